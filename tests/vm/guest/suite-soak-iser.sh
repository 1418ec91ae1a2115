#!/bin/bash
# soak-iser: `make soak SOAK_TRANSPORT=iser`, the soak (tests/soak/run.sh) with the hosts' I/O
# over the gateway's iSER datamover on Soft-RoCE. Not in `make test-vm`. An rxe device on a
# veth gives the soak its SOAK_ISER_ADDR; the soak then runs as on the host (tgtd behind two
# flapping back-end paths in a network namespace, the agent changing the configuration and
# restarting, isergw-verify, isergw-bench and short sessions, now over iser://) for SOAK_SECS
# (the host's SOAK_* variables reach the guest through the share), and each of its results
# becomes one of this suite's; its run folder is kept in share/logs/soak-iser/ on a failure.
# SOAK_VM_TRANSPORT=tcp runs the TCP soak in the same guest instead (gateway in a network
# namespace, no rxe), to compare its latency figures with the iSER soak's under the same
# emulation; its figures go to share/soak-tcp-figures.txt.
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin soak-iser

ADDR=10.211.9.1

if ! vm_need rdma ip tgtd tgtadm curl python3 iscsi-ls; then
	skip all "$VM_MISSING is not installed (iproute2, tgt, curl, libiscsi-bin)"
	vm_end
fi
if ! vm_modprobe rdma_rxe ib_uverbs rdma_ucm veth; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi
if ! vm_veth sk0 "$ADDR" || ! check rxe vm_rxe_add rxesk sk0; then
	fail setup "no rxe device on sk0"
	vm_end
fi

TRANSPORT=${SOAK_VM_TRANSPORT:-iser}
case "$TRANSPORT" in
iser | tcp) ;;
*)
	fail transport "SOAK_VM_TRANSPORT is iser or tcp, not '$TRANSPORT'"
	vm_end
	;;
esac
echo "+ SOAK_TRANSPORT=$TRANSPORT SOAK_ISER_ADDR=$ADDR SOAK_SECS=${SOAK_SECS:-1800} tests/soak/run.sh"
SOAK_TRANSPORT=$TRANSPORT SOAK_ISER_ADDR=$ADDR BUILD=$VM_BUILD \
	bash "$VM_LIB_DIR/../../soak/run.sh" >"$VM_WORK/soak.out" 2>&1
rc=$?
cat "$VM_WORK/soak.out"
# Its "  ok    NAME" and "  FAIL  NAME: WHY" lines, one result each.
n=0
while IFS= read -r line; do
	case "$line" in
	"  ok    "*)
		n=$((n + 1))
		pass "soak/$n" "${line#  ok    }"
		;;
	"  FAIL  "*)
		n=$((n + 1))
		fail "soak/$n" "${line#  FAIL  }"
		;;
	"  skip  "*)
		n=$((n + 1))
		skip "soak/$n" "${line#  skip  }"
		;;
	esac
done <"$VM_WORK/soak.out"
fig=$(grep '^soak-figures:' "$VM_WORK/soak.out")
[ -n "$fig" ] && echo "$fig" >"$VM_SHARE/soak-$TRANSPORT-figures.txt"
if [ "$rc" -ne 0 ] || [ "$n" -eq 0 ]; then
	fail soak "tests/soak/run.sh exited with status $rc after $n results"
	# Its run folder (kept on a failure) with the gateway's, the agent's and each round's logs.
	dir=$(sed -n 's/^soak: logs kept in \(\/tmp\/isergw-soak\.[A-Za-z0-9]*\)$/\1/p' "$VM_WORK/soak.out")
	if [ -n "$dir" ] && [ -d "$dir" ]; then
		cp -a "$dir" "$VM_WORK/run"
		rm -rf "$dir"
	fi
elif [ -n "$fig" ]; then
	pass figures "${fig#soak-figures: }"
fi
vm_end
