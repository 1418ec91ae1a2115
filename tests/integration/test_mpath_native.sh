#!/bin/bash
# test_mpath_native: the whole multipath suite (test_mpath.sh: path cuts three ways with
# verified I/O, failback, no_path_retry, refusal, start-up with black-holed back ends, the real
# gateway re-exporting a LUN) with the remote backstore's native initiator, "engine": "native".
MP_ENGINE=native exec "$(dirname "$0")/test_mpath.sh" "$@"
