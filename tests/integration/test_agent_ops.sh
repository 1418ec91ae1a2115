#!/bin/bash
# The agent's operator endpoints against the real gateway: per-LUN latency histograms in
# /metrics after real I/O (counts equal the commands the client completed; the text format's
# invariants hold; every event loop's counters; gzip for scrapers that ask), secrets masked in every answer and absent from
# both daemons' debug logs, bond and RDMA port status from a sysfs fixture tree (ISERGW_SYSFS)
# with desired settings, drift and events, every API operation covered by isergwctl, and
# HTTPS: a self-signed certificate served, plain HTTP refused, the CLI with --cacert, and
# non-loopback listening only with TLS and --allow-remote.
#
#   tests/integration/test_agent_ops.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/api.sh"

t_begin agent_ops
if [ "$TARGET" != isergwd ]; then
	skip agent_ops "the agent drives isergwd only"
	t_end
fi
AGENT=$T_BUILD/isergw-agent
CTL=$T_BUILD/isergwctl
BENCH=$T_TOOLS/isergw-bench
PROM="python3 $T_ROOT/tests/lib/prom_check.py"
if [ ! -x "$AGENT" ] || [ ! -x "$CTL" ] || [ ! -x "$BENCH" ]; then
	skip agent_ops "no $AGENT, $CTL or $BENCH"
	t_end
fi
if ! t_need curl python3; then
	skip agent_ops "needs curl and python3"
	t_end
fi

IQN=iqn.2026-11.org.isergw:ops
GW_PORT=$(t_free_port)
API_PORT=$(t_free_port)
SOCK=$T_DIR/ctl.sock
STATE=$T_DIR/agent
URL=http://$T_HOST:$API_PORT
GWCONF=$T_DIR/gateway.json

cat >"$GWCONF" <<EOC
{ "gateway": { "control_socket": "$SOCK" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $GW_PORT } ],
  "targets": [ { "name": "$IQN", "allow_any_initiator": true, "portals": [ "tcp0" ],
                 "luns": [ { "lun": 0, "backstore": { "type": "ram", "size": "64M" } },
                           { "lun": 1, "backstore": { "type": "ram", "size": "64M" } } ] } ] }
EOC

# agent_start TAG [ARGS...]: the agent with extra arguments (behind the command in AGENT_WRAP,
# when set); AGENT_PID.
agent_start() {
	local tag=$1
	shift
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		t_daemon_start agent agent "$T_DIR/agent.$tag.log" \
		${AGENT_WRAP[@]+"${AGENT_WRAP[@]}"} "$AGENT" --state-dir "$STATE" \
		--gateway-socket "$SOCK" "$@"
	AGENT_PID=$T_LAST_PID
}

agent_stop() {
	t_stop_pid "$AGENT_PID" 10
	if [ "$T_STOP_WAS_DEAD" = 1 ] || [ "$T_STOP_KILLED" = 1 ] || [ "$T_STOP_RC" -ne 0 ]; then
		fail "agent-stop ($1)" "dead before SIGTERM: $T_STOP_WAS_DEAD, killed: $T_STOP_KILLED, status $T_STOP_RC"
	fi
}

metrics() {
	curl -s -o "$T_DIR/metrics" -H "Authorization: Bearer $ADMIN" "$URL/metrics"
}

# metric 'NAME{labels}': its value in $T_DIR/metrics ("-" when absent).
metric() {
	$PROM "$T_DIR/metrics" "$1" 2>/dev/null
}

# ---- start --------------------------------------------------------------------------------

# The gateway's network model reads a sysfs fixture tree (re-read every second), empty until
# the bond section below moves a host into it; the agent shows the gateway's model.
SYS=$T_DIR/sys
mkdir -p "$SYS"
export ISERGW_SYSFS=$SYS
if ! gw_start "$GWCONF" "$T_DIR/gateway.log" "$GW_PORT"; then
	fail start "the gateway did not start"
	t_end
fi
agent_start 1 --listen "$T_HOST:$API_PORT" --debug all
if ! t_wait_port "$AGENT_PID" "$API_PORT" 10; then
	fail start "the agent did not start"
	tail -n 20 "$T_DIR/agent.1.log"
	t_end
fi
ADMIN=$(cat "$STATE/admin.token")

# ---- latency histograms -------------------------------------------------------------------

lat_count() {
	metric "isergw_lun_${1}_latency_seconds_count{target=\"$IQN\",lun=\"$2\"}"
}

has_histograms() {
	metrics && [ "$(lat_count read 0)" = 0 ] && [ "$(lat_count write 0)" = 0 ]
}
check "/metrics has empty read and write histograms for an idle LUN" wait_for 10 has_histograms
check "the exposition's format and histogram invariants hold (idle)" $PROM "$T_DIR/metrics"

LURL=iscsi://$T_HOST:$GW_PORT/$IQN/0
if "$BENCH" -w -q 4 -b 4096 -t 1 -S 16777216 "$LURL" >"$T_DIR/bench-w.out" 2>&1; then
	WIOS=$(sed -n 's/.* ios=\([0-9]*\) .*/\1/p' "$T_DIR/bench-w.out")
	pass "isergw-bench writes to LUN 0 ($WIOS commands)"
else
	WIOS=
	fail "isergw-bench writes" "$(tail -n 2 "$T_DIR/bench-w.out")"
fi
if "$BENCH" -q 2 -b 65536 -t 1 -S 16777216 "$LURL" >"$T_DIR/bench-r.out" 2>&1; then
	RIOS=$(sed -n 's/.* ios=\([0-9]*\) .*/\1/p' "$T_DIR/bench-r.out")
	pass "isergw-bench reads LUN 0 ($RIOS commands)"
else
	RIOS=
	fail "isergw-bench reads" "$(tail -n 2 "$T_DIR/bench-r.out")"
fi
counts_seen() {
	metrics && [ "$(lat_count write 0)" = "$WIOS" ] && [ "$(lat_count read 0)" = "$RIOS" ]
}
if [ -n "$WIOS" ] && [ -n "$RIOS" ]; then
	if wait_for 10 counts_seen; then
		pass "write and read histogram counts equal the commands isergw-bench completed"
	else
		fail "histogram counts" "write $(lat_count write 0) want $WIOS, read $(lat_count read 0) want $RIOS"
	fi
fi
check "the exposition's format and histogram invariants hold (after I/O)" $PROM "$T_DIR/metrics"
check "_count equals the LUN's write_ops_total" test "$(lat_count write 0)" = \
	"$(metric "isergw_lun_write_ops_total{target=\"$IQN\",lun=\"0\"}")"
check "_count equals the LUN's read_ops_total" test "$(lat_count read 0)" = \
	"$(metric "isergw_lun_read_ops_total{target=\"$IQN\",lun=\"0\"}")"
check "the latency sums are positive" python3 -c "import sys; sys.exit(not (float('$(metric "isergw_lun_write_latency_seconds_sum{target=\"$IQN\",lun=\"0\"}")') > 0 and float('$(metric "isergw_lun_read_latency_seconds_sum{target=\"$IQN\",lun=\"0\"}")') > 0))"
check "the +Inf bucket holds them all" test "$(metric "isergw_lun_write_latency_seconds_bucket{target=\"$IQN\",lun=\"0\",le=\"+Inf\"}")" = "$WIOS"
check "the other LUN's histograms stay empty" test "$(lat_count write 1)" = 0 -a "$(lat_count read 1)" = 0
# loop_metrics: every event loop has its samples, it has slept, and no more polls found work
# than were started.
loop_metrics() {
	python3 - "$T_DIR/metrics" <<'PY'
import re, sys
v = {}
for line in open(sys.argv[1]):
    m = re.match(r'(isergw_loop_[a-z_]+)\{loop="(\d+)",cpu="(-?\d+)"\} (\d+)$', line)
    if m:
        v.setdefault(m.group(2), {})[m.group(1)] = int(m.group(4))
names = ["isergw_loop_connections", "isergw_loop_sessions", "isergw_loop_sleeps_total",
         "isergw_loop_polls_total", "isergw_loop_poll_hits_total"]
print(v)
ok = bool(v) and all(all(n in l for n in names) and l["isergw_loop_sleeps_total"] > 0 and
                     l["isergw_loop_poll_hits_total"] <= l["isergw_loop_polls_total"]
                     for l in v.values())
sys.exit(0 if ok else 1)
PY
}
check "/metrics has every event loop's placement, sleeps and busy polls" loop_metrics

# Prometheus asks for gzip: the same exposition, compressed.
curl -s -o "$T_DIR/metrics.gz" -D "$T_DIR/hdr.gz" -H "Accept-Encoding: gzip" \
	-H "Authorization: Bearer $ADMIN" "$URL/metrics"
check "Accept-Encoding: gzip gets Content-Encoding: gzip" grep -qi "^Content-Encoding: gzip" "$T_DIR/hdr.gz"
check "  ... which gunzips to a valid exposition with the same histograms" bash -c \
	"gzip -dc '$T_DIR/metrics.gz' >'$T_DIR/metrics.unz' && $PROM '$T_DIR/metrics.unz' >/dev/null &&
	 test \"\$($PROM '$T_DIR/metrics.unz' 'isergw_lun_write_latency_seconds_count{target=\"$IQN\",lun=\"0\"}')\" = '$WIOS' &&
	 test \$(stat -c %s '$T_DIR/metrics.gz') -lt \$(stat -c %s '$T_DIR/metrics.unz')"
check "isergwctl metrics (gzip on the wire) prints the same histograms" bash -c \
	"'$CTL' --url '$URL' --state-dir '$STATE' metrics >'$T_DIR/metrics.cli' &&
	 test \"\$($PROM '$T_DIR/metrics.cli' 'isergw_lun_read_latency_seconds_count{target=\"$IQN\",lun=\"0\"}')\" = '$RIOS'"
curl -s -o "$T_DIR/metrics.q0" -D "$T_DIR/hdr.q0" -H "Accept-Encoding: gzip;q=0, identity" \
	-H "Authorization: Bearer $ADMIN" "$URL/metrics"
check "gzip;q=0 gets plain text" bash -c "! grep -qi '^Content-Encoding' '$T_DIR/hdr.q0' && $PROM '$T_DIR/metrics.q0'"

# ---- secrets: write-only, masked everywhere, in no log even at debug level ----------------

api GET /api/v1/config
G=$(sed -n 's/^ETag: "\([0-9]*\)".*/\1/Ip' "$T_DIR/hdr" | tr -d '\r')
python3 -c "import json; j=json.load(open('$T_DIR/body')); j.setdefault('gateway', {})['log_debug']='all'; print(json.dumps(j))" >"$T_DIR/debug.json"
IF_MATCH=$G api PUT /api/v1/config "$(cat "$T_DIR/debug.json")"
expect "PUT config: the gateway logs at debug level" 200
SECRET=ops-chap-secret-4711
MSECRET=ops-mutual-secret-0815
DSECRET=ops-discovery-secret-99
api PUT /api/v1/discovery "{\"auth\":\"chap\",\"chap\":{\"user\":\"disc\",\"secret\":\"$DSECRET\"}}"
expect "PUT discovery with a CHAP secret" 200
api POST /api/v1/targets/$IQN/acls "{\"name\":\"$T_INI1\",\"chap\":{\"user\":\"host1\",\"secret\":\"$SECRET\",\"mutual_user\":\"gw1\",\"mutual_secret\":\"$MSECRET\"}}"
expect "POST an ACL with mutual CHAP" 201
check "the POST answer masks both secrets" test "$(jget "(j['chap']['secret'], j['chap']['mutual_secret'])")" = "('****', '****')"
api PUT /api/v1/targets/$IQN "{\"allow_any_initiator\":false,\"portals\":[\"tcp0\"]}"
expect "PUT target: listed initiators only" 200
if [ -x "$T_TOOLS/isergw-verify" ]; then
	check "the initiator logs in with mutual CHAP" "$T_TOOLS/isergw-verify" -q -n 2 \
		-S 1048576 -i "$T_INI1" -u host1 -p "$SECRET" -U gw1 -P "$MSECRET" -N "$LURL"
	check "a wrong secret is refused (login status 0x0201)" t_refused "$T_LOGIN_AUTH" \
		"$T_TOOLS/isergw-verify" -q -n 1 -S 1048576 -i "$T_INI1" -u host1 \
		-p wrong-secret-000 -U gw1 -P "$MSECRET" -N "$LURL"
fi
for p in "/api/v1/targets/$IQN/acls/$T_INI1" "/api/v1/targets/$IQN/acls" "/api/v1/targets/$IQN" \
	/api/v1/targets /api/v1/discovery /api/v1/config; do
	api GET "$p"
	if [ "$CODE" = 200 ] && ! grep -q -e "$SECRET" -e "$MSECRET" -e "$DSECRET" "$T_DIR/body"; then
		pass "GET $p shows no secret"
	else
		fail "GET $p" "HTTP $CODE or a secret in the answer"
	fi
done
check "isergwctl acl show masks the secrets" bash -c "'$CTL' --url '$URL' --state-dir '$STATE' \
	acl show '$IQN' '$T_INI1' | grep -q '\\*\\*\\*\\*' && ! '$CTL' --url '$URL' --state-dir '$STATE' \
	acl show '$IQN' '$T_INI1' | grep -q '$SECRET'"
check "the agent logged at debug level" grep -q "GET /api/v1/config" "$T_DIR/agent.1.log"
check "the gateway logged at debug level (login keys)" grep -q "<- SessionType=Normal" "$T_DIR/gateway.log"
check "no secret in the agent's log, debug included" bash -c \
	"! grep -q -e '$SECRET' -e '$MSECRET' -e '$DSECRET' -e '$ADMIN' '$T_DIR/agent.1.log'"
check "no secret in the gateway's log, debug included" bash -c \
	"! grep -q -e '$SECRET' -e '$MSECRET' -e '$DSECRET' '$T_DIR/gateway.log'"
check "the secrets are stored (the store owns them, mode 0600)" bash -c \
	"grep -q '$SECRET' '$STATE/config.json' && test \"\$(stat -c %a '$STATE/config.json')\" = 600"

# ---- bonds and RDMA ports: the gateway's model of a sysfs fixture ------------------------

# The files the kernel shows for an active-backup bond bd0 (slaves bd0a active, bd0b backup)
# with rxe0 on it, a plain NIC eth9, and a PCI RDMA device mlx5_0 whose port is down. Written
# aside and moved into the gateway's tree at once, so that no read sees half a host.
NEW=$T_DIR/sys.new
put() { mkdir -p "$(dirname "$NEW/$1")" && printf '%s\n' "$2" >"$NEW/$1"; }
B=class/net/bd0
put $B/address 02:00:00:00:0a:01
put $B/bonding/mode "active-backup 1"
put $B/bonding/fail_over_mac "active 1"
put $B/bonding/miimon 50
put $B/bonding/mii_status up
put $B/bonding/active_slave bd0a
put $B/bonding/primary ""
put $B/bonding/slaves "bd0a bd0b"
# Each slave is a netdev of its own whose master is the bond (symlinks, as in /sys).
SA=class/net/bd0a/bonding_slave
SB=class/net/bd0b/bonding_slave
put class/net/bd0a/address 02:00:00:00:0a:01
put $SA/state active
put $SA/mii_status up
put $SA/link_failure_count 0
put $SA/perm_hwaddr 02:00:00:00:0a:01
put class/net/bd0b/address 02:00:00:00:0a:01
put $SB/state backup
put $SB/mii_status up
put $SB/link_failure_count 2
put $SB/perm_hwaddr 02:00:00:00:0b:01
for s in bd0a bd0b; do
	ln -s ../bd0 "$NEW/class/net/$s/master"
	ln -s ../$s "$NEW/$B/lower_$s"
done
put class/net/eth9/address 02:00:00:00:09:09
put class/infiniband/rxe0/parent bd0
put class/infiniband/rxe0/node_guid 0000:00ff:fe00:0a01
put class/infiniband/rxe0/ports/1/state "4: ACTIVE"
put class/infiniband/rxe0/ports/1/phys_state "5: LinkUp"
put class/infiniband/rxe0/ports/1/link_layer Ethernet
put class/infiniband/rxe0/ports/1/rate "10 Gb/sec (1X QDR)"
put class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0 bd0
mkdir -p "$NEW/class/infiniband/mlx5_0/device/net/ens1f0"
put class/infiniband/mlx5_0/ports/1/state "1: DOWN"
put class/infiniband/mlx5_0/ports/1/phys_state "3: Disabled"
put class/infiniband/mlx5_0/ports/1/link_layer InfiniBand
put class/infiniband/mlx5_0/ports/1/rate "100 Gb/sec (4X EDR)"
mv "$NEW/class" "$SYS/class"
# From now on the fixture is the host: its files are written in place.
put() { mkdir -p "$(dirname "$SYS/$1")" && printf '%s\n' "$2" >"$SYS/$1"; }

agent_stop main
# Tokens are read at start: the read-only one is made while the agent is down.
READ=$("$AGENT" --state-dir "$STATE" --add-token monitor --role read 2>/dev/null)
agent_start 2 --listen "$T_HOST:$API_PORT"
if ! t_wait_port "$AGENT_PID" "$API_PORT" 10; then
	fail start "the agent did not restart"
	t_end
fi

# bond_is EXPR WANT: GET /api/v1/bonds/bd0 until EXPR (python, over j) prints WANT: the
# gateway re-reads its tree every second and the agent follows its "changed" events, so a
# check waits for the final state rather than taking the first answer.
bond_is() {
	api GET /api/v1/bonds/bd0 "" "$READ"
	[ "$CODE" = 200 ] && [ "$(jget "$1")" = "$2" ]
}
check "the agent shows the gateway's model of bd0" wait_for 15 bond_is \
	"(j['mode'], j['fail_over_mac'], j['active_slave'], j['miimon'])" \
	"('active-backup', 'active', 'bd0a', 50)"
api GET /api/v1/bonds "" "$READ"
expect "GET bonds (read token)" 200
check "bd0 is the only bond (eth9 is not one)" test "$(jget "[b['name'] for b in j['bonds']]")" = "['bd0']"
check "each slave's state and link failures" test \
	"$(jget "[(s['name'], s['state'], s['link_failure_count']) for s in j['bonds'][0]['slaves']]")" = \
	"[('bd0a', 'active', 0), ('bd0b', 'backup', 2)]"
check "no failover counted yet; rxe0 sits on the bond; no desired settings" test \
	"$(jget "(lambda b: (b['failovers'], b['rdma_devices'], b['desired'], b['drift']))(j['bonds'][0])")" = \
	"(0, ['rxe0'], None, None)"
check "the list carries the gateway's verdicts" test "$(jget "(type(j['verdicts']).__name__, j['gateway'])")" = "('list', True)"
api GET /api/v1/rdma "" "$READ"
expect "GET rdma" 200
check "rxe0: port 1 ACTIVE on bd0 (its parent), Ethernet" test \
	"$(jget "(lambda d: (d['name'], d['netdev'], d['ports'][0]['state'], d['ports'][0]['state_num'], d['ports'][0]['link_layer'], d['ports'][0]['netdev']))([d for d in j['devices'] if d['name']=='rxe0'][0])")" = \
	"('rxe0', 'bd0', 'ACTIVE', 4, 'Ethernet', 'bd0')"
check "mlx5_0: port 1 DOWN (Disabled), InfiniBand, its rate, its netdev from device/net" test \
	"$(jget "(lambda d: (d['netdev'], d['ports'][0]['state'], d['ports'][0]['phys_state'], d['ports'][0]['link_layer'], d['ports'][0]['rate']))([d for d in j['devices'] if d['name']=='mlx5_0'][0])")" = \
	"('ens1f0', 'DOWN', 'Disabled', 'InfiniBand', '100 Gb/sec (4X EDR)')"
check "rxe0: its node GUID and the port's LinkUp" test \
	"$(jget "(lambda d: (d['node_guid'], d['ports'][0]['phys_state']))([d for d in j['devices'] if d['name']=='rxe0'][0])")" = \
	"('0000:00ff:fe00:0a01', 'LinkUp')"

# /metrics is cached for up to a second: wait for an exposition that has the model's bond.
bond_in_metrics() {
	metrics && [ "$(metric 'isergw_bond_active_slave{bond="bd0",slave="bd0a"}')" != - ]
}
wait_for 5 bond_in_metrics
check "metrics: bd0a is the active slave, bd0b not" test \
	"$(metric 'isergw_bond_active_slave{bond="bd0",slave="bd0a"}') $(metric 'isergw_bond_active_slave{bond="bd0",slave="bd0b"}')" = "1 0"
check "metrics: bond failovers and RDMA port states" test \
	"$(metric 'isergw_bond_failovers_total{bond="bd0"}') $(metric 'isergw_rdma_port_state{device="rxe0",port="1",netdev="bd0"}') $(metric 'isergw_rdma_port_state{device="mlx5_0",port="1",netdev=""}')" = "0 4 1"
check "the exposition's invariants hold with bond metrics" $PROM "$T_DIR/metrics"

# A failover, as the kernel would show it: bd0a lost its link, bd0b took over. The gateway
# sees it in its next read, counts it once (a read between the writes below sees the new
# active slave, or not yet: one change of active slave either way) and tells the agent, which
# reads the model again and tells its event stream.
curl -s -N -H "Authorization: Bearer $READ" "$URL/api/v1/events" >"$T_DIR/events.out" 2>&1 &
EV=$!
# Subscribed once its hello arrived: an event before that is not this stream's.
check "the event stream says hello" wait_for 10 grep -q '^event: hello' "$T_DIR/events.out"
put $B/bonding/active_slave bd0b
put $SA/state backup
put $SA/mii_status down
put $SA/link_failure_count 1
put $SB/state active
check "after the failover GET shows bd0b active, bd0a down, one failover" wait_for 15 bond_is \
	"(j['active_slave'], [(s['name'], s['state'], s['mii_status']) for s in j['slaves']], j['failovers'])" \
	"('bd0b', [('bd0a', 'backup', 'down'), ('bd0b', 'active', 'up')], 1)"
check "  ... and where it came from (last_failover)" test \
	"$(jget "(j['last_failover']['old'], j['last_failover']['new'])")" = "('bd0a', 'bd0b')"
failed_over() {
	metrics && [ "$(metric 'isergw_bond_active_slave{bond="bd0",slave="bd0b"}')" = 1 ] &&
		[ "$(metric 'isergw_bond_failovers_total{bond="bd0"}')" = 1 ]
}
check "metrics follow the failover" wait_for 15 failed_over
put class/infiniband/rxe0/ports/1/state "1: DOWN"
failover_events() {
	python3 -c "
import json, sys
ev = {'bond': [], 'rdma': []}
kind = None
for line in open('$T_DIR/events.out'):
    if line.startswith('event: '): kind = line[7:].strip()
    elif line.startswith('data: ') and kind in ev: ev[kind].append(json.loads(line[6:]))
# One failover, one event: the gateway counts changes of active slave, whatever order the
# fixture's files were written in.
bonds, rdma = ev['bond'], ev['rdma']
assert [(b['bond'], b['previous'], b['active_slave'], b['failovers']) for b in bonds] == [('bd0', 'bd0a', 'bd0b', 1)], bonds
assert [(r['device'], r['port'], r['state'], r['previous'], r['netdev']) for r in rdma] == [('rxe0', 1, 'DOWN', 'ACTIVE', 'bd0')], rdma
"
}
wait_for 15 failover_events
check "the event stream reports the failover (bd0a -> bd0b) and the port going down, once each" failover_events
kill "$EV" 2>/dev/null
wait "$EV" 2>/dev/null
put class/infiniband/rxe0/ports/1/state "4: ACTIVE"

# Desired settings: stored, compared, reported as drift, never applied.
api PUT /api/v1/bonds/bd0 '{"mode":"active-backup","fail_over_mac":"active","slaves":["bd0b","bd0a"],"primary":"bd0a"}'
expect "PUT bonds/bd0 desired settings" 200
check "drift: only the primary differs (slaves compared as a set)" test \
	"$(jget "[(d['field'], d['desired'], d['actual']) for d in j['drift']]")" = "[('primary', 'bd0a', '')]"
check "the host's bond was not touched" test "$(cat "$SYS/$B/bonding/primary")" = ""
drift_metric() {
	metrics && [ "$(metric 'isergw_bond_drift{bond="bd0"}')" = 1 ]
}
# /metrics is cached for up to a second: the exposition before the PUT may still be served.
check "metrics: isergw_bond_drift 1" wait_for 5 drift_metric
put $B/bonding/primary bd0a
check "once the host matches, the drift is empty" wait_for 15 bond_is \
	"(j['drift'], j['desired']['primary'])" "([], 'bd0a')"
# The gateway's verdicts on the bond: bd0a without link since the failover (a warning, its
# message in "warnings"); rxe0 on the bond itself (RDMA LAG: fine, so fail_over_mac=follow is a
# drift but no verdict).
put $B/bonding/fail_over_mac "follow 2"
check "fail_over_mac=follow: drift; the verdicts say RDMA LAG (fine) and bd0a down" wait_for 15 bond_is \
	"([d['field'] for d in j['drift']], [(v['id'], v['severity']) for v in j['verdicts']], len(j['warnings']))" \
	"(['fail_over_mac'], [('bond-rdma-lag', 'info'), ('bond-slave-down', 'warning')], 1)"
put $B/bonding/fail_over_mac "active 1"
check "  ... the drift goes once the host matches" wait_for 15 bond_is \
	"(j['drift'], j['fail_over_mac'])" "([], 'active')"
# No link monitoring: an error verdict, in /metrics and isergwctl bond check (exit 4).
put $B/bonding/miimon 0
check "miimon=0: the error verdict bond-no-link-monitor" wait_for 15 bond_is \
	"[v['id'] for v in j['verdicts'] if v['severity'] == 'error']" "['bond-no-link-monitor']"
verdict_metric() {
	metrics && [ "$(metric 'isergw_net_verdict{id="bond-no-link-monitor",severity="error",object="bond/bd0"}')" = 1 ]
}
# /metrics is cached for up to a second.
check "metrics: isergw_net_verdict for it" wait_for 5 verdict_metric
check "the exposition's invariants hold with verdicts" $PROM "$T_DIR/metrics"
cli() { "$CTL" --url "$URL" --state-dir "$STATE" "$@"; }
cli bond check >"$T_DIR/check.out" 2>&1
check "isergwctl bond check exits 4 on an error verdict" test $? = 4
check "  ... and prints it first, with its fix" bash -c \
	"head -n 2 '$T_DIR/check.out' | tr '\n' ' ' | grep -E '^error +bond-no-link-monitor bond/bd0: .* fix: '"
put $B/bonding/miimon 50
check "  ... resolved once miimon is set again" wait_for 15 bond_is \
	"[v['id'] for v in j['verdicts'] if v['severity'] == 'error']" "[]"
cli bond check >"$T_DIR/check.out" 2>&1
check "isergwctl bond check exits 0 with warnings only" test $? = 0
check "  ... and still lists them" grep -q '^warning bond-slave-down bond/bd0: ' "$T_DIR/check.out"
cp "$STATE/net.json" "$T_DIR/net.before"
api PUT /api/v1/bonds/bd0 '{"mode":"fast","fail_over_mac":"sometimes","slaves":["bd0a","a/b"],"primary":"bd0c","speed":1}'
expect "PUT bonds/bd0 with five mistakes" 422 invalid
check "  ... lists every error with its field" test \
	"$(jget "sorted(e['field'] for e in j['errors'])")" = "['fail_over_mac', 'mode', 'primary', 'slaves[1]', 'speed']"
check "  ... and stores nothing" cmp "$STATE/net.json" "$T_DIR/net.before"
api PUT /api/v1/bonds/bd0 '{"mode":"active-backup"' 
expect "PUT bonds/bd0 malformed JSON" 400 malformed_json
api PUT /api/v1/bonds/bd0 '{"name":"bd1"}'
expect "PUT bonds/bd0 naming another bond" 422 invalid
api PUT /api/v1/bonds/bd0 '{"mode":"active-backup"}' "$READ"
expect "PUT bonds/bd0 with a read-only token" 403 forbidden
CODE=$(curl -s --path-as-is -o "$T_DIR/body" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" "$URL/api/v1/bonds/..")
expect "GET bonds/.. (not an interface name)" 400 bad_request
api GET /api/v1/bonds/bd7
expect "GET an unknown bond" 404 not_found
api PUT /api/v1/bonds/bd7 '{"mode":"active-backup","fail_over_mac":"active","slaves":["bd7a","bd7b"]}'
expect "PUT desired settings of a bond the host lacks" 200
check "  ... reported missing, drift on its name" test "$(jget "(j['present'], j['drift'][0]['field'])")" = "(False, 'name')"
api GET /api/v1/bonds
check "the list shows both bonds" test "$(jget "[(b['name'], b['present']) for b in j['bonds']]")" = "[('bd0', True), ('bd7', False)]"
api DELETE /api/v1/bonds/bd7
expect "DELETE bonds/bd7 (forget desired)" 204
api DELETE /api/v1/bonds/bd7
expect "DELETE bonds/bd7 again" 404 not_found

check "isergwctl bond list shows bd0, bd0b active, in sync" bash -c \
	"'$CTL' --url '$URL' --state-dir '$STATE' bond list | grep -E '^bd0 +active-backup +active +bd0b +bd0a,bd0b\\* +1 +rxe0 +in sync'"
check "isergwctl rdma list shows rxe0 on bd0 and mlx5_0 down" bash -c \
	"out=\$('$CTL' --url '$URL' --state-dir '$STATE' rdma list) && echo \"\$out\" | grep -E '^rxe0 +1 +ACTIVE .* bd0\$' && echo \"\$out\" | grep -E '^mlx5_0 +1 +DOWN'"
check "isergwctl bond set stores a desired change" bash -c \
	"'$CTL' --url '$URL' --state-dir '$STATE' bond set bd0 primary=bd0b | grep -q 'drift: primary'"
check "isergwctl --json bond show is the API's JSON" bash -c \
	"'$CTL' --url '$URL' --state-dir '$STATE' --json bond show bd0 | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"desired\"][\"primary\"] == \"bd0b\"'"
cli bond set bd0 mode=fast >/dev/null 2>&1
check "isergwctl bond set with a bad mode exits 1" test $? = 1
check "isergwctl bond forget" bash -c "'$CTL' --url '$URL' --state-dir '$STATE' bond forget bd0"

# ---- every API operation has its isergwctl command -----------------------------------------

# "METHOD PATH" from openapi.json -> the command that performs it. A route added without a
# CLI command fails here; the read-only ones are also run against the live agent.
declare -A CLI_OF=(
	["get /api/v1/health"]="health"
	["get /api/v1/version"]="version"
	["get /api/v1/openapi.json"]="openapi"
	["get /api/v1/events"]="events"
	["get /metrics"]="metrics"
	["get /api/v1/targets"]="target list"
	["post /api/v1/targets"]="target create"
	["get /api/v1/targets/{target}"]="target show $IQN"
	["put /api/v1/targets/{target}"]="target set"
	["delete /api/v1/targets/{target}"]="target delete"
	["get /api/v1/targets/{target}/luns"]="lun list $IQN"
	["post /api/v1/targets/{target}/luns"]="lun create"
	["get /api/v1/targets/{target}/luns/{lun}"]="lun show $IQN 0"
	["put /api/v1/targets/{target}/luns/{lun}"]="lun set"
	["delete /api/v1/targets/{target}/luns/{lun}"]="lun delete"
	["post /api/v1/targets/{target}/luns/{lun}/resize"]="lun resize"
	["get /api/v1/targets/{target}/acls"]="acl list $IQN"
	["post /api/v1/targets/{target}/acls"]="acl add"
	["get /api/v1/targets/{target}/acls/{initiator}"]="acl show $IQN $T_INI1"
	["put /api/v1/targets/{target}/acls/{initiator}"]="acl set"
	["delete /api/v1/targets/{target}/acls/{initiator}"]="acl delete"
	["get /api/v1/portals"]="portal list"
	["post /api/v1/portals"]="portal create"
	["get /api/v1/portals/{portal}"]="portal show tcp0"
	["put /api/v1/portals/{portal}"]="portal set"
	["delete /api/v1/portals/{portal}"]="portal delete"
	["get /api/v1/discovery"]="discovery show"
	["put /api/v1/discovery"]="discovery set"
	["get /api/v1/sessions"]="session list"
	["delete /api/v1/sessions/{tsih}"]="session drop"
	["get /api/v1/config"]="config export"
	["put /api/v1/config"]="config import"
	["post /api/v1/config/validate"]="config validate"
	["get /api/v1/bonds"]="bond list"
	["get /api/v1/bonds/{bond}"]="bond show bd0"
	["put /api/v1/bonds/{bond}"]="bond set"
	["delete /api/v1/bonds/{bond}"]="bond forget"
	["get /api/v1/rdma"]="rdma list"
	["get /api/v1/cluster"]="cluster show"
)
api GET /api/v1/openapi.json "" -
python3 -c "import json; j=json.load(open('$T_DIR/body'))
for p, item in sorted(j['paths'].items()):
    for m in sorted(item): print(m, p)" >"$T_DIR/operations"
missing=
while read -r op; do
	[ -n "${CLI_OF[$op]:-}" ] || missing="$missing; $op"
done <"$T_DIR/operations"
if [ -z "$missing" ]; then
	pass "every operation in openapi.json ($(wc -l <"$T_DIR/operations")) has an isergwctl command"
else
	fail "isergwctl coverage" "no command for${missing#;}"
fi
check "isergwctl usage names every command in the table" bash -c \
	"'$CTL' --help >'$T_DIR/usage' 2>&1; for c in target lun acl portal discovery session config bond rdma; do grep -q \"^  \$c \\| \$c \" '$T_DIR/usage' || { echo \"no \$c\"; exit 1; }; done"
bad=
while read -r op; do
	cmd=${CLI_OF[$op]:-}
	case "$op" in
	"get /api/v1/events") continue ;;	# a stream: test_agent.sh reads it with curl
	"get /api/v1/cluster") continue ;;	# 404 without --store etcd: test_cluster.sh runs it
	get\ *) ;;
	*) continue ;;
	esac
	# shellcheck disable=SC2086
	timeout 20 "$CTL" --url "$URL" --state-dir "$STATE" $cmd >"$T_DIR/cli.out" 2>&1 ||
		bad="$bad; isergwctl $cmd (exit $?)"
done <"$T_DIR/operations"
if [ -z "$bad" ]; then
	pass "every read-only command runs against the agent (exit 0)"
else
	fail "isergwctl read-only commands" "${bad#; }"
fi

agent_stop bonds
# A damaged net.json stops the start with the file and place named, and is left as it was.
cp "$STATE/net.json" "$T_DIR/net.good"
printf '{"bonds": [ {"name": "bd0",\n' >"$STATE/net.json"
cp "$STATE/net.json" "$T_DIR/net.bad"
if timeout 20 "$AGENT" --state-dir "$STATE" --listen "$T_HOST:$API_PORT" >"$T_DIR/agent.badnet.log" 2>&1; then
	fail "damaged net.json" "the agent started"
elif grep -q "net.json: line" "$T_DIR/agent.badnet.log" && cmp -s "$STATE/net.json" "$T_DIR/net.bad"; then
	pass "a damaged net.json stops the start, named with its line, and is kept"
else
	fail "damaged net.json" "$(tail -n 2 "$T_DIR/agent.badnet.log")"
fi
printf '{"bonds": [ {"name": "bd0", "mode": "fast"} ] }\n' >"$STATE/net.json"
if ! timeout 20 "$AGENT" --state-dir "$STATE" --listen "$T_HOST:$API_PORT" >"$T_DIR/agent.badnet2.log" 2>&1 &&
	grep -q "bonds\[0\]: mode" "$T_DIR/agent.badnet2.log"; then
	pass "an invalid desired bond in net.json stops the start, named"
else
	fail "invalid net.json" "$(tail -n 2 "$T_DIR/agent.badnet2.log")"
fi
cp "$T_DIR/net.good" "$STATE/net.json"

# ---- HTTPS --------------------------------------------------------------------------------

if ! t_need openssl; then
	skip tls "needs openssl"
	t_end
fi
TLS_PORT=$(t_free_port)
CERT=$T_DIR/cert.pem
KEY=$T_DIR/key.pem
REMOTE=192.0.2.1	# TEST-NET-1, only ever inside the agent's own network namespace
if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=isergw-test -addext "subjectAltName=IP:127.0.0.1,IP:$REMOTE" \
	-keyout "$KEY" -out "$CERT" >"$T_DIR/openssl.out" 2>&1; then
	fail tls "openssl could not make a certificate: $(tail -n 2 "$T_DIR/openssl.out")"
	t_end
fi
TURL=https://$T_HOST:$TLS_PORT
agent_start tls --listen "$T_HOST:$TLS_PORT" --tls-cert "$CERT" --tls-key "$KEY"
if ! t_wait_port "$AGENT_PID" "$TLS_PORT" 10; then
	fail tls "the agent did not start with TLS: $(tail -n 3 "$T_DIR/agent.tls.log")"
	t_end
fi
check "the agent says it serves https" grep -q "listening on $T_HOST:$TLS_PORT (https)" "$T_DIR/agent.tls.log"
CODE=$(curl -s --cacert "$CERT" -o "$T_DIR/body" -w '%{http_code}' "$TURL/api/v1/health")
expect "curl --cacert: GET health over HTTPS" 200
CODE=$(curl -s --cacert "$CERT" -o "$T_DIR/body" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" "$TURL/api/v1/targets")
expect "curl --cacert: GET targets with a token over HTTPS" 200
check "  ... lists the target" test "$(jget "j['targets'][0]['name']")" = "$IQN"
curl -s -o /dev/null "$TURL/api/v1/health" 2>/dev/null
check "curl without the CA refuses the self-signed certificate (exit 60)" test $? = 60
CODE=$(curl -s -m 5 -o "$T_DIR/body" -w '%{http_code}' "http://$T_HOST:$TLS_PORT/api/v1/health" 2>/dev/null)
check "plain HTTP to the TLS port gets no HTTP answer" test "$CODE" = 000
check "  ... and the agent still serves HTTPS after it" bash -c \
	"curl -sf --cacert '$CERT' '$TURL/api/v1/health' >/dev/null"
tcli() { "$CTL" --url "$TURL" --state-dir "$STATE" "$@"; }
check "isergwctl --cacert target list over HTTPS" bash -c \
	"'$CTL' --url '$TURL' --state-dir '$STATE' --cacert '$CERT' target list | grep -q '$IQN'"
check "isergwctl --cacert bond list over HTTPS" tcli --cacert "$CERT" bond list
tcli target list >/dev/null 2>&1
check "isergwctl without --cacert fails the certificate check (exit 3)" test $? = 3
check "isergwctl --insecure skips the check" tcli --insecure health
agent_stop tls

# Loopback only unless TLS and --allow-remote both say otherwise. Refused starts bind nothing.
refused() {
	local tag=$1 want=$2
	shift 2
	timeout 20 "$AGENT" --state-dir "$STATE" "$@" >"$T_DIR/agent.$tag.log" 2>&1
	local rc=$?
	# Exit 1 with the reason, and a clean exit (no sanitizer report, in a sanitized build).
	[ "$rc" = 1 ] && grep -q "$want" "$T_DIR/agent.$tag.log" &&
		! grep -q "Sanitizer" "$T_DIR/agent.$tag.log"
}
check "a non-loopback address without TLS is refused" \
	refused r1 "without TLS" --listen "$REMOTE:$TLS_PORT"
check "  ... also with --allow-remote" \
	refused r2 "without TLS" --listen "$REMOTE:$TLS_PORT" --allow-remote
check "a non-loopback address with TLS but no --allow-remote is refused" \
	refused r3 "add --allow-remote" --listen "$REMOTE:$TLS_PORT" --tls-cert "$CERT" --tls-key "$KEY"
check "0.0.0.0 (every address) is refused without --allow-remote" \
	refused r4 "add --allow-remote" --listen "0.0.0.0:$TLS_PORT" --tls-cert "$CERT" --tls-key "$KEY"
if t_need unshare nsenter ip; then
	# Its own network namespace (gone with it), $REMOTE on its lo (this kernel may lack the
	# dummy module): an address the agent must treat as remote, reachable from nowhere else.
	AGENT_WRAP=(unshare -n sh -c "ip link set lo up && ip addr add $REMOTE/32 dev lo && \
		exec \"\$0\" \"\$@\"")
	agent_start remote --listen "$REMOTE:$TLS_PORT" --tls-cert "$CERT" --tls-key "$KEY" \
		--allow-remote
	AGENT_WRAP=()
	remote_up() {
		nsenter -t "$AGENT_PID" -n curl -sf -m 5 --cacert "$CERT" \
			"https://$REMOTE:$TLS_PORT/api/v1/health" >/dev/null
	}
	check "TLS and --allow-remote serve a non-loopback address" wait_for 10 remote_up
	agent_stop remote
else
	skip "remote listen" "needs unshare, nsenter and ip"
fi
t_end
