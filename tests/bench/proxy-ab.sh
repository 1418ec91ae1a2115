#!/bin/bash
# Two gateway builds side by side on the proxy path, in one run: what a change to the remote
# backstore is worth, as ratios (this machine is shared and its absolute figures move by 2x
# between runs). The setup of tests/bench/mpath.sh's proxy rows:
#
#   ns GW: isergw-bench, gateway A (127.0.0.1:3260), gateway B (127.0.0.1:3261)
#          --veth--> ns BE: tgtd on 10.214.1.2 serving a 512 MiB tmpfs file
#
# Each gateway exports two targets: $GW_IQN with LUN 0 remote (one path to that tgtd, the
# defaults), and $GW_IQN-local with LUN 0 a file LUN on the same tmpfs file. Two targets, not two
# LUNs of one: with one loop per CPU the two LUNs are owned by different loops, and the session
# to a target holding both sits on one of them and crosses to the other on every command of the
# other LUN (docs/PERFORMANCE.md, "Loop crossings on the proxy path"). BENCH_AB_ONE_TARGET_A=1
# (or _B) exports both as LUN 0 and LUN 1 of one target in that gateway, as before. For every
# row and run the client measures, in an order rotated from run to run: tgtd directly, A
# proxied, B proxied, and (BENCH_AB_LOCAL=1) A and B local.
# Per side: IOPS, MiB/s, the gateway's CPU per I/O (isergwd utime+stime over the run from
# /proc/PID/stat, divided by the I/Os), and the machine's CPU per I/O (every CPU's busy time
# from /proc/stat, whatever ran there: client, tgtd, gateways, the kernel's TCP) with the
# machine's busy share over the run. Printed: the medians, B/A for IOPS and CPU per I/O, and
# each side against direct.
#
# Environment: BUILD_A, BUILD_B (build trees holding isergwd; B defaults to $BUILD), BUILD (the
# client tools), BENCH_SECS [5], BENCH_RUNS [3], BENCH_AB_ROWS (a subset of the rows below
# [all]), BENCH_AB_LOCAL [1], BENCH_AB_OUT [$BUILD/bench-proxy-ab.md],
# BENCH_AB_ENV_A, BENCH_AB_ENV_B (VAR=value ... in the environment of gateway A or B),
# BENCH_AB_ENGINE_A, BENCH_AB_ENGINE_B (the remote LUN's "engine": libiscsi [default] or native;
# one build with BENCH_AB_ENGINE_B=native compares the two initiators), BENCH_AB_LOOPS_A,
# BENCH_AB_LOOPS_B (that gateway's "loops" [unset: the default, one per CPU]), BENCH_AB_POLL_A,
# BENCH_AB_POLL_B (that gateway's "poll_us" [unset: the default, 20]),
# BENCH_AB_ONE_TARGET_A, BENCH_AB_ONE_TARGET_B [0] (1: the remote and the file LUN in one target
# of that gateway), BENCH_AB_STRACE [1 when strace is installed: after the timed runs, one more
# run per row and proxied side under `strace -c -f` of that gateway, for its system calls per
# I/O; slowed, so not timed], BENCH_AB_PHASES [0] (1: after the rows, a QD 1 512 KiB read per
# side D, A, B under tcpdump, cut into where its time goes by tests/bench/proxy-phases.awk),
# BENCH_AB_HOLD=FILE (after the runs, everything stays up until FILE is removed: for perf and
# strace by hand; BENCH_AB_ROWS=none skips the runs).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/bench.sh"
. "$(dirname "$0")/../lib/mpath.sh"

BENCH_SECS=${BENCH_SECS:-5}
BENCH_RUNS=${BENCH_RUNS:-3}
LOCAL=${BENCH_AB_LOCAL:-1}
OUT=${BENCH_AB_OUT:-$T_BUILD/bench-proxy-ab.md}
BENCH=$T_TOOLS/isergw-bench
GWD_A=${BUILD_A:-}/isergwd
GWD_B=${BUILD_B:-$T_BUILD}/isergwd
CLK_TCK=$(getconf CLK_TCK)
LOAD0=$(cut -d ' ' -f 1-3 /proc/loadavg)
TARGET=isergwd

t_begin bench-proxy-ab
SFX=$$
NS_GW=abgw$SFX NS_B=abbe$SFX
IQN_B=iqn.2026-11.org.isergw:ab-be
GW_IQN=iqn.2026-11.org.isergw:ab-gw
URL_D=iscsi://10.214.1.2:3260/$IQN_B/1
trap 'ab_rc=$?; t_stop_all; mp_cleanup_ns; ( exit $ab_rc ); t_exit_trap' EXIT

if [ "$(id -u)" != 0 ] || ! t_need ip tgtd tgtadm; then
	skip bench-proxy-ab "needs root, ip and tgt"
	t_end
fi
if [ -z "${BUILD_A:-}" ] || [ ! -x "$GWD_A" ] || [ ! -x "$GWD_B" ] || [ ! -x "$BENCH" ]; then
	fail build "set BUILD_A and BUILD_B to build trees with isergwd ($GWD_A, $GWD_B; $BENCH)"
	t_end
fi
mp_ns_pair bench-proxy-ab gA1 10.214.1.1 bA1 10.214.1.2
dd if=/dev/urandom of="$T_SHM/be.img" bs=4M count=128 status=none
mp_tgtd b1 "$NS_B" "$IQN_B" "$T_SHM/be.img" ab-be 10.214.1.2:3260 || fail tgtd setup

# gw_start A|B PORT BINARY: sets PID_A / PID_B.
declare -A GPID=()
gw_start() {
	local which=$1 port=$2 bin=$3 conf=$T_DIR/gw-$1.json log=$T_DIR/gw-$1.log i
	local enginev=BENCH_AB_ENGINE_$which engine loopsv=BENCH_AB_LOOPS_$which gwobj= gwkeys=
	local onev=BENCH_AB_ONE_TARGET_$which pollv=BENCH_AB_POLL_$which
	engine=${!enginev:-libiscsi}
	[ -n "${!loopsv:-}" ] && gwkeys="\"loops\": ${!loopsv}"
	[ -n "${!pollv:-}" ] && gwkeys="${gwkeys:+$gwkeys, }\"poll_us\": ${!pollv}"
	[ -n "$gwkeys" ] && gwobj="\"gateway\": { $gwkeys },"
	local file='{ "lun": LUN, "backstore": { "type": "file", "path": "'$T_SHM/be.img'",
        "size": "512M", "block_size": 512 } }' lun1='' tgt2=''
	if [ "${!onev:-0}" = 1 ]; then
		lun1=",
      ${file/LUN/1}"
	else
		tgt2=",
    { \"name\": \"$GW_IQN-local\", \"portals\": [\"tcp0\"], \"allow_any_initiator\": true,
      \"luns\": [ ${file/LUN/0} ] }"
	fi
	cat >"$conf" <<EOF
{ $gwobj
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "127.0.0.1", "port": $port } ],
  "targets": [ { "name": "$GW_IQN", "portals": ["tcp0"], "allow_any_initiator": true,
    "luns": [
      { "lun": 0, "backstore": { "type": "remote", "block_size": 512, "engine": "$engine",
        "paths": [ { "url": "$URL_D" } ] } }$lun1 ] }$tgt2 ] }
EOF
	local envv=BENCH_AB_ENV_$which
	# shellcheck disable=SC2086
	t_daemon_start "isergwd-$which" isergwd "$log" env ${!envv:-} ip netns exec "$NS_GW" "$bin" \
		--config "$conf"
	GPID[$which]=$T_LAST_PID
	for i in $(seq 1 400); do
		grep -q 'main: ready' "$log" 2>/dev/null && return 0
		t_alive "${GPID[$which]}" || break
		sleep 0.025
	done
	fail "gateway $which" "not ready: $(tail -n 3 "$log" | tr '\n' ' ')"
	return 1
}
gw_start A 3260 "$GWD_A" || t_end
gw_start B 3261 "$GWD_B" || t_end
t_log "bench-proxy-ab: A = $GWD_A (pid ${GPID[A]}), B = $GWD_B (pid ${GPID[B]})"

STRACE=${BENCH_AB_STRACE:-$(command -v strace >/dev/null && echo 1 || echo 0)}
# syscalls SIDE ARGS: one run against SIDE under strace -c -f of its gateway; prints the gateway's
# system calls per I/O.
syscalls() {
	local side=$1 args=$2 pid line out=$T_DIR/strace-$1.txt spid total
	case $side in ?A) pid=${GPID[A]} ;; *) pid=${GPID[B]} ;; esac
	rm -f "$out"
	strace -c -f -q -o "$out" -p "$pid" 2>/dev/null &
	spid=$!
	sleep 1
	# shellcheck disable=SC2086
	line=$(timeout -k 5 $((BENCH_SECS + 60)) ip netns exec "$NS_GW" "$BENCH" \
		${args//,/ } -t "$BENCH_SECS" "${URL[$side]}" </dev/null 2>&1 | grep '^bench:' | tail -n 1)
	kill -INT "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	# The total line: % time, seconds, usecs/call, calls, [errors,] "total".
	total=$(awk '$NF == "total" { print $4 }' "$out" 2>/dev/null)
	awk -v t="${total:-0}" -v n="$(bench_field ios "$line")" 'BEGIN { if (n > 0 && t > 0)
		printf "%.2f\n", t / n; else print "-" }'
}

SIDES="D GA GB"
[ "$LOCAL" = 1 ] && SIDES="$SIDES LA LB"
declare -A URL=([D]=$URL_D [GA]=iscsi://127.0.0.1:3260/$GW_IQN/0
	[GB]=iscsi://127.0.0.1:3261/$GW_IQN/0 [LA]=iscsi://127.0.0.1:3260/$GW_IQN-local/0
	[LB]=iscsi://127.0.0.1:3261/$GW_IQN-local/0)
[ "${BENCH_AB_ONE_TARGET_A:-0}" = 1 ] && URL[LA]=iscsi://127.0.0.1:3260/$GW_IQN/1
[ "${BENCH_AB_ONE_TARGET_B:-0}" = 1 ] && URL[LB]=iscsi://127.0.0.1:3261/$GW_IQN/1
ROWS="
randread-4k-qd32 -q,32,-b,4096 iops
seqread-512k-qd8 -q,8,-b,524288,-s mibps
randwrite-4k-qd32 -q,32,-b,4096,-w iops
seqwrite-512k-qd8 -q,8,-b,524288,-s,-w mibps
"
TABLE=$T_DIR/ab.md
{
	printf '| workload | metric | direct | A proxied | B proxied | B/A | A/direct | B/direct |'
	printf ' A CPU µs/IO | B CPU µs/IO | B/A CPU |'
	printf ' machine CPU µs/IO: direct | A | B | machine busy: direct | A | B |'
	[ "$LOCAL" = 1 ] && printf ' A local | B local | A local CPU µs/IO | B local CPU µs/IO |'
	[ "$STRACE" = 1 ] && printf ' A syscalls/IO | B syscalls/IO |'
	echo
	printf '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'
	printf ' ---: | ---: | ---: | ---: | ---: | ---: |'
	[ "$LOCAL" = 1 ] && printf ' ---: | ---: | ---: | ---: |'
	[ "$STRACE" = 1 ] && printf ' ---: | ---: |'
	echo
} >"$TABLE"
while read -r name args metric; do
	[ -n "$name" ] || continue
	[ -z "${BENCH_AB_ROWS:-}" ] || [[ " $BENCH_AB_ROWS " == *" $name "* ]] || continue
	declare -A V=() C=() MU=() MB=()
	for run in $(seq 1 "$BENCH_RUNS"); do
		# Rotate the order by one side per run.
		read -ra s <<<"$SIDES"
		n=${#s[@]}
		for k in $(seq 0 $((n - 1))); do
			side=${s[$(((k + run - 1) % n))]}
			pid=
			case $side in ?A) pid=${GPID[A]} ;; ?B) pid=${GPID[B]} ;; esac
			c0=$([ -n "$pid" ] && t_cpu_ticks "$pid")
			read -r m0 a0 < <(bench_machine_ticks)
			# shellcheck disable=SC2086
			line=$(timeout -k 5 $((BENCH_SECS + 60)) ip netns exec "$NS_GW" "$BENCH" \
				${args//,/ } -t "$BENCH_SECS" "${URL[$side]}" </dev/null 2>&1 | grep '^bench:' | tail -n 1)
			c1=$([ -n "$pid" ] && t_cpu_ticks "$pid")
			read -r m1 a1 < <(bench_machine_ticks)
			echo "$run $side $line" >>"$T_DIR/ab-$name.out"
			v=$(bench_field "$metric" "$line")
			if [ -z "$v" ] || [ "$(bench_field errors "$line")" != 0 ]; then
				fail "$name $side run $run" "${line:-no result}"
				continue
			fi
			V[$side]="${V[$side]:-} $v"
			MU[$side]="${MU[$side]:-} $(awk -v a="$m0" -v b="$m1" -v n="$(bench_field ios "$line")" \
				-v hz="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / hz * 1e6 / n }')"
			MB[$side]="${MB[$side]:-} $(awk -v b="$((m1 - m0))" -v t="$((a1 - a0))" \
				'BEGIN { printf "%.0f", (t > 0 ? 100 * b / t : 0) }')"
			if [ -n "$pid" ]; then
				C[$side]="${C[$side]:-} $(awk -v a="$c0" -v b="$c1" -v n="$(bench_field ios "$line")" \
					-v hz="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / hz * 1e6 / n }')"
			fi
		done
	done
	declare -A M=() MC=() MMU=() MMB=()
	for side in $SIDES; do
		# shellcheck disable=SC2086
		M[$side]=$(bench_median %.1f ${V[$side]:-})
		# shellcheck disable=SC2086
		MC[$side]=$(bench_median %.1f ${C[$side]:-})
		# shellcheck disable=SC2086
		MMU[$side]=$(bench_median %.1f ${MU[$side]:-})
		# shellcheck disable=SC2086
		MMB[$side]=$(bench_median %.1f ${MB[$side]:-})
	done
	line="| $name | $metric | ${M[D]} | ${M[GA]} | ${M[GB]} | $(bench_ratio "${M[GB]}" "${M[GA]}") |"
	line="$line $(bench_ratio "${M[GA]}" "${M[D]}") | $(bench_ratio "${M[GB]}" "${M[D]}") |"
	line="$line ${MC[GA]} | ${MC[GB]} | $(bench_ratio "${MC[GB]}" "${MC[GA]}") |"
	line="$line ${MMU[D]} | ${MMU[GA]} | ${MMU[GB]} | ${MMB[D]}% | ${MMB[GA]}% | ${MMB[GB]}% |"
	[ "$LOCAL" = 1 ] && line="$line ${M[LA]} | ${M[LB]} | ${MC[LA]} | ${MC[LB]} |"
	[ "$STRACE" = 1 ] && line="$line $(syscalls GA "$args") | $(syscalls GB "$args") |"
	echo "$line" >>"$TABLE"
	pass "$name: B/A $metric $(bench_ratio "${M[GB]}" "${M[GA]}"), CPU per I/O B/A $(bench_ratio "${MC[GB]}" "${MC[GA]}")"
	unset V C M MC MU MB MMU MMB
done <<<"$ROWS"

# Phases of a QD 1 512 KiB read per side (BENCH_AB_PHASES=1): a packet capture in the client's
# namespace during a short run, cut into the gaps and transfers of tests/bench/proxy-phases.awk.
PHASES=$T_DIR/phases.md
if [ "${BENCH_AB_PHASES:-0}" = 1 ] && t_need tcpdump; then
	declare -A GWADDR=([D]="" [GA]=127.0.0.1.3260 [GB]=127.0.0.1.3261)
	echo "| side | QD 1 512 KiB read: medians in µs |" >"$PHASES"
	echo "| --- | --- |" >>"$PHASES"
	for side in D GA GB; do
		cap=$T_DIR/phases-$side.pcap
		ip netns exec "$NS_GW" timeout -s INT 5 tcpdump -i any -nn -s 96 -w "$cap" \
			"tcp port 3260 or tcp port 3261" >"$T_DIR/tcpdump-$side.log" 2>&1 &
		tpid=$!
		sleep 1
		line=$(timeout -k 5 60 ip netns exec "$NS_GW" "$BENCH" -q 1 -b 524288 -s -t 2 \
			"${URL[$side]}" </dev/null 2>&1 | grep '^bench:' | tail -n 1)
		wait "$tpid"
		ph=$(tcpdump -r "$cap" -nn -tt 2>/dev/null | awk -v be=10.214.1.2.3260 \
			-v gw="${GWADDR[$side]}" -f "$T_ROOT/tests/bench/proxy-phases.awk")
		echo "| $side | $ph lat_us=$(bench_field lat_us "$line") |" >>"$PHASES"
		pass "phases $side: $ph"
	done
fi

if [ -n "${BENCH_AB_HOLD:-}" ]; then
	touch "$BENCH_AB_HOLD"
	t_log "bench-proxy-ab: holding until $BENCH_AB_HOLD is removed; gateways A ${GPID[A]}," \
		"B ${GPID[B]}; client: ip netns exec $NS_GW $BENCH ARGS ${URL[GB]}"
	while [ -e "$BENCH_AB_HOLD" ]; do sleep 1; done
fi

mkdir -p "$(dirname "$OUT")"
{
	echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) CPUs, kernel $(uname -r), no pinning;" \
		"load average $LOAD0 at the start, $(cut -d ' ' -f 1-3 /proc/loadavg) at the end."
	echo "Remote LUN engine: A ${BENCH_AB_ENGINE_A:-libiscsi}, B ${BENCH_AB_ENGINE_B:-libiscsi}."
	echo "A: ${BENCH_AB_ENV_A:-}${BENCH_AB_ENV_A:+ }$GWD_A; B: ${BENCH_AB_ENV_B:-}${BENCH_AB_ENV_B:+ }$GWD_B. $BENCH_RUNS runs of $BENCH_SECS s per side, rotating order, medians."
	extra=
	for v in BENCH_AB_LOOPS_A BENCH_AB_LOOPS_B BENCH_AB_POLL_A BENCH_AB_POLL_B \
		BENCH_AB_ONE_TARGET_A BENCH_AB_ONE_TARGET_B; do
		[ -n "${!v:-}" ] && extra="$extra$v=${!v} "
	done
	echo "Command: BUILD_A=${BUILD_A} BUILD_B=${BUILD_B:-$T_BUILD} BENCH_SECS=$BENCH_SECS" \
		"BENCH_AB_ENGINE_A=${BENCH_AB_ENGINE_A:-libiscsi} BENCH_AB_ENGINE_B=${BENCH_AB_ENGINE_B:-libiscsi}" \
		"${extra}BENCH_RUNS=$BENCH_RUNS tests/bench/proxy-ab.sh"
	echo
	cat "$TABLE"
	[ -s "$PHASES" ] && echo && cat "$PHASES"
} >"$OUT"
t_log ""
cat "$OUT"
t_end
