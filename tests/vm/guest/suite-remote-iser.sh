#!/bin/bash
# remote-iser: the gateway's remote backstore over libiscsi's iSER transport. tgtd serves a LUN
# over iSER on an rxe device; isergwd imports it with an iser:// path and re-exports it over
# TCP; libiscsi clients (isergw-verify, iscsi-test-cu) are the host. What libiscsi 1.19's iSER
# gets wrong, and what the gateway does about it, is in docs/TROUBLESHOOTING.md ("Back ends over
# iSER"); each check below fails if one of those workarounds is lost:
#  - the gateway runs with MALLOC_PERTURB_=1, so every malloc returns garbage: libiscsi reads
#    its iSER connection state before writing it and crashes at once unless the gateway hands
#    it zeroed memory;
#  - host I/O of 512 B .. 4 MiB: commands over 256 KiB must be split (libiscsi fails them and
#    then double-frees);
#  - the back end restarted twice: a closed iSER connection must be torn down without freeing
#    the context under libiscsi's connection manager thread.
# A second LUN's only path leads nowhere: its connects (which libiscsi makes block, so the
# gateway runs them in a thread of their own) keep failing, are abandoned at their deadline or
# at shutdown, and must leave the other LUN and the gateway's stop unharmed.
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/vm/guest/lib-tgt.sh
. "$(dirname "$0")/lib-tgt.sh"
vm_begin remote-iser

ADDR=10.200.6.1
TGT_IQN=iqn.2026-11.org.isergw:vm-remote-backend
GW_IQN=iqn.2026-11.org.isergw:vm-remote-gw
GW_INI=iqn.2026-11.org.isergw:vm-remote-gw-initiator
HOST_INI=iqn.2026-11.org.isergw:vm-remote-host
HOST_INI2=iqn.2026-11.org.isergw:vm-remote-host2
GW_PORT=3270
GW_URL=iscsi://127.0.0.1:$GW_PORT/$GW_IQN/0
# tgt's iSCSI/TCP portal, on loopback: the back end read directly, not through the gateway.
TGT_TCP_URL=iscsi://127.0.0.1:3264/$TGT_IQN-tcp/1
# An address on the rxe subnet that nobody has: its iSER connect never gets an answer.
DEAD=10.200.6.77
VERIFY=$VM_BUILD/tests/tools/isergw-verify
VERIFY_ARGS=(-s 4242 -n 48 -M 512 -m 4194304 -S 96M)

if ! vm_need tgtd tgtadm rdma iscsi-test-cu "$VERIFY" "$VM_BUILD/isergwd"; then
	skip all "$VM_MISSING is not installed (tgt, iproute2, libiscsi-bin; make test-build)"
	vm_end
fi
if ! vm_modprobe rdma_rxe ib_uverbs rdma_ucm; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi
if ! vm_veth vr0 "$ADDR" || ! check rxe vm_rxe_add rxer vr0; then
	vm_end
fi
truncate -s 256M "$VM_WORK/backend.img"
if ! check backend-start vm_tgt_start "$TGT_IQN" "$VM_WORK/backend.img" 127.0.0.1:3264 \
	"$GW_INI" "$HOST_INI" || ! check backend-tcp-target vm_tgt_add_tcp "$TGT_IQN-tcp" \
	"$VM_WORK/backend.img"; then
	vm_end
fi

cat >"$VM_WORK/isergwd.json" <<JSON
{ "portals": [ { "name": "tcp0", "transport": "tcp", "address": "127.0.0.1", "port": $GW_PORT } ],
  "targets": [ { "name": "$GW_IQN", "portals": ["tcp0"], "allow_any_initiator": true,
    "luns": [ { "lun": 0, "backstore": { "type": "remote", "block_size": 512,
      "initiator": "$GW_INI", "polling_interval": 1, "login_timeout": 10,
      "reconnect_delay_ms": 200, "reconnect_max_ms": 2000, "no_path_retry": "queue",
      "paths": [ { "url": "iser://$ADDR/$TGT_IQN/1" } ] } },
      { "lun": 1, "backstore": { "type": "remote", "block_size": 512, "size": "64M",
      "initiator": "$GW_INI", "login_timeout": 3, "initial_login_retry_max": 2,
      "reconnect_delay_ms": 500, "reconnect_max_ms": 2000, "no_path_retry": "fail",
      "paths": [ { "url": "iser://$DEAD/$TGT_IQN-none/1" } ] } } ] } ] }
JSON
cat "$VM_WORK/isergwd.json"
GW_LOG=$VM_WORK/isergwd.log
if ! MALLOC_PERTURB_=1 check gateway-start vm_gw_start "$VM_WORK/isergwd.json" "$GW_LOG" \
	127.0.0.1 "$GW_PORT"; then
	vm_end
fi

gw_alive() {
	if kill -0 "$VM_GW_PID" 2>/dev/null; then
		pass "$1" "${2:-}"
	else
		fail "$1" "the gateway died: $(tail -n 5 "$GW_LOG")"
	fi
}

# path_active_count: how many times the iSER path has become ACTIVE so far.
path_active_count() {
	grep -c "path iser://$ADDR/.*-> active" "$GW_LOG"
}

# wait_active N SECONDS: the path became ACTIVE for the Nth time.
wait_active() {
	local n=$1 secs=$2
	for _ in $(seq 1 $((secs * 5))); do
		[ "$(path_active_count)" -ge "$n" ] && return 0
		kill -0 "$VM_GW_PID" 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}

if wait_active 1 30; then
	pass path-active "$(grep -m1 'path iser://.*-> active' "$GW_LOG" | cut -c1-200)"
else
	fail path-active "the iSER path never became ACTIVE: $(grep mpath "$GW_LOG" | tail -n 3)"
	vm_end
fi

# 1. Host I/O of every size from 512 B to 4 MiB through the gateway, read back.
VM_TMO=300 run "$VERIFY" -q "${VERIFY_ARGS[@]}" -i "$HOST_INI" "$GW_URL" \
	>"$VM_WORK/verify.out" 2>&1
rc=$?
cat "$VM_WORK/verify.out"
if [ "$rc" -eq 0 ]; then
	pass verify-512b-4m "$(tail -n 1 "$VM_WORK/verify.out")"
else
	fail verify-512b-4m "exit $rc: $(tail -n 3 "$VM_WORK/verify.out")"
fi
gw_alive gateway-alive-after-verify

# 2. What the host wrote is on the back end: the same layout verified straight from tgt, over
#    its TCP portal (no gateway, no iSER in between).
VM_TMO=300 run "$VERIFY" -q -V "${VERIFY_ARGS[@]}" -i "$HOST_INI" "$TGT_TCP_URL" \
	>"$VM_WORK/verify-backend.out" 2>&1
rc=$?
cat "$VM_WORK/verify-backend.out"
if [ "$rc" -eq 0 ]; then
	pass backend-has-the-data "$(tail -n 1 "$VM_WORK/verify-backend.out")"
else
	fail backend-has-the-data "exit $rc: $(tail -n 3 "$VM_WORK/verify-backend.out")"
fi

# 3. libiscsi's conformance tool through the gateway (large transfers, odd lengths, many
#    commands): the gateway must survive it, and every test of these families must pass (CUnit
#    counts a skipped test as passed): the expected result is "all ran, none failed, exit 0".
#    The remote LUN is not thin (tgt's LUN reports no LBPME), so WriteSame16's UNMAP tests must
#    find WRITE SAME with UNMAP refused as LBPWS=0 says (WriteSame16.UnmapVPD).
for fam in SCSI.Read16 SCSI.Write16 SCSI.WriteSame16; do
	total=$(iscsi-test-cu --list 2>/dev/null | grep -c "^$fam\.")
	VM_TMO=240 run iscsi-test-cu -d -t "$fam" -i "$HOST_INI" -I "$HOST_INI2" "$GW_URL" \
		"$GW_URL" >"$VM_WORK/cu-$fam.out" 2>&1
	rc=$?
	# CUnit's row: tests TOTAL RAN PASSED FAILED INACTIVE
	summary=$(grep -E '^ +tests ' "$VM_WORK/cu-$fam.out" | tr -s ' ' | sed 's/^ //')
	echo "iscsi-test-cu $fam: exit $rc; $summary"
	grep -B3 -E '\[FAILED\]|FAILED' "$VM_WORK/cu-$fam.out" | head -n 30
	if ! kill -0 "$VM_GW_PID" 2>/dev/null; then
		fail "test-cu/$fam" "the gateway died: $(tail -n 5 "$GW_LOG")"
	elif [ "$rc" -eq 0 ] && [ "$total" -gt 0 ] &&
		[ "$summary" = "tests $total $total $total 0 0" ]; then
		pass "test-cu/$fam" "all $total passed (skips included)"
	else
		fail "test-cu/$fam" "tool exit $rc; want 'tests $total $total $total 0 0', got \
'${summary:-no summary: the tool crashed?}'; failed: $(grep -E '^ +Test: .*FAILED|\[FAILED\]' \
			"$VM_WORK/cu-$fam.out" | head -n 3 | tr -s ' ' | tr '\n' ';')"
	fi
done

# 4. The back end goes away and comes back, twice: the path goes down, the gateway tears the
#    iSER connection down and logs in again, and I/O works on the new connection.
for round in 1 2; do
	before=$(path_active_count)
	vm_tgt_stop
	sleep 2
	if ! vm_tgt_start "$TGT_IQN" "$VM_WORK/backend.img" 127.0.0.1:3264 "$GW_INI" "$HOST_INI" \
		>"$VM_WORK/tgt-restart-$round.out" 2>&1; then
		fail "backend-restart-$round" \
			"tgtd did not come back: $(tail -n 3 "$VM_WORK/tgt-restart-$round.out")"
		break
	fi
	if wait_active $((before + 1)) 120; then
		pass "path-back-$round" \
			"$(grep "path iser://$ADDR/" "$GW_LOG" | tail -n 2 | cut -c1-160 | tr '\n' ' ')"
	else
		fail "path-back-$round" "not ACTIVE again: $(grep mpath "$GW_LOG" | tail -n 3)"
		break
	fi
	VM_TMO=120 run "$VERIFY" -q -s $((round + 10)) -n 16 -M 512 -m 1048576 -S 32M \
		-i "$HOST_INI" "$GW_URL" >"$VM_WORK/verify-$round.out" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		pass "verify-after-restart-$round" "$(tail -n 1 "$VM_WORK/verify-$round.out")"
	else
		fail "verify-after-restart-$round" "exit $rc: $(tail -n 3 "$VM_WORK/verify-$round.out")"
	fi
done

if grep -q "path iser://$DEAD/.*: connect to $DEAD.*failed\|path iser://$DEAD/.*timed out" "$GW_LOG"
then
	pass dead-path-fails "$(grep -m1 "path iser://$DEAD/.*-> down" "$GW_LOG" | cut -c1-200)"
else
	fail dead-path-fails "no failed connect to $DEAD logged: $(grep "$DEAD" "$GW_LOG" | tail -n 2)"
fi
if vm_gw_stop; then
	pass gateway-stop "$VM_GW_STOP"
else
	fail gateway-stop "$VM_GW_STOP: $(tail -n 5 "$GW_LOG")"
fi
grep -E 'mpath|bs:' "$GW_LOG" | tail -n 30
vm_end
