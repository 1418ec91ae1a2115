#!/bin/bash
# `make bench`: the gateway and tgtd side by side in one run, on the same RAM-backed LUN.
#
# Both targets export one file in /dev/shm (1 GiB, filled with random data so reads touch real
# pages): tgtd as its rdwr backing store, the gateway with its `file` backstore on the same
# file. Each target is pinned to CPU 0 and every client to CPU 1 (taskset), so the two never
# share a CPU, and "target CPU per I/O" is the daemon's utime+stime delta (/proc/PID/stat, all
# threads) over the I/Os of the run. Every row runs twice per target, alternating which target
# goes first, and reports the median (with two runs: the mean).
#
# Reads use iscsi-perf (READ16, offsets not aligned to 4 KiB; its "MB/s" is MiB/s); writes use
# tests/tools/isergw-bench (WRITE16, aligned), as iscsi-perf cannot write.
#
# Environment:
#   BUILD         build tree (isergwd, tests/tools/isergw-bench)
#   BENCH_A BENCH_B   the two targets compared [isergwd tgtd]; BENCH_A=tgtd gives a tgt-vs-tgt
#                 dry run that shows the noise between two identical targets
#   BENCH_SECS    seconds per run [10]
#   BENCH_RUNS    runs per row and target [2]
#   BENCH_ROWS    space-separated subset of the row names below [all]
#   BENCH_PIN     0 disables CPU pinning
#   BENCH_OUT     Markdown output [$BUILD/bench.md]
#   BENCH_LOOPS   0 leaves out the loop rows (loops: 1 against loops: 2, tests/bench/loops.sh;
#                 BENCH_LOOPS_RUNS [5] runs of them)
#   BENCH_VM      0 leaves out the iSER rows, the bond failover stall and the cluster failover
#                 stall measured in the VM rig (tests/bench/vm-iser.sh, tests/bench/vm-failover.sh,
#                 tests/bench/vm-cluster.sh)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/bench.sh"

BENCH_A=${BENCH_A:-isergwd}
BENCH_B=${BENCH_B:-tgtd}
BENCH_SECS=${BENCH_SECS:-10}
BENCH_RUNS=${BENCH_RUNS:-2}
BENCH_PIN=${BENCH_PIN:-1}
BENCH_OUT=${BENCH_OUT:-$T_BUILD/bench.md}
BENCH=$T_TOOLS/isergw-bench
CLK_TCK=$(getconf CLK_TCK)

# name tool op pattern block-bytes qd
ROWS="
randread-4k-qd1 perf read rand 4096 1
randread-4k-qd32 perf read rand 4096 32
randread-4k-qd128 perf read rand 4096 128
seqread-512k-qd8 perf read seq 524288 8
seqread-512k-qd32 perf read seq 524288 32
randwrite-4k-qd1 bench write rand 4096 1
randwrite-4k-qd32 bench write rand 4096 32
seqwrite-512k-qd8 bench write seq 524288 8
"
BENCH_ROWS=${BENCH_ROWS:-$(echo "$ROWS" | awk 'NF { printf "%s ", $1 }')}

TARGET="$BENCH_A+$BENCH_B"
t_begin bench
if ! t_need iscsi-perf taskset; then
	skip bench "iscsi-perf or taskset missing"
	t_end
fi
if [ ! -x "$BENCH" ]; then
	fail build "$BENCH is missing (make $BUILD/tests/tools/isergw-bench)"
	t_end
fi
NCPU=$(nproc)
if [ "$BENCH_PIN" = 1 ] && [ "$NCPU" -ge 2 ]; then
	T_PIN_CPU=0
	CLIENT=(taskset -c 1)
	PIN_NOTE="target pinned to CPU 0, client to CPU 1 (never the same CPU)"
else
	T_PIN_CPU=
	CLIENT=()
	PIN_NOTE="no CPU pinning: target and client may share a CPU"
fi

LUN_FILE=$T_SHM/bench.img
t_log "bench: filling a 1 GiB LUN file in /dev/shm with random data"
if ! dd if=/dev/urandom of="$LUN_FILE" bs=4M count=256 status=none; then
	fail lun "cannot create $LUN_FILE"
	t_end
fi

# Start both targets once, on the same file, each on its own port.
declare -A URL=() PID=() LABEL=()
start_one() {
	local which=$1 kind=$2
	TARGET=$kind
	tg_defaults
	TG_IQN=iqn.2026-11.org.isergw:bench-$(echo "$which" | tr A-Z a-z)
	TG_BACKING=$LUN_FILE
	TG_THIN=0
	if target_start "bench-$which"; then
		URL[$which]=$T_URL
		PID[$which]=$T_TARGET_PID
		return 0
	fi
	fail "start $kind" "$kind did not start (see $T_DIR)"
	return 1
}
LABEL[A]=$BENCH_A
LABEL[B]=$BENCH_B
[ "$BENCH_A" = "$BENCH_B" ] && LABEL[A]="$BENCH_A#1" && LABEL[B]="$BENCH_B#2"
t_log "bench: ${LABEL[A]} against ${LABEL[B]}, $BENCH_RUNS x ${BENCH_SECS}s per row and target"
start_one A "$BENCH_A"
start_one B "$BENCH_B"
T_PIN_CPU=

# one_run WHICH TOOL OP PATTERN BS QD: prints "iops mibps cpu_us_per_io", or "-" on failure.
one_run() {
	local which=$1 tool=$2 op=$3 pat=$4 bs=$5 qd=$6 url out c0 c1 t0 t1 iops ios
	url=${URL[$which]}
	out=$T_DIR/run.$which.$tool.$op.$pat.$bs.$qd.$RANDOM.out
	c0=$(t_cpu_ticks "${PID[$which]}")
	t0=$(date +%s.%N)
	if [ "$tool" = perf ]; then
		local args=(-t "$BENCH_SECS" -m "$qd" -b $((bs / 512)))
		[ "$pat" = rand ] && args+=(-r)
		timeout -k 5 $((BENCH_SECS + 30)) "${CLIENT[@]}" iscsi-perf "${args[@]}" "$url" \
			>"$out" 2>&1
		local rc=$?
		iops=$(tr '\r' '\n' <"$out" | sed -n 's/.*iops average \([0-9]*\) .*/\1/p' | tail -n 1)
		if [ $rc -ne 0 ] || ! grep -q '^finished' "$out"; then
			iops=
		fi
	else
		local args=(-t "$BENCH_SECS" -q "$qd" -b "$bs")
		[ "$op" = write ] && args+=(-w)
		[ "$pat" = seq ] && args+=(-s)
		timeout -k 5 $((BENCH_SECS + 40)) "${CLIENT[@]}" "$BENCH" "${args[@]}" "$url" >"$out" 2>&1 ||
			true
		iops=$(sed -n 's/^bench: .* iops=\([0-9]*\) .* errors=0\( .*\)\{0,1\}$/\1/p' "$out")
	fi
	t1=$(date +%s.%N)
	c1=$(t_cpu_ticks "${PID[$which]}")
	if [ -z "$iops" ] || [ -z "$c0" ] || [ -z "$c1" ]; then
		echo "- - -"
		echo "bench: $which $tool $op $pat $bs $qd failed: $(tail -n 2 "$out" | tr '\r\n' '  ')" >&2
		return
	fi
	awk -v iops="$iops" -v bs="$bs" -v c0="$c0" -v c1="$c1" -v hz="$CLK_TCK" -v t0="$t0" \
		-v t1="$t1" 'BEGIN {
		ios = iops * (t1 - t0)
		cpu = ios > 0 ? (c1 - c0) / hz * 1e6 / ios : 0
		printf "%d %.1f %.1f\n", iops, iops * bs / 1048576, cpu
	}'
}

TABLE=$T_DIR/table.md
{
	echo "| workload | tool | ${LABEL[A]} IOPS | ${LABEL[A]} MiB/s | ${LABEL[A]} CPU µs/IO |" \
		"${LABEL[B]} IOPS | ${LABEL[B]} MiB/s | ${LABEL[B]} CPU µs/IO | IOPS ${LABEL[A]}/${LABEL[B]} |"
	echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
} >"$TABLE"

for row in $BENCH_ROWS; do
	spec=$(echo "$ROWS" | awk -v r="$row" '$1 == r')
	if [ -z "$spec" ]; then
		fail "$row" "unknown row (rows: $(echo "$ROWS" | awk 'NF { printf "%s ", $1 }'))"
		continue
	fi
	read -r _ tool op pat bs qd <<<"$spec"
	declare -A R_IOPS=() R_MIB=() R_CPU=()
	for which in A B; do R_IOPS[$which]= R_MIB[$which]= R_CPU[$which]=; done
	for run in $(seq 1 "$BENCH_RUNS"); do
		# Alternate which target goes first: odd runs A then B, even runs B then A.
		order="A B"
		[ $((run % 2)) -eq 0 ] && order="B A"
		for which in $order; do
			[ -n "${URL[$which]:-}" ] || continue
			read -r i m c <<<"$(one_run "$which" "$tool" "$op" "$pat" "$bs" "$qd")"
			R_IOPS[$which]="${R_IOPS[$which]} $i"
			R_MIB[$which]="${R_MIB[$which]} $m"
			R_CPU[$which]="${R_CPU[$which]} $c"
		done
	done
	line="| $row | $([ "$tool" = perf ] && echo iscsi-perf || echo isergw-bench) |"
	for which in A B; do
		if [ -n "${URL[$which]:-}" ]; then
			# shellcheck disable=SC2086
			line="$line $(bench_median %.0f ${R_IOPS[$which]}) | $(bench_median %.1f ${R_MIB[$which]})"
			line="$line | $(bench_median %.1f ${R_CPU[$which]}) |"
		else
			line="$line - | - | - |"
		fi
	done
	# shellcheck disable=SC2086
	ia=$(bench_median %.0f ${R_IOPS[A]}) ib=$(bench_median %.0f ${R_IOPS[B]})
	ratio=$(awk -v a="$ia" -v b="$ib" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
	echo "$line $ratio |" >>"$TABLE"
	bad=0
	[ -n "${URL[A]:-}" ] && [ "$ia" = - ] && bad=1
	[ -n "${URL[B]:-}" ] && [ "$ib" = - ] && bad=1
	if [ $bad = 1 ]; then
		fail "$row" "a run failed (see $T_DIR)"
	else
		pass "$row: ${LABEL[A]} $ia IOPS, ${LABEL[B]} $ib IOPS"
	fi
	unset R_IOPS R_MIB R_CPU
done

mkdir -p "$(dirname "$BENCH_OUT")"
{
	echo "Measured $(date -u +%Y-%m-%d) on $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)," \
		"$NCPU CPUs, kernel $(uname -r); $PIN_NOTE."
	echo "LUN: 1 GiB file in /dev/shm filled with random data, shared by both targets (tgtd rdwr"
	echo "backing store; isergwd file backstore). $BENCH_RUNS runs of ${BENCH_SECS} s per row and target,"
	echo "alternating order, median shown. CPU µs/IO = target utime+stime / I/Os."
	echo "Command: \`make bench\` (BENCH_A=$BENCH_A BENCH_B=$BENCH_B BENCH_SECS=$BENCH_SECS tests/bench/run.sh)"
	echo
	cat "$TABLE"
} >"$BENCH_OUT"
t_log ""
cat "$BENCH_OUT"
t_log ""
t_log "bench: table written to $BENCH_OUT"

# The loop rows: loops: 1 against loops: 2 on a null LUN (tests/bench/loops.sh), appended to
# the same file, after the targets above have stopped working.
if [ "${BENCH_LOOPS:-1}" != 0 ]; then
	if BENCH_OUT=$BENCH_OUT BENCH_SECS=$BENCH_SECS "$(dirname "$0")/loops.sh"; then
		pass "loop rows"
	else
		fail "loop rows" "tests/bench/loops.sh failed (its output is above)"
	fi
fi

# The iSER rows: one VM run (tests/bench/vm-iser.sh), appended to the same file (the targets
# above sit idle meanwhile). BENCH_VM=0 leaves it out.
if [ "${BENCH_VM:-1}" != 0 ]; then
	if BENCH_OUT=$BENCH_OUT "$(dirname "$0")/vm-iser.sh"; then
		pass "iser rows (VM)"
	else
		fail "iser rows (VM)" "tests/bench/vm-iser.sh failed (its output is above)"
	fi
	# The bond failover stall, 20 failovers per run (tests/bench/vm-failover.sh).
	if BENCH_OUT=$BENCH_OUT "$(dirname "$0")/vm-failover.sh"; then
		pass "failover stall (VM)"
	else
		fail "failover stall (VM)" "tests/bench/vm-failover.sh failed (its output is above)"
	fi
	# The cluster failover seen by the kernel initiator (tests/bench/vm-cluster.sh).
	if BENCH_OUT=$BENCH_OUT "$(dirname "$0")/vm-cluster.sh"; then
		pass "cluster stall (VM)"
	else
		fail "cluster stall (VM)" "tests/bench/vm-cluster.sh failed (its output is above)"
	fi
fi
t_end
