/* SPDX-License-Identifier: MIT */
/*
 * Every file of a path (gateway/mpath/mp_priv.h lists the stack), compiled into the test that
 * includes this after fake_iscsi.h: on the fake clock and the fake libiscsi, and all of them,
 * so that none is taken from the engine library with the real ones. The test reaches their
 * static functions and each engine's state (mp_lis_of, mp_lis_ctx).
 */
#ifndef PATH_FILES_H
#define PATH_FILES_H

#include "../../../gateway/mpath/mp_path.c"
#include "../../../gateway/mpath/mp_path_libiscsi.c"
#include "../../../gateway/mpath/mp_path_native.c"
#include "../../../gateway/mpath/mp_path_probe.c"
#include "../../../gateway/mpath/mp_path_tmf.c"
#include "../../../gateway/mpath/mp_path_core.c"

#endif
