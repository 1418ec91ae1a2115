#!/bin/bash
# The loop rows of `make bench` (issue 13): one gateway with `gateway.loops: 1` against one with
# `gateway.loops: 2`, both running in the same run on `null` backstores (no data kept: what is
# measured is the gateway's own path), each driven by two isergw-bench processes at once (one
# session each, 4 KiB random READ(16) or WRITE(16) at QD 32 per process), each on a target of
# its own with one LU: with two loops the LUs are owned one per loop and each session is placed
# on its LU's owner, so no command crosses (the crossing's cost is measured apart,
# docs/PERFORMANCE.md "Messages between loops"). Reported per
# configuration: the sum of both clients' IOPS and the gateway's CPU per I/O (its utime+stime
# over the run, /proc/PID/stat, all threads, divided by the I/Os both clients completed), and
# the ratios loops 2 / loops 1. Goal of the issue: the CPU per I/O must not grow with the loops.
# The loops the two sessions were on (the state's per-session "loop") are printed beside the
# row, so a run where both sat on one loop says so.
#
# The clients are not pinned: on a 2-CPU machine the gateway's two loops take both CPUs, so
# clients and loops share them in both configurations alike.
#
# The spread between two runs of the same tree was as large as what the rows look for (CPU per
# I/O loops 2 / loops 1 of 1.01-1.25 on a quiet machine), so each run measures both
# configurations back to back (order alternating) and the ratios are taken per run, then the
# median and the range over the runs are reported: a drift of the machine between runs moves
# both sides of a pair alike.
#
# Each row is measured for every value of `gateway.poll_us` in BENCH_LOOPS_POLL (busy polling
# before a loop sleeps, docs/TUNING.md): 20 and 0 (never, the default), so what polling changes
# is measured in the same run; each value has a pair of gateways of its own.
#
# Environment (as tests/bench/run.sh): BUILD, BENCH_SECS [10], BENCH_LOOPS_RUNS [5] (runs per
# row; each is three measurements per poll value: loops 1, loops 2, loops 1 with one client),
# BENCH_OUT (Markdown appended to) [$BUILD/bench-loops.md], BENCH_LOOPS_ROWS [randread-4k-qd32
# randwrite-4k-qd32], BENCH_LOOPS_POLL [20 0].
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/bench.sh"

BENCH_SECS=${BENCH_SECS:-10}
RUNS=${BENCH_LOOPS_RUNS:-5}
BENCH_OUT=${BENCH_OUT:-$T_BUILD/bench-loops.md}
BENCH_LOOPS_ROWS=${BENCH_LOOPS_ROWS:-randread-4k-qd32 randwrite-4k-qd32}
BENCH_LOOPS_POLL=${BENCH_LOOPS_POLL:-20 0}
BENCH=$T_TOOLS/isergw-bench
CLK_TCK=$(getconf CLK_TCK)
TARGET=isergwd

t_begin bench-loops
if [ ! -x "$BENCH" ] || [ ! -x "$T_BUILD/isergwd" ]; then
	fail build "$BENCH or $T_BUILD/isergwd is missing (make test-build)"
	t_end
fi
NCPU=$(nproc)
[ "$NCPU" -lt 2 ] && t_log "bench-loops: only $NCPU CPU: loops: 2 shares it (the rows say little)"

declare -A URL1=() URL2=() PID=() CTL=()
# start_gw N P: a gateway with `loops: N` and `poll_us: P` (its key: N-P), two null LUNs of 1 GiB.
start_gw() {
	local n=$1 k=$1-$2 port iqn=iqn.2026-11.org.isergw:bench-loops$1-$2
	port=$(t_free_port) || return 1
	CTL[$k]=$T_DIR/ctl$k.sock
	cat >"$T_DIR/gw$k.json" <<EOF
{
  "gateway": { "loops": $n, "poll_us": $2, "control_socket": "${CTL[$k]}" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $port } ],
  "targets": [
    { "name": "$iqn-a", "tpgt": 1, "portals": ["tcp0"], "allow_any_initiator": true,
      "luns": [ { "lun": 0, "backstore": { "type": "null", "size": "1G", "block_size": 512 } } ] },
    { "name": "$iqn-b", "tpgt": 1, "portals": ["tcp0"], "allow_any_initiator": true,
      "luns": [ { "lun": 0, "backstore": { "type": "null", "size": "1G", "block_size": 512 } } ] } ]
}
EOF
	gw_start "$T_DIR/gw$k.json" "$T_DIR/gw$k.log" "$port" || return 1
	PID[$k]=$T_GW_PID
	URL1[$k]=iscsi://$T_HOST:$port/$iqn-a/0
	URL2[$k]=iscsi://$T_HOST:$port/$iqn-b/0
}
for p in $BENCH_LOOPS_POLL; do
	for n in 1 2; do
		if ! start_gw "$n" "$p"; then
			fail "start loops: $n, poll_us: $p" "the gateway did not start (see $T_DIR)"
			t_end
		fi
	done
done

# sessions_loops KEY: the loops of the normal sessions now ("0,1"; "-" without the field).
sessions_loops() {
	gw_ctl "${CTL[$1]}" '{"op":"state"}' 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
l = sorted(str(x.get("loop", "-")) for x in s.get("sessions", []) if x.get("type") == "normal")
print(",".join(l) or "-")' 2>/dev/null || echo "?"
}

# one_run KEY OP [CLIENTS]: CLIENTS (2) clients at once against gateway KEY (N-P); prints
# "iops cpu_us_per_io loops", or "- - -" when a client failed.
one_run() {
	local n=$1 op=$2 nc=${3:-2} c0 c1 t0 t1 i pids=() ios=0 iops=0 v bad=0 where args url
	args=(-t "$BENCH_SECS" -q 32 -b 4096)
	[ "$op" = write ] && args+=(-w)
	c0=$(t_cpu_ticks "${PID[$n]}")
	t0=$(date +%s.%N)
	rm -f "$T_DIR"/run.$n.$op.*.out
	for i in $(seq 1 "$nc"); do
		url=URL$i[$n]
		timeout -k 5 $((BENCH_SECS + 40)) "$BENCH" "${args[@]}" \
			-i "iqn.2026-11.org.isergw:bench-loops-client$i" "${!url}" \
			>"$T_DIR/run.$n.$op.$i.out" 2>&1 &
		pids+=($!)
		# The first login is placed before the second: each on its target's LU owner.
		sleep 0.3
	done
	sleep $((BENCH_SECS / 2))
	where=$(sessions_loops "$n")
	for i in "${pids[@]}"; do
		wait "$i" || bad=1
	done
	t1=$(date +%s.%N)
	c1=$(t_cpu_ticks "${PID[$n]}")
	for i in $(seq 1 "$nc"); do
		v=$(sed -n 's/^bench: .* ios=\([0-9]*\) iops=\([0-9]*\) .* errors=0 .*/\1 \2/p' \
			"$T_DIR/run.$n.$op.$i.out")
		[ -z "$v" ] && bad=1 && continue
		ios=$((ios + ${v% *}))
		iops=$((iops + ${v#* }))
	done
	if [ "$bad" = 1 ] || [ -z "$c0" ] || [ -z "$c1" ] || [ "$ios" -eq 0 ]; then
		echo "bench-loops: loops $n $op failed: $(tail -q -n 1 "$T_DIR"/run.$n.$op.*.out | tr '\n' ' ')" >&2
		echo "- - -"
		return
	fi
	awk -v iops="$iops" -v ios="$ios" -v c0="$c0" -v c1="$c1" -v hz="$CLK_TCK" -v w="$where" \
		'BEGIN { printf "%d %.2f %s\n", iops, (c1 - c0) / hz * 1e6 / ios, w }'
}

# stats [-i] VALUE...: "median min max" ("- - -" when any run failed); -i: whole numbers.
stats() {
	local v f=%.2f
	[ "$1" = -i ] && f=%.0f && shift
	for v in "$@"; do [ "$v" = - ] && echo "- - -" && return; done
	printf '%s\n' "$@" | sort -g | awk -v f="$f" '{ v[n++] = $1 } END {
		if (!n) { print "- - -"; exit }
		m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
		printf f " " f " " f "\n", m, v[0], v[n - 1] }'
}

# cell "median min max": "median (min-max)".
cell() {
	local m lo hi
	read -r m lo hi <<<"$1"
	[ "$m" = - ] && echo - && return
	echo "$m ($lo-$hi)"
}

TABLE=$T_DIR/loops.md
{
	echo "| workload (2 clients) | poll_us | loops: 1 IOPS | loops: 1 CPU µs/IO | loops: 2 IOPS | loops: 2 CPU µs/IO | IOPS 2/1 per run | CPU/IO 2/1 per run | loops: 1, one client: CPU µs/IO | CPU/IO 2 / (1, one client) per run | sessions' loops (loops: 2) |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
} >"$TABLE"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for row in $BENCH_LOOPS_ROWS; do
	case "$row" in
	randread-4k-qd32) op=read ;;
	randwrite-4k-qd32) op=write ;;
	*) fail "$row" "unknown row (randread-4k-qd32 randwrite-4k-qd32)"; continue ;;
	esac
	declare -A IO=() CPU=() RI=() RC=() RS=() WHERE=()
	for run in $(seq 1 "$RUNS"); do
		for p in $BENCH_LOOPS_POLL; do
			order="1 2"
			[ $((run % 2)) -eq 0 ] && order="2 1"
			declare -A ri=() rc=()
			for n in $order; do
				read -r i c w <<<"$(one_run "$n-$p" "$op")"
				IO[$n-$p]="${IO[$n-$p]:-} $i"
				CPU[$n-$p]="${CPU[$n-$p]:-} $c"
				ri[$n]=$i rc[$n]=$c
				[ "$n" = 2 ] && WHERE[$p]="${WHERE[$p]:-} $w"
			done
			# The same load per loop as two clients on two loops: one client on one loop.
			read -r i c w <<<"$(one_run "1-$p" "$op" 1)"
			IO[s-$p]="${IO[s-$p]:-} $i"
			CPU[s-$p]="${CPU[s-$p]:-} $c"
			RI[$p]="${RI[$p]:-} $(bench_ratio "${ri[2]}" "${ri[1]}")"
			RC[$p]="${RC[$p]:-} $(bench_ratio "${rc[2]}" "${rc[1]}")"
			RS[$p]="${RS[$p]:-} $(bench_ratio "${rc[2]}" "$c")"
			unset ri rc
		done
	done
	for p in $BENCH_LOOPS_POLL; do
		# shellcheck disable=SC2086
		i1=$(stats -i ${IO[1-$p]}) c1=$(stats ${CPU[1-$p]}) i2=$(stats -i ${IO[2-$p]})
		# shellcheck disable=SC2086
		c2=$(stats ${CPU[2-$p]}) cs=$(stats ${CPU[s-$p]})
		# shellcheck disable=SC2086
		ri=$(stats ${RI[$p]}) rc=$(stats ${RC[$p]}) rs=$(stats ${RS[$p]})
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |%s |\n' "$row" "$p" \
			"$(cell "$i1")" "$(cell "$c1")" "$(cell "$i2")" "$(cell "$c2")" \
			"$(cell "$ri")" "$(cell "$rc")" "$(cell "$cs")" "$(cell "$rs")" \
			"${WHERE[$p]}" >>"$TABLE"
		if [ "${ri%% *}" = - ] || [ "${rc%% *}" = - ]; then
			fail "$row, poll_us $p" "a run failed (see $T_DIR)"
		else
			pass "$row, poll_us $p: loops 2 / loops 1, median of $RUNS runs: IOPS ${ri%% *}, CPU per I/O ${rc%% *} (sessions on loops${WHERE[$p]})"
		fi
	done
	unset IO CPU RI RC RS WHERE
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

mkdir -p "$(dirname "$BENCH_OUT")"
{
	echo
	echo "Loop rows, measured $(date -u +%Y-%m-%d) on $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), $NCPU CPUs,"
	echo "load average $LOAD0 before and $LOAD1 after. Two targets of a null LUN each; two isergw-bench"
	echo "processes at once (one session each, QD 32, 4 KiB); $RUNS runs of ${BENCH_SECS} s per row and"
	echo "configuration, each run both configurations back to back in alternating order; median (range)"
	echo "over the runs, ratios taken per run; CPU µs/IO = gateway utime+stime / I/Os."
	echo "\"loops: 1, one client\" has the load per loop of two clients on two loops: a loop serving"
	echo "two sessions handles both in one round, so two clients on one loop cost less per I/O."
	echo "poll_us: gateway.poll_us of both configurations (busy polling before a loop sleeps; 0: never)."
	echo "Command: \`BENCH_SECS=$BENCH_SECS BENCH_LOOPS_RUNS=$RUNS BENCH_LOOPS_POLL=\"$BENCH_LOOPS_POLL\" tests/bench/loops.sh\` (part of \`make bench\`)"
	echo
	cat "$TABLE"
} >>"$BENCH_OUT"
cat "$TABLE"
t_log "bench-loops: table appended to $BENCH_OUT"
t_end
