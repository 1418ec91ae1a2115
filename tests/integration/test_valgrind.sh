#!/bin/bash
# test_valgrind: one whole session of each transport the host has, against isergwd under
# valgrind memcheck: login, a few MiB of verified I/O (isergw-verify: writes of 512 B..1 MiB read
# back), logout, SIGTERM. Passes only with no memcheck error and no definite or indirect leak:
#   valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=99
# The host has TCP only; iSER needs an RDMA device (the VM rig), so it is not run here.
#
#   tests/integration/test_valgrind.sh        (release build only: valgrind and ASan do not mix)
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin valgrind
if [ "$TARGET" != isergwd ]; then
	skip valgrind "gateway only"
	t_end
fi
case "$T_BUILD" in
*/san | */tsan)
	skip valgrind "not under a sanitized build (valgrind runs the release build)"
	t_end
	;;
esac
VERIFY=$T_TOOLS/isergw-verify
if ! t_need valgrind "$VERIFY" "$T_BUILD/isergwd"; then
	fail valgrind "needs valgrind, $T_BUILD/isergwd and $VERIFY"
	t_end
fi

tg_defaults
TG_SIZE=64M
PORT=$(t_free_port) || { fail valgrind "no free port"; t_end; }
truncate -s "$TG_SIZE" "$TG_BACKING"
gw_write_config "$T_DIR/vg.json" "$PORT"
VGLOG=$T_DIR/memcheck.log
t_daemon_start isergwd-valgrind valgrind "$T_DIR/vg.isergwd.log" \
	valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite,indirect \
	--error-exitcode=99 --track-fds=no --log-file="$VGLOG" \
	"$T_BUILD/isergwd" --config "$T_DIR/vg.json"
VG_PID=$T_LAST_PID
# valgrind starts slowly: a generous bound.
if ! t_wait_port "$VG_PID" "$PORT" 120; then
	fail "isergwd under valgrind: portal open" "$(tail -n 5 "$T_DIR/vg.isergwd.log" | tr '\n' ' ')"
	t_end
fi
pass "isergwd under valgrind: listening on $T_HOST:$PORT (tcp)"

URL=iscsi://$T_HOST:$PORT/$TG_IQN/0
# About 4-8 MiB moved: 24 writes of 512 B..1 MiB, each read back, then the span re-read.
check "tcp: login, verified I/O (512 B..1 MiB), logout" \
	timeout -k 5 300 "$VERIFY" -q -s 7 -n 24 -m 1M "$URL"

t_stop_pid "$VG_PID" 120
if [ "$T_STOP_WAS_DEAD" = 1 ]; then
	fail "memcheck" "isergwd had already exited (status $T_STOP_RC)"
elif [ "$T_STOP_KILLED" = 1 ]; then
	fail "memcheck" "isergwd did not exit within 120 s of SIGTERM under valgrind"
elif [ "$T_STOP_RC" -ne 0 ]; then
	fail "memcheck: exit status 0 after SIGTERM" "status $T_STOP_RC (99: valgrind found errors)"
else
	pass "memcheck: isergwd exited 0 after SIGTERM"
fi
summary=$(grep -E 'ERROR SUMMARY|All heap blocks|in use at exit|definitely lost|indirectly lost|possibly lost|still reachable' \
	"$VGLOG" | sed 's/^==[0-9]*== *//' | tr '\n' ';')
if grep -q 'ERROR SUMMARY: 0 errors' "$VGLOG" &&
	{ grep -q 'All heap blocks were freed' "$VGLOG" ||
		{ grep -q 'definitely lost: 0 bytes' "$VGLOG" &&
			grep -q 'indirectly lost: 0 bytes' "$VGLOG"; }; }; then
	pass "memcheck: no errors, no definite or indirect leak ($summary)"
else
	fail "memcheck: errors or leaks" "$summary"
	grep -E -A 20 '(Invalid|uninitialised|definitely lost in|indirectly lost in)' "$VGLOG" |
		head -n 60 | sed 's/^/    /'
fi
t_log "valgrind: memcheck log in $VGLOG"
t_end
