#!/bin/bash
# bond-apply: PUT /api/v1/bonds/{bond}?apply=true against a kernel with bonding. The agent
# takes the bonds' present settings from a real gateway's network model (rtnetlink events, over
# its control socket) and builds an active-backup bond from two bare veths (every setting read back from sysfs), a
# re-apply changes one setting in one step, an injected failure mid-apply (a new bond, and a
# fail_over_mac change on the running one) leaves the links and the networkd files as they
# were, and the files written are handed to a real systemd-networkd (started by hand with udevd
# and the system bus: the guest runs no systemd), which must build the same bond from them with
# no complaint, and networkctl must show the slaves configured from them.
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin bond-apply

ND=/run/systemd/network	# one of networkd's own folders; the guest's /run is its memory
PORT=18081
AGENT_PID=

if ! vm_need curl python3 "$VM_BUILD/isergw-agent" "$VM_BUILD/isergwd"; then
	skip all "$VM_MISSING is not there"
	vm_end
fi
if ! vm_modprobe bonding; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi
mkdir -p "$ND"
vm_on_exit "rm -f $ND/10-isergw-agent-*"

# bare NAME: a veth NAME (its peer NAME-p up, for a carrier), no address, up.
bare() {
	run ip link add "$1" type veth peer name "$1-p" || return 1
	vm_on_exit "ip link del $1 2>/dev/null"
	run ip link set "$1-p" up && run ip link set "$1" up
}
for i in ba0 ba1 bx0 bx1; do
	check "bare-$i" bare "$i" || vm_end
done
vm_on_exit "ip link del bda 2>/dev/null; ip link del bdr 2>/dev/null; true"

# The gateway (one TCP portal, its control socket): the agent's source of the bonds' state.
GW_TCP_PORT=13262
SOCK=$VM_WORK/ctl.sock
cat >"$VM_WORK/gw-bond-apply.json" <<EOF
{"gateway": {"control_socket": "$SOCK"},
 "portals": [{"name": "tcp0", "transport": "tcp", "address": "127.0.0.1", "port": $GW_TCP_PORT}],
 "targets": []}
EOF
check gateway-start vm_gw_start "$VM_WORK/gw-bond-apply.json" "$VM_WORK/gateway.log" \
	127.0.0.1 "$GW_TCP_PORT" || vm_end

# agent_up [VAR=VALUE...]: the agent on the gateway's socket, up once it holds the model.
agent_up() {
	[ -n "$AGENT_PID" ] && { kill -TERM "$AGENT_PID"; wait "$AGENT_PID"; } 2>/dev/null
	env "$@" "$VM_BUILD/isergw-agent" --state-dir "$VM_WORK/agent" \
		--listen "127.0.0.1:$PORT" --networkd-dir "$ND" --gateway-socket "$SOCK" \
		>>"$VM_WORK/agent.log" 2>&1 &
	AGENT_PID=$!
	for _ in $(seq 1 100); do
		vm_port_open 127.0.0.1 "$PORT" &&
			[ "$(get /api/v1/bonds "j['gateway']")" = True ] && return 0
		sleep 0.2
	done
	tail -n 20 "$VM_WORK/agent.log"
	return 1
}
# get PATH EXPR: EXPR (python, over j) on the agent's answer to GET PATH.
get() {
	curl -s -m 10 -H "Authorization: Bearer $(cat "$VM_WORK/agent/admin.token" 2>/dev/null)" \
		"http://127.0.0.1:$PORT$1" |
		python3 -c "import json,sys; j=json.load(sys.stdin); print(($2))" 2>/dev/null
}
# model_in_sync BOND: GET shows the bond from the gateway's model with no drift (the model
# follows the kernel by netlink events: an apply's answer may come before it).
model_in_sync() {
	[ "$(get "/api/v1/bonds/$1" "(j['present'], j['drift'])")" = "(True, [])" ]
}
vm_on_exit 'kill -TERM $AGENT_PID 2>/dev/null; wait $AGENT_PID 2>/dev/null'
# put PATH BODY: the agent's status in CODE, its body in $VM_WORK/body.
put() {
	CODE=$(curl -s -m 30 -o "$VM_WORK/body" -w '%{http_code}' -X PUT \
		-H "Authorization: Bearer $(cat "$VM_WORK/agent/admin.token")" \
		-H "Content-Type: application/json" --data-binary "$2" "http://127.0.0.1:$PORT$1")
	echo "PUT $1 $2 -> $CODE $(head -c 600 "$VM_WORK/body")"
}
jb() {
	python3 -c "import json; j=json.load(open('$VM_WORK/body')); print(($1))" 2>/dev/null
}
# bond_is BOND: "mode fom miimon num_grat_arp primary slaves(sorted) up", from sysfs.
bond_is() {
	local b=/sys/class/net/$1
	[ -d "$b/bonding" ] || { echo none; return; }
	echo "$(cut -d' ' -f1 "$b/bonding/mode") $(cut -d' ' -f1 "$b/bonding/fail_over_mac")" \
		"$(cat "$b/bonding/miimon") $(cat "$b/bonding/num_grat_arp")" \
		"$(cat "$b/bonding/primary")" \
		"$(tr ' ' '\n' <"$b/bonding/slaves" | grep . | sort | tr '\n' ',')" \
		"$(($(cat "$b/flags") & 1))"
}
# link_is IF: "master up" of a plain interface.
link_is() {
	local m=-
	[ -e "/sys/class/net/$1/master" ] && m=$(basename "$(readlink "/sys/class/net/$1/master")")
	echo "$m $(($(cat "/sys/class/net/$1/flags") & 1))"
}
files_sum() {
	cat "$ND"/10-isergw-agent-* 2>/dev/null | md5sum | cut -d' ' -f1
}

check agent-start agent_up || vm_end

# ---- apply builds the bond ----------------------------------------------------------------

BODY='{"mode":"active-backup","fail_over_mac":"active","miimon":100,"num_grat_arp":2,"slaves":["ba0","ba1"],"primary":"ba1"}'
put "/api/v1/bonds/bda?apply=true" "$BODY"
if [ "$CODE" = 200 ]; then
	pass apply "$(jb "' '.join(s['op'] + ':' + s['link'] for s in j['applied']['steps'])")"
else
	fail apply "HTTP $CODE: $(head -c 300 "$VM_WORK/body")"
fi
got=$(bond_is bda)
want="active-backup active 100 2 ba1 ba0,ba1, 1"
[ "$got" = "$want" ] && pass built "sysfs: $got" || fail built "sysfs: $got, want $want"
act=
for _ in $(seq 1 50); do
	act=$(cat /sys/class/net/bda/bonding/active_slave 2>/dev/null)
	[ "$act" = ba1 ] && break
	sleep 0.1
done
[ "$act" = ba1 ] && pass active-slave "the primary, ba1, is active" ||
	fail active-slave "active slave '$act', want ba1"
got=$(jb "sorted(f.split('/')[-1] for f in [x['path'] for x in j['applied']['files']])")
want="['10-isergw-agent-bda-ba0.network', '10-isergw-agent-bda-ba1.network', '10-isergw-agent-bda.netdev']"
[ "$got" = "$want" ] && pass applied-files "$got" || fail applied-files "$got, want $want"
for _ in $(seq 1 100); do model_in_sync bda && break; sleep 0.2; done
check no-drift model_in_sync bda
ls -l "$ND"; cat "$ND"/10-isergw-agent-bda*
check files-written test "$(ls "$ND"/10-isergw-agent-bda* | wc -l)" = 3

# ---- a re-apply changes one setting -------------------------------------------------------

put "/api/v1/bonds/bda?apply=true" "${BODY/\"miimon\":100/\"miimon\":250}"
got=$(jb "[(s['op'], s['set']) for s in j['applied']['steps']]")
if [ "$CODE" = 200 ] && [ "$got" = "[('set', {'miimon': 250})]" ]; then
	pass reapply-one-step "$got"
else
	fail reapply-one-step "HTTP $CODE, steps $got"
fi
got=$(bond_is bda)
want="active-backup active 250 2 ba1 ba0,ba1, 1"
[ "$got" = "$want" ] && pass reapplied "sysfs: $got" || fail reapplied "sysfs: $got, want $want"
check netdev-rewritten grep -qx 'MIIMonitorSec=250ms' "$ND/10-isergw-agent-bda.netdev"
for _ in $(seq 1 100); do model_in_sync bda && break; sleep 0.2; done
check no-drift-reapplied model_in_sync bda

# ---- rollback -----------------------------------------------------------------------------

check agent-restart-fault agent_up ISERGW_BOND_FAIL_AT=5
before_links="$(link_is bx0) / $(link_is bx1)"
before_files=$(files_sum)
# A new bond: create, set, down bx0, enslave bx0, down bx1 <- fails.
put "/api/v1/bonds/bdr?apply=true" '{"mode":"active-backup","miimon":100,"slaves":["bx0","bx1"]}'
msg=$(jb "j['error']['code'] + ': ' + j['error']['message']")
if [ "$CODE" = 422 ] && printf '%s' "$msg" | grep -q 'step 5 (down bx1) failed.*the 4 steps before it were undone'; then
	pass rollback-refused "$msg"
else
	fail rollback-refused "HTTP $CODE: $msg"
fi
after="$(bond_is bdr) $(link_is bx0) / $(link_is bx1)"
if [ "$after" = "none $before_links" ] && ! ip link show bdr >/dev/null 2>&1 &&
	[ "$(files_sum)" = "$before_files" ]; then
	pass rollback-new-bond "no bdr, bx0 and bx1 as they were ($before_links), files unchanged"
else
	fail rollback-new-bond "now: $after; before: none $before_links; files $(files_sum) vs $before_files"
	ls -l "$ND"
fi
# The running bond: down bda, release ba0, release ba1, set fail_over_mac <- step 4 fails.
check agent-restart-fault4 agent_up ISERGW_BOND_FAIL_AT=4
before=$(bond_is bda)
before_files=$(files_sum)
put "/api/v1/bonds/bda?apply=true" "${BODY/\"active\"/\"none\"}"
msg=$(jb "j['error']['message']")
if [ "$CODE" = 422 ] && printf '%s' "$msg" | grep -q 'step 4 (set bda) failed'; then
	pass rollback-refused-running "$msg"
else
	fail rollback-refused-running "HTTP $CODE: $msg"
fi
after=$(bond_is bda)
if [ "$after" = "$before" ] && [ "$(files_sum)" = "$before_files" ]; then
	pass rollback-running-bond "bda as it was: $after; files unchanged"
else
	fail rollback-running-bond "now $after, was $before; files $(files_sum) vs $before_files"
fi
check agent-restart agent_up

# ---- systemd-networkd reads the files -----------------------------------------------------

NWD=/lib/systemd/systemd-networkd
if ! vm_need "$NWD"; then
	skip networkd "$NWD is not installed (systemd)"
	vm_end
fi
# A reboot, as far as the bond goes: it is gone, its slaves bare; networkd starts.
run ip link del bda
for i in ba0 ba1; do run ip link set "$i" up; done
check bond-gone test "$(bond_is bda)" = none
# networkd configures a link only once udev has initialized it: udevd runs for this part.
if vm_need /lib/systemd/systemd-udevd udevadm; then
	run /lib/systemd/systemd-udevd --daemon
	vm_on_exit "udevadm control --exit 2>/dev/null"
	run udevadm trigger --subsystem-match=net --action=add
	run udevadm settle -t 20
else
	skip networkd "$VM_MISSING is not installed (udev)"
	vm_end
fi
# The system bus, for networkctl (networkd waits for it and registers once it is there).
if vm_need dbus-daemon && [ -r /usr/share/dbus-1/system.conf ]; then
	mkdir -p /run/dbus
	dbus-daemon --system --fork --print-pid >"$VM_WORK/dbus.pid" || echo "dbus-daemon failed"
	vm_on_exit 'kill -TERM $(cat '"$VM_WORK"'/dbus.pid) 2>/dev/null; rm -f /run/dbus/system_bus_socket'
fi
mkdir -p /run/systemd/netif/links /run/systemd/netif/leases /run/systemd/netif/lldp
chown -R systemd-network: /run/systemd/netif 2>/dev/null
SYSTEMD_LOG_LEVEL=debug SYSTEMD_LOG_TARGET=console "$NWD" >"$VM_WORK/networkd.log" 2>&1 &
NWD_PID=$!
vm_on_exit "kill -TERM $NWD_PID 2>/dev/null; wait $NWD_PID 2>/dev/null"
# The bond's own state (up or not) is not the files': they leave it to the operator's own
# .network for the bond (its addresses), which this test does not write.
want="active-backup active 250 2 ba1 ba0,ba1,"
got=none
for _ in $(seq 1 150); do
	got=$(bond_is bda)
	got=${got% [01]}
	[ "$got" = "$want" ] && break
	sleep 0.2
done
grep -iE 'bda|ba0|ba1|isergw|unknown|invalid|failed to parse' "$VM_WORK/networkd.log" | head -n 40
if [ "$got" = "$want" ]; then
	pass networkd-built "systemd-networkd $("$NWD" --version | head -n 1 | cut -d' ' -f2) built from the files: $got"
else
	fail networkd-built "after 30 s: $got, want $want (networkd alive: $(kill -0 $NWD_PID 2>/dev/null && echo yes || echo no))"
fi
# Its parser says what it did not understand at warning level, naming file and line.
bad=$(grep -E '10-isergw-agent-bda.*(Unknown|Failed|[Ii]nvalid|ignoring)' "$VM_WORK/networkd.log" | head -n 3)
[ -z "$bad" ] && pass networkd-parsed "no warning about the files (netdev and networks loaded)" ||
	fail networkd-parsed "$bad"
# networkctl, over the bus: the slaves are enslaved and configured from the .network files.
nc_ok() {
	timeout 10 networkctl --no-pager --no-legend list >"$VM_WORK/networkctl.out" 2>&1 &&
		grep -qE '^ *[0-9]+ +bda +bond ' "$VM_WORK/networkctl.out" &&
		grep -qE '^ *[0-9]+ +ba0 +ether +enslaved +configured' "$VM_WORK/networkctl.out" &&
		grep -qE '^ *[0-9]+ +ba1 +ether +enslaved +configured' "$VM_WORK/networkctl.out"
}
if ! vm_need networkctl dbus-daemon; then
	skip networkctl "$VM_MISSING is not installed"
else
	ok=0
	for _ in $(seq 1 50); do
		nc_ok && { ok=1; break; }
		sleep 0.2
	done
	cat "$VM_WORK/networkctl.out"
	timeout 10 networkctl --no-pager status ba1 2>&1 | head -n 20
	if [ "$ok" = 1 ]; then
		pass networkctl "networkctl list: bda a bond, ba0 and ba1 enslaved and configured"
	else
		fail networkctl "$(tr '\n' ';' <"$VM_WORK/networkctl.out" | cut -c1-250)"
	fi
fi
vm_end
