# tests/lib/common.sh: sourced (bash) by every integration suite and the benchmark.
#
# It owns what every black-box test needs and must get right once: daemons started in the
# background and always stopped by PID (bounded, SIGTERM then SIGKILL) from an EXIT trap, free
# loopback ports, a per-run temp folder, pass/fail/skip counters with a final line
# "SUITE: N passed, N failed, N skipped", and one way to bring up the target under test so that
# switching between the gateway and tgtd is the single variable TARGET.
#
# Environment:
#   BUILD   build tree holding isergwd and the test tools (build, or build/san for sanitizers)
#   TARGET  isergwd (default) or tgtd
#   T_KEEP  1 keeps the run folder (logs, configs) even when every test passed
#
# Nothing here touches a process it did not start, or an address other than 127.0.0.1.

set -u

T_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in
/*) T_BUILD=$BUILD ;;
*) T_BUILD=$T_ROOT/$BUILD ;;
esac
TARGET=${TARGET:-isergwd}
T_KEEP=${T_KEEP:-0}
T_HOST=127.0.0.1
T_TOOLS=$T_BUILD/tests/tools
# shellcheck source=tests/lib/wait.sh
. "$T_ROOT/tests/lib/wait.sh"

T_SUITE=
T_PASS=0
T_FAIL=0
T_SKIP=0
T_DIR=
T_SHM=
T_ENDED=0
T_PIDS=()
declare -A T_PID_NAME=()
declare -A T_PID_KIND=()
declare -A T_PID_CTL=()
T_PORTS_GIVEN=" "

# Two initiator names every target admits (iscsi-test-cu needs both for its multipath tests).
T_INI1=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test
T_INI2=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2

t_log() {
	printf '%s\n' "$*"
}

pass() {
	T_PASS=$((T_PASS + 1))
	printf '  ok    %s\n' "$1"
}

fail() {
	T_FAIL=$((T_FAIL + 1))
	printf '  FAIL  %s: %s\n' "$1" "${2:-}"
}

# skip NAME REASON: counted as skipped; inside `make test` (ISERGW_MAKE_TEST=1) a failure
# unless "NAME: REASON" matches a line of tests/allowed-skips.txt.
skip() {
	if ! t_skip_allowed "$1: ${2:-}"; then
		fail "$1" "skipped inside make test, and not for a reason in tests/allowed-skips.txt: ${2:-}"
		return
	fi
	T_SKIP=$((T_SKIP + 1))
	printf '  skip  %s: %s\n' "$1" "${2:-}"
}

# t_skip_allowed "NAME: REASON": true outside `make test`, or when an extended regex of
# tests/allowed-skips.txt (comments and blank lines aside) matches it.
t_skip_allowed() {
	[ "${ISERGW_MAKE_TEST:-0}" = 1 ] || return 0
	grep -vE '^(#|[[:space:]]*$)' "$T_ROOT/tests/allowed-skips.txt" 2>/dev/null |
		grep -qE -f - <(printf '%s\n' "$1") 2>/dev/null
}

# check NAME CMD...: runs CMD (output to the run folder) and counts pass/fail on its status.
check() {
	local name=$1
	shift
	local out
	out=$T_DIR/$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.-' '_').out
	if "$@" >"$out" 2>&1; then
		pass "$name"
	else
		local rc=$?
		fail "$name" "exit $rc: $(tail -n 3 "$out" | tr '\n' ' ')"
	fi
}

# t_refused PATTERN CMD...: a negative check that proves the refusal it claims. True only when
# CMD fails AND its output has PATTERN (an extended regex: the sense key and ASC, the login
# status, ...); a dead target, a refused connection or any other failure does not count. The
# output is printed (check keeps it), with a last line saying what was wrong.
#   check "a wrong secret is refused" t_refused 'Authentication failure\(513\)' isergw-verify ...
# Login refusals as libiscsi prints them (isergw-verify, iscsi-*):
T_LOGIN_AUTH='Status: Authentication failure\(513\)'
T_LOGIN_AUTHZ='Status: Authorization failure\(514\)'
T_LOGIN_NOTFOUND='Status: Target not found\(515\)'
T_LOGIN_MUTUAL='Invalid CHAP_R response from the target'
T_SENSE_NO_LUN='ILLEGAL_REQUEST\(5\) ASCQ:LOGICAL_UNIT_NOT_SUPPORTED\(0x2500\)'
# COMPARE AND WRITE through a gateway that is not the shared LU's owner (docs/CLUSTER.md,
# "Atomics"), as isergw-alua caw prints it: NOT READY, TARGET PORT IN STANDBY STATE.
T_SENSE_CAW_NOT_OWNER='CHECK CONDITION sense 02/04/0b'
t_refused() {
	local want=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	if [ "$rc" -eq 0 ]; then
		echo "t_refused: it succeeded; expected a refusal matching /$want/"
		return 1
	fi
	if ! printf '%s\n' "$out" | grep -qE -- "$want"; then
		echo "t_refused: exit $rc, but not the refusal expected (/$want/)"
		return 1
	fi
	return 0
}

# t_begin SUITE: counters, run folder, traps. Call once at the top of a suite.
t_begin() {
	T_SUITE=$1
	T_DIR=$(mktemp -d "/tmp/isergw-$T_SUITE.XXXXXX") || exit 1
	T_SHM=$(mktemp -d "/dev/shm/isergw-$T_SUITE.XXXXXX") || exit 1
	mkdir -p "$T_DIR/san"
	trap t_exit_trap EXIT
	trap 'fail "$T_SUITE" "interrupted"; exit 130' INT TERM HUP
	t_log "$T_SUITE: target $TARGET, build $T_BUILD, logs in $T_DIR"
}

# t_end: stops every daemon (which may record a sanitizer or exit-status failure), prints the
# final line and exits 1 if anything failed.
t_end() {
	t_stop_all
	T_ENDED=1
	t_summary
	if [ "$T_FAIL" -ne 0 ]; then
		exit 1
	fi
	exit 0
}

t_summary() {
	if [ "$T_FAIL" -eq 0 ] && [ "$T_KEEP" != 1 ]; then
		rm -rf "$T_DIR"
	else
		t_log "$T_SUITE: logs kept in $T_DIR"
	fi
	[ -n "$T_SHM" ] && rm -rf "$T_SHM"
	printf '%s: %d passed, %d failed, %d skipped\n' "$T_SUITE" "$T_PASS" "$T_FAIL" "$T_SKIP"
}

t_exit_trap() {
	local rc=$?
	[ "$T_ENDED" = 1 ] && exit "$rc"
	T_ENDED=1
	trap - INT TERM HUP
	if [ "$rc" -ne 0 ] && [ "$T_FAIL" -eq 0 ]; then
		fail "$T_SUITE" "suite exited early with status $rc"
	fi
	t_stop_all
	t_summary
	[ "$T_FAIL" -ne 0 ] && exit 1
	exit "$rc"
}

# t_fault NAME CMD...: a fault injected or undone by CMD (ip, iptables, kill, ...). A non-zero
# exit fails NAME, naming the command and what it printed: the fault did not happen, and the
# step after it would prove nothing. Returns CMD's status. That the fault took effect (the
# process gone, the link down, a counter moved) is the suite's to check as well.
t_fault() {
	local name=$1 rc
	shift
	# In this shell, not a subshell: a kill of this shell's child is then reaped here.
	"$@" >"$T_DIR/fault.out" 2>&1
	rc=$?
	[ "$rc" = 0 ] && return 0
	fail "$name" "'$*' exited $rc: $(tail -n 2 "$T_DIR/fault.out" | tr '\n' ' ')"
	return "$rc"
}

# t_need TOOL...: true when every tool is on PATH or is an executable path.
t_need() {
	local x
	for x in "$@"; do
		if [ -x "$x" ] || command -v "$x" >/dev/null 2>&1; then
			continue
		fi
		return 1
	done
	return 0
}

# ---- ports --------------------------------------------------------------------------------

# t_ns_reap PREFIX...: removes the network namespaces an earlier run of this suite left
# behind when it was killed too hard for its EXIT trap (named PREFIX + that run's PID, $$): each
# one whose PID no longer exists, after killing (-9) the processes still inside it (that run's
# tgtd and gateways, which hold the namespace and their files). A namespace of a run that is
# still going, or whose PID came back as another process, is left alone.
t_ns_reap() {
	local pre ns pid p
	for pre in "$@"; do
		for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
			[[ "$ns" =~ ^${pre}([0-9]+)$ ]] || continue
			pid=${BASH_REMATCH[1]}
			[ -e "/proc/$pid" ] && continue
			for p in $(ip netns pids "$ns" 2>/dev/null); do
				kill -9 "$p" 2>/dev/null
			done
			ip netns del "$ns" 2>/dev/null &&
				t_log "removed network namespace $ns, left by run $pid (gone)"
		done
	done
}

# t_ns_own PREFIX: a network namespace of this run's own, PREFIX followed by the shell's PID, in
# T_NS, its loopback up; the ones a killed earlier run left go first (t_ns_reap). A fixed port
# bound inside it (the demo's 127.0.0.1:3260 and :8080) collides with nothing else on the
# machine. t_stop_all removes it once this run's daemons are stopped. False, T_NS empty, where
# namespaces cannot be made.
T_NS=
T_NS_MADE=()
t_ns_own() {
	t_ns_reap "$1"
	T_NS=$1$$
	if ! ip netns add "$T_NS" 2>/dev/null; then
		T_NS=
		return 1
	fi
	T_NS_MADE+=("$T_NS")
	ip -n "$T_NS" link set lo up
}

# t_ns_port_open NS HOST PORT: t_port_open inside network namespace NS.
t_ns_port_open() {
	timeout -k 5 1 ip netns exec "$1" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null
}

# t_free_port: prints a TCP port no socket uses (any state: a client's local port or a
# TIME_WAIT blocks bind() too) and this run has not handed out yet, below the kernel's
# ephemeral range so that outgoing connections do not take it between the pick and the bind.
t_free_port() {
	local used p i lo=20000 hi eph_lo
	eph_lo=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
	hi=$((${eph_lo:-32768} - 1))
	[ "$hi" -le $((lo + 1000)) ] && lo=$((hi - 5000))
	used=" $(ss -Htan 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' | tr '\n' ' ') "
	# Callers use $(t_free_port), a subshell: remember what was given in a file, not a variable.
	[ -n "$T_DIR" ] && [ -r "$T_DIR/ports.given" ] &&
		T_PORTS_GIVEN=" $(tr '\n' ' ' <"$T_DIR/ports.given") "
	for i in $(seq 1 200); do
		p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo)))
		case "$used$T_PORTS_GIVEN" in
		*" $p "*) continue ;;
		esac
		T_PORTS_GIVEN="$T_PORTS_GIVEN$p "
		[ -n "$T_DIR" ] && echo "$p" >>"$T_DIR/ports.given"
		echo "$p"
		return 0
	done
	return 1
}

# t_port_open HOST PORT: true when a TCP connect succeeds (bounded to 1 s).
t_port_open() {
	timeout -k 5 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# ---- processes ----------------------------------------------------------------------------

# t_alive PID: true while the process exists and has not exited (a zombie has exited).
t_alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	case "$st" in
	Z* | X* | "") return 1 ;;
	esac
	return 0
}

# t_daemon_start NAME KIND LOG CMD...: starts CMD in the background, output to LOG, and
# remembers its PID in T_LAST_PID (not printed: the daemon must stay a child of this shell).
# T_PIN_CPU, when set, pins the daemon (and its threads) to that CPU with taskset.
t_daemon_start() {
	local name=$1 kind=$2 log=$3
	shift 3
	[ -n "${ISERGW_LOOPS:-}" ] && t_conf_loops_args "$@"
	if [ -n "${T_PIN_CPU:-}" ]; then
		set -- taskset -c "$T_PIN_CPU" "$@"
	fi
	"$@" >"$log" 2>&1 &
	T_LAST_PID=$!
	T_PIDS+=("$T_LAST_PID")
	T_PID_NAME[$T_LAST_PID]=$name
	T_PID_KIND[$T_LAST_PID]=$kind
}

# t_conf_loops_args CMD...: with ISERGW_LOOPS set, a command line running isergwd (directly,
# under valgrind or `ip netns exec`) with --config FILE gets `"loops": $ISERGW_LOOPS` written
# into FILE's "gateway" object, unless FILE sets loops itself (tests/lib/conf_loops.py), so
# every suite's gateways run with that many event loops, whoever wrote their configuration.
t_conf_loops_args() {
	local a prev="" gw=0
	for a in "$@"; do
		[ "${a##*/}" = isergwd ] && gw=1
	done
	[ "$gw" = 1 ] || return 0
	for a in "$@"; do
		if [ "$prev" = --config ] && [ -f "$a" ]; then
			python3 "$T_ROOT/tests/lib/conf_loops.py" "$a" "$ISERGW_LOOPS" ||
				t_log "ISERGW_LOOPS: could not give $a \"loops\": $ISERGW_LOOPS"
		fi
		prev=$a
	done
}

# t_wait_port PID PORT [SECONDS]: waits until 127.0.0.1:PORT accepts, while PID lives.
t_wait_port() {
	local pid=$1 port=$2 secs=${3:-10} i=0
	while ! t_port_open "$T_HOST" "$port"; do
		if ! t_alive "$pid"; then
			return 1
		fi
		i=$((i + 1))
		if [ "$i" -gt $((secs * 10)) ]; then
			return 1
		fi
		sleep 0.1
	done
	return 0
}

# t_stop_pid PID [SECONDS]: SIGTERM, bounded wait, then SIGKILL. Sets T_STOP_RC to the exit
# status and T_STOP_KILLED=1 when SIGKILL was needed. Only PIDs this shell started.
t_stop_pid() {
	local pid=$1 secs=${2:-10} i=0
	T_STOP_KILLED=0
	T_STOP_RC=0
	T_STOP_WAS_DEAD=1
	if t_alive "$pid"; then
		T_STOP_WAS_DEAD=0
		kill -TERM "$pid" 2>/dev/null
		while t_alive "$pid" && [ "$i" -lt $((secs * 10)) ]; do
			sleep 0.1
			i=$((i + 1))
		done
		if t_alive "$pid"; then
			T_STOP_KILLED=1
			kill -KILL "$pid" 2>/dev/null
		fi
	fi
	wait "$pid" 2>/dev/null
	T_STOP_RC=$?
	t_forget "$pid"
}

t_forget() {
	local p keep=()
	for p in "${T_PIDS[@]}"; do
		[ "$p" != "$1" ] && keep+=("$p")
	done
	T_PIDS=("${keep[@]}")
	unset "T_PID_NAME[$1]" "T_PID_KIND[$1]" "T_PID_CTL[$1]"
}

# Stops what is left, last started first. Gateways, agents and test harnesses still running
# here must exit as asked (status 0, no SIGKILL, no sanitizer report): a crash or a
# LeakSanitizer report at exit fails the suite instead of vanishing with the process.
t_stop_all() {
	local i pid
	for ((i = ${#T_PIDS[@]} - 1; i >= 0; i--)); do
		pid=${T_PIDS[$i]}
		case "${T_PID_KIND[$pid]:-}" in
		tgtd) tgt_stop "$pid" ;;
		isergwd) gw_stop "$pid" ;;
		agent | harness) t_stop_checked "$pid" ;;
		*) t_stop_pid "$pid" 5 ;;
		esac
	done
	for i in "${T_NS_MADE[@]}"; do
		ip netns del "$i" 2>/dev/null
	done
	T_NS_MADE=()
	t_san_check
}

# t_stop_checked PID [NAME] [SECONDS]: SIGTERM (10 s), then checks what t_stop_pid saw: the
# process was still alive, exited by itself, with status 0. Fails NAME-stop otherwise (silent
# on success, so a suite that restarts a daemon often counts only what goes wrong), and fails
# on any sanitizer report in the run folder. Returns 1 on a failure.
t_stop_checked() {
	local pid=$1 name=${2:-${T_PID_NAME[$1]:-process}} secs=${3:-10} sig="" rc=0
	t_stop_pid "$pid" "$secs"
	[ "$T_STOP_RC" -gt 128 ] && sig=" (signal $((T_STOP_RC - 128)))"
	if [ "$T_STOP_WAS_DEAD" = 1 ]; then
		fail "$name-stop" "$name (pid $pid) had already exited, status $T_STOP_RC$sig"
		rc=1
	elif [ "$T_STOP_KILLED" = 1 ]; then
		fail "$name-stop" "$name (pid $pid) did not exit within $secs s of SIGTERM"
		rc=1
	elif [ "$T_STOP_RC" -ne 0 ]; then
		fail "$name-stop" "$name (pid $pid) exited with status $T_STOP_RC$sig after SIGTERM"
		rc=1
	fi
	t_san_check || rc=1
	return $rc
}

# t_san_check: every sanitizer report file in $T_DIR/san (gateways, agents, harnesses) fails
# the suite once and is printed. Returns 1 when there was one.
t_san_check() {
	local f rc=0
	[ -n "${T_DIR:-}" ] && [ -d "$T_DIR/san" ] || return 0
	for f in "$T_DIR"/san/*; do
		[ -e "$f" ] || continue
		case "$f" in *.seen) continue ;; esac
		fail "sanitizer" "report $f:"
		head -n 40 "$f" | sed 's/^/    /'
		mv "$f" "$f.seen"
		rc=1
	done
	return $rc
}

# t_sigstopped PID: true while the process is stopped by a signal (SIGSTOP: state T).
t_sigstopped() {
	[ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" = T ]
}

# t_cpu_ticks PID: utime+stime of PID in clock ticks (for CPU per I/O).
t_cpu_ticks() {
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }'
}

# ---- tgtd ---------------------------------------------------------------------------------

T_TGT_CTL=
T_TGT_GIVEN=" "
# t_tgt_instance BASE: sets T_TGT_N to a tgtd control instance number (`tgtd -C N`: its unix
# socket and lock file /var/run/tgtd/socket.N[.lock]) in BASE..BASE+999 that no running tgtd
# uses (another run's suites may have tgtds of their own up: a second tgtd on the same number
# exits with "another tgtd is using ...") and that this run has not handed out before.
t_tgt_instance() {
	local base=$1 used n i
	used=" $(pgrep -a tgtd | sed -n 's/.* -C \([0-9]*\).*/\1/p' | tr '\n' ' ')"
	for i in $(seq 1 100); do
		n=$((base + SRANDOM % 1000))
		[[ "$used$T_TGT_GIVEN" == *" $n "* ]] && continue
		T_TGT_GIVEN="$T_TGT_GIVEN$n "
		T_TGT_N=$n
		return 0
	done
	return 1
}

# tgtadm_at CTL ARGS...: tgtadm against the tgtd with control number CTL, bounded (a hung
# tgtd fails the call instead of hanging the suite). tgtadm_c: the one tgt_start started.
tgtadm_at() {
	local ctl=$1
	shift
	timeout -k 5 20 tgtadm -C "$ctl" --lld iscsi "$@"
}

tgtadm_c() {
	tgtadm_at "$T_TGT_CTL" "$@"
}

# tgt_start PORT LOG: tgtd with its own control port, iSCSI portal 127.0.0.1:PORT.
tgt_start() {
	local port=$1 log=$2 ctl
	t_tgt_instance 100 || return 1
	ctl=$T_TGT_N
	T_TGT_CTL=$ctl
	t_daemon_start tgtd tgtd "$log" tgtd -f -C "$ctl" --iscsi "portal=$T_HOST:$port"
	T_PID_CTL[$T_LAST_PID]=$ctl
	T_TGT_PID=$T_LAST_PID
	if ! t_wait_port "$T_TGT_PID" "$port" 10; then
		t_log "tgtd did not open $T_HOST:$port; its log:"
		tail -n 20 "$log"
		tgt_stop "$T_TGT_PID"
		return 1
	fi
	# tgtadm may race the control socket right after start; retry briefly.
	local i
	for i in $(seq 1 20); do
		timeout -k 5 5 tgtadm -C "$ctl" --op show --mode sys >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# tgt_stop PID: tgtd ignores SIGTERM while it has targets: delete them, then the system.
tgt_stop() {
	local pid=$1 ctl=${T_PID_CTL[$1]:-} tid
	if [ -n "$ctl" ] && t_alive "$pid"; then
		for tid in $(timeout -k 5 10 tgtadm -C "$ctl" --lld iscsi --op show --mode target 2>/dev/null |
			sed -n 's/^Target \([0-9]*\):.*/\1/p'); do
			timeout -k 5 10 tgtadm -C "$ctl" --lld iscsi --op delete --force --mode target \
				--tid "$tid" >/dev/null 2>&1
		done
		timeout -k 5 10 tgtadm -C "$ctl" --op delete --mode system >/dev/null 2>&1
	fi
	t_stop_pid "$pid" 10
}

# ---- isergwd ------------------------------------------------------------------------------

# gw_start CONFIG LOG PORT: isergwd on CONFIG, waits for its portal; under sanitizers the
# reports (ASan, UBSan, and ThreadSanitizer's for BUILD=build/tsan) go to $T_DIR/san/ and
# gw_stop fails the suite when one appears.
gw_start() {
	local conf=$1 log=$2 port=$3
	if [ ! -x "$T_BUILD/isergwd" ]; then
		t_log "no gateway binary at $T_BUILD/isergwd"
		return 1
	fi
	ASAN_OPTIONS="log_path=$T_DIR/san/asan:detect_leaks=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		TSAN_OPTIONS="log_path=$T_DIR/san/tsan:halt_on_error=0${TSAN_OPTIONS:+:$TSAN_OPTIONS}" \
		t_daemon_start isergwd isergwd "$log" \
		"$T_BUILD/isergwd" --config "$conf"
	T_GW_PID=$T_LAST_PID
	if ! t_wait_port "$T_GW_PID" "$port" 15; then
		t_log "isergwd did not open $T_HOST:$port; its log:"
		tail -n 30 "$log"
		# The caller reports the failed start; reap it here so it is not reported twice.
		t_stop_pid "$T_GW_PID" 5
		return 1
	fi
	return 0
}

# gw_stop PID: SIGTERM must give a clean exit 0 within 10 s and no sanitizer report.
# T_STOP_QUIET=1 counts only failed stops (suites that restart the gateway many times).
gw_stop() {
	local pid=$1 sig=""
	t_stop_pid "$pid" 10
	[ "$T_STOP_RC" -gt 128 ] && sig=" (signal $((T_STOP_RC - 128)))"
	if [ "$T_STOP_WAS_DEAD" = 1 ]; then
		fail "gateway-stop" "isergwd (pid $pid) had already exited, status $T_STOP_RC$sig"
	elif [ "$T_STOP_KILLED" = 1 ]; then
		fail "gateway-stop" "isergwd (pid $pid) did not exit within 10 s of SIGTERM"
	elif [ "$T_STOP_RC" -ne 0 ]; then
		fail "gateway-stop" "isergwd (pid $pid) exited with status $T_STOP_RC$sig after SIGTERM"
	elif [ "${T_STOP_QUIET:-0}" != 1 ]; then
		pass "gateway-stop"
	fi
	t_san_check
}

# ---- the target under test ----------------------------------------------------------------
#
# Describe it with these variables, then call target_start; it sets T_PORT, T_LUN, T_URL
# (iscsi://127.0.0.1:PORT/IQN/LUN), T_PORTAL (127.0.0.1:PORT) and T_TARGET_PID.
#   TG_IQN         target name
#   TG_SIZE        LUN size for truncate(1) and the gateway (e.g. 1G)
#   TG_BACKING     backing file (created sparse in /dev/shm when missing)
#   TG_INITIATORS  space-separated admitted initiator names; empty admits any initiator
#   TG_CHAP_USER TG_CHAP_SECRET TG_MUTUAL_USER TG_MUTUAL_SECRET   target CHAP (empty: none)
#   TG_THIN        1 reports the LUN thin-provisioned (UNMAP, GET LBA STATUS)
#   TG_BS          gateway backstore type: file (default) or ram
#   TG_GATEWAY     members of the gateway's "gateway" object (JSON), e.g. "data_memory": "64M"
#   ISERGW_LOOPS   (environment) gateway.loops for every gateway target_start starts, so a
#                  suite runs with several event loops: ISERGW_LOOPS=2 tests/integration/run.sh X;
#                  gateways started on a configuration of their own get it too, unless that
#                  configuration sets loops (t_daemon_start, t_conf_loops_args)
tg_defaults() {
	TG_IQN=iqn.2026-11.org.isergw:${T_SUITE:-test}
	TG_SIZE=1G
	TG_BACKING=$T_SHM/lun0.img
	TG_INITIATORS=
	TG_CHAP_USER=
	TG_CHAP_SECRET=
	TG_MUTUAL_USER=
	TG_MUTUAL_SECRET=
	TG_THIN=1
	TG_BS=file
	TG_GATEWAY=
}

# to_bytes 1G -> 1073741824
to_bytes() {
	numfmt --from=iec "$1"
}

gw_write_config() {
	local conf=$1 port=$2 ini_json="" n first=1 allow=true chap
	if [ -n "$TG_INITIATORS" ]; then
		allow=false
		for n in $TG_INITIATORS; do
			[ $first = 1 ] || ini_json="$ini_json, "
			first=0
			ini_json="$ini_json{ \"name\": \"$n\" }"
		done
	fi
	chap="{ \"user\": \"$TG_CHAP_USER\", \"secret\": \"$TG_CHAP_SECRET\","
	chap="$chap \"mutual_user\": \"$TG_MUTUAL_USER\", \"mutual_secret\": \"$TG_MUTUAL_SECRET\" }"
	local bs
	if [ "$TG_BS" = ram ]; then
		bs="{ \"type\": \"ram\", \"size\": \"$TG_SIZE\", \"block_size\": 512 }"
	else
		bs="{ \"type\": \"file\", \"path\": \"$TG_BACKING\", \"size\": \"$TG_SIZE\", \"block_size\": 512 }"
	fi
	local gwobj=${TG_GATEWAY:-}
	if [ -n "${ISERGW_LOOPS:-}" ]; then
		gwobj="\"loops\": $ISERGW_LOOPS${gwobj:+, $gwobj}"
	fi
	cat >"$conf" <<EOF
{
  "gateway": { $gwobj },
  "portals": [
    { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $port }
  ],
  "targets": [
    {
      "name": "$TG_IQN",
      "alias": "$T_SUITE",
      "tpgt": 1,
      "portals": ["tcp0"],
      "allow_any_initiator": $allow,
      "initiators": [ $ini_json ],
      "chap": $chap,
      "params": {
        "HeaderDigest": "CRC32C,None", "DataDigest": "CRC32C,None",
        "MaxRecvDataSegmentLength": 262144, "MaxBurstLength": 1048576,
        "FirstBurstLength": 65536, "InitialR2T": false, "ImmediateData": true
      },
      "luns": [
        { "lun": 0, "vendor": "ISERGW", "product": "test", "write_cache": true,
          "thin": $([ "$TG_THIN" = 1 ] && echo true || echo false),
          "backstore": $bs }
      ]
    }
  ]
}
EOF
}

tgt_setup_target() {
	local tid=1 n
	tgtadm_c --op new --mode target --tid $tid -T "$TG_IQN" || return 1
	tgtadm_c --op new --mode logicalunit --tid $tid --lun 1 -b "$TG_BACKING" || return 1
	if [ "$TG_THIN" = 1 ]; then
		tgtadm_c --op update --mode logicalunit --tid $tid --lun 1 \
			--params thin_provisioning=1 || return 1
	fi
	# The same negotiation limits the gateway's configuration offers.
	local kv
	for kv in HeaderDigest=CRC32C,None DataDigest=CRC32C,None \
		MaxRecvDataSegmentLength=262144 MaxXmitDataSegmentLength=262144 \
		MaxBurstLength=1048576 FirstBurstLength=65536 InitialR2T=No ImmediateData=Yes; do
		tgtadm_c --op update --mode target --tid $tid -n "${kv%%=*}" -v "${kv#*=}" || return 1
	done
	if [ -z "$TG_INITIATORS" ]; then
		tgtadm_c --op bind --mode target --tid $tid -I ALL || return 1
	else
		for n in $TG_INITIATORS; do
			tgtadm_c --op bind --mode target --tid $tid --initiator-name "$n" || return 1
		done
	fi
	if [ -n "$TG_CHAP_USER" ]; then
		tgtadm_c --op new --mode account --user "$TG_CHAP_USER" \
			--password "$TG_CHAP_SECRET" || return 1
		tgtadm_c --op bind --mode account --tid $tid --user "$TG_CHAP_USER" || return 1
	fi
	if [ -n "$TG_MUTUAL_USER" ]; then
		tgtadm_c --op new --mode account --user "$TG_MUTUAL_USER" \
			--password "$TG_MUTUAL_SECRET" || return 1
		tgtadm_c --op bind --mode account --tid $tid --user "$TG_MUTUAL_USER" \
			--outgoing || return 1
	fi
	return 0
}

# target_start [NAME]: brings up TARGET as described by the TG_* variables. A port taken between
# the pick and the bind (another program on this machine) gets a second and third pick.
target_start() {
	local name=${1:-target} attempt
	for attempt in 1 2 3; do
		target_start_once "$name" && return 0
		grep -qi 'in use' "$T_DIR/$name".*.log 2>/dev/null || return 1
		t_log "port $T_PORT was taken meanwhile; trying another"
	done
	return 1
}

target_start_once() {
	local name=$1
	T_PORT=$(t_free_port) || return 1
	T_PORTAL=$T_HOST:$T_PORT
	if [ "$TG_BS" != ram ] && [ ! -e "$TG_BACKING" ]; then
		truncate -s "$(to_bytes "$TG_SIZE")" "$TG_BACKING" || return 1
	fi
	case "$TARGET" in
	tgtd)
		tgt_start "$T_PORT" "$T_DIR/$name.tgtd.log" || return 1
		T_TARGET_PID=$T_TGT_PID
		if ! tgt_setup_target >"$T_DIR/$name.tgtadm.log" 2>&1; then
			t_log "tgtadm failed:"
			tail -n 5 "$T_DIR/$name.tgtadm.log"
			return 1
		fi
		T_LUN=1
		;;
	isergwd)
		gw_write_config "$T_DIR/$name.json" "$T_PORT"
		gw_start "$T_DIR/$name.json" "$T_DIR/$name.isergwd.log" "$T_PORT" || return 1
		T_TARGET_PID=$T_GW_PID
		T_LUN=0
		;;
	*)
		t_log "unknown TARGET=$TARGET (isergwd or tgtd)"
		return 1
		;;
	esac
	T_URL=iscsi://$T_PORTAL/$TG_IQN/$T_LUN
	return 0
}

# target_stop: stops the target started by target_start (the gateway's stop is checked).
target_stop() {
	[ -n "${T_TARGET_PID:-}" ] || return 0
	case "$TARGET" in
	tgtd) tgt_stop "$T_TARGET_PID" ;;
	isergwd) gw_stop "$T_TARGET_PID" ;;
	esac
	T_TARGET_PID=
}

# gw_ctl SOCKET JSON: one request on the gateway's control socket (docs/CONTROL.md); prints the
# reply line. Exit 1 when the socket does not answer within 5 s.
gw_ctl() {
	python3 "$T_ROOT/tests/lib/gw_ctl.py" "$1" "$2"
}
