#!/bin/bash
# `make soak`: the gateway under a long mixed load, to find what short suites miss: leaks, slow
# growth, rare races. For SOAK_SECONDS (default 600) it runs, against one gateway:
#   - a data-integrity writer (isergw-verify, a new seed each round: random 512 B..4 MiB writes
#     read back and compared),
#   - a random-read load (iscsi-perf, 4 KiB at QD 32) beside them,
#   - session churn (iscsi-ls logs in and out every round).
# It fails on any verify mismatch or command error, on the gateway dying, on a sanitizer report
# (run it with BUILD=build/san after `make SANITIZE=address,undefined`), or when the gateway's
# resident memory grew by more than SOAK_RSS_GROWTH_PCT (default 25) percent between the end
# of the first round and the end of the run.
#
#   make soak                         release build, 10 minutes
#   SOAK_SECONDS=60 BUILD=build/san tests/soak/run.sh
set -u
. "$(dirname "$0")/../lib/common.sh"

SOAK_SECONDS=${SOAK_SECONDS:-600}
SOAK_RSS_GROWTH_PCT=${SOAK_RSS_GROWTH_PCT:-25}
t_begin soak
TARGET=isergwd
tg_defaults
TG_SIZE=2G
if ! target_start soak; then
	fail start "the gateway did not start"
	t_end
fi
VERIFY=$T_TOOLS/isergw-verify
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$T_GW_PID/status" 2>/dev/null; }

end=$((SECONDS + SOAK_SECONDS))
round=0 bad=0 rss0=
while [ $SECONDS -lt $end ] && [ $bad -eq 0 ]; do
	round=$((round + 1))
	timeout -k 5 120 iscsi-perf -i "$T_INI2" -r -m 32 -t 20 "$T_URL" >"$T_DIR/perf.$round" 2>&1 &
	perf=$!
	timeout -k 5 300 "$VERIFY" -q -i "$T_INI1" -s "$round" -n 100 -S 1G "$T_URL" \
		>"$T_DIR/verify.$round" 2>&1 &
	va=$!
	timeout -k 5 30 iscsi-ls -s "iscsi://$T_PORTAL/" >"$T_DIR/ls.$round" 2>&1 || bad=1
	wait $va || bad=1
	wait $perf || bad=1
	if ! t_alive "$T_GW_PID"; then
		fail "round $round" "the gateway died"
		t_end
	fi
	[ -z "$rss0" ] && rss0=$(rss)
	[ $bad -ne 0 ] && fail "round $round" "$(tail -n 3 "$T_DIR/verify.$round" "$T_DIR/perf.$round" 2>/dev/null | tr '\n' ' ')"
done
[ $bad -eq 0 ] && pass "$round rounds in ${SOAK_SECONDS}s: every write verified, no errors"
rss1=$(rss)
if [ -n "$rss0" ] && [ -n "$rss1" ]; then
	growth=$(( (rss1 - rss0) * 100 / rss0 ))
	if [ "$growth" -le "$SOAK_RSS_GROWTH_PCT" ]; then
		pass "gateway RSS ${rss0} kB after round 1, ${rss1} kB at the end (${growth}%)"
	else
		fail "memory growth" "RSS ${rss0} kB -> ${rss1} kB (${growth}% > ${SOAK_RSS_GROWTH_PCT}%)"
	fi
fi
target_stop
t_end
