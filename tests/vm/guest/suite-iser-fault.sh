#!/bin/bash
# iser-fault: rdma_cm fault events under the gateway's iSER datamover, with the kernel iSER
# initiator logged in and writing. The portal sits on an active-backup bond of two veths with
# fail_over_mac=active and Soft-RoCE on the bond (both ends share the rxe device in one guest).
#  1. ADDR_CHANGE: the active slave loses its carrier under direct writes; the bond takes the
#     other slave's MAC, rdma_cm reports an address change. The gateway must log it, drop the
#     affected connections, listen again, and the initiator must log in again by itself and
#     finish its writes, which then read back intact.
#  2. DEVICE_REMOVAL: the rxe device is deleted under direct writes. The gateway must not crash,
#     must log the removal, free every QP, MR and buffer, and report the portal not listening
#     with a reason. rxe cannot revoke a device a process has open, so the kernel's deletion
#     finishes only once the gateway lets go of librdmacm's context of it (dmv_iser_ctx.c):
#     `rdma link delete` must return while isergwd runs. Then rxe is added again: the portal
#     must listen by itself and a new login with verified I/O must work. No resource is left
#     after logout; SIGTERM exits 0.
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin iser-fault

ADDR=10.200.8.1
PORT=3260
PORTAL=$ADDR:$PORT
BOND=bf0
RXE=rxebf
T=iqn.2026-11.org.isergw:vm-iser-fault
SOCK=$VM_WORK/ctl.sock
LOG=$VM_WORK/isergwd.log

if ! vm_need rdma iscsiadm iscsid python3 cmp; then
	skip all "$VM_MISSING is not installed (iproute2, open-iscsi)"
	vm_end
fi
if ! vm_modprobe bonding rdma_rxe ib_uverbs rdma_ucm ib_iser; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi


if ! check bond vm_bond_up "$BOND" "$ADDR" || ! check rxe-on-bond vm_rxe_add "$RXE" "$BOND"; then
	vm_end
fi

truncate -s 256M "$VM_WORK/lun.img"
cat >"$VM_WORK/isergwd.json" <<EOF
{
  "gateway": { "control_socket": "$SOCK" },
  "portals": [
    { "name": "tcp0", "transport": "tcp", "address": "$ADDR", "port": $PORT },
    { "name": "iser0", "transport": "iser", "address": "$ADDR", "port": $PORT }
  ],
  "targets": [
    { "name": "$T", "tpgt": 1, "portals": ["tcp0", "iser0"], "allow_any_initiator": true,
      "luns": [ { "lun": 0, "vendor": "ISERGW", "product": "vm-fault", "write_cache": true,
        "thin": true, "backstore": { "type": "file", "path": "$VM_WORK/lun.img",
        "size": "256M", "block_size": 512 } } ] }
  ]
}
EOF

NO_RES='r["connections"] == 0 and r["qps"] == 0 and r["mrs"] == 0 and r["buffers_in_use"] == 0 and r["buffers_lent"] == 0 and r["registered_bytes"] == 0'

login() {
	VM_TMO=60 run iscsiadm -m node -T "$T" -p "$PORTAL" -I iser --login
}

logout() {
	VM_TMO=40 run iscsiadm -m node -T "$T" -p "$PORTAL" -I iser --logout
}

# uverbs_holders: the processes with an RDMA verbs device open (pid:name).
uverbs_holders() {
	local f pid
	for f in /proc/[0-9]*/fd/*; do
		case "$(readlink "$f" 2>/dev/null)" in
		/dev/infiniband/uverbs*)
			pid=${f#/proc/}
			pid=${pid%%/*}
			echo "$pid:$(cat "/proc/$pid/comm" 2>/dev/null)"
			;;
		esac
	done | sort -u | tr '\n' ' '
}

# The gateway is alive: its process runs and its control socket answers.
gw_alive() {
	kill -0 "$VM_GW_PID" 2>/dev/null && gw_state 'True' >/dev/null 2>&1
}

if ! check gateway-start vm_gw_start "$VM_WORK/isergwd.json" "$LOG" "$ADDR" "$PORT" ||
	! wait_state 'p["listening"]' 15; then
	fail iser-listening "$(tail -n 5 "$LOG")"
	vm_end
fi
if ! check iscsid vm_iscsid_start; then
	vm_end
fi
VM_TMO=30 run iscsiadm -m discovery -t st -p "$PORTAL" -I iser >"$VM_WORK/discovery.out" 2>&1
if ! grep -q "^$PORTAL,1 $T\$" "$VM_WORK/discovery.out"; then
	fail discovery "$(tail -n 3 "$VM_WORK/discovery.out")"
	vm_end
fi

# ---- 1. ADDR_CHANGE: the bond's active slave fails under direct writes ----------------------

MIB=200
head -c "${MIB}M" /dev/urandom >"$VM_WORK/pattern-ac"
if login >"$VM_WORK/login-ac.out" 2>&1 && dev=$(vm_wait_disk "$T" 30); then
	pass addr-change/login "/dev/$dev over iSER on $BOND ($(cat "/sys/class/net/$BOND/bonding/active_slave") active)"
	act0=$(cat "/sys/class/net/$BOND/bonding/active_slave")
	mac0=$(cat "/sys/class/net/$BOND/address")
	# The gateway's reaction: its netlink model re-homes the listener (usually first), or
	# rdma_cm's ADDR_CHANGE does (the backup).
	REACT='ADDR_CHANGE|re-homed on bond'
	lines0=$(grep -cE "$REACT" "$LOG")
	dd if="$VM_WORK/pattern-ac" of="/dev/$dev" bs=1M seek=1 oflag=direct conv=fsync \
		status=none 2>"$VM_WORK/dd-ac.err" &
	ddpid=$!
	sleep 1
	t0=$(date +%s)
	running=no
	kill -0 "$ddpid" 2>/dev/null && running=yes
	run ip link set "$act0-p" down
	for _ in $(seq 1 40); do
		[ "$(grep -cE "$REACT" "$LOG")" -gt "$lines0" ] && break
		sleep 0.25
	done
	act1=$(cat "/sys/class/net/$BOND/bonding/active_slave")
	mac1=$(cat "/sys/class/net/$BOND/address")
	echo "bond: $act0 ($mac0) -> $act1 ($mac1)"
	# The writes must finish: the initiator logs in again within its replacement timeout.
	if timeout 120 tail --pid="$ddpid" -f /dev/null; then
		wait "$ddpid"
		ddrc=$?
	else
		kill "$ddpid" 2>/dev/null
		wait "$ddpid" 2>/dev/null
		ddrc=timeout
	fi
	secs=$(($(date +%s) - t0))
	grep -E "$REACT|listening|dropping" "$LOG" | tail -n 6
	dmesg | grep -iE 'iser|connection[0-9:]* error|1011' | tail -n 6
	line=$(grep -m1 -E "$REACT" "$LOG")
	if [ "$act1" != "$act0" ] && [ "$mac1" != "$mac0" ] && [ -n "$line" ]; then
		pass addr-change/logged "$act0 -> $act1, MAC $mac0 -> $mac1; gateway: $line"
	else
		fail addr-change/logged "active $act0 -> '$act1', MAC $mac0 -> $mac1, gateway log: $(tail -n 4 "$LOG")"
	fi
	if wait_state 'p["listening"]' 20; then
		pass addr-change/relisten "$(grep 'listening on' "$LOG" | tail -n 1)"
	else
		fail addr-change/relisten "not listening 20 s after the failover: $(tail -n 3 "$LOG")"
	fi
	if [ "$running" = no ]; then
		fail addr-change/io-completes "the writes had ended before the failover: nothing crossed it"
	elif [ "$ddrc" = 0 ]; then
		pass addr-change/io-completes "$MIB MiB of direct writes across the failover finished ${secs} s after it"
	else
		fail addr-change/io-completes "dd: $ddrc $(tail -n 2 "$VM_WORK/dd-ac.err")"
	fi
	reconn=$(dmesg | grep -ciE 'iser.*(error|disconnect)|conn.*error \(1011\)')
	if dev2=$(vm_wait_disk "$T" 30) && dd if="/dev/$dev2" bs=1M skip=1 count="$MIB" \
		iflag=direct status=none | cmp - "$VM_WORK/pattern-ac"; then
		pass addr-change/data "the $MIB MiB read back intact after reconnecting ($reconn kernel connection-error lines)"
	else
		fail addr-change/data "what was written across the failover does not read back"
	fi
	check addr-change/logout logout
	if wait_state "$NO_RES" 30; then
		pass addr-change/no-leak "$(gw_state 'r')"
	else
		fail addr-change/no-leak "$(gw_state 'r' 2>&1)"
	fi
else
	fail addr-change/login "$(tail -n 3 "$VM_WORK/login-ac.out"); $(tail -n 3 "$LOG")"
fi
if ! gw_alive; then
	fail gateway-alive "the gateway died: $(tail -n 5 "$LOG")"
	vm_end
fi

# ---- 2. DEVICE_REMOVAL: the rxe device is deleted under direct writes ----------------------

if login >"$VM_WORK/login-dr.out" 2>&1 && dev=$(vm_wait_disk "$T" 30); then
	pass removal/login "/dev/$dev"
	wait_state 'r["qps"] >= 1' 10
	echo "before: $(gw_state 'r' 2>&1)"
	dd if=/dev/urandom of="/dev/$dev" bs=1M count=400 oflag=direct status=none 2>/dev/null &
	ddpid=$!
	sleep 2
	rdma link delete "$RXE" >"$VM_WORK/rxe-del.out" 2>&1 &
	delpid=$!
	deleted=no
	for _ in $(seq 1 120); do
		if ! kill -0 "$delpid" 2>/dev/null; then
			if wait "$delpid"; then deleted=yes; else deleted=failed; fi
			break
		fi
		sleep 0.25
	done
	held=$(uverbs_holders)
	echo "rdma link delete: done=$deleted $(cat "$VM_WORK/rxe-del.out");" \
		"uverbs held by: $held; its kernel stack:" \
		"$(tr '\n' ' ' <"/proc/$delpid/stack" 2>/dev/null | cut -c1-400)"
	if gw_alive; then
		pass removal/gateway-alive "the gateway runs and answers on its control socket"
	else
		fail removal/gateway-alive "$(tail -n 5 "$LOG")"
		vm_end
	fi
	line=$(grep -m1 'DEVICE_REMOVAL' "$LOG")
	if [ -n "$line" ]; then
		pass removal/logged "$line"
	else
		fail removal/logged "no DEVICE_REMOVAL in the gateway's log: $(tail -n 4 "$LOG")"
	fi
	if wait_state "$NO_RES" 30; then
		pass removal/resources-freed "$(gw_state 'r')"
	else
		fail removal/resources-freed "30 s after the removal: $(gw_state 'r' 2>&1)"
	fi
	why=$(grep 'iSER not listening' "$LOG" | tail -n 1)
	if [ "$(gw_state 'p["listening"]' 2>&1)" = False ] && [ -n "$why" ]; then
		pass removal/not-listening "$why"
	else
		fail removal/not-listening "listening $(gw_state 'p["listening"]' 2>&1); $(tail -n 3 "$LOG")"
	fi
	kill "$ddpid" 2>/dev/null
	# The host's session has no device to reconnect through: end it.
	logout >/dev/null 2>&1
	wait "$ddpid" 2>/dev/null
	if [ "$deleted" = no ]; then
		fail removal/rxe-deleted "rdma link delete $RXE still waits with isergwd running (uverbs held by: $held; $(grep -c 'its files are closed' "$LOG") let-go lines in the log)"
	elif [ "$deleted" = failed ]; then
		fail removal/rxe-deleted "rdma link delete $RXE failed: $(cat "$VM_WORK/rxe-del.out")"
	else
		pass removal/rxe-deleted "$(grep -m1 'its files are closed' "$LOG")"
		if check removal/rxe-readded vm_rxe_add "$RXE" "$BOND"; then
			if wait_state 'p["listening"]' 20; then
				pass removal/relisten "$(grep 'listening on' "$LOG" | tail -n 1)"
			else
				fail removal/relisten "not listening 20 s after rxe came back: $(tail -n 3 "$LOG")"
			fi
			if login >"$VM_WORK/login-after.out" 2>&1 && dev=$(vm_wait_disk "$T" 30); then
				check removal/serves-after vm_io_check "/dev/$dev" 8
				check removal/logout logout
			else
				fail removal/serves-after "$(tail -n 3 "$VM_WORK/login-after.out")"
			fi
		fi
	fi
else
	fail removal/login "$(tail -n 3 "$VM_WORK/login-dr.out"); $(tail -n 3 "$LOG")"
fi

# ---- nothing leaked; clean stop -------------------------------------------------------------

vm_iscsid_stop
if wait_state "not s[\"sessions\"] and $NO_RES" 30; then
	pass no-leak "$(gw_state 'r')"
else
	fail no-leak "sessions $(gw_state 'len(s["sessions"])' 2>&1), resources $(gw_state 'r' 2>&1)"
fi
if vm_gw_stop; then
	pass gateway-stop "$VM_GW_STOP"
else
	fail gateway-stop "$VM_GW_STOP; log: $(tail -n 3 "$LOG")"
fi
if [ -n "${delpid:-}" ] && [ "${deleted:-}" = no ]; then
	if timeout 30 tail --pid="$delpid" -f /dev/null && wait "$delpid" &&
		! rdma link show "$RXE/1" >/dev/null 2>&1; then
		echo "rdma link delete $RXE finished once isergwd had exited"
	else
		fail removal/rxe-deleted-at-exit "rdma link delete $RXE still waits 30 s after isergwd exited; uverbs held by: $(uverbs_holders)"
	fi
fi
vm_end
