#!/bin/bash
# The gateway's own behaviour as an operator meets it: configuration errors reported all at once
# with the full key path, --check, a clean stop on SIGTERM while a host is doing I/O, and the
# embedded demo configuration written by --state-dir. Gateway only: with TARGET=tgtd every test
# is skipped.
#
#   tests/integration/test_config.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin config
if [ "$TARGET" != isergwd ]; then
	skip config "gateway-only suite (TARGET=$TARGET)"
	t_end
fi
GW=$T_BUILD/isergwd
if [ ! -x "$GW" ]; then
	fail build "$GW is missing"
	t_end
fi
export ASAN_OPTIONS="log_path=$T_DIR/san/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# A valid configuration passes --check.
tg_defaults
gw_write_config "$T_DIR/good.json" "$(t_free_port)"
check "--check accepts a valid configuration" \
	timeout -k 5 10 "$GW" --config "$T_DIR/good.json" --check

# Three independent mistakes: each reported, with its full key path, in one run.
sed -e 's/"size": "1G"/"size": "12Q"/' \
	-e 's/"tpgt": 1,/"tpgt": 1, "bogus_key": 1,/' \
	-e 's/"port": [0-9]*/"port": 70000/' "$T_DIR/good.json" >"$T_DIR/bad.json"
timeout -k 5 10 "$GW" --config "$T_DIR/bad.json" --check >"$T_DIR/bad.out" 2>&1
rc=$?
if [ $rc -eq 1 ]; then
	pass "--check rejects a bad configuration with status 1"
else
	fail "--check rejects a bad configuration with status 1" "exit $rc"
fi
for key in 'targets\[0\]\.luns\[0\]\.backstore\.size' 'targets\[0\]\.bogus_key' 'portals\[0\]\.port'; do
	name="error names ${key//\\/}"
	if grep -q "$key" "$T_DIR/bad.out"; then
		pass "$name"
	else
		fail "$name" "not in: $(head -n 5 "$T_DIR/bad.out" | tr '\n' '|')"
	fi
done

# Started on a bad configuration (no --check), the gateway exits non-zero at once.
timeout -k 5 10 "$GW" --config "$T_DIR/bad.json" >"$T_DIR/bad-start.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'backstore\.size' "$T_DIR/bad-start.out"; then
	pass "a bad configuration stops start-up with the error (exit $rc)"
else
	fail "a bad configuration stops start-up with the error" "exit $rc"
fi
# Malformed JSON: an error with a position, not a crash.
printf '{ "portals": [ \n' >"$T_DIR/broken.json"
timeout -k 5 10 "$GW" --config "$T_DIR/broken.json" --check >"$T_DIR/broken.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && [ -s "$T_DIR/broken.out" ]; then
	pass "malformed JSON is reported (exit 1)"
else
	fail "malformed JSON is reported (exit 1)" "exit $rc: $(head -n 2 "$T_DIR/broken.out")"
fi

# SIGTERM while a host has a session and I/O in flight: clean exit 0 within 10 s. First the
# gateway's state shows the host's session and its command count moving between two looks: else
# no I/O was in flight. (Its "tasks" is no witness: a file in /dev/shm is read on the loop, so
# no task is left in flight when the loop answers the state.)
BUSY_LAST=
busy_io() {
	local n
	n=$(gw_ctl "$T_DIR/busy-ctl.sock" '{"op":"state"}' 2>/dev/null | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin)["sessions"] if x["type"] == "normal"]
print(sum(x["commands"] for x in s) if s else -1)')
	echo "a normal session's commands: ${n:-no state} (before: ${BUSY_LAST:-none})"
	[ "${n:--1}" -gt 0 ] && [ -n "$BUSY_LAST" ] && [ "$n" -gt "$BUSY_LAST" ] && return 0
	BUSY_LAST=${n:-}
	return 1
}
TG_GATEWAY="\"control_socket\": \"$T_DIR/busy-ctl.sock\""
if target_start busy; then
	timeout -k 5 20 iscsi-perf -t 8 -m 32 -r "$T_URL" >"$T_DIR/busy-perf.out" 2>&1 &
	perf_pid=$!
	check "before SIGTERM: a host's session, its command count moving (the gateway's state)" \
		t_wait_for 10 busy_io
	target_stop # counts gateway-stop: exit 0 within 10 s, no sanitizer report
	# iscsi-perf keeps trying to reconnect: stop it (timeout passes the signal on).
	kill -TERM "$perf_pid" 2>/dev/null
	wait "$perf_pid" 2>/dev/null
	if grep -q 'listening on 127.0.0.1:[0-9]* (tcp)' "$T_DIR/busy.isergwd.log"; then
		pass "the gateway logs 'listening on ADDR:PORT (tcp)'"
	else
		fail "the gateway logs 'listening on ADDR:PORT (tcp)'" "see $T_DIR/busy.isergwd.log"
	fi
else
	fail "start under load" "the gateway did not start"
fi

# An iSER portal where no RDMA device has the address (this machine has none): the gateway
# starts, serves its TCP portal, says why iSER does not listen, does not advertise the iSER
# portal, and keeps trying (the control socket's state says it does not listen).
iport=$(t_free_port)
cport=$(t_free_port)
truncate -s 64M "$T_DIR/iser.img"
cat >"$T_DIR/iser.json" <<EOF
{ "gateway": { "control_socket": "$T_DIR/iser-ctl.sock" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "127.0.0.1", "port": $cport },
               { "name": "iser0", "transport": "iser", "address": "127.0.0.1", "port": $iport } ],
  "targets": [ { "name": "iqn.2026-11.org.isergw:iser-wait", "portals": ["tcp0", "iser0"],
    "allow_any_initiator": true, "luns": [ { "lun": 0, "backstore":
    { "type": "file", "path": "$T_DIR/iser.img", "size": "64M" } } ] } ] }
EOF
iser_state() {
	python3 -c '
import json, socket, sys
c = socket.socket(socket.AF_UNIX); c.settimeout(5); c.connect(sys.argv[1])
c.sendall(b"{\"op\":\"state\"}\n"); b = b""
while not b.endswith(b"\n"):
    d = c.recv(65536)
    if not d: break
    b += d
p = {x["name"]: x for x in json.loads(b)["portals"]}
print(p["tcp0"]["listening"], p["iser0"]["listening"], p["iser0"].get("resources", {}).get("qps"))
' "$T_DIR/iser-ctl.sock"
}
t_daemon_start isergwd isergwd "$T_DIR/iser.log" "$GW" --config "$T_DIR/iser.json"
iser_pid=$T_LAST_PID
if t_wait_port "$iser_pid" "$cport" 15; then
	check "with an iSER portal waiting for a device, TCP serves" \
		timeout -k 5 10 iscsi-inq "iscsi://127.0.0.1:$cport/iqn.2026-11.org.isergw:iser-wait/0"
	if grep -q "portal iser0: iSER not listening (.*no RDMA device.*); retrying" "$T_DIR/iser.log"
	then
		pass "the log says why the iSER portal does not listen"
	else
		fail "the log says why the iSER portal does not listen" "$(tail -n 3 "$T_DIR/iser.log")"
	fi
	state=$(iser_state 2>&1)
	if [ "$state" = "True False 0" ]; then
		pass "state: tcp0 listens, iser0 does not, no QP"
	else
		fail "state: tcp0 listens, iser0 does not, no QP" "got '$state'"
	fi
	ls_out=$(timeout -k 5 10 iscsi-ls -s "iscsi://127.0.0.1:$cport" 2>&1)
	if printf '%s\n' "$ls_out" | grep -q "iser-wait" &&
		! printf '%s\n' "$ls_out" | grep -q ":$iport"; then
		pass "SendTargets leaves out the iSER portal that does not listen"
	else
		fail "SendTargets leaves out the iSER portal that does not listen" "$ls_out"
	fi
else
	fail "a gateway with an iSER portal and no RDMA device starts" "$(tail -n 3 "$T_DIR/iser.log")"
fi
gw_stop "$iser_pid"

# --state-dir on an empty folder writes the demo configuration and its 1 GiB sparse LUN, and
# serves it on 127.0.0.1:3260: in a network namespace of its own (t_ns_own), where that port is
# free whatever else runs on this machine.
if ! t_ns_own isergw-cfg; then
	fail "--state-dir demo" "cannot create a network namespace for the demo's port 3260"
else
	mkdir -p "$T_DIR/state"
	t_daemon_start isergwd isergwd "$T_DIR/demo.log" \
		ip netns exec "$T_NS" "$GW" --state-dir "$T_DIR/state"
	demo_pid=$T_LAST_PID
	if t_wait_for 15 t_ns_port_open "$T_NS" 127.0.0.1 3260; then
		check "--state-dir writes a configuration that --check accepts" \
			timeout -k 5 10 "$GW" --config "$T_DIR/state/isergwd.json" --check
		size=$(stat -c %s "$T_DIR/state/demo.img" 2>/dev/null)
		if [ "${size:-0}" -eq 1073741824 ]; then
			pass "--state-dir creates demo.img of 1 GiB"
		else
			fail "--state-dir creates demo.img of 1 GiB" "size '${size:-missing}'"
		fi
		check "the demo target answers iscsi-inq" timeout -k 5 10 ip netns exec "$T_NS" \
			iscsi-inq iscsi://127.0.0.1:3260/iqn.2026-11.org.isergw:demo/0
	else
		fail "--state-dir demo" "no portal on 127.0.0.1:3260: $(tail -n 3 "$T_DIR/demo.log")"
	fi
	gw_stop "$demo_pid"
fi

# gateway.loops: more loops than the CPUs the process may run on is refused at start-up, naming
# the key; two loops on two CPUs start both loops, pinned, and serve a host.
printf '{ "gateway": { "loops": 2 }, "portals": [ { "name": "p", "address": "127.0.0.1", "port": 3999 } ], "targets": [] }\n' >"$T_DIR/loops.json"
if t_refused 'gateway\.loops: 2 loops, but this process may run on 1 CPU' \
	timeout -k 5 10 taskset -c 0 "$GW" --config "$T_DIR/loops.json" >"$T_DIR/loops-refused.out"; then
	pass "gateway.loops beyond the affinity mask's CPUs is refused by name"
else
	fail "gateway.loops beyond the affinity mask's CPUs is refused by name" \
		"$(tail -n 3 "$T_DIR/loops-refused.out")"
fi
if [ "$(nproc)" -ge 2 ]; then
	tg_defaults
	TG_BS=ram
	TG_SIZE=64M
	TG_GATEWAY='"loops": 2'
	# Its own "loops": 2, not ISERGW_LOOPS's as well (a duplicate key).
	if ISERGW_LOOPS= target_start loops2; then
		check "two loops: a host writes and reads back verified data" \
			timeout -k 5 120 "$T_TOOLS/isergw-verify" -q -n 40 -S 16777216 "$T_URL"
		target_stop
		if grep -q 'loop 0 on CPU' "$T_DIR/loops2.isergwd.log" &&
		   grep -q 'loop 1 on CPU' "$T_DIR/loops2.isergwd.log"; then
			pass "two loops: each pinned to its CPU (the log says which)"
		else
			fail "two loops: each pinned to its CPU" "see $T_DIR/loops2.isergwd.log"
		fi
	else
		fail "a gateway with two loops starts" "see $T_DIR/loops2.isergwd.log"
	fi
	tg_defaults
fi

# The default (no "loops"): one loop per CPU of the affinity mask, at most 16; confined to one
# CPU, one loop, nothing pinned. ISERGW_LOOPS is emptied so no count is inserted.
printf '{ "portals": [ { "name": "p", "address": "127.0.0.1", "port": %s } ], "targets": [] }\n' \
	"$(t_free_port)" >"$T_DIR/loops-default.json"
want=$(nproc)
[ "$want" -gt 16 ] && want=16
loops_default() {
	local cpus=$1 want=$2 log=$T_DIR/loops-default.$1.log pid
	if [ "$cpus" = all ]; then
		ISERGW_LOOPS= "$GW" --config "$T_DIR/loops-default.json" >"$log" 2>&1 &
	else
		ISERGW_LOOPS= taskset -c "$cpus" "$GW" --config "$T_DIR/loops-default.json" >"$log" 2>&1 &
	fi
	pid=$!
	for _ in $(seq 1 100); do
		grep -q 'main: ready' "$log" && break
		sleep 0.1
	done
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"
	echo "$(grep -c 'loop [0-9]* on CPU' "$log") loops pinned; log: $(grep -m1 'loop' "$log")"
	if [ "$want" = 1 ]; then
		! grep -q 'loop [0-9]* on CPU' "$log" && grep -q 'main: ready' "$log"
	else
		[ "$(grep -c 'loop [0-9]* on CPU' "$log")" = "$want" ]
	fi
}
check "the default runs one loop per CPU ($want here), each pinned" loops_default all "$want"
check "the default confined to one CPU (taskset) runs one loop, pinned to nothing" \
	loops_default 0 1

t_end
