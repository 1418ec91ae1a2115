#!/bin/bash
# test_resolve: back-end portals given by DNS name are looked up off the event loop
# (lib/gw_resolve.c), so a dead DNS server delays only the paths that name it.
#
# The gateway runs in a network namespace of its own with only loopback, whose resolv.conf
# (ip netns exec bind-mounts /etc/netns/NAME/resolv.conf) names 127.0.0.1:53, where a small
# UDP server receives every query and never answers: each lookup of a name not in /etc/hosts
# hangs for the resolver's whole timeout (15 s x 2). Nothing leaves the namespace. One gateway
# (ISERGW_LOOPS, 1 by default here: every LUN on one loop) serves a local ram LUN and remote
# LUNs whose paths name backend.resolve.invalid (engine native, engine libiscsi) and localhost
# (the gateway's own LUN 5, through /etc/hosts: the path's state shows the address it connected
# to; not LUN 0, so that the I/O measured there never sees the remote paths' resets).
#   - 4 KiB reads on the local LUN keep completing while the lookups hang: the longest time
#     without a completion stays far below the DNS timeout (a lookup on the loop would stall
#     it for 15 s or more);
#   - both paths to the dead name report "name lookup of backend.resolve.invalid did not finish
#     within 3 s" (their login_timeout) in the control socket's state, and the DNS server did
#     receive the queries (the test exercises what it claims);
#   - the localhost paths are active, their state saying "address": "127.0.0.1:3260";
#   - SIGTERM while the lookups still hang: a clean exit within a few seconds (nothing waits
#     for getaddrinfo; the paths' pending lookups are cancelled; sanitizers clean).
. "$(dirname "$0")/../lib/common.sh"

t_begin resolve

NS=isergw-rs$$
DNS_PY=$T_DIR/dns_swallow.py
DNS_COUNT=$T_DIR/dns.count
CTL_SOCK=$T_DIR/ctl.sock
IQN=iqn.2026-11.org.isergw:resolve
DEAD=backend.resolve.invalid
export ISERGW_LOOPS=${ISERGW_LOOPS:-1}

rs_cleanup() {
	ip netns del "$NS" 2>/dev/null
	rm -rf "/etc/netns/$NS"
}
trap 'rs_rc=$?; t_stop_all; rs_cleanup; ( exit $rs_rc ); t_exit_trap' EXIT

if [ "$(id -u)" != 0 ] || ! t_need ip python3 jq; then
	skip resolve "needs root, ip, python3 and jq"
	t_end
fi
if [ ! -x "$T_BUILD/isergwd" ] || [ ! -x "$T_TOOLS/isergw-bench" ]; then
	skip resolve "no isergwd or isergw-bench in $T_BUILD (make test-build)"
	t_end
fi
if ! ip netns add "$NS" 2>/dev/null; then
	skip resolve "cannot create network namespaces here"
	t_end
fi
ip -n "$NS" link set lo up
mkdir -p "/etc/netns/$NS"
printf 'nameserver 127.0.0.1\noptions timeout:15 attempts:2\n' >"/etc/netns/$NS/resolv.conf"

# The DNS server that never answers: counts the queries it swallows.
cat >"$DNS_PY" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
n = 0
while True:
    s.recvfrom(4096)
    n += 1
    with open(sys.argv[1], "w") as f:
        f.write("%d\n" % n)
EOF
t_daemon_start dns-swallow helper "$T_DIR/dns.log" ip netns exec "$NS" python3 "$DNS_PY" "$DNS_COUNT"

remote_lun() {	# LUN ENGINE HOST
	cat <<EOF
      { "lun": $1, "backstore": { "type": "remote", "engine": "$2", "block_size": 512,
          "login_timeout": 3, "reconnect_delay_ms": 200, "reconnect_max_ms": 1000,
          "polling_interval": 1,
          "paths": [ { "url": "iscsi://$3:3260/$IQN/5" } ] } }
EOF
}

cat >"$T_DIR/gw.json" <<EOF
{ "gateway": { "control_socket": "$CTL_SOCK" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "127.0.0.1", "port": 3260 } ],
  "targets": [ { "name": "$IQN", "portals": ["tcp0"], "allow_any_initiator": true,
    "luns": [
      { "lun": 0, "backstore": { "type": "ram", "size": "64M", "block_size": 512 } },
      { "lun": 5, "backstore": { "type": "ram", "size": "16M", "block_size": 512 } },
$(remote_lun 1 native "$DEAD"),
$(remote_lun 2 libiscsi "$DEAD"),
$(remote_lun 3 native localhost),
$(remote_lun 4 libiscsi localhost)
    ] } ] }
EOF
ASAN_OPTIONS="log_path=$T_DIR/san/asan:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
	UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
	TSAN_OPTIONS="log_path=$T_DIR/san/tsan:halt_on_error=0${TSAN_OPTIONS:+:$TSAN_OPTIONS}" \
	t_daemon_start isergwd isergwd "$T_DIR/gw.log" \
	ip netns exec "$NS" "$T_BUILD/isergwd" --config "$T_DIR/gw.json"
GW_PID=$T_LAST_PID

gw_ready() { grep -q 'main: ready' "$T_DIR/gw.log"; }
if ! t_wait_for 20 gw_ready; then
	fail "gateway start" "$(tail -n 20 "$T_DIR/gw.log" | tr '\n' '|')"
	t_end
fi
pass "the gateway is ready with two paths to a name whose DNS server never answers"

# rs_path LUN JQ-FILTER: the state of LUN's first path, asked now, passes JQ-FILTER ($RS_ST).
RS_ST=$T_DIR/path.json
rs_path() {
	python3 "$T_ROOT/tests/lib/gw_ctl.py" "$CTL_SOCK" '{"op":"state"}' 2>/dev/null |
		jq ".targets[0].luns[] | select(.lun == $1) | .status.paths[0]" >"$RS_ST" 2>/dev/null
	# jq -e is true on empty input: an unanswered state must not pass.
	[ -s "$RS_ST" ] && jq -e "$2" "$RS_ST" >/dev/null 2>&1
}

# 1. I/O on the local LUN while the lookups hang. The paths start a lookup at once and again
#    every retry; each hangs 30 s. 12 s of reads: no gap near the DNS timeout.
t0=$SECONDS
ip netns exec "$NS" "$T_TOOLS/isergw-bench" -q 4 -b 4096 -t 12 -S 32M \
	"iscsi://127.0.0.1:3260/$IQN/0" >"$T_DIR/bench.log" 2>&1
rc=$?
gap=$(grep -o 'max_gap_us=[0-9]*' "$T_DIR/bench.log" | cut -d= -f2)
ios=$(grep -o ' ios=[0-9]*' "$T_DIR/bench.log" | cut -d= -f2)
queries=$(cat "$DNS_COUNT" 2>/dev/null || echo 0)
# 5 s: a generous bound for a loaded machine, a third of one DNS timeout.
if [ "$rc" = 0 ] && [ -n "$gap" ] && [ "$gap" -lt 5000000 ] && [ "${ios:-0}" -gt 0 ] &&
	[ "$queries" -gt 0 ]; then
	pass "local LUN on the same loop: $ios reads in 12 s while $queries DNS queries hung, longest gap $((gap / 1000)) ms"
else
	fail "local I/O while the lookups hang" "rc=$rc gap_us=${gap:-?} ios=${ios:-?} queries=$queries: $(tail -n 3 "$T_DIR/bench.log" | tr '\n' '|')"
fi

# 2. The paths to the dead name say why they are down.
for lun in 1 2; do
	eng=native
	[ $lun = 2 ] && eng=libiscsi
	if t_wait_for 20 rs_path $lun ".last_error == \"name lookup of $DEAD did not finish within 3 s\""; then
		pass "engine $eng: the path reports \"$(jq -r .last_error "$RS_ST")\" ($(jq -c '{state, resolving}' "$RS_ST"))"
	else
		fail "engine $eng: the lookup failure in the path's state" "$(jq -c . "$RS_ST" | head -c 500)"
	fi
done

# 3. A name /etc/hosts answers: the path logs in, its state shows the address it connected to.
for lun in 3 4; do
	eng=native
	[ $lun = 4 ] && eng=libiscsi
	if t_wait_for 20 rs_path $lun '.state == "active" and .address == "127.0.0.1:3260"'; then
		pass "engine $eng: iscsi://localhost path active, \"address\": \"127.0.0.1:3260\""
	else
		fail "engine $eng: localhost path and its address" "$(jq -c . "$RS_ST" | head -c 500)"
	fi
done

# 4. Stop while lookups still hang (each 30 s): nothing waits for them.
if rs_path 1 '.resolving == "'"$DEAD"'"' || rs_path 2 '.resolving == "'"$DEAD"'"' ||
	t_wait_for 10 rs_path 1 '.resolving == "'"$DEAD"'"'; then
	pass "a path is in a lookup when the gateway is stopped"
else
	fail "a lookup under way before the stop" "$(jq -c . "$RS_ST" | head -c 300)"
fi
t1=$EPOCHREALTIME
gw_stop "$GW_PID"
ms=$(( (${EPOCHREALTIME//[!0-9]/} - ${t1//[!0-9]/}) / 1000 ))
if [ "$ms" -lt 8000 ]; then
	pass "SIGTERM during hanging lookups: the gateway stopped in $ms ms"
else
	fail "stop during hanging lookups" "took $ms ms"
fi
t_log "resolve: ran $((SECONDS - t0)) s"
t_end
