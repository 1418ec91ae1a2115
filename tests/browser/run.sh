#!/bin/bash
# `make test-browser`: the dashboard (webui/) in headless Chromium against a real isergwd and
# isergw-agent on loopback. dashboard.mjs drives the browser (playwright-core, Debian's
# /usr/bin/chromium, no browser download); this script owns the daemons and the peers: when
# the page script prints "CMD NAME" it starts I/O, adds a LUN through the API, stops or starts
# the gateway or the agent, then answers through $T_DIR/cmd.NAME.done. Result lines
# ("PASS|FAIL|SKIP name: why") become the suite's counts; it ends with
# "browser: N passed, N failed, N skipped".
#
#   tests/browser/run.sh            (BUILD=build|build/san; CHROMIUM=/usr/bin/chromium)
# Screenshots of failed steps are kept in the run folder ($T_DIR, printed at the start).
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin browser
# playwright-core from npm (make test-browser: npm ci from tests/browser/package-lock.json).
NODE_DIR=${BROWSER_NODE_DIR:-$T_ROOT/build/browser}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
AGENT=$T_BUILD/isergw-agent
BENCH=$T_TOOLS/isergw-bench
if [ "$TARGET" != isergwd ]; then
	skip browser "the dashboard watches isergwd only"
	t_end
fi
if [ ! -x "$CHROMIUM" ]; then
	skip browser "no Chromium at $CHROMIUM (apt-get install chromium; deploy/install-deps.sh test)"
	t_end
fi
if ! t_need node curl python3; then
	skip browser "needs node (nodejs), curl and python3"
	t_end
fi
if [ ! -r "$NODE_DIR/node_modules/playwright-core/package.json" ]; then
	skip browser "playwright-core is not installed in $NODE_DIR (make test-browser runs npm ci)"
	t_end
fi
if [ ! -x "$AGENT" ] || [ ! -x "$BENCH" ]; then
	skip browser "no $AGENT or $BENCH (make test-build)"
	t_end
fi

IQN=iqn.2026-11.org.isergw:browser
GW_PORT=$(t_free_port)
API_PORT=$(t_free_port)
SOCK=$T_DIR/ctl.sock
STATE=$T_DIR/agent
URL=http://$T_HOST:$API_PORT
truncate -s 1G "$T_SHM/lun0.img"
cat >"$T_DIR/gateway.json" <<EOC
{ "gateway": { "control_socket": "$SOCK" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $GW_PORT } ],
  "targets": [ { "name": "$IQN", "alias": "browser", "portals": ["tcp0"],
                 "allow_any_initiator": true,
                 "luns": [ { "lun": 0, "thin": true,
                             "backstore": { "type": "file", "path": "$T_SHM/lun0.img",
                                            "size": "1G" } } ] } ] }
EOC

agent_start() {
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		t_daemon_start agent agent "$T_DIR/agent.$1.log" \
		"$AGENT" --state-dir "$STATE" --listen "$T_HOST:$API_PORT" --gateway-socket "$SOCK" \
		--webui-dir "$T_ROOT/webui"
	AGENT_PID=$T_LAST_PID
	t_wait_port "$AGENT_PID" "$API_PORT" 15
}

# agent_stop: SIGTERM must end the agent cleanly (exit 0), also with a browser attached.
agent_stop() {
	t_stop_checked "$AGENT_PID" agent && pass "agent-stop"
}

if ! gw_start "$T_DIR/gateway.json" "$T_DIR/gateway.log" "$GW_PORT"; then
	fail start "the gateway did not start"
	t_end
fi
READ=$("$AGENT" --state-dir "$STATE" --add-token wallscreen --role read 2>"$T_DIR/addtoken.err")
if ! agent_start 1; then
	fail start "the agent did not start: $(tail -n 5 "$T_DIR/agent.1.log" | tr '\n' ' ')"
	t_end
fi
ADMIN=$(cat "$STATE/admin.token")

# The command channel: the page script asks, this shell acts and answers.
BENCH_PID=
do_cmd() {
	local rc=0
	case "$1" in
	io-start)
		# A reader and a writer (own initiator names) for as long as the page needs to see
		# them; stopped by io-stop.
		t_daemon_start bench bench "$T_DIR/bench-read.log" \
			"$BENCH" -q 4 -b 4096 -t 600 "iscsi://$T_HOST:$GW_PORT/$IQN/0"
		BENCH_PID=$T_LAST_PID
		t_daemon_start bench bench "$T_DIR/bench-write.log" \
			"$BENCH" -w -q 2 -b 65536 -t 600 -i "$IQN-writer" \
			"iscsi://$T_HOST:$GW_PORT/$IQN/0"
		BENCH_PID="$BENCH_PID $T_LAST_PID"
		;;
	io-stop)
		for p in $BENCH_PID; do
			t_stop_pid "$p" 5
		done
		BENCH_PID=
		;;
	add-lun)
		curl -sf -o "$T_DIR/add-lun.json" -H "Authorization: Bearer $ADMIN" \
			-H 'Content-Type: application/json' \
			--data-binary '{"lun": 1, "backstore": {"type": "ram", "size": "64M"}}' \
			"$URL/api/v1/targets/$IQN/luns" || rc=1
		;;
	gateway-stop)
		gw_stop "$T_GW_PID"
		;;
	gateway-start)
		gw_start "$T_DIR/gateway.json" "$T_DIR/gateway.2.log" "$GW_PORT" || rc=1
		;;
	agent-stop)
		agent_stop
		;;
	agent-start)
		agent_start 2 || rc=1
		;;
	revoke-read)
		# An operator withdraws the dashboard's token: edit the list while the agent is down.
		agent_stop
		python3 - "$STATE/tokens.json" <<'EOP' || rc=1
import json, sys
p = sys.argv[1]
j = json.load(open(p))
j["tokens"] = [t for t in j["tokens"] if t["name"] != "wallscreen"]
json.dump(j, open(p, "w"))
EOP
		agent_start 3 || rc=1
		;;
	*) rc=2 ;;
	esac
	# Written whole, then renamed: the page script must never read a half-written answer.
	echo "$rc" >"$T_DIR/cmd.$1.tmp"
	mv "$T_DIR/cmd.$1.tmp" "$T_DIR/cmd.$1.done"
}

t_log "browser: dashboard at $URL/, $("$CHROMIUM" --version 2>/dev/null | awk '{ print $1, $2 }')"
export DASH_URL=$URL DASH_READ=$READ DASH_IQN=$IQN DASH_DIR=$T_DIR DASH_GW_PORT=$GW_PORT CHROMIUM
export PW_DIR=$NODE_DIR
saw_end=0
while IFS= read -r line; do
	case "$line" in
	"CMD "*) do_cmd "${line#CMD }" ;;
	"PASS "*) pass "${line#PASS }" ;;
	"FAIL "*)
		line=${line#FAIL }
		fail "${line%%: *}" "${line#*: }"
		;;
	"SKIP "*)
		line=${line#SKIP }
		skip "${line%%: *}" "${line#*: }"
		;;
	"END") saw_end=1 ;;
	*) printf '        %s\n' "$line" ;;
	esac
done < <(timeout -k 10 300 node "$T_ROOT/tests/browser/dashboard.mjs" 2>&1)
[ "$saw_end" = 1 ] || fail "page script" "ended early (see the lines above)"

for p in $BENCH_PID; do
	t_stop_pid "$p" 5
done
agent_stop
t_end
