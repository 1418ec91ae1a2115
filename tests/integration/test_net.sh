#!/bin/bash
# The gateway's network model as an operator meets it (docs/CONTROL.md, "net"): a host described
# by a sysfs fixture tree (ISERGW_SYSFS) with a RoCE active-backup bond shows its verdicts in the
# log at start and in `state`, each portal's chain down to the GID, a failover counted with old
# and new slave, a fixed setting resolving its verdict, and an apply re-judging the portals.
# Then, in a network namespace of its own (root only), the live reader: rtnetlink events bring
# a portal address the gateway did not see at start.
#
#   tests/integration/test_net.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin net
if [ "$TARGET" != isergwd ]; then
	skip net "gateway-only suite (TARGET=$TARGET)"
	t_end
fi
GW=$T_BUILD/isergwd
if [ ! -x "$GW" ]; then
	fail build "$GW is missing"
	t_end
fi
export ASAN_OPTIONS="log_path=$T_DIR/san/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# ---- the fixture: bd0 (active-backup, fail_over_mac=none) over bd0a (mlx5_0) and bd0b (mlx5_1)

SYS=$T_DIR/sys
put() { mkdir -p "$(dirname "$SYS/$1")" && printf '%s\n' "$2" >"$SYS/$1"; }
link() { # NAME MAC
	put "class/net/$1/type" 1
	put "class/net/$1/address" "$2"
	put "class/net/$1/operstate" up
	put "class/net/$1/flags" 0x1003
	put "class/net/$1/speed" 100000
}
B=class/net/bd0/bonding
link bd0 02:00:00:00:0a:01
put $B/mode "active-backup 1"
put $B/fail_over_mac "none 0"
put $B/miimon 100
put $B/arp_interval 0
put $B/num_grat_arp 1
put $B/num_unsol_na 1
put $B/mii_status up
put $B/active_slave bd0a
put $B/primary ""
put $B/primary_reselect "always 0"
put $B/slaves "bd0a bd0b"
for s in a b; do
	link bd0$s 02:00:00:00:0$s:01
	put class/net/bd0$s/bonding_slave/mii_status up
	put class/net/bd0$s/bonding_slave/perm_hwaddr 02:00:00:00:0$s:01
	put class/net/bd0$s/bonding_slave/link_failure_count 0
done
put class/net/bd0a/bonding_slave/state active
put class/net/bd0b/bonding_slave/state backup
port() { # DEV NETDEV GID0
	local P=class/infiniband/$1/ports/1
	put $P/state "4: ACTIVE"
	put $P/link_layer Ethernet
	put $P/rate "100 Gb/sec (4X EDR)"
	put $P/gids/0 "$3"
	put $P/gid_attrs/types/0 "IB/RoCE v1"
	put $P/gid_attrs/ndevs/0 "$2"
}
port mlx5_0 bd0a fe80:0000:0000:0000:0000:00ff:fe00:0a01
port mlx5_1 bd0b fe80:0000:0000:0000:0000:00ff:fe00:0b01
# The bond's address as a RoCE v2 GID on the active slave's port.
put class/infiniband/mlx5_0/ports/1/gids/1 0000:0000:0000:0000:0000:ffff:c0a8:3201
put class/infiniband/mlx5_0/ports/1/gid_attrs/types/1 "RoCE v2"
put class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/1 bd0
put class/net/lo/type 772
put class/net/lo/address 00:00:00:00:00:00
put class/net/lo/operstate unknown
put class/net/lo/flags 0x9
printf 'lo 127.0.0.1/8\nbd0 192.168.50.1/24\n' >"$SYS/isergw-addrs"

# ---- the gateway on it: a TCP portal on loopback, an iSER portal on bd0's address ----------

PORT=$(t_free_port)
SOCK=$T_DIR/ctl.sock
tg_defaults
TG_BS=ram
TG_SIZE=1M
TG_GATEWAY="\"control_socket\": \"$SOCK\""
gw_write_config "$T_DIR/base.json" "$PORT"
python3 - "$T_DIR/base.json" "$T_DIR/gw.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["portals"].append({"name": "iser0", "transport": "iser", "address": "192.168.50.1",
                     "port": c["portals"][0]["port"]})
c["targets"][0]["portals"].append("iser0")
json.dump(c, open(sys.argv[2], "w"))
EOF

# state KEY-EXPRESSION: evaluates a Python expression over n (the state's "net" object).
state() {
	gw_ctl "$SOCK" '{"op":"state"}' >"$T_DIR/state.json" || return 1
	python3 -c "
import json, sys
n = json.load(open('$T_DIR/state.json'))['net']
v = {(x['id'], x['object']): x for x in n['verdicts']}
p = {x['name']: x for x in n['portals']}
b = {x['name']: x for x in n['bonds']}
print($1)"
}
# wait_for SECONDS CMD...: until CMD succeeds.
wait_for() {
	local secs=$1 i=0
	shift
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -gt $((secs * 10)) ] && return 1
		sleep 0.1
	done
}
is() { [ "$(state "$1")" = "$2" ]; }

export ISERGW_SYSFS=$SYS
if ! gw_start "$T_DIR/gw.json" "$T_DIR/gateway.log" "$PORT"; then
	fail start "the gateway did not start on the fixture"
	t_end
fi
unset ISERGW_SYSFS
wait_for 5 test -S "$SOCK"

check "start: the log names the fail_over_mac error on bd0, with the fix" \
	grep -q "net: bond-fail-over-mac bond/bd0: iSER portal iser0 (192.168.50.1) is on active-backup bond bd0 with fail_over_mac=none.*(fix: set fail_over_mac=active" "$T_DIR/gateway.log"
check "state: the model comes from sysfs, with one bond and two RDMA ports" \
	is "(n['source'], [x['name'] for x in n['bonds']], len(n['rdma_ports']))" "('sysfs', ['bd0'], 2)"
check "state: bond-fail-over-mac is an error on bond/bd0, and the only verdict" \
	is "[(k, x['severity']) for k, x in v.items()]" "[(('bond-fail-over-mac', 'bond/bd0'), 'error')]"
check "state: bd0's attributes and slaves" \
	is "(b['bd0']['mode'], b['bd0']['fail_over_mac'], b['bd0']['miimon'], b['bd0']['active_slave'], [(s['name'], s['state'], s['link_layer'], s['rdma'][0]['device']) for s in b['bd0']['slaves']])" \
	"('active-backup', 'none', 100, 'bd0a', [('bd0a', 'active', 'roce', 'mlx5_0'), ('bd0b', 'backup', 'roce', 'mlx5_1')])"
check "state: iser0 goes bd0 -> bd0a -> mlx5_0 port 1 -> its RoCE v2 GID" \
	is "(lambda c: (c['netdev'], c['bond'], c['slave'], c['rdma_device'], c['rdma_port'], c['gid'], c['gid_type']))(p['iser0'])" \
	"('bd0', 'bd0', 'bd0a', 'mlx5_0', 1, '::ffff:192.168.50.1', 'RoCE v2')"
check "state: tcp0 sits on lo, with no RDMA (and needs none)" \
	is "(p['tcp0']['netdev'], p['tcp0']['rdma_device'])" "('lo', None)"
check "state: no failover yet" is "(b['bd0']['failovers'], b['bd0']['last_failover'])" "(0, None)"

# A failover, as the kernel would show it: bd0a lost its link, bd0b took over.
put $B/active_slave bd0b
put class/net/bd0a/bonding_slave/state backup
put class/net/bd0a/bonding_slave/mii_status down
put class/net/bd0a/operstate down
put class/net/bd0b/bonding_slave/state active
check "failover: counted once, with old and new slave and their MACs" wait_for 5 is \
	"(b['bd0']['failovers'], b['bd0']['last_failover']['old'], b['bd0']['last_failover']['new'], b['bd0']['last_failover']['old_mac'], b['bd0']['last_failover']['new_mac'])" \
	"(1, 'bd0a', 'bd0b', '02:00:00:00:0a:01', '02:00:00:00:0b:01')"
check "failover: the old slave's GID was the bond's address" \
	is "(b['bd0']['last_failover']['old_gid'], b['bd0']['last_failover']['time_ms'] > 0)" "('::ffff:192.168.50.1', True)"
check "failover: the log says bd0a -> bd0b with MACs" \
	grep -q "net: bond bd0: active slave bd0a -> bd0b (MAC 02:00:00:00:0a:01 -> 02:00:00:00:0b:01" "$T_DIR/gateway.log"
check "failover: iser0 now goes through bd0b and mlx5_1" \
	is "(p['iser0']['slave'], p['iser0']['rdma_device'])" "('bd0b', 'mlx5_1')"
check "failover: bd0a without link is a warning, logged" wait_for 3 grep -q \
	"net: bond-slave-down bond/bd0: bond bd0: slave bd0a has no link" "$T_DIR/gateway.log"

# The operator sets fail_over_mac=active: the error goes, and the log says so.
put $B/fail_over_mac "active 1"
check "fixed: bond-fail-over-mac leaves state" wait_for 5 is \
	"('bond-fail-over-mac', 'bond/bd0') in v" "False"
check "fixed: the log says resolved" \
	grep -q "net: bond-fail-over-mac bond/bd0: resolved" "$T_DIR/gateway.log"

# An apply without the iSER portal: its chain and its verdicts go with it.
python3 -c "
import json
c = json.load(open('$T_DIR/base.json'))
print(json.dumps({'op': 'apply', 'config': c}))" >"$T_DIR/apply.json"
gw_ctl "$SOCK" "$(cat "$T_DIR/apply.json")" >"$T_DIR/apply.out"
check "apply without iser0: ok" grep -q '"ok":true' "$T_DIR/apply.out"
check "apply without iser0: only tcp0 has a chain now" is "sorted(p)" "['tcp0']"
gw_stop "$T_GW_PID"

# ---- live: rtnetlink in a network namespace of this suite's own ---------------------------

NS=isergw-net-$$
[ "$(id -u)" = 0 ] && t_ns_reap isergw-net-
if [ "$(id -u)" != 0 ] || ! ip netns add "$NS" 2>/dev/null; then
	skip live "needs root and ip netns (network namespaces)"
	t_end
fi
# The namespace goes on any exit; the suite's own status is kept for t_exit_trap.
net_exit() {
	local rc=$?
	ip netns del "$NS" 2>/dev/null
	(exit $rc)
	t_exit_trap
}
trap net_exit EXIT
nsx() { ip netns exec "$NS" "$@"; }
nsx ip link set lo up
nsx ip link add nv1 type veth peer name nv2
cat >"$T_DIR/live.json" <<EOF
{"gateway": {"control_socket": "$SOCK"},
 "portals": [{"name": "iser0", "transport": "iser", "address": "10.77.0.1", "port": $PORT}],
 "targets": [{"name": "iqn.2026-11.org.isergw:net", "portals": ["iser0"],
   "allow_any_initiator": true, "luns": [{"lun": 0, "backstore": {"type": "ram", "size": "1M"}}]}]}
EOF
rm -f "$SOCK"
t_daemon_start isergwd isergwd "$T_DIR/live.log" ip netns exec "$NS" "$GW" --config "$T_DIR/live.json"
LIVE=$T_LAST_PID
if ! wait_for 10 test -S "$SOCK"; then
	fail live "the gateway did not start in $NS: $(tail -n 5 "$T_DIR/live.log" | tr '\n' ' ')"
	ip netns del "$NS"
	t_end
fi
check "live: read through netlink; the portal's address is nowhere yet" \
	is "(n['source'], ('portal-no-address', 'portal/iser0') in v)" "('netlink', True)"
nsx ip addr add 10.77.0.1/24 dev nv1
nsx ip link set nv1 up
check "live: an address event brings the chain (iser0 on nv1) without waiting for the timer" \
	wait_for 3 is "(p['iser0']['netdev'], n['events'] > 0)" "('nv1', True)"
check "live: nv1 has no RDMA device: portal-no-rdma replaces portal-no-address" \
	is "sorted(k[0] for k in v)" "['portal-no-rdma']"
check "live: the log shows both and the resolution" bash -c \
	"grep -q 'portal-no-address portal/iser0: resolved' '$T_DIR/live.log' && grep -q 'net: portal-no-rdma portal/iser0' '$T_DIR/live.log'"
gw_stop "$LIVE"
ip netns del "$NS"
t_end
