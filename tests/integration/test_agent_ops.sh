#!/bin/bash
# The agent's operator endpoints against the real gateway: per-LUN latency histograms in
# /metrics after real I/O (counts equal the commands the client completed; the text format's
# invariants hold), bond and RDMA port status from a sysfs fixture tree (ISERGW_SYSFS) with the
# desired settings and their drift, and HTTPS: a self-signed certificate served, plain HTTP
# refused, the CLI with --cacert, and non-loopback listening only when asked for.
#
#   tests/integration/test_agent_ops.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"

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

# api METHOD PATH [BODY] [TOKEN]: sets CODE; body in $T_DIR/body, headers in $T_DIR/hdr.
api() {
	local m=$1 p=$2 body=${3:-} tok=${4:-$ADMIN} args=()
	[ "$tok" != - ] && args+=(-H "Authorization: Bearer $tok")
	[ -n "$body" ] && args+=(-H "Content-Type: application/json" --data-binary "$body")
	CODE=$(curl -s -o "$T_DIR/body" -D "$T_DIR/hdr" -w '%{http_code}' -X "$m" "${args[@]}" \
		"${API_URL:-$URL}$p" 2>/dev/null)
}

jget() {
	python3 -c "import json,sys; j=json.load(open('$T_DIR/body')); print($1)" 2>/dev/null
}

expect() {
	local name=$1 want=$2 ecode=${3:-}
	if [ "$CODE" != "$want" ]; then
		fail "$name" "HTTP $CODE, want $want: $(head -c 300 "$T_DIR/body" | tr '\n' ' ')"
		return 1
	fi
	if [ -n "$ecode" ] && [ "$(jget "j['error']['code']")" != "$ecode" ]; then
		fail "$name" "error code $(jget "j['error']['code']"), want $ecode"
		return 1
	fi
	pass "$name"
}

wait_for() {
	local secs=$1 i=0
	shift
	while ! "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -gt $((secs * 5)) ] && return 1
		sleep 0.2
	done
}

# agent_start TAG [ARGS...]: the agent on API_PORT with extra arguments; AGENT_PID.
agent_start() {
	local tag=$1
	shift
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		t_daemon_start agent agent "$T_DIR/agent.$tag.log" \
		"$AGENT" --state-dir "$STATE" --gateway-socket "$SOCK" "$@"
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

if ! gw_start "$GWCONF" "$T_DIR/gateway.log" "$GW_PORT"; then
	fail start "the gateway did not start"
	t_end
fi
agent_start 1 --listen "$T_HOST:$API_PORT"
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

agent_stop main
t_end
