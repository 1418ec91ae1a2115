#!/bin/bash
# Shared logical-unit state across event loops (issue 13; docs/ARCHITECTURE.md, "Several event
# loops"): one gateway with `gateway.loops: 2`, one target with four LUNs (RAM and file
# backstores), and hosts whose sessions sit on different loops, each driven line by line
# (tests/tools/isergw-pr reading its commands from a FIFO, so a session stays logged in):
#  - placement: two hosts logged in one after the other land on two loops (the state's
#    per-session "loop"), the state's "loops" array counts a connection on each, the LUs'
#    "owner_loop"s cover both loops;
#  - persistent reservations on LUN 0 (RAM) between the two loops: REGISTER, RESERVE (write
#    exclusive), the non-holder's WRITE and RESERVE refused with RESERVATION CONFLICT, READ KEYS
#    and READ RESERVATION agreeing from the other loop, PREEMPT, the preempted host's WRITE
#    refused, RELEASE, CLEAR;
#  - COMPARE AND WRITE races on one block of LUN 1 (file): each round both hosts send a
#    COMPARE AND WRITE expecting the block's current byte at once; exactly one is GOOD and the
#    other a MISCOMPARE (0e/1d/00), and the block then holds the winner's byte read from the
#    other loop; the blocks beside it untouched;
#  - LOGICAL UNIT RESET on LUN 2 (RAM) from one loop while isergw-bench writes at QD 16 from the
#    other: the writer's commands end (TASK ABORTED or a unit attention) and it exits by itself
#    well before its own end, nothing hangs; then verified writes on LUN 2 after the resets;
#  - throughout, isergw-verify back to back on LUN 3 (file): every run verifies;
#  - after every host logged out, no session is left and every loop's counts are back to 0;
#  - busy polling (gateway.poll_us): off by default (no poll during a busy run), an apply with 20
#    makes a busy session's loop poll and find work (and is logged), one with 0 stops it again;
#  - a session alone on a second target with a single LU lands on that LU's owner loop (the
#    placement's tie-break), so none of its commands crosses to another loop.
# Until sessions are placed on every loop (s9-sess) and LUs spread (s9-scsi), the placement
# checks fail and name what is missing; everything else runs and must pass on one loop too.
#
#   tests/integration/test_loops.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/hosts.sh"

t_begin loops
if [ "$TARGET" != isergwd ]; then
	skip loops "gateway.loops is the gateway's own setting"
	t_end
fi
if [ "$(nproc)" -lt 2 ]; then
	skip loops "fewer than 2 CPUs: one loop per CPU cannot be shown"
	t_end
fi
PR=$T_TOOLS/isergw-pr
VERIFY=$T_TOOLS/isergw-verify
BENCH=$T_TOOLS/isergw-bench
for b in "$T_BUILD/isergwd" "$PR" "$VERIFY" "$BENCH"; do
	if [ ! -x "$b" ]; then
		fail build "$b is missing (make test-build)"
		t_end
	fi
done

IQN=iqn.2026-11.org.isergw:loops
CTL=$T_DIR/ctl.sock
PORT=$(t_free_port)
URL=iscsi://$T_HOST:$PORT/$IQN
IQN1=iqn.2026-11.org.isergw:loops-one
URL1=iscsi://$T_HOST:$PORT/$IQN1
INI_W=iqn.2026-11.org.isergw:loops-writer
INI_V=iqn.2026-11.org.isergw:loops-verify
CAW_ROUNDS=${LOOPS_CAW_ROUNDS:-40}
RESET_ROUNDS=${LOOPS_RESET_ROUNDS:-3}
truncate -s 64M "$T_SHM/lun1.img"
truncate -s 256M "$T_SHM/lun3.img"

# No NOP-In pings: a held host (libiscsi's synchronous API) reads its socket only while it runs
# a command, and may sit idle longer than a ping's timeout while the other host works.
cat >"$T_DIR/gw.json" <<EOF
{
  "gateway": { "loops": 2, "control_socket": "$CTL" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $PORT } ],
  "targets": [
    {
      "name": "$IQN", "alias": "loops", "tpgt": 1, "portals": ["tcp0"],
      "allow_any_initiator": true,
      "params": { "nop_interval": 0 },
      "luns": [
        { "lun": 0, "backstore": { "type": "ram", "size": "64M", "block_size": 512 } },
        { "lun": 1, "backstore": { "type": "file", "path": "$T_SHM/lun1.img", "size": "64M",
                                   "block_size": 512 } },
        { "lun": 2, "backstore": { "type": "ram", "size": "64M", "block_size": 512 } },
        { "lun": 3, "backstore": { "type": "file", "path": "$T_SHM/lun3.img", "size": "256M",
                                   "block_size": 512 } }
      ]
    },
    {
      "name": "$IQN1", "alias": "loops-one", "tpgt": 1, "portals": ["tcp0"],
      "allow_any_initiator": true,
      "params": { "nop_interval": 0 },
      "luns": [ { "lun": 0, "backstore": { "type": "ram", "size": "16M", "block_size": 512 } } ]
    }
  ]
}
EOF
if ! gw_start "$T_DIR/gw.json" "$T_DIR/gw.log" "$PORT"; then
	fail gateway-start "isergwd did not start (log: $T_DIR/gw.log)"
	t_end
fi
GW=$T_GW_PID

# ---- the gateway's state ------------------------------------------------------------------

# st EXPR: prints the python expression EXPR over the gateway's state (s); `loops` is its
# "loops" array, `sess(INI)` the normal sessions of an initiator, `lidx(l)` a loop's index.
st() {
	gw_ctl "$CTL" '{"op":"state"}' >"$T_DIR/state.json" 2>/dev/null || return 1
	python3 - "$T_DIR/state.json" "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
loops = s.get("loops") or []
def lidx(l):
    return l.get("index", l.get("loop"))
def sess(ini):
    return [x for x in s.get("sessions", []) if x.get("initiator") == ini and x.get("type") == "normal"]
def owners(name=None):
    out = []
    def walk(o):
        if isinstance(o, dict):
            if "owner_loop" in o:
                out.append(o["owner_loop"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk([t for t in s.get("targets", []) if name is None or t.get("name") == name])
    return out
r = eval(sys.argv[2])
if r is False or r is None:
    sys.exit(1)
if r is not True:
    print(r)
PY
}

# st_is EXPR: true when EXPR holds over the state (for t_wait_for).
st_is() { st "$1" >/dev/null; }

# loop_of INI: the loop index of the initiator's one normal session ("none" without the field).
loop_of() {
	st "sess('$1')[0].get('loop', 'none') if len(sess('$1')) == 1 else 'no-session'"
}

# ---- hosts: isergw-pr sessions driven line by line ----------------------------------------

# host_start, host_send, host_wait, host_do, host_expect, host_stop: tests/lib/hosts.sh.

# ---- start: the loops, the background verifier, two hosts ---------------------------------

check "state: two loops in the \"loops\" array" st_is 'len(loops) == 2 and sorted(lidx(l) for l in loops) == [0, 1]'

# isergw-verify back to back on LUN 3 until $T_DIR/verify.stop exists, one line per run.
# While $T_DIR/verify.pause exists it starts no run and says so with $T_DIR/verify.idle.
verifier() {
	local seed=1 rc
	while [ ! -e "$T_DIR/verify.stop" ]; do
		if [ -e "$T_DIR/verify.pause" ]; then
			: >"$T_DIR/verify.idle"
			sleep 0.1
			continue
		fi
		rm -f "$T_DIR/verify.idle"
		timeout -k 5 120 "$VERIFY" -q -i "$INI_V" -s "$seed" -n 60 -M 512 -m 256k -S 128M \
			"$URL/3" >"$T_DIR/verify.$seed.out" 2>&1
		rc=$?
		echo "$seed $rc" >>"$T_DIR/verify.runs"
		seed=$((seed + 1))
	done
}
# Placement goes to the loop with the fewest connections, so the verifier's session, logged
# in on either loop at any moment, would decide where a host lands. It pauses (its current
# run ends, its session is gone) while a host whose loop a check names logs in.
verifier_pause() {
	: >"$T_DIR/verify.pause"
	t_wait_for 150 test -e "$T_DIR/verify.idle" &&
		t_wait_for 15 st_is "len(sess('$INI_V')) == 0"
}
verifier_resume() { rm -f "$T_DIR/verify.pause" "$T_DIR/verify.idle"; }
: >"$T_DIR/verify.runs"
verifier &
VERIFIER_PID=$!
T_PIDS+=("$VERIFIER_PID")
T_PID_NAME[$VERIFIER_PID]=verifier

check "the verifier pauses for the hosts' logins" verifier_pause
check "host A (initiator 1) logs in and answers" host_start A "$T_INI1" 1
check "host B (initiator 2) logs in and answers" host_start B "$T_INI2" 2
verifier_resume
LOOP_A=$(loop_of "$T_INI1")
LOOP_B=$(loop_of "$T_INI2")
t_log "  host A on loop ${LOOP_A:-?}, host B on loop ${LOOP_B:-?}"
on_two_loops() {
	case "$LOOP_A$LOOP_B" in
	*none* | *no-session* | "") echo "the state has no per-session \"loop\" (A: $LOOP_A, B: $LOOP_B)"; return 1 ;;
	esac
	[ "$LOOP_A" != "$LOOP_B" ] || { echo "both sessions on loop $LOOP_A"; return 1; }
}
check "placement: hosts A and B logged in one after the other are on two loops" on_two_loops
check "placement: the \"loops\" array counts a connection on each loop" \
	t_wait_for 5 st_is 'all(l.get("connections", 0) >= 1 for l in loops) and len(loops) == 2'
check "placement: the target's four LUs are owned by both loops (\"owner_loop\")" \
	st_is "sorted(set(owners('$IQN'))) == [0, 1] and len(owners('$IQN')) == 4"

# ---- persistent reservations on LUN 0 between the loops ------------------------------------

K1=0x00000000000000a1
K2=0x00000000000000b2
check "PR: A registers K1" host_expect A "register $K1" '^register: good$'
check "PR: A reserves (write exclusive)" host_expect A "reserve $K1 1" '^reserve: good$'
check "PR: B (other loop) reads A's key and reservation" \
	host_expect B "read-keys read-reservation" "^reservation $K1 1\$"
grep -q "^keys [0-9]* $K1\$" "$T_DIR/B.last" || fail "PR: B reads A's key" "$(cat "$T_DIR/B.last")"
check "PR: B (not registered) WRITE refused with RESERVATION CONFLICT" \
	host_expect B "write 8" '^write: reservation-conflict$'
check "PR: B READ works (write exclusive)" host_expect B "read 8" '^read: good$'
check "PR: A, the holder, WRITEs" host_expect A "write 8" '^write: good$'
check "PR: B registers K2" host_expect B "register $K2" '^register: good$'
check "PR: B RESERVE while A holds it: RESERVATION CONFLICT" \
	host_expect B "reserve $K2 1" '^reserve: reservation-conflict$'
check "PR: A reads both keys" host_expect A "read-keys" "^keys [0-9]+ ($K1 $K2|$K2 $K1)\$"
check "PR: B preempts A" host_expect B "preempt $K2 $K1 1" '^preempt: good$'
check "PR: A (other loop) sees B's reservation and only B's key" \
	host_expect A "read-keys read-reservation" "^reservation $K2 1\$"
grep -qE "^keys [0-9]+ $K2\$" "$T_DIR/A.last" || fail "PR: A reads only B's key" "$(cat "$T_DIR/A.last")"
check "PR: A (preempted) WRITE refused with RESERVATION CONFLICT" \
	host_expect A "write 8" '^write: reservation-conflict$'
check "PR: B releases" host_expect B "release $K2 1" '^release: good$'
check "PR: A sees no reservation" host_expect A "read-reservation" '^reservation none$'
check "PR: A WRITEs again (no reservation)" host_expect A "write 8" '^write: good$'
check "PR: B clears" host_expect B "clear $K2" '^clear: good$'
check "PR: A reads no key" host_expect A "read-keys" '^keys [0-9]+$'

# ---- COMPARE AND WRITE races on LUN 1 ------------------------------------------------------

CAW_LBA=100
caw_setup() {
	host_expect A "lun 1" '^lun: good$' && host_expect B "lun 1" '^lun: good$' &&
		host_expect A "fill $((CAW_LBA - 1)) 0x5a fill $CAW_LBA 0 fill $((CAW_LBA + 1)) 0xa5" \
			'^fill: good$' && ! grep -qv '^fill: good$' "$T_DIR/A.last"
}
check "CAW: both hosts on LUN 1, block $CAW_LBA zeroed" caw_setup
# caw_rounds: each round both hosts expect the block's byte CUR, A writes 2r-1, B writes 2r.
# Either may win; what must hold is one winner and one miscompare, and the winner's data.
caw_rounds() {
	local r cur=0 a b wa wb wins_a=0 wins_b=0 bad=0
	for r in $(seq 1 "$CAW_ROUNDS"); do
		a=$(((2 * r - 1) % 255 + 1)) b=$(((2 * r) % 255 + 1))
		# Which host hears of the round first alternates.
		if [ $((r % 2)) = 1 ]; then
			host_send A "caw $CAW_LBA $cur $a"
			host_send B "caw $CAW_LBA $cur $b"
		else
			host_send B "caw $CAW_LBA $cur $b"
			host_send A "caw $CAW_LBA $cur $a"
		fi
		host_wait A && host_wait B || return 1
		wa=$(cat "$T_DIR/A.last") wb=$(cat "$T_DIR/B.last")
		case "$wa|$wb" in
		"caw: good|caw: check-condition 0e/1d/00") cur=$a wins_a=$((wins_a + 1)) ;;
		"caw: check-condition 0e/1d/00|caw: good") cur=$b wins_b=$((wins_b + 1)) ;;
		*)
			echo "round $r: not exactly one winner and one miscompare: A '$wa', B '$wb'"
			bad=1
			break
			;;
		esac
		# The block holds the winner's byte, read through the loser's loop.
		if [ "$cur" = "$a" ]; then
			host_expect B "expect $CAW_LBA $cur" '^expect: good$' || { bad=1; break; }
		else
			host_expect A "expect $CAW_LBA $cur" '^expect: good$' || { bad=1; break; }
		fi
	done
	echo "caw: $CAW_ROUNDS rounds, A won $wins_a, B won $wins_b, final byte $cur"
	CAW_FINAL=$cur
	[ "$bad" = 0 ]
}
CAW_FINAL=
check "CAW: $CAW_ROUNDS rounds from two loops, each with exactly one winner" caw_rounds
t_log "  $(tail -n 1 "$T_DIR/CAW__${CAW_ROUNDS}_rounds_from_two_loops__each_with_exactly_one_winner.out" 2>/dev/null)"
if [ -n "$CAW_FINAL" ]; then
	check "CAW: the block's final content is the last winner's, seen from both loops" \
		host_expect A "expect $CAW_LBA $CAW_FINAL" '^expect: good$'
	check "CAW: ... and from B" host_expect B "expect $CAW_LBA $CAW_FINAL" '^expect: good$'
fi
check "CAW: the blocks beside it untouched" \
	host_expect B "expect $((CAW_LBA - 1)) 0x5a expect $((CAW_LBA + 1)) 0xa5" '^expect: good$'
grep -qv '^expect: good$' "$T_DIR/B.last" && fail "CAW: neighbours" "$(cat "$T_DIR/B.last")"

# ---- LUN RESET on LUN 2 from one loop while the other writes --------------------------------

# B logs out, so that loop B's (now empty) takes the writer's session.
check "host B logs out" host_stop B
check "state: B's session is gone" t_wait_for 10 st_is "len(sess('$T_INI2')) == 0"
check "RESET: host A on LUN 2" host_expect A "lun 2" '^lun: good$'

# reset_round N: isergw-bench writes LUN 2 at QD 16 for up to 60 s; once it has completed
# commands, A resets LUN 2; the writer must end by itself within 20 s, having seen the reset.
reset_round() {
	local n=$1 out=$T_DIR/writer.$1.out pid wl t0
	# The writer logs in with the verifier paused: A's loop holds A, the other nothing.
	verifier_pause || { echo "the verifier did not pause"; verifier_resume; return 1; }
	timeout -k 5 90 "$BENCH" -i "$INI_W" -w -q 16 -b 4096 -t 60 -S 32M "$URL/2" >"$out" 2>&1 &
	pid=$!
	if ! t_wait_for 20 st_is "len(sess('$INI_W')) == 1 and sess('$INI_W')[0].get('commands', 0) > 200"; then
		echo "the writer's session did not complete 200 commands within 20 s"
		verifier_resume
		kill "$pid" 2>/dev/null
		wait "$pid"
		return 1
	fi
	verifier_resume
	wl=$(loop_of "$INI_W")
	echo "round $n: writer on loop $wl, host A on loop $LOOP_A"
	echo "$n $wl" >>"$T_DIR/writer.loops"
	t0=$(date +%s)
	if ! host_expect A "lun-reset" '^lun-reset: good$'; then
		kill "$pid" 2>/dev/null
		wait "$pid"
		return 1
	fi
	if ! t_wait_for 20 gone "$pid"; then
		# Seen on main (2026-11-26): the gateway shows the session with nothing active while
		# the writer waits for commands the reset aborted, which never got a response (its
		# control mode page says TAS=1: another session's aborted commands end TASK ABORTED).
		echo "the writer still runs 20 s after the reset; its session (commands, active) now and 1 s later:"
		st "[(x.get('commands'), x.get('active')) for x in sess('$INI_W')]"
		sleep 1
		st "[(x.get('commands'), x.get('active')) for x in sess('$INI_W')]"
		tail -n 3 "$out"
		kill "$pid" 2>/dev/null
		wait "$pid"
		return 1
	fi
	wait "$pid"
	echo "writer exit $? after $(($(date +%s) - t0)) s: $(tr '\n' ' ' <"$out")"
	# It ended on the reset: an error from it (TASK ABORTED, status 0x40, or the unit attention
	# the reset left for its nexus), and its summary line, printed after every command ended.
	grep -qE '^bench: write rand .* errors=[1-9]' "$out" &&
		grep -qE 'status 0x40|UNIT_ATTENTION' "$out"
}
: >"$T_DIR/writer.loops"
for n in $(seq 1 "$RESET_ROUNDS"); do
	check "RESET round $n: the writer's commands end on the LUN RESET, none hangs" reset_round "$n"
done
writer_other_loop() {
	cat "$T_DIR/writer.loops"
	[ -s "$T_DIR/writer.loops" ] && ! awk -v a="$LOOP_A" '$2 == a || $2 == "none" { bad = 1 } END { exit !bad }' \
		"$T_DIR/writer.loops"
}
check "placement: every writer was on the other loop than host A" writer_other_loop
check "RESET: host A writes and reads back LUN 2 after the resets" \
	host_expect A "fill 7 0x3c expect 7 0x3c" '^expect: good$'
check "RESET: isergw-verify on LUN 2 after the resets (512 B..256 KiB, read back)" \
	timeout -k 5 120 "$VERIFY" -q -i "$INI_W" -s 77 -n 80 -M 512 -m 256k -S 32M "$URL/2"

# ---- the background verifier, the end ------------------------------------------------------

touch "$T_DIR/verify.stop"
verifier_done() {
	if ! t_wait_for 130 gone "$VERIFIER_PID"; then
		kill "$VERIFIER_PID" 2>/dev/null
		echo "the verifier did not stop within 130 s"
		return 1
	fi
	wait "$VERIFIER_PID"
	echo "runs (seed status): $(tr '\n' ' ' <"$T_DIR/verify.runs")"
	[ -s "$T_DIR/verify.runs" ] && ! awk '$2 != 0 { bad = 1 } END { exit !bad }' "$T_DIR/verify.runs"
}
check "isergw-verify on LUN 3 ran back to back throughout, every run verified" verifier_done
t_log "  verifier: $(wc -l <"$T_DIR/verify.runs") runs"

check "host A logs out" host_stop A
check "state: no session left, every loop's connections (and sessions) back to 0" t_wait_for 15 st_is \
	'len([x for x in s.get("sessions", []) if x.get("type") == "normal"]) == 0 and len(loops) == 2 and all(l.get("connections", 0) == 0 and l.get("sessions", 0) == 0 for l in loops)'

# ---- busy polling (gateway.poll_us) -----------------------------------------------------------

# polls: the loops' polls started, summed ("-" without the fields).
polls() { st 'sum(l["polls"] for l in loops) if loops and all("polls" in l for l in loops) else "-"'; }
# busy_run: 3 s of 4 KiB reads at QD 32 on LUN 0, without an error.
busy_run() {
	timeout -k 5 60 "$BENCH" -t 3 -q 32 -b 4096 -i "$INI_W" "$URL/0" >"$T_DIR/busy.out" 2>&1 &&
		grep -q ' errors=0 ' "$T_DIR/busy.out" && grep '^bench:' "$T_DIR/busy.out"
}
# apply_poll US: the running configuration with gateway.poll_us US, applied.
apply_poll() {
	local reply
	reply=$(gw_ctl "$CTL" "{\"op\": \"apply\", \"config\": $(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
c["gateway"]["poll_us"] = int(sys.argv[2])
print(json.dumps(c))' "$T_DIR/gw.json" "$1")}") || return 1
	echo "$reply"
	case $reply in *'"ok": true'* | *'"ok":true'*) return 0 ;; esac
	return 1
}
# no_polls_during_run: every loop reports poll_us 0, and a busy run starts no poll.
no_polls_during_run() {
	local p0 p1
	st_is 'len(loops) == 2 and all(l.get("poll_us") == 0 for l in loops)' ||
		{ echo "poll_us is not 0 on every loop: $(st '[l.get("poll_us") for l in loops]')"; return 1; }
	p0=$(polls) || return 1
	busy_run || return 1
	p1=$(polls) || return 1
	echo "polls before: $p0, after: $p1"
	[ "$p0" = "$p1" ]
}
check "polling: off by default (poll_us 0 on every loop, no poll during a busy run)" no_polls_during_run
# polls_while_busy: with poll_us 20 a busy session's loop checks for work instead of sleeping,
# and finds it.
polls_while_busy() {
	local p0 p1
	apply_poll 20 || return 1
	st_is 'all(l.get("poll_us") == 20 for l in loops)' || { echo "poll_us not 20"; return 1; }
	p0=$(st 'sum(l["poll_hits"] for l in loops)') || return 1
	busy_run || return 1
	p1=$(st 'sum(l["poll_hits"] for l in loops)') || return 1
	echo "polls that found work during the run: $((p1 - p0)); sleeps: $(st 'sum(l["sleeps"] for l in loops)')"
	[ "$p1" -gt "$p0" ]
}
check "polling: an apply with poll_us 20: a busy session's loop polls and finds work" polls_while_busy
check "polling: the log says what changed" grep -q 'poll up to 20 µs before sleeping (was 0 µs)' "$T_DIR/gw.log"
off_again() { apply_poll 0 >/dev/null && no_polls_during_run; }
check "polling: an apply with poll_us 0 stops it again" off_again

# ---- a session alone on a one-LU target: on its LU's owner loop ----------------------------

# one_lu_placed: with both loops idle, the session goes where the target's only LU is owned.
one_lu_placed() {
	local owner loop
	owner=$(st "owners('$IQN1')[0] if len(owners('$IQN1')) == 1 else 'none'")
	host_start C "$T_INI1" 3 "$URL1" || return 1
	loop=$(loop_of "$T_INI1")
	echo "the LU's owner loop: $owner, the session's loop: $loop"
	host_stop C || return 1
	[ -n "$owner" ] && [ "$owner" != none ] && [ "$loop" = "$owner" ]
}
check "placement: a session alone on a one-LU target is on its LU's owner loop" one_lu_placed
check "gateway alive" t_alive "$GW"
t_end
