#!/bin/bash
# `make bench`, multipath rows: what a host sees of the gateway's remote LUNs, with the
# remote backstore's default settings, in network namespaces the script builds:
#
#   ns GW (gateway + host client) --veth--> ns BE: tgtd b1 on 10.212.1.2, tgtd b2 on 10.212.2.2,
#                                             one file, one identity: two paths to one LUN
#                                 --veth--> ns BH: 16 addresses 10.213.0.2-17, all TCP dropped
#
# 1. Stall on a path cut. The gateway exports the LUN over both paths with
#    path_grouping_policy failover (one path carries all I/O, so every I/O in flight is caught
#    by the cut); isergw-bench reads 4 KiB at QD 8 through it while the active path is cut:
#    "reset" (tgtd b1 killed: its sockets close) or "silent" (iptables DROP on b1's link). The
#    stall is the longest time without any completion at the host (max_gap: from the last I/O
#    before the cut to the first one completed on the other path); the slowest single I/O is
#    shown too. Zero errors are required. Goal: under 1 s (reset) and 3 s (silent).
# 2. Start-up: isergwd with 1 and with 16 remote LUNs whose only path is black-holed, from exec
#    to "main: ready" (portals open, READY=1), and its stop. Goal: under 3 s (gateway.boot_wait
#    2 s bounds the wait for the back ends' first logins).
# 3. Proxy cost: the host reading (and writing) through the gateway (host -> gateway -> tgtd b1,
#    one path) against the host reading tgtd b1 directly, same run, rotating order. Goal: 90%
#    of direct IOPS at 4 KiB QD 32 and of direct MiB/s at 512 KiB. The same gateway also serves
#    a local LUN (file backstore on the back end's tmpfs file, in a target of its own so that
#    neither LUN's session crosses loops) that the same client measures in the same rotation:
#    the gateway's CPU per I/O (utime+stime of isergwd over the run, from /proc/PID/stat,
#    divided by the I/Os) is shown for the proxied and for the local I/O.
#
# Environment: BUILD; BENCH_SECS (seconds per proxy run [10]), BENCH_RUNS (runs per proxy row
# and side, and per cut kind [2]), BENCH_MPATH_OUT (Markdown [$BUILD/bench-mpath.md]),
# BENCH_MPATH_PARTS (a subset of "cut boot proxy" [all]), BENCH_PERF=1 (perf record -g of the
# gateway during the proxy rows, into the run folder), BENCH_PROXY_ROWS (a subset of the proxy
# rows by name [all]), BENCH_MPATH_ONE_TARGET=1 (the proxy rows' local LUN as LUN 1 of the
# remote LUN's target, as before session 10), BENCH_MPATH_ENGINE (the remote LUNs' "engine":
# libiscsi or native [libiscsi]; tests/bench/proxy-ab.sh compares the two side by side).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/bench.sh"
. "$(dirname "$0")/../lib/mpath.sh"

BENCH_SECS=${BENCH_SECS:-10}
BENCH_RUNS=${BENCH_RUNS:-2}
PARTS=" ${BENCH_MPATH_PARTS:-cut boot proxy} "
OUT=${BENCH_MPATH_OUT:-$T_BUILD/bench-mpath.md}
BENCH=$T_TOOLS/isergw-bench
GWD=$T_BUILD/isergwd
TARGET=isergwd

t_begin bench-mpath
LOAD0=$(cut -d ' ' -f 1-3 /proc/loadavg)
SFX=$$
NS_GW=mbgw$SFX NS_B=mbbe$SFX NS_BH=mbbh$SFX
IQN_B=iqn.2026-11.org.isergw:bench-be
GW_IQN=iqn.2026-11.org.isergw:bench-gw
URL_B1=iscsi://10.212.1.2:3260/$IQN_B/1
URL_B2=iscsi://10.212.2.2:3260/$IQN_B/1
GW_URL=iscsi://127.0.0.1:3260/$GW_IQN/0
trap 'mb_rc=$?; t_stop_all; mp_cleanup_ns; ( exit $mb_rc ); t_exit_trap' EXIT

if [ "$(id -u)" != 0 ] || ! t_need ip iptables tgtd tgtadm; then
	skip bench-mpath "needs root, ip, iptables and tgt"
	t_end
fi
if [ ! -x "$BENCH" ] || [ ! -x "$GWD" ]; then
	fail build "$BENCH or $GWD is missing"
	t_end
fi
t_ns_reap mbgw mbbe mbbh
if ! ip netns add "$NS_GW" 2>/dev/null; then
	skip bench-mpath "cannot create network namespaces here"
	t_end
fi
NS_MADE+=("$NS_GW")

mb_net() {
	local ns i bh=()
	for ns in "$NS_B" "$NS_BH"; do
		ip netns add "$ns" || return 1
		NS_MADE+=("$ns")
		ip -n "$ns" link set lo up || return 1
	done
	ip -n "$NS_GW" link set lo up || return 1
	mp_link gB1 10.212.1.1 "$NS_B" bB1 10.212.1.2 || return 1
	mp_link gB2 10.212.2.1 "$NS_B" bB2 10.212.2.2 || return 1
	for i in $(seq 2 17); do bh+=("10.213.0.$i"); done
	mp_link gH 10.213.0.1 "$NS_BH" bH "${bh[@]}" || return 1
	ip netns exec "$NS_BH" iptables -A INPUT -p tcp -j DROP
}

if ! mb_net >"$T_DIR/net.log" 2>&1; then
	fail network "$(tail -n 3 "$T_DIR/net.log" | tr '\n' ' ')"
	t_end
fi
t_log "bench-mpath: filling a 512 MiB back-end LUN in /dev/shm with random data"
dd if=/dev/urandom of="$T_SHM/be.img" bs=4M count=128 status=none
mp_tgtd b1 "$NS_B" "$IQN_B" "$T_SHM/be.img" bench-be 10.212.1.2:3260 || fail tgtd-b1 setup
TGT_B1=$MP_LAST_TGT
mp_tgtd b2 "$NS_B" "$IQN_B" "$T_SHM/be.img" bench-be 10.212.2.2:3260 || fail tgtd-b2 setup

# ---- the gateway ----------------------------------------------------------------------------

# gw_conf FILE LUNS-JSON [TARGETS-JSON]: one target on 127.0.0.1:3260 in ns GW with the given
# LUNs (and the further targets of TARGETS-JSON, a list that starts with a comma).
gw_conf() {
	cat >"$1" <<EOF
{ "portals": [ { "name": "tcp0", "transport": "tcp", "address": "127.0.0.1", "port": 3260 } ],
  "targets": [ { "name": "$GW_IQN", "portals": ["tcp0"], "allow_any_initiator": true,
    "luns": [ $2 ] } ${3:-} ] }
EOF
}

# remote_lun LUN POLICY-JSON URL...: a remote LUN with the defaults but for POLICY-JSON.
remote_lun() {
	local lun=$1 pol=$2 u paths="" sep=""
	shift 2
	for u in "$@"; do
		paths="$paths$sep{ \"url\": \"$u\" }"
		sep=", "
	done
	printf '{ "lun": %s, "backstore": { "type": "remote", "engine": "%s", "block_size": 512, %s "paths": [ %s ] } }' \
		"$lun" "${BENCH_MPATH_ENGINE:-libiscsi}" "$pol" "$paths"
}

# gw_up NAME CONF: isergwd in ns GW; sets GW_PID and READY_MS (exec to "main: ready").
gw_up() {
	local log=$T_DIR/gw-$1.log t0 i
	t0=$(date +%s%N)
	t_daemon_start "isergwd-$1" isergwd "$log" ip netns exec "$NS_GW" "$GWD" --config "$2"
	GW_PID=$T_LAST_PID
	READY_MS=
	for i in $(seq 1 1200); do
		if grep -q 'main: ready' "$log" 2>/dev/null; then
			READY_MS=$((($(date +%s%N) - t0) / 1000000))
			return 0
		fi
		t_alive "$GW_PID" || break
		sleep 0.025
	done
	return 1
}

# gw_down: SIGTERM; sets STOP_MS.
gw_down() {
	local t0
	t0=$(date +%s%N)
	gw_stop "$GW_PID" >/dev/null
	STOP_MS=$((($(date +%s%N) - t0) / 1000000))
}

# bench_run URL ARGS...: one isergw-bench run in ns GW; prints its result line.
bench_run() {
	local url=$1
	shift
	timeout -k 5 $((BENCH_SECS + 60)) ip netns exec "$NS_GW" "$BENCH" "$@" "$url" 2>&1 |
		grep '^bench:' | tail -n 1
}

TABLE_CUT=$T_DIR/cut.md
TABLE_BOOT=$T_DIR/boot.md
TABLE_PROXY=$T_DIR/proxy.md

# ---- 1. stall on a path cut -----------------------------------------------------------------

echo "| cut | run | stall (max gap) ms | slowest I/O ms | I/Os | errors | goal |" >"$TABLE_CUT"
echo "| --- | ---: | ---: | ---: | ---: | ---: | --- |" >>"$TABLE_CUT"
gw_conf "$T_DIR/cut.json" "$(remote_lun 0 '"path_grouping_policy": "failover",' \
	"$URL_B1" "$URL_B2")"
if [[ $PARTS != *" cut "* ]]; then
	:
elif gw_up cut "$T_DIR/cut.json"; then
	for kind in reset silent; do
		goal=1000
		[ "$kind" = silent ] && goal=3000
		for run in $(seq 1 "$BENCH_RUNS"); do
			# Both paths up and the failover group back on path 1 (failback immediate).
			sleep 3
			bench_run "$GW_URL" -q 8 -b 4096 -t 8 >"$T_DIR/cut-$kind-$run.out" &
			bpid=$!
			sleep 3
			if [ "$kind" = reset ]; then
				kill -KILL "$TGT_B1" 2>/dev/null
				t_stop_pid "$TGT_B1" 2
			else
				ip netns exec "$NS_B" iptables -A INPUT -i "bB1$SFX" -j DROP
			fi
			wait "$bpid"
			if [ "$kind" = reset ]; then
				mp_tgtd b1 "$NS_B" "$IQN_B" "$T_SHM/be.img" bench-be 10.212.1.2:3260 ||
					fail tgtd-b1 restart
				TGT_B1=$MP_LAST_TGT
			else
				ip netns exec "$NS_B" iptables -D INPUT -i "bB1$SFX" -j DROP
			fi
			line=$(cat "$T_DIR/cut-$kind-$run.out")
			gap=$(bench_field max_gap_us "$line")
			lat=$(bench_field max_lat_us "$line")
			errs=$(bench_field errors "$line")
			ios=$(bench_field ios "$line")
			if [ -z "$gap" ] || [ "${errs:-1}" != 0 ]; then
				fail "cut $kind run $run" "${line:-no result}"
				continue
			fi
			gap=$((${gap%.*} / 1000))
			lat=$((${lat%.*} / 1000))
			met="met"
			[ "$gap" -ge "$goal" ] && met="missed"
			echo "| $kind | $run | $gap | $lat | $ios | 0 | < $goal ms: $met |" >>"$TABLE_CUT"
			pass "cut $kind run $run: stall $gap ms, slowest I/O $lat ms, 0 errors (goal < $goal ms: $met)"
		done
	done
	gw_down
else
	fail "cut bench" "the gateway did not get ready: $(tail -n 3 "$T_DIR/gw-cut.log")"
fi

# ---- 2. start-up with unreachable back ends -------------------------------------------------

echo "| unreachable back ends | ready after ms | stop took ms | goal |" >"$TABLE_BOOT"
echo "| ---: | ---: | ---: | --- |" >>"$TABLE_BOOT"
for n in 1 16; do
	[[ $PARTS == *" boot "* ]] || break
	luns=""
	for i in $(seq 1 "$n"); do
		[ -n "$luns" ] && luns="$luns, "
		luns="$luns$(remote_lun $((i - 1)) "" \
			"iscsi://10.213.0.$((i + 1)):3260/iqn.2026-11.org.isergw:hole/0")"
	done
	gw_conf "$T_DIR/boot-$n.json" "$luns"
	if gw_up "boot-$n" "$T_DIR/boot-$n.json"; then
		gw_down
		met=met
		[ "$READY_MS" -ge 3000 ] && met=missed
		echo "| $n | $READY_MS | $STOP_MS | < 3000 ms: $met |" >>"$TABLE_BOOT"
		pass "start-up with $n black-holed back ends: ready after $READY_MS ms, stopped in $STOP_MS ms (goal < 3000 ms: $met)"
	else
		fail "start-up with $n black-holed back ends" "not ready: $(tail -n 2 "$T_DIR/gw-boot-$n.log")"
	fi
done

# ---- 3. proxy cost ----------------------------------------------------------------------------

# The gateway's CPU time in clock ticks (utime+stime, all threads): `ip netns exec` execs it, so
# GW_PID is isergwd itself.
CLK_TCK=$(getconf CLK_TCK)
# The local LUN is a target of its own: with one loop per CPU the remote LUN and the file LUN
# are owned by different loops, and a session to a target holding both sits on one of them and
# crosses to the other for every command of the other LUN (docs/PERFORMANCE.md, "Loop
# crossings on the proxy path"). Alone in its target, each LUN's session is placed on its owner.
# BENCH_MPATH_ONE_TARGET=1 puts it back as LUN 1 of the remote LUN's target (the layout before
# session 10).
GW_LOCAL_IQN=$GW_IQN-local
GW_LOCAL_URL=iscsi://127.0.0.1:3260/$GW_LOCAL_IQN/0
[ "${BENCH_MPATH_ONE_TARGET:-0}" = 1 ] && GW_LOCAL_URL=iscsi://127.0.0.1:3260/$GW_IQN/1

# cpu_per_io TICKS0 TICKS1 IOS: microseconds of CPU per I/O.
cpu_per_io() {
	awk -v a="$1" -v b="$2" -v n="$3" -v hz="$CLK_TCK" 'BEGIN {
		if (a == "" || b == "" || n + 0 <= 0) print "-"
		else printf "%.1f\n", (b - a) / hz * 1e6 / n }'
}

{
	echo "| workload | direct IOPS | direct MiB/s | via gateway IOPS | via gateway MiB/s |" \
		"gateway/direct | goal | gateway CPU µs/IO proxied | gateway local LUN IOPS |" \
		"gateway CPU µs/IO local | proxied/local CPU |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"
} >"$TABLE_PROXY"
LOCAL_LUN="\"backstore\": { \"type\": \"file\", \"path\": \"$T_SHM/be.img\", \"size\": \"512M\",
      \"block_size\": 512 }"
if [ "${BENCH_MPATH_ONE_TARGET:-0}" = 1 ]; then
	gw_conf "$T_DIR/proxy.json" "$(remote_lun 0 "" "$URL_B1"), { \"lun\": 1, $LOCAL_LUN }"
else
	gw_conf "$T_DIR/proxy.json" "$(remote_lun 0 "" "$URL_B1")" ",
  { \"name\": \"$GW_LOCAL_IQN\", \"portals\": [\"tcp0\"], \"allow_any_initiator\": true,
    \"luns\": [ { \"lun\": 0, $LOCAL_LUN } ] }"
fi
if [[ $PARTS != *" proxy "* ]]; then
	:
elif gw_up proxy "$T_DIR/proxy.json"; then
	if [ "${BENCH_PERF:-0}" = 1 ]; then
		perf record -g -o "$T_DIR/perf.data" -p "$GW_PID" >"$T_DIR/perf.log" 2>&1 &
		PERF_PID=$!
	fi
	# name args goal-ratio metric
	while read -r name args goal metric; do
		[ -n "$name" ] || continue
		[ -z "${BENCH_PROXY_ROWS:-}" ] || [[ " $BENCH_PROXY_ROWS " == *" $name "* ]] || continue
		declare -a D=() G=() L=() GC=() LC=()
		for run in $(seq 1 "$BENCH_RUNS"); do
			# Rotate the order: D G L, then L G D, ...
			order="D G L"
			[ $((run % 2)) -eq 0 ] && order="L G D"
			for side in $order; do
				url=$URL_B1
				[ "$side" = G ] && url=$GW_URL
				[ "$side" = L ] && url=$GW_LOCAL_URL
				c0=$(t_cpu_ticks "$GW_PID")
				# shellcheck disable=SC2086
				line=$(bench_run "$url" ${args//,/ } -t "$BENCH_SECS")
				c1=$(t_cpu_ticks "$GW_PID")
				echo "$side $line" >>"$T_DIR/proxy-$name.out"
				v=$(bench_field "$metric" "$line")
				if [ -z "$v" ] || [ "$(bench_field errors "$line")" != 0 ]; then
					fail "proxy $name $side" "${line:-no result}"
					continue
				fi
				cpu=$(cpu_per_io "$c0" "$c1" "$(bench_field ios "$line")")
				case $side in
				D) D+=("$v") ;;
				G) G+=("$v") && GC+=("$cpu") ;;
				L) L+=("$v") && LC+=("$cpu") ;;
				esac
			done
		done
		[ ${#D[@]} -gt 0 ] && [ ${#G[@]} -gt 0 ] || continue
		dm=$(bench_median %.0f "${D[@]}")
		gm=$(bench_median %.0f "${G[@]}")
		lm=$(bench_median %.0f "${L[@]}")
		gc=$(bench_median %.1f "${GC[@]}")
		lc=$(bench_median %.1f "${LC[@]}")
		ratio=$(awk -v g="$gm" -v d="$dm" 'BEGIN { printf "%.2f\n", (d > 0 ? g / d : 0) }')
		cratio=$(bench_ratio "$gc" "$lc")
		met=$(awk -v r="$ratio" -v g="$goal" 'BEGIN {
			if (g == "-") print "-"; else printf("%s: %s\n", g "x", (r + 0 >= g + 0 ? "met" : "missed")) }')
		di=$(grep '^D ' "$T_DIR/proxy-$name.out" | tail -n 1)
		gi=$(grep '^G ' "$T_DIR/proxy-$name.out" | tail -n 1)
		li=$(grep '^L ' "$T_DIR/proxy-$name.out" | tail -n 1)
		if [ "$metric" = iops ]; then
			cells="$dm | $(bench_field mibps "$di") | $gm | $(bench_field mibps "$gi")"
			lcell=$lm
		else
			cells="$(bench_field iops "$di") | $dm | $(bench_field iops "$gi") | $gm"
			lcell=$(bench_field iops "$li")
		fi
		echo "| $name | $cells | $ratio | $met | $gc | ${lcell:--} | $lc | $cratio |" >>"$TABLE_PROXY"
		pass "proxy $name: gateway/direct $metric $ratio ($gm / $dm); gateway CPU $gc µs per proxied I/O, $lc per local I/O"
		unset D G L GC LC
	done <<-EOF
		randread-4k-qd32 -q,32,-b,4096 0.9 iops
		seqread-512k-qd8 -q,8,-b,524288,-s 0.9 mibps
		randwrite-4k-qd32 -q,32,-b,4096,-w - iops
		seqwrite-512k-qd8 -q,8,-b,524288,-s,-w - mibps
	EOF
	if [ -n "${PERF_PID:-}" ]; then
		kill -INT "$PERF_PID"
		wait "$PERF_PID"
	fi
	gw_down
else
	fail "proxy bench" "the gateway did not get ready: $(tail -n 3 "$T_DIR/gw-proxy.log")"
fi

mkdir -p "$(dirname "$OUT")"
{
	echo "Measured $(date -u +%Y-%m-%d) on $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)," \
		"$(nproc) CPUs, kernel $(uname -r); no CPU pinning. Remote backstore defaults."
	echo "Load average $LOAD0 at the start, $(cut -d ' ' -f 1-3 /proc/loadavg) at the end."
	echo "Command: \`BENCH_SECS=$BENCH_SECS BENCH_RUNS=$BENCH_RUNS tests/bench/mpath.sh\` (part of \`make bench\`)"
	echo
	echo "Stall on a path cut (isergw-bench 4 KiB reads, QD 8, through the gateway, failover policy):"
	echo
	cat "$TABLE_CUT"
	echo
	echo "Start-up with black-holed back ends (defaults: gateway.boot_wait 2 s, login_timeout 5 s,"
	echo "initial_login_retry_max 1; READY at the boot_wait bound, the LUNs log in in the background):"
	echo
	cat "$TABLE_BOOT"
	echo
	echo "Proxy cost (isergw-bench in the gateway's namespace; direct: to tgtd over the veth;"
	echo "via gateway: to isergwd on loopback, which reaches the same tgtd over the same veth;"
	echo "local: a file LUN of the same gateway on the same tmpfs file. Gateway CPU µs/IO ="
	echo "isergwd utime+stime over the run / I/Os; median of $BENCH_RUNS runs per side, rotating order):"
	echo
	cat "$TABLE_PROXY"
} >"$OUT"
t_log ""
cat "$OUT"
t_log ""
t_log "bench-mpath: tables written to $OUT"
t_end
