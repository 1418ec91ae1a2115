# shellcheck shell=bash
# tests/lib/hosts.sh: hosts that stay logged in (sourced after common.sh). Each is an isergw-pr
# session reading its commands from a FIFO, one line at a time, and printing "end" after each
# line's answers, so a suite drives several at once (on different event loops of one gateway)
# or keeps a session across a fault and sends the next command after it.

declare -A HOST_FD=()
# host_start NAME INITIATOR ISID [TARGET-URL]: a session to LUN 0 of TARGET-URL (default: the
# suite's $URL) kept logged in; commands go in by FIFO. It answers a first read-keys. With
# HOST_UA=1 it prints each unit attention it retries ("ua 06/2a/09").
host_start() {
	local name=$1 fifo=$T_DIR/$1.in fd
	rm -f "$fifo" && mkfifo "$fifo" || return 1
	: >"$T_DIR/$name.out"
	t_daemon_start "host-$name" client "$T_DIR/$name.out" \
		bash -c 'exec "$@" <"$0"' "$fifo" "$T_TOOLS/isergw-pr" -i "$2" -s "$3" \
		${HOST_UA:+-u} "${4:-$URL}/0" -
	# Read-write opens a FIFO without waiting for the reader (Linux).
	exec {fd}<>"$fifo"
	HOST_FD[$name]=$fd
	host_do "$name" read-keys
}

# host_send NAME LINE: sends one line; HOST_N0[NAME] remembers how many answers came before.
declare -A HOST_N0=()
host_send() {
	HOST_N0[$1]=$(grep -c '^end$' "$T_DIR/$1.out")
	printf '%s\n' "$2" >&"${HOST_FD[$1]}"
}

# host_wait NAME: waits (60 s) for the answer to the last line; it is left in $T_DIR/NAME.last.
host_wait() {
	local name=$1 n0=${HOST_N0[$1]} i
	for i in $(seq 1 600); do
		if [ "$(grep -c '^end$' "$T_DIR/$name.out")" -gt "$n0" ]; then
			awk -v n="$n0" '/^end$/ { e++; next } e == n' "$T_DIR/$name.out" >"$T_DIR/$name.last"
			return 0
		fi
		sleep 0.1
	done
	echo "host $name: no answer within 60 s; its output ends:"
	tail -n 5 "$T_DIR/$name.out"
	return 1
}

host_do() { host_send "$1" "$2" && host_wait "$1"; }

# host_expect NAME LINE REGEX: LINE's answer has a line matching REGEX (printed for check).
host_expect() {
	host_do "$1" "$2" || return 1
	cat "$T_DIR/$1.last"
	grep -qE "$3" "$T_DIR/$1.last"
}

# gone PID: true once PID has exited (for t_wait_for).
gone() { ! t_alive "$1"; }

# host_stop NAME: "quit", then the process must log out and end by itself within 15 s, with
# status 0 or 1 (isergw-pr's); t_stop_pid only reaps it then (a signal from it is a failure).
host_stop() {
	local name=$1 pid rc=0
	printf 'quit\n' >&"${HOST_FD[$name]}"
	for pid in "${T_PIDS[@]}"; do
		[ "${T_PID_NAME[$pid]}" = "host-$name" ] || continue
		t_wait_for 15 gone "$pid"
		t_stop_pid "$pid" 1
		if [ "$T_STOP_WAS_DEAD" != 1 ]; then
			echo "host $name did not log out within 15 s (stopped by signal)"
			rc=1
		elif [ "$T_STOP_RC" -gt 1 ]; then
			# 1 is a command that was not good (a conflict the suite asked for); more is
			# no login, or a signal (a crash).
			echo "host $name ended with status $T_STOP_RC after quit"
			rc=1
		fi
	done
	eval "exec ${HOST_FD[$name]}>&-"
	unset "HOST_FD[$name]"
	return "$rc"
}
