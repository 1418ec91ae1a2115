#!/bin/bash
# What a cut-through would save the gateway per proxied 512 KiB read (issue 13): the relay
# micro-bench tests/bench/relay.c in its three modes -- copy (recv + writev, what the gateway
# does), splice (socket -> pipe -> socket for the payload, headers through recv/send) and zc
# (recv + sendmsg(MSG_ZEROCOPY)) -- side by side in one run, the modes interleaved and their order
# rotated from run to run. Two paths:
#
#   veth: ns BE: relay send (10.214.3.2) --veth--> ns GW: relay fwd --lo--> relay recv
#         (the proxy rig of tests/bench/proxy-ab.sh: tgtd across a veth, the client on loopback)
#   lo:   all three in ns GW over loopback
#
# Per mode: the relay's CPU per 512 KiB record (its getrusage, user + system, over its records),
# the three processes' CPU per record, the machine's CPU per record (every CPU's busy time in
# /proc/stat over the run, whatever ran: under load this counts the other work too), the
# receiver's MiB/s, and each mode against copy. Every record is checked byte for byte by the
# receiver; first, one run with a record spoiled on purpose per mode must fail (else the check
# checks nothing).
#
# Environment: BUILD [build], RELAY_SECS [3], RELAY_RUNS [3], RELAY_MODES ["copy splice zc"],
# RELAY_PATHS ["veth lo"], RELAY_PIPE [1048576] (the splice pipe's size, F_SETPIPE_SZ),
# RELAY_OUT [$BUILD/bench-relay.md; every run's lines beside it in bench-relay-runs.txt].
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/bench.sh"
. "$(dirname "$0")/../lib/mpath.sh"

SECS=${RELAY_SECS:-3}
RUNS=${RELAY_RUNS:-3}
MODES=${RELAY_MODES:-copy splice zc}
PATHS=${RELAY_PATHS:-veth lo}
PIPE=${RELAY_PIPE:-1048576}
OUT=${RELAY_OUT:-$T_BUILD/bench-relay.md}
RELAY=$T_BUILD/relay
CLK_TCK=$(getconf CLK_TCK)
LOAD0=$(cut -d ' ' -f 1-3 /proc/loadavg)
TARGET=relay

t_begin bench-relay
SFX=$$
NS_GW=rlgw$SFX NS_B=rlbe$SFX
trap 'rl_rc=$?; mp_cleanup_ns; ( exit $rl_rc ); t_exit_trap' EXIT

if [ "$(id -u)" != 0 ] || ! t_need ip cc; then
	skip bench-relay "needs root, ip and cc"
	t_end
fi
if ! cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$RELAY" "$T_ROOT/tests/bench/relay.c" \
	2>"$T_DIR/cc.log"; then
	fail build "$(head -n 3 "$T_DIR/cc.log" | tr '\n' ' ')"
	t_end
fi
mp_ns_pair bench-relay rG 10.214.3.1 rB 10.214.3.2

PORT=4800
# one PATH MODE SECS [SPOIL]: one run; its three result lines in $T_DIR/one.out; the receiver's
# exit status is the function's.
one() {
	local path=$1 mode=$2 secs=$3 spoil=${4:-} src rpid spid rc
	if [ "$path" = veth ]; then
		src=10.214.3.2:$PORT
		ip netns exec "$NS_B" "$RELAY" send -t "$secs" "$src" >"$T_DIR/send.out" 2>&1 &
	else
		src=127.0.0.1:$PORT
		ip netns exec "$NS_GW" "$RELAY" send -t "$secs" "$src" >"$T_DIR/send.out" 2>&1 &
	fi
	spid=$!
	ip netns exec "$NS_GW" "$RELAY" recv "127.0.0.1:$((PORT + 1))" >"$T_DIR/recv.out" 2>&1 &
	rpid=$!
	timeout -k 5 $((${secs%.*} + 60)) ip netns exec "$NS_GW" "$RELAY" fwd -m "$mode" -p "$PIPE" \
		${spoil:+-x "$spoil"} "$src" "127.0.0.1:$((PORT + 1))" >"$T_DIR/fwd.out" 2>&1
	wait "$rpid"
	rc=$?
	wait "$spid"
	cat "$T_DIR/send.out" "$T_DIR/fwd.out" "$T_DIR/recv.out" >"$T_DIR/one.out"
	return $rc
}

# one_show ARGS...: one, then its output (for t_refused).
one_show() {
	local rc
	one "$@"
	rc=$?
	cat "$T_DIR/one.out"
	return $rc
}

# The check checks: a record spoiled by the relay fails the receiver, in every mode.
for mode in $MODES; do
	PORT=$((PORT + 2))
	if t_refused 'recv: record 3 segment [01]: (bad header|wrong data)' one_show lo "$mode" 0.3 3 \
		>"$T_DIR/spoil-$mode.out"; then
		pass "spoiled record, $mode: the receiver refuses it"
	else
		fail "spoiled record, $mode" "$(tr '\n' ' ' <"$T_DIR/spoil-$mode.out")"
	fi
done

TABLE=$T_DIR/relay.md
{
	echo "| path | mode | MiB/s | relay CPU µs/record | sender CPU µs/record | receiver CPU µs/record | the three, µs/record | machine CPU µs/record | machine busy | relay CPU vs copy | the three vs copy | machine CPU vs copy | MiB/s vs copy | zc notes copied |"
	echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
} >"$TABLE"
for path in $PATHS; do
	declare -A TP=() RC=() SC=() VC=() PC=() MC=() MB=() ZC=()
	for run in $(seq 1 "$RUNS"); do
		read -ra s <<<"$MODES"
		n=${#s[@]}
		for k in $(seq 0 $((n - 1))); do
			mode=${s[$(((k + run - 1) % n))]}
			PORT=$((PORT + 2))
			read -r m0 a0 < <(bench_machine_ticks)
			one "$path" "$mode" "$SECS"
			rc=$?
			read -r m1 a1 < <(bench_machine_ticks)
			sed "s/^/$path $mode run $run: /" "$T_DIR/one.out" >>"$T_DIR/runs.out"
			fl=$(grep '^fwd:' "$T_DIR/one.out")
			rl=$(grep '^recv:' "$T_DIR/one.out")
			sl=$(grep '^send:' "$T_DIR/one.out")
			recs=$(bench_field records "$rl")
			if [ "$rc" != 0 ] || [ -z "$recs" ] || [ "$recs" = 0 ] || [ "$(bench_field errors "$rl")" != 0 ]; then
				fail "$path $mode run $run" "$(tr '\n' ' ' <"$T_DIR/one.out")"
				continue
			fi
			TP[$mode]="${TP[$mode]:-} $(bench_field mibps "$rl")"
			RC[$mode]="${RC[$mode]:-} $(bench_field us_per_rec "$fl")"
			SC[$mode]="${SC[$mode]:-} $(awk -v a="$(bench_field cpu_us "$sl")" -v n="$recs" \
				'BEGIN { printf "%.1f", a / n }')"
			VC[$mode]="${VC[$mode]:-} $(awk -v a="$(bench_field cpu_us "$rl")" -v n="$recs" \
				'BEGIN { printf "%.1f", a / n }')"
			PC[$mode]="${PC[$mode]:-} $(awk -v a="$(bench_field cpu_us "$sl")" -v b="$(bench_field cpu_us "$fl")" \
				-v c="$(bench_field cpu_us "$rl")" -v n="$recs" 'BEGIN { printf "%.1f", (a + b + c) / n }')"
			MC[$mode]="${MC[$mode]:-} $(awk -v a="$m0" -v b="$m1" -v n="$recs" -v hz="$CLK_TCK" \
				'BEGIN { printf "%.1f", (b - a) / hz * 1e6 / n }')"
			MB[$mode]="${MB[$mode]:-} $(awk -v b="$((m1 - m0))" -v t="$((a1 - a0))" \
				'BEGIN { printf "%.0f", (t > 0 ? 100 * b / t : 0) }')"
			if [ "$mode" = zc ]; then
				ZC[$mode]="${ZC[$mode]:-} $(awk -v c="$(bench_field zc_copied_notes "$fl")" \
					-v n="$(bench_field zc_notes "$fl")" 'BEGIN { printf "%.0f", (n > 0 ? 100 * c / n : 0) }')"
			fi
		done
	done
	# shellcheck disable=SC2086
	c_rc=$(bench_median %.1f ${RC[copy]:-}) c_mc=$(bench_median %.1f ${MC[copy]:-}) c_tp=$(bench_median %.1f ${TP[copy]:-})
	# shellcheck disable=SC2086
	c_pc=$(bench_median %.1f ${PC[copy]:-})
	for mode in $MODES; do
		# shellcheck disable=SC2086
		rc_m=$(bench_median %.1f ${RC[$mode]:-}) mc_m=$(bench_median %.1f ${MC[$mode]:-}) tp_m=$(bench_median %.1f ${TP[$mode]:-})
		# shellcheck disable=SC2086
		pc_m=$(bench_median %.1f ${PC[$mode]:-})
		# shellcheck disable=SC2086
		echo "| $path | $mode | $tp_m | $rc_m | $(bench_median %.1f ${SC[$mode]:-}) | $(bench_median %.1f ${VC[$mode]:-}) |" \
			"$pc_m | $mc_m | $(bench_median %.1f ${MB[$mode]:-})% | $(bench_ratio "$rc_m" "$c_rc") | $(bench_ratio "$pc_m" "$c_pc") |" \
			"$(bench_ratio "$mc_m" "$c_mc") | $(bench_ratio "$tp_m" "$c_tp") |" \
			"$([ "$mode" = zc ] && echo "$(bench_median %.1f ${ZC[$mode]:-})%" || echo -) |" >>"$TABLE"
		pass "$path $mode: relay CPU $rc_m µs/record ($(bench_ratio "$rc_m" "$c_rc") of copy), $tp_m MiB/s"
	done
	unset TP RC SC VC PC MC MB ZC
done

mkdir -p "$(dirname "$OUT")"
cp "$T_DIR/runs.out" "${OUT%.md}-runs.txt" 2>/dev/null
{
	echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) CPUs, kernel $(uname -r), no pinning;" \
		"load average $LOAD0 at the start, $(cut -d ' ' -f 1-3 /proc/loadavg) at the end."
	echo "$RUNS runs of $SECS s per mode and path, modes interleaved in rotating order, medians;" \
		"records of 2 x (48-byte header + 256 KiB); splice pipe $PIPE bytes."
	echo "Command: RELAY_SECS=$SECS RELAY_RUNS=$RUNS RELAY_MODES=\"$MODES\" RELAY_PATHS=\"$PATHS\" tests/bench/relay.sh"
	echo
	cat "$TABLE"
} >"$OUT"
t_log ""
cat "$OUT"
t_end
