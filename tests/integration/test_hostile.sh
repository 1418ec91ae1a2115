#!/bin/bash
# Hostile peers on the iSCSI portal: a raw-socket client (tests/tools/isergw_hostile.py) sends
# truncated and oversized PDUs, bad AHS, wrong digests, opcodes out of phase, CmdSN outside the
# window, stray Data-Out, R2T storms, logins that never finish, a flood of half-open
# connections and slow readers; then the login limits (max_connections, login_timeout,
# max_sessions, max_sessions_per_initiator, the failed-login back-off) are driven past their
# bounds. Each answer is checked against RFC 7143 (the Reject reason or login status, or the
# connection dropped), and the gateway must stay alive.
#
# Throughout, a well-behaved client (isergw-verify, in a loop from 127.0.0.1) keeps writing and
# verifying data beside them; its runs are checked at the end. The gateway's RSS and open file
# descriptors are measured before and after and must stay within generous bounds. Hostile cases
# come from other loopback addresses (127.0.0.2...) so the failed-login back-off of one never
# reaches the well-behaved client.
#
#   tests/integration/test_hostile.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin hostile
VERIFY=$T_TOOLS/isergw-verify
HOSTILE="python3 $T_ROOT/tests/tools/isergw_hostile.py"
if [ "$TARGET" != isergwd ]; then
	skip hostile "the hostile suite checks the gateway's own limits (TARGET=$TARGET)"
	t_end
fi
if [ ! -x "$VERIFY" ]; then
	fail build "$VERIFY is missing (make $BUILD/tests/tools/isergw-verify)"
	t_end
fi

GOOD=iqn.1994-05.com.example:good
BAD=iqn.1994-05.com.example:hostile
TGT=iqn.2026-11.org.isergw:hostile
TGT2=iqn.2026-11.org.isergw:hostile-few
LOGIN_TIMEOUT=3
FLOOD_MAX=300
FAIL_LIMIT=5
BACKOFF=4
PORT=$(t_free_port)
FPORT=$(t_free_port)
CTL=$T_DIR/ctl.sock
truncate -s 256M "$T_SHM/lun0.img"

# Portal tcp0 carries the well-behaved client and most cases; portal flood has a small
# max_connections for the flood. Target hostile-few has small session limits.
cat >"$T_DIR/gw.json" <<EOF
{
  "gateway": { "control_socket": "$CTL", "data_memory": "256M"${ISERGW_LOOPS:+, \"loops\": $ISERGW_LOOPS} },
  "portals": [
    { "name": "tcp0", "address": "$T_HOST", "port": $PORT, "login_timeout": $LOGIN_TIMEOUT,
      "login_fail_limit": $FAIL_LIMIT, "login_fail_window": 60, "login_backoff": $BACKOFF },
    { "name": "flood", "address": "$T_HOST", "port": $FPORT, "max_connections": $FLOOD_MAX,
      "login_timeout": 30 }
  ],
  "targets": [
    { "name": "$TGT", "portals": ["tcp0", "flood"], "allow_any_initiator": false,
      "initiators": [ { "name": "$GOOD" }, { "name": "$BAD" }, { "name": "$BAD-alias" },
                      { "name": "$BAD-bystander" } ],
      "params": { "HeaderDigest": "CRC32C,None", "DataDigest": "CRC32C,None",
                  "MaxRecvDataSegmentLength": 262144, "MaxBurstLength": 1048576,
                  "FirstBurstLength": 65536, "InitialR2T": false, "ImmediateData": true,
                  "MaxOutstandingR2T": 65535, "queue_depth": 32 },
      "luns": [ { "lun": 0, "backstore": { "type": "file", "path": "$T_SHM/lun0.img",
                                           "size": "256M", "block_size": 512 } } ] },
    { "name": "$TGT2", "portals": ["tcp0"], "allow_any_initiator": true,
      "max_sessions": 3, "max_sessions_per_initiator": 2,
      "luns": [ { "lun": 0, "backstore": { "type": "ram", "size": "16M" } } ] }
  ]
}
EOF
if ! gw_start "$T_DIR/gw.json" "$T_DIR/gw.log" "$PORT"; then
	fail start "isergwd did not start"
	t_end
fi
GW=$T_GW_PID
PORTAL=$T_HOST:$PORT
URL=iscsi://$PORTAL/$TGT/0

rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$GW/status"; }
nfds() { ls "/proc/$GW/fd" 2>/dev/null | wc -l; }
state() { gw_ctl "$CTL" '{"op":"state"}'; }
# jq-free JSON field: state | jfield 'x["login"]["timeouts"]'
jfield() { python3 -c "import json,sys; x=json.load(sys.stdin); print($1)"; }

# hostile CASE SRC [ARGS...]: one case of the raw client from source address SRC.
hostile() {
	local c=$1 src=$2
	shift 2
	timeout -k 5 120 $HOSTILE "$c" --portal "$PORTAL" --target "$TGT" --initiator "$BAD" \
		--src "$src" --ctl "$CTL" "$@"
}
alive() {
	if kill -0 "$GW" 2>/dev/null; then
		pass "$1: gateway alive"
	else
		fail "$1: gateway alive" "isergwd (pid $GW) is gone; see $T_DIR/gw.log"
		t_end
	fi
}

# A first verified run, then the figures at rest.
check "well-behaved client: first verified run" \
	timeout -k 5 120 "$VERIFY" -q -i "$GOOD" -s 1 -n 40 -m 256k -S 64M "$URL"
RSS0=$(rss_kb)
FD0=$(nfds)
t_log "gateway at rest: RSS $RSS0 kB, $FD0 fds"

# The well-behaved client: verified runs back to back until told to stop.
STOP=$T_DIR/verify.stop
(
	i=0
	while [ ! -e "$STOP" ]; do
		i=$((i + 1))
		timeout -k 5 120 "$VERIFY" -q -i "$GOOD" -s $((100 + i)) -n 30 -m 256k -S 64M "$URL" \
			>"$T_DIR/verify.$i.out" 2>&1
		echo "$i $?" >>"$T_DIR/verify.rc"
	done
) &
VPID=$!

check "truncated PDUs: connection dropped, next login served" hostile truncated 127.0.0.2
alive truncated
check "oversized data segments: Reject or drop" hostile oversize 127.0.0.2
alive oversize
check "bad AHS lengths: Reject, drop or ignored" hostile ahs 127.0.0.2
alive ahs
check "bad data digest (NOP-Out, Text, immediate data, Data-Out): Reject 0x02, CHECK CONDITION 47/05 for the write; bad header digest: drop" hostile digest 127.0.0.2
alive digest
check "opcodes out of phase: drop before login, Reject in FFP" hostile phase 127.0.0.2
alive phase
check "CmdSN outside the window: ignored, session in step" hostile cmdsn 127.0.0.2
alive cmdsn
check "Data-Out unknown task / wrong TTT / beyond burst / overlap: Reject or drop" \
	hostile dataout 127.0.0.2
alive dataout

# R2T storm and slow readers: memory held while they wait must come back when they leave.
check "R2T storm: bounded R2Ts, initiator leaves" hostile r2t-storm 127.0.0.3
alive r2t-storm
check "slow reader: 8 MiB reads never drained" hostile slow-reader 127.0.0.3 --hold 3
alive slow-reader
# One host's many sessions (one name from two addresses, two names from one address) hold
# one session's share of data_memory together; another host is still served.
check "one host's sessions hold one share of data_memory together" hostile shares 127.0.0.3
alive shares
# The figures (R2Ts sent, data memory held while they waited) for the log.
grep -h "R2Ts in\|state:\|reads of\|taken" "$T_DIR"/R2T_storm*.out "$T_DIR"/slow_reader*.out \
	"$T_DIR"/one_host*.out |
	while read -r l; do t_log "  $l"; done
used=
for _ in $(seq 1 50); do
	used=$(state | jfield 'x["data_memory"]["used"]') || used=
	[ "$used" = 0 ] && break
	# The well-behaved client's own buffers come and go: sample until a quiet moment.
	sleep 0.2
done
if [ "$used" = 0 ] || [ -n "$used" ] && [ "$used" -le $((16 << 20)) ]; then
	pass "data memory back after the storm and the slow reader (used $used)"
else
	fail "data memory back after the storm and the slow reader" "used $used bytes"
fi

# Logins that never finish: closed by login_timeout ($LOGIN_TIMEOUT s here).
check "logins that never finish: closed by login_timeout" \
	hostile never-finish 127.0.0.4 --login-timeout $LOGIN_TIMEOUT
t=$(state | jfield 'x["login"]["timeouts"]')
if [ "${t:-0}" -ge 3 ]; then
	pass "login timeouts counted in the state ($t)"
else
	fail "login timeouts counted in the state" "timeouts=$t"
fi

# Half-open flood on the flood portal: 2000 connects, max_connections $FLOOD_MAX.
FPORTAL=$T_HOST:$FPORT
check "2000 half-open connections: max_connections holds" \
	timeout -k 5 120 $HOSTILE flood --portal "$FPORTAL" --target "$TGT" --src 127.0.0.5 \
	--count 2000 --max-conns $FLOOD_MAX
alive flood
grep -h "^flood:" "$T_DIR"/2000_half-open*.out | while read -r l; do t_log "  $l"; done
ok=0
for _ in $(seq 1 50); do
	n=$(state | jfield '[p["connections"] for p in x["login"]["portals"] if p["name"]=="flood"][0]')
	[ "$n" = 0 ] && ok=1 && break
	sleep 0.1
done
r=$(state | jfield '[p["refused"] for p in x["login"]["portals"] if p["name"]=="flood"][0]')
if [ $ok = 1 ] && [ "${r:-0}" -ge $((2000 - FLOOD_MAX)) ]; then
	pass "flood portal: $r refused at accept, back to 0 connections"
else
	fail "flood portal accounting" "connections=$n refused=$r"
fi
check "flood portal serves a login after the flood" \
	timeout -k 5 30 $HOSTILE login --portal "$FPORTAL" --target "$TGT" --initiator "$BAD" \
	--src 127.0.0.5 --expect 0

# Session limits on hostile-few: max_sessions_per_initiator 2, max_sessions 3 (0x0302).
S2="--portal $PORTAL --target $TGT2"
timeout -k 5 60 $HOSTILE sessions $S2 --src 127.0.0.6 --initiator iqn.1994-05.com.example:a \
	--count 3 --expect-list 0,0,0x0302 --hold 6 >"$T_DIR/sessions-a.out" 2>&1 &
SA=$!
check "max_sessions_per_initiator: third session of one initiator refused (0x0302)" \
	t_wait_for 10 grep -q "statuses as expected" "$T_DIR/sessions-a.out"
check "max_sessions: a fourth session (another initiator) refused (0x0302)" \
	timeout -k 5 30 $HOSTILE sessions $S2 --src 127.0.0.6 \
	--initiator iqn.1994-05.com.example:b --count 2 --expect-list 0,0x0302
wait $SA
check "session limits: the held sessions logged out cleanly" \
	grep -q "statuses as expected" "$T_DIR/sessions-a.out"
check "session limits: a new session once the others left" \
	timeout -k 5 30 $HOSTILE login $S2 --src 127.0.0.6 --initiator iqn.1994-05.com.example:c \
	--expect 0
r=$(state | jfield 'x["login"]["sessions_refused"]')
[ "${r:-0}" -ge 2 ] && pass "sessions refused counted ($r)" ||
	fail "sessions refused counted" "sessions_refused=$r"

# Failed-login back-off: $FAIL_LIMIT authorization failures from 127.0.0.7, then even a
# valid login from there is refused (0x0301) for $BACKOFF s; 127.0.0.1 is never affected.
for i in $(seq 1 $FAIL_LIMIT); do
	timeout -k 5 30 $HOSTILE login --portal "$PORTAL" --target "$TGT" --src 127.0.0.7 \
		--initiator iqn.1994-05.com.example:stranger --expect 0x0202 \
		>>"$T_DIR/backoff.out" 2>&1 || echo "attempt $i: unexpected" >>"$T_DIR/backoff.out"
done
if ! grep -q unexpected "$T_DIR/backoff.out"; then
	pass "$FAIL_LIMIT unlisted-initiator logins refused (0x0202)"
else
	fail "unlisted-initiator logins refused (0x0202)" "$(tail -n 3 "$T_DIR/backoff.out")"
fi
check "back-off: a valid login from that address refused (0x0301)" \
	hostile login 127.0.0.7 --expect 0x0301
check "back-off: another address still logs in" hostile login 127.0.0.8 --expect 0
if grep -q "failed logins within 60 s: refusing logins from 127.0.0.7" "$T_DIR/gw.log"; then
	pass "back-off logged once with the address"
else
	fail "back-off logged" "no back-off line in $T_DIR/gw.log"
fi
src=$(state | jfield '[ (s["failed"], s["refused"], s["backoffs"]) for s in x["login"]["sources"] if s["address"]=="127.0.0.7"]')
t_log "failed-login table for 127.0.0.7 (failed, refused, backoffs): $src"
case "$src" in
"[($FAIL_LIMIT, 1, 1)]") pass "per-source counters in the state" ;;
*) fail "per-source counters in the state" "$src" ;;
esac
sleep $((BACKOFF + 1))
check "back-off over: a valid login from that address served" \
	hostile login 127.0.0.7 --expect 0

# The well-behaved client: every run verified, and it ran throughout.
touch "$STOP"
wait $VPID
runs=$(wc -l <"$T_DIR/verify.rc")
bad=$(awk '$2 != 0' "$T_DIR/verify.rc" | wc -l)
if [ "$runs" -ge 3 ] && [ "$bad" -eq 0 ]; then
	pass "well-behaved client: $runs verified runs beside the hostile ones, no error"
else
	fail "well-behaved client" "$runs runs, $bad failed: $(awk '$2 != 0' "$T_DIR/verify.rc" |
		head -n 3 | tr '\n' ' ')"
fi
alive end

# Bounded memory and descriptors: after everything left (no connection or session in the
# state), near where they started.
no_conns() { [ "$(state | jfield 'x["connections"] + len(x["sessions"])')" = 0 ]; }
t_wait_for 10 no_conns
RSS1=$(rss_kb)
FD1=$(nfds)
t_log "gateway after: RSS $RSS1 kB (before $RSS0 kB), $FD1 fds (before $FD0)"
# The allocator keeps freed buffers for reuse (glibc), and ASan keeps freed memory in its
# quarantine (256 MiB by default): the bound allows for that, not for a leak per connection
# (2000+ connections and hundreds of sessions went through). Measured in make test: +57 MiB,
# +136 MiB under ASan; the bounds are about twice that (ASan's: its quarantine's 256 MiB and
# a margin, whichever is more).
RSS_BOUND=122880
ldd "$T_BUILD/isergwd" 2>/dev/null | grep -q libasan && RSS_BOUND=294912
if [ "$RSS1" -le $((RSS0 + RSS_BOUND)) ]; then
	pass "RSS bounded: $RSS0 -> $RSS1 kB (bound +$((RSS_BOUND / 1024)) MiB)"
else
	fail "RSS bounded" "$RSS0 -> $RSS1 kB (bound +$((RSS_BOUND / 1024)) MiB)"
fi
if [ "$FD1" -le $((FD0 + 4)) ]; then
	pass "fds bounded: $FD0 -> $FD1"
else
	fail "fds bounded" "$FD0 -> $FD1: $(ls -l /proc/$GW/fd | tail -n 5)"
fi
c=$(state | jfield 'x["connections"]')
s=$(state | jfield 'len(x["sessions"])')
if [ "$c" = 0 ] && [ "$s" = 0 ]; then
	pass "no connection or session left"
else
	fail "no connection or session left" "connections=$c sessions=$s"
fi

gw_stop "$GW"
t_end
