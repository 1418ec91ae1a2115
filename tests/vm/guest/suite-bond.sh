#!/bin/bash
# bond: Soft-RoCE on an active-backup bond, and what a slave failover does to RDMA. The gateway's
# RDMA ports sit on bonds, and a bond only carries RDMA with fail_over_mac=active: on a
# failover the bond takes the new active slave's MAC, rdma_cm sees an address change, existing
# queue pairs break and the GID table is filled again. This suite checks that ground: the
# bond fails over, its MAC follows the new slave, the GID comes back, and a new rdma_cm
# connection works after the failover. (rping running across the failover is reported, not
# judged: it is expected to break, and the iSER datamover must reconnect the same way.)
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin bond

ADDR=10.200.2.1
BOND=bd0

if ! vm_need rdma ibv_devinfo rping; then
	skip all "$VM_MISSING is not installed (rdma-core, ibverbs-utils, rdmacm-utils)"
	vm_end
fi
if ! vm_modprobe bonding rdma_rxe ib_uverbs rdma_ucm; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi


if ! check create vm_bond_up "$BOND" "$ADDR"; then
	vm_end
fi
mode=$(cat "/sys/class/net/$BOND/bonding/mode")
fom=$(cat "/sys/class/net/$BOND/bonding/fail_over_mac")
act0=$(cat "/sys/class/net/$BOND/bonding/active_slave")
mac0=$(cat "/sys/class/net/$BOND/address")
echo "bond $BOND mode '$mode' fail_over_mac '$fom' active $act0 mac $mac0;" \
	"slaves: $BOND""a=$(cat "/sys/class/net/${BOND}a/address")" \
	"$BOND""b=$(cat "/sys/class/net/${BOND}b/address")"
if [ "$mode" = "active-backup 1" ] && [ "$fom" = "active 1" ] &&
	[ "$mac0" = "$(cat "/sys/class/net/$act0/address")" ]; then
	pass settings "active-backup, fail_over_mac=active, bond MAC is $act0's"
else
	fail settings "mode '$mode', fail_over_mac '$fom', bond MAC $mac0, active $act0"
fi

if ! check rxe-on-bond vm_rxe_add rxebd "$BOND"; then
	vm_end
fi
if vm_rping "$ADDR" 10 7175; then
	pass rping-before "$VM_RPING_COUNT ping-pongs on $ADDR via $act0"
else
	fail rping-before "$(tail -n 2 "$VM_WORK/rping-c.7175.log")"
fi

# ---- the agent reports the gateway's model of the real bond and rxe device -----------------

AGENT_PORT=18080
AGENT_PID=
GW_TCP_PORT=13261
SOCK=$VM_WORK/ctl.sock
agent_get() {
	curl -s -m 10 -H "Authorization: Bearer $(cat "$VM_WORK/agent/admin.token")" \
		"http://127.0.0.1:$AGENT_PORT$1"
}
# agent_json PATH EXPR: EXPR (python, over j) on the agent's JSON answer.
agent_json() {
	agent_get "$1" | python3 -c "import json,sys; j=json.load(sys.stdin); print(($2))"
}
# The agent shows the gateway's network model (rtnetlink events here): a gateway with one TCP
# portal and its control socket, and the agent on that socket.
agent_up() {
	[ -x "$VM_BUILD/isergw-agent" ] && [ -x "$VM_BUILD/isergwd" ] || return 1
	cat >"$VM_WORK/gw-bond.json" <<EOF
{"gateway": {"control_socket": "$SOCK"},
 "portals": [{"name": "tcp0", "transport": "tcp", "address": "127.0.0.1", "port": $GW_TCP_PORT}],
 "targets": []}
EOF
	vm_gw_start "$VM_WORK/gw-bond.json" "$VM_WORK/gateway.log" 127.0.0.1 "$GW_TCP_PORT" ||
		return 1
	"$VM_BUILD/isergw-agent" --state-dir "$VM_WORK/agent" --listen "127.0.0.1:$AGENT_PORT" \
		--gateway-socket "$SOCK" >"$VM_WORK/agent.log" 2>&1 &
	AGENT_PID=$!
	vm_on_exit "kill -TERM $AGENT_PID 2>/dev/null; wait $AGENT_PID 2>/dev/null"
	for _ in $(seq 1 50); do
		vm_port_open 127.0.0.1 "$AGENT_PORT" && break
		sleep 0.2
	done
	# Up once it holds the gateway's model of the bond (up to 20 s on the emulated guest).
	for _ in $(seq 1 80); do
		[ "$(agent_json "/api/v1/bonds/$BOND" "j['active_slave']" 2>/dev/null)" = "$act0" ] &&
			return 0
		sleep 0.25
	done
	tail -n 20 "$VM_WORK/agent.log" "$VM_WORK/gateway.log"
	return 1
}
AGENT_OK=0
if ! vm_need curl python3 || ! vm_need "$VM_BUILD/isergw-agent"; then
	skip agent "$VM_MISSING is not there"
elif check agent-start agent_up; then
	AGENT_OK=1
	got=$(agent_json "/api/v1/bonds/$BOND" "j['mode'], j['fail_over_mac'], j['active_slave'], sorted(s['name'] for s in j['slaves']), j['rdma_devices']")
	want="('active-backup', 'active', '$act0', ['${BOND}a', '${BOND}b'], ['rxebd'])"
	if [ "$got" = "$want" ]; then
		pass agent-bond "GET /api/v1/bonds/$BOND: $got"
	else
		fail agent-bond "GET /api/v1/bonds/$BOND: $got, want $want"
	fi
	got=$(agent_json /api/v1/rdma "[(d['name'], d['netdev'], d['ports'][0]['state'], d['ports'][0]['link_layer']) for d in j['devices'] if d['name'] == 'rxebd']")
	want="[('rxebd', '$BOND', 'ACTIVE', 'Ethernet')]"
	if [ "$got" = "$want" ]; then
		pass agent-rdma "GET /api/v1/rdma: $got"
	else
		fail agent-rdma "GET /api/v1/rdma: $got, want $want"
	fi
fi

# ---- the failover, under a running rping --------------------------------------------------

timeout 60 rping -s -a "$ADDR" -p 7176 -C 100000 >"$VM_WORK/rping-s.long.log" 2>&1 &
lsrv=$!
sleep 1
timeout 60 rping -c -a "$ADDR" -p 7176 -C 100000 -S 1024 >"$VM_WORK/rping-c.long.log" 2>&1 &
lcli=$!
sleep 1
EV_PID=
if [ "$AGENT_OK" = 1 ]; then
	# The agent's event stream, across the failover.
	curl -s -N -m 60 -H "Authorization: Bearer $(cat "$VM_WORK/agent/admin.token")" \
		"http://127.0.0.1:$AGENT_PORT/api/v1/events" >"$VM_WORK/events.out" 2>&1 &
	EV_PID=$!
	vm_on_exit "kill $EV_PID 2>/dev/null"
	# The stream is subscribed once its hello arrived; an event the agent sends before that is
	# not this stream's, so the cable is pulled only after it. Wait up to 15 s.
	for _ in $(seq 1 60); do
		grep -q '^event: hello' "$VM_WORK/events.out" 2>/dev/null && break
		sleep 0.25
	done
	if grep -q '^event: hello' "$VM_WORK/events.out" 2>/dev/null; then
		pass agent-subscribed "the event stream said hello before the cable is pulled"
	else
		fail agent-subscribed "no hello on the event stream within 15 s: $(tail -c 300 \
			"$VM_WORK/events.out" 2>/dev/null)"
	fi
fi
# Carrier loss on the active slave, as a pulled cable: its peer end goes down.
t0=$(date +%s%N)
run ip link set "$act0-p" down
act1=$act0
for i in $(seq 1 100); do
	act1=$(cat "/sys/class/net/$BOND/bonding/active_slave")
	[ -n "$act1" ] && [ "$act1" != "$act0" ] && break
	sleep 0.05
done
ms=$((($(date +%s%N) - t0) / 1000000))
mac1=$(cat "/sys/class/net/$BOND/address")
grep -E 'Currently Active|MII Status|Slave Interface|Permanent' "/proc/net/bonding/$BOND"
if [ -n "$act1" ] && [ "$act1" != "$act0" ]; then
	pass failover "active slave $act0 -> $act1 in ${ms} ms"
else
	fail failover "active slave still '$act1' ${ms} ms after $act0 lost its carrier"
fi
if [ "$mac1" != "$mac0" ] && [ "$mac1" = "$(cat "/sys/class/net/$act1/address" 2>/dev/null)" ]; then
	pass mac-follows "bond MAC $mac0 -> $mac1 ($act1's)"
else
	fail mac-follows "bond MAC $mac0 -> $mac1, new active $act1"
fi
# The address's GID is removed with the old MAC and added again with the new one.
gid=0
for _ in $(seq 1 50); do
	vm_rxe_has_gid rxebd "$ADDR" && gid=1 && break
	sleep 0.1
done
ibv_devinfo -d rxebd -v | grep -E 'GID\[|state:'
if [ "$gid" = 1 ]; then
	pass gid-after "GID ::ffff:$ADDR back on rxebd"
else
	fail gid-after "no GID for $ADDR on rxebd 5 s after the failover"
fi

if [ "$AGENT_OK" = 1 ]; then
	# The gateway counts the failover from rtnetlink (IFLA_BOND_ACTIVE_SLAVE) and tells the
	# agent, which reads the model again: the final state, waited for up to 20 s.
	want="('$act1', True, True)"
	for _ in $(seq 1 80); do
		got=$(agent_json "/api/v1/bonds/$BOND" "j['active_slave'], [s['link_failure_count'] for s in j['slaves'] if s['name'] == '$act0'][0] >= 1, j['failovers'] >= 1" 2>&1)
		[ "$got" = "$want" ] && break
		sleep 0.25
	done
	if [ "$got" = "$want" ]; then
		pass agent-failover "the agent reports $act1 active, $act0's link failure counted"
	else
		fail agent-failover "GET /api/v1/bonds/$BOND after the failover: $got, want $want"
	fi
	# The bond event is sent once the agent holds the model that includes it, so it is on the
	# stream by now or soon: waited for up to 20 s. Each change of active slave the gateway
	# counts is one event (not a poll that can miss or split it): the first names act0 -> act1.
	for _ in $(seq 1 80); do
		got=$(python3 -c "
import json
kind, ev = None, []
for line in open('$VM_WORK/events.out'):
    if line.startswith('event: '): kind = line[7:].strip()
    elif line.startswith('data: ') and kind == 'bond':
        b = json.loads(line[6:]); ev.append((b['bond'], b['previous'], b['active_slave']))
print(ev and ev[0])
" 2>&1 | tail -n 1)
		[ "$got" = "('$BOND', '$act0', '$act1')" ] && break
		sleep 0.25
	done
	kill "$EV_PID" 2>/dev/null
	wait "$EV_PID" 2>/dev/null
	if [ "$got" = "('$BOND', '$act0', '$act1')" ]; then
		pass agent-event "event: bond $got"
	else
		fail agent-event "no bond event $act0 -> $act1 on the stream: $got $(tail -c 300 "$VM_WORK/events.out")"
	fi
	# /metrics is cached for up to a second: waited for up to 10 s.
	for _ in $(seq 1 40); do
		got=$(agent_get /metrics | grep -E "^isergw_bond_active_slave\\{bond=\"$BOND\",slave=\"$act1\"\\} 1\$|^isergw_rdma_port_state\\{device=\"rxebd\",port=\"1\",netdev=\"$BOND\"\\} 4\$" | wc -l)
		[ "$got" = 2 ] && break
		sleep 0.25
	done
	if [ "$got" = 2 ]; then
		pass agent-metrics "isergw_bond_active_slave names $act1; rxebd port ACTIVE"
	else
		fail agent-metrics "$(agent_get /metrics | grep -E '^isergw_(bond|rdma)')"
	fi
fi

# The rping that ran across the failover: stopped now if it still runs; its fate is reported.
sleep 2
kill -TERM "$lcli" "$lsrv" 2>/dev/null
wait "$lcli"
lrc=$?
wait "$lsrv" 2>/dev/null
if [ "$lrc" -eq 143 ] || [ "$lrc" -eq 124 ]; then
	during="the rping across the failover was still running"
elif grep -q DISCONNECT "$VM_WORK/rping-c.long.log"; then
	during="the rping across the failover was disconnected by it"
else
	during="the rping across the failover ended with exit $lrc"
fi
echo "$during; $(tail -n 2 "$VM_WORK/rping-c.long.log" | tr '\n' ' ')"

if vm_rping "$ADDR" 10 7177; then
	pass rping-after "$VM_RPING_COUNT ping-pongs via $act1 ($during)"
else
	fail rping-after "$(tail -n 2 "$VM_WORK/rping-c.7177.log") ($during)"
fi
vm_end
