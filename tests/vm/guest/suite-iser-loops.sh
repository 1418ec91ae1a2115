#!/bin/bash
# iser-loops: the iSER datamover on two of the gateway's loops (issue 13) against Soft-RoCE.
# Runs the unit binary test_dmv_iser_live with ISER_LIVE_ADDR on an rxe device: a portal on
# loop 0 with loop 1 on its own thread, two rdma_cm clients; the first connection must be
# accepted on loop 0 and the second on loop 1's thread, each with its own device pool, counted
# in the loops' load; after both disconnect every loop's QPs, registrations, chunks and load
# must be back to zero. (gateway.loops itself is another branch's; this checks the datamover.)
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin iser-loops

ADDR=10.200.9.1
BIN=$VM_BUILD/tests/unit/dmv/test_dmv_iser_live

if ! vm_need rdma "$BIN"; then
	skip all "$VM_MISSING is not installed (iproute2; make test-build)"
	vm_end
fi
if ! vm_modprobe rdma_rxe ib_uverbs rdma_ucm; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi
if ! vm_veth vlp0 "$ADDR" || ! check rxe vm_rxe_add rxelp vlp0; then
	vm_end
fi
out=$VM_WORK/live.out
ISER_LIVE_ADDR=$ADDR VM_TMO=120 run "$BIN" --verbose >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -eq 0 ] && grep -q 'Passing: 1 | Failing: 0 | Crashing: 0' "$out"; then
	pass two-loops "connections accepted on loop 0 and loop 1, everything released"
else
	fail two-loops "test_dmv_iser_live (exit $rc): $(grep -E 'FAIL|error|Synthesis' "$out" |
		tail -n 3 | tr '\n' ' ')"
fi
vm_end
