/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/iscsi/: what the connection's owner, the dispatcher (isc_conn.c),
 * registers with each connection at accept. The PDU handlers close a connection or move it to
 * full feature phase through these (isc_conn_close / isc_conn_enter_ffp in isc_xmit.c), so
 * they never call the dispatcher by name while it calls them.
 */
#ifndef ISC_PRIV_H
#define ISC_PRIV_H

#include "isc.h"

struct isc_conn_ops {
	/* Tears the connection down: every handler's per-connection state, then the
	 * datamover's, two-phase. */
	void (*close)(struct isc_conn *c, const char *why);
	/* The final Login Response is queued: negotiated parameters to the datamover, NOP
	 * pings on. */
	void (*enter_ffp)(struct isc_conn *c);
};

#endif
