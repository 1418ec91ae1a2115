#!/bin/bash
# `make bench`, the disk rows: file and block backstores on this machine's real disk.
#
# One file on the disk (not tmpfs: $BENCH_DISK_DIR, default /var/tmp), written in full with
# random data first so that no read lands on an unwritten extent, opened with O_DIRECT by every
# target. Four ways on that file, in the same run:
#   gw-uring    isergwd, file backstore, direct, io_engine uring (queue_depth 128)
#   gw-threads  isergwd, the same with io_engine threads (4 workers): the engine before
#   tgt-aio     tgtd, --bstype aio (its O_DIRECT libaio backing store)
#   fio         local `fio --ioengine=io_uring --direct=1` on the file: the ceiling
#   gw-b        isergwd from another build ($BENCH_DISK_GW_B), set up as gw-uring: an A/B of
#               two builds on the same file and client in one run (only when that is set)
#   gw-poll     gw-uring with gateway.poll_us 20: busy polling before the loop sleeps (the
#               default does not poll), to show what polling does to the wake-up chain
#   gw-null     isergwd with the null backstore (no disk at all): what the client, the loopback
#               round trip and the gateway's iSCSI/SCSI path allow, the ceiling of the iSCSI ways
# The iSCSI rows use tests/tools/isergw-bench (READ16/WRITE16 aligned to the block size, one
# connection). Targets are pinned to CPU 0 and clients (and local fio) to CPU 1. Order
# alternates per row. CPU µs/IO is the target's utime+stime over the I/Os of the run; the
# client's (isergw-bench's) is measured the same way and shown for gw-uring. "disk QD" is the
# mean number of requests the disk had in flight during gw-uring's and fio's runs (aqu-sz from
# /proc/diskstats' weighted time in queue; on a shared machine other I/O adds to it).
#
# Environment:
#   BUILD            build tree (isergwd, tests/tools/isergw-bench)
#   BENCH_SECS       seconds per run [10]
#   BENCH_DISK_DIR   where the file goes [/var/tmp]
#   BENCH_DISK_SIZE  file size [1G]
#   BENCH_DISK_ROWS  subset of the row names below [all]
#   BENCH_DISK_WAYS  subset of: gw-uring gw-threads tgt-aio fio gw-null gw-poll gw-b [all but gw-b;
#                    gw-b is added when BENCH_DISK_GW_B is set]
#   BENCH_DISK_GW_B  another build's isergwd binary (named isergwd), for the gw-b way
#   BENCH_DISK_REPEAT  runs of every row, interleaved (row 1..n, then again) [1]
#   BENCH_OUT        Markdown output, appended [$BUILD/bench.md]
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/bench.sh"

BENCH_SECS=${BENCH_SECS:-10}
BENCH_OUT=${BENCH_OUT:-$T_BUILD/bench.md}
BENCH_DISK_DIR=${BENCH_DISK_DIR:-/var/tmp}
BENCH_DISK_SIZE=${BENCH_DISK_SIZE:-1G}
BENCH_DISK_GW_B=${BENCH_DISK_GW_B:-}
BENCH_DISK_WAYS=${BENCH_DISK_WAYS:-gw-uring gw-threads tgt-aio fio gw-null gw-poll${BENCH_DISK_GW_B:+ gw-b}}
BENCH_DISK_REPEAT=${BENCH_DISK_REPEAT:-1}
BENCH=$T_TOOLS/isergw-bench
CLK_TCK=$(getconf CLK_TCK)

# name op pattern block-bytes qd
ROWS="
randread-4k-qd1 read rand 4096 1
randread-4k-qd32 read rand 4096 32
randread-4k-qd128 read rand 4096 128
randwrite-4k-qd1 write rand 4096 1
randwrite-4k-qd32 write rand 4096 32
randwrite-4k-qd128 write rand 4096 128
seqread-128k-qd8 read seq 131072 8
seqwrite-128k-qd8 write seq 131072 8
"
BENCH_DISK_ROWS=${BENCH_DISK_ROWS:-$(echo "$ROWS" | awk 'NF { printf "%s ", $1 }')}

t_begin bench-disk
if ! t_need fio taskset tgtd tgtadm; then
	skip bench-disk "fio, taskset or tgt missing"
	t_end
fi
if [ ! -x "$BENCH" ]; then
	fail build "$BENCH is missing (make $BUILD/tests/tools/isergw-bench)"
	t_end
fi
FSTYPE=$(stat -f -c %T "$BENCH_DISK_DIR" 2>/dev/null)
case "$FSTYPE" in
tmpfs | ramfs | "")
	skip bench-disk "$BENCH_DISK_DIR is ${FSTYPE:-missing}, not a disk (set BENCH_DISK_DIR)"
	t_end
	;;
esac
DISK_FILE=$(mktemp "$BENCH_DISK_DIR/isergw-bench-disk.XXXXXX.img") || exit 1
# The file goes with the suite; t_exit_trap still sees the status the script exited with.
trap 'rc=$?; rm -f "$DISK_FILE"; (exit $rc); t_exit_trap' EXIT
BYTES=$(to_bytes "$BENCH_DISK_SIZE")
t_log "bench-disk: writing $BENCH_DISK_SIZE of random data to $DISK_FILE ($FSTYPE)"
if ! fallocate -l "$BYTES" "$DISK_FILE" ||
	! dd if=/dev/urandom of="$DISK_FILE" bs=4M count=$((BYTES / 4194304)) oflag=direct \
		conv=notrunc status=none; then
	fail file "cannot write $DISK_FILE"
	t_end
fi
sync

# The disk under the file, for its queue: /proc/diskstats' name (vda for /dev/vda1 and /dev/vda).
DISK_DEV=$(basename "$(df --output=source "$BENCH_DISK_DIR" | tail -n 1)")
[ -e "/sys/class/block/$DISK_DEV/partition" ] &&
	DISK_DEV=$(basename "$(readlink -f "/sys/class/block/$DISK_DEV/..")")
disk_queue_ms() {
	awk -v d="$DISK_DEV" '$3 == d { print $14 }' /proc/diskstats
}

NCPU=$(nproc)
CLIENT=()
PIN_NOTE="no CPU pinning"
if [ "$NCPU" -ge 2 ]; then
	T_PIN_CPU=0
	CLIENT=(taskset -c 1)
	PIN_NOTE="targets pinned to CPU 0, clients and local fio to CPU 1"
fi

declare -A URL=() PID=()
start_gw() {
	local way=$1 engine=$2 conf
	TARGET=isergwd
	tg_defaults
	TG_IQN=iqn.2026-11.org.isergw:bench-$way
	TG_BACKING=$DISK_FILE
	TG_SIZE=$BENCH_DISK_SIZE
	TG_THIN=0
	[ "$way" = gw-poll ] && TG_GATEWAY='"poll_us": 20'
	T_PORT=$(t_free_port) || return 1
	conf=$T_DIR/$way.json
	gw_write_config "$conf" "$T_PORT"
	if [ "$engine" = null ]; then
		sed -i "s|{ \"type\": \"file\", \"path\": \"[^\"]*\",|{ \"type\": \"null\",|" "$conf"
		grep -q '"type": "null"' "$conf" || return 1
	else
		sed -i "s|\"block_size\": 512 }|\"block_size\": 512, \"direct\": true, \"io_engine\": \"$engine\" }|" "$conf"
		grep -q '"direct": true' "$conf" || return 1
	fi
	if [ "$way" = gw-b ]; then
		# gw_start runs $T_BUILD/isergwd: the other build's, for this way only.
		[ "$(basename "$BENCH_DISK_GW_B")" = isergwd ] || return 1
		T_BUILD=$(dirname "$BENCH_DISK_GW_B") gw_start "$conf" "$T_DIR/$way.isergwd.log" \
			"$T_PORT" || return 1
	else
		gw_start "$conf" "$T_DIR/$way.isergwd.log" "$T_PORT" || return 1
	fi
	URL[$way]=iscsi://$T_HOST:$T_PORT/$TG_IQN/0
	PID[$way]=$T_GW_PID
	grep -o "I/O engine [a-z_]*" "$T_DIR/$way.isergwd.log" | head -n 1 | sed "s/^/bench-disk: $way: /"
}
start_tgt() {
	local way=$1 kv
	TG_IQN=iqn.2026-11.org.isergw:bench-$way
	T_PORT=$(t_free_port) || return 1
	tgt_start "$T_PORT" "$T_DIR/$way.tgtd.log" || return 1
	{
		tgtadm_c --op new --mode target --tid 1 -T "$TG_IQN" &&
			tgtadm_c --op new --mode logicalunit --tid 1 --lun 1 --bstype aio \
				-b "$DISK_FILE" &&
			tgtadm_c --op bind --mode target --tid 1 -I ALL
		for kv in MaxRecvDataSegmentLength=262144 MaxXmitDataSegmentLength=262144 \
			MaxBurstLength=1048576 FirstBurstLength=65536 InitialR2T=No ImmediateData=Yes; do
			tgtadm_c --op update --mode target --tid 1 -n "${kv%%=*}" -v "${kv#*=}"
		done
	} >"$T_DIR/$way.tgtadm.log" 2>&1 || return 1
	URL[$way]=iscsi://$T_HOST:$T_PORT/$TG_IQN/1
	PID[$way]=$T_TGT_PID
}

for way in $BENCH_DISK_WAYS; do
	case $way in
	gw-uring) start_gw "$way" uring || fail "start $way" "see $T_DIR" ;;
	gw-threads) start_gw "$way" threads || fail "start $way" "see $T_DIR" ;;
	gw-null) start_gw "$way" null || fail "start $way" "see $T_DIR" ;;
	gw-b) start_gw "$way" uring || fail "start $way" "see $T_DIR ($BENCH_DISK_GW_B)" ;;
	gw-poll) start_gw "$way" uring || fail "start $way" "see $T_DIR" ;;
	tgt-aio) start_tgt "$way" || fail "start $way" "see $T_DIR" ;;
	fio) ;;
	*) fail "$way" "unknown way (gw-uring gw-threads tgt-aio fio gw-null gw-poll gw-b)" ;;
	esac
done
T_PIN_CPU=

# one_run WAY OP PATTERN BS QD: prints "iops cpu_us_per_io client_cpu_us_per_io disk_qd" ("-"
# for fio's CPU), or "- - - -".
one_run() {
	local way=$1 op=$2 pat=$3 bs=$4 qd=$5 out c0 c1 t0 t1 iops cc q0 q1
	out=$T_DIR/run.$way.$op.$pat.$bs.$qd.$RANDOM.out
	if [ "$way" = fio ]; then
		local rw=$op
		[ "$pat" = rand ] && rw=rand$op
		q0=$(disk_queue_ms)
		t0=$(date +%s.%N)
		timeout -k 5 $((BENCH_SECS + 30)) "${CLIENT[@]}" fio --name=disk \
			--filename="$DISK_FILE" --ioengine=io_uring --direct=1 --rw="$rw" --bs="$bs" \
			--iodepth="$qd" --runtime="$BENCH_SECS" --time_based --size="$BYTES" \
			--output-format=json >"$out" 2>&1
		iops=$(python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))["jobs"][0]
print(int(d[sys.argv[2]]["iops"]))' "$out" "$op" 2>/dev/null)
		t1=$(date +%s.%N)
		q1=$(disk_queue_ms)
		[ -n "$iops" ] && echo "$iops - - $(disk_qd "$q0" "$q1" "$t0" "$t1")" || echo "- - - -"
		return
	fi
	[ -n "${URL[$way]:-}" ] || { echo "- - - -"; return; }
	local args=(-t "$BENCH_SECS" -q "$qd" -b "$bs")
	[ "$op" = write ] && args+=(-w)
	[ "$pat" = seq ] && args+=(-s)
	c0=$(t_cpu_ticks "${PID[$way]}")
	q0=$(disk_queue_ms)
	t0=$(date +%s.%N)
	# The client's CPU in seconds: the user+system time of this subshell's waited children
	# (bash's times builtin, second line: "XmY.YYYs XmY.YYYs").
	cc=$(
		timeout -k 5 $((BENCH_SECS + 40)) "${CLIENT[@]}" "$BENCH" "${args[@]}" \
			"${URL[$way]}" >"$out" 2>&1
		times
	)
	cc=$(echo "$cc" | tail -n 1 | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/)
		print u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
	t1=$(date +%s.%N)
	c1=$(t_cpu_ticks "${PID[$way]}")
	q1=$(disk_queue_ms)
	iops=$(sed -n 's/^bench: .* iops=\([0-9]*\) .* errors=0\( .*\)\{0,1\}$/\1/p' "$out")
	if [ -z "$iops" ] || [ -z "$c0" ] || [ -z "$c1" ]; then
		echo "- - - -"
		echo "bench-disk: $way $op $pat $bs $qd failed: $(tail -n 2 "$out" | tr '\r\n' '  ')" >&2
		return
	fi
	awk -v iops="$iops" -v c0="$c0" -v c1="$c1" -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" \
		-v cc="${cc:-0}" '
	BEGIN { ios = iops * (t1 - t0); cpu = ios > 0 ? (c1 - c0) / hz * 1e6 / ios : 0
		ccpu = ios > 0 ? cc * 1e6 / ios : 0
		printf "%d %.1f %.1f ", iops, cpu, ccpu }'
	disk_qd "$q0" "$q1" "$t0" "$t1"
}

# disk_qd Q0_MS Q1_MS T0 T1: the mean queue at the disk between the two samples, or -.
disk_qd() {
	awk -v a="$1" -v b="$2" -v t0="$3" -v t1="$4" 'BEGIN {
		if (a == "" || b == "" || t1 <= t0) print "-"; else printf "%.1f\n", (b - a) / 1000 / (t1 - t0) }'
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
TABLE=$T_DIR/table.md
{
	echo "| workload | gw-uring IOPS | gw-uring CPU µs/IO | client CPU µs/IO | gw-uring disk QD | gw-threads IOPS |" \
		"gw-threads CPU µs/IO | tgt-aio IOPS | tgt-aio CPU µs/IO | local fio IOPS | fio disk QD | gw-null IOPS |" \
		"uring/fio | uring/tgt-aio | uring/threads | uring/null | gw-poll IOPS | gw-poll CPU µs/IO | poll/uring |" \
		"gw-b IOPS | gw-b CPU µs/IO | uring/b |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
} >"$TABLE"
n=0
ALLROWS=
for ((rep = 1; rep <= BENCH_DISK_REPEAT; rep++)); do ALLROWS="$ALLROWS $BENCH_DISK_ROWS"; done
for row in $ALLROWS; do
	spec=$(echo "$ROWS" | awk -v r="$row" '$1 == r')
	if [ -z "$spec" ]; then
		fail "$row" "unknown row"
		continue
	fi
	read -r _ op pat bs qd <<<"$spec"
	declare -A I=() C=() K=() Q=()
	order=$BENCH_DISK_WAYS
	# Alternate: every other row runs the ways in reverse order.
	[ $((n % 2)) = 1 ] && order=$(echo "$BENCH_DISK_WAYS" | tr ' ' '\n' | tac | tr '\n' ' ')
	n=$((n + 1))
	for way in gw-uring gw-threads tgt-aio fio gw-null gw-poll gw-b; do I[$way]=- C[$way]=- K[$way]=- Q[$way]=-; done
	for way in $order; do
		read -r i c k q <<<"$(one_run "$way" "$op" "$pat" "$bs" "$qd")"
		I[$way]=$i C[$way]=$c K[$way]=$k Q[$way]=$q
	done
	echo "| $row | ${I[gw-uring]} | ${C[gw-uring]} | ${K[gw-uring]} | ${Q[gw-uring]} |" \
		"${I[gw-threads]} | ${C[gw-threads]} | ${I[tgt-aio]} | ${C[tgt-aio]} | ${I[fio]} |" \
		"${Q[fio]} | ${I[gw-null]} |" \
		"$(bench_ratio "${I[gw-uring]}" "${I[fio]}") | $(bench_ratio "${I[gw-uring]}" "${I[tgt-aio]}") |" \
		"$(bench_ratio "${I[gw-uring]}" "${I[gw-threads]}") | $(bench_ratio "${I[gw-uring]}" "${I[gw-null]}") |" \
		"${I[gw-poll]} | ${C[gw-poll]} | $(bench_ratio "${I[gw-poll]}" "${I[gw-uring]}") |" \
		"${I[gw-b]} | ${C[gw-b]} | $(bench_ratio "${I[gw-uring]}" "${I[gw-b]}") |" >>"$TABLE"
	bad=0
	for way in $BENCH_DISK_WAYS; do [ "${I[$way]}" = - ] && bad=1; done
	if [ $bad = 1 ]; then
		fail "$row" "a run failed (see $T_DIR)"
	else
		pass "$row: uring ${I[gw-uring]}, threads ${I[gw-threads]}, tgt-aio ${I[tgt-aio]}, fio ${I[fio]}, null ${I[gw-null]}, polling ${I[gw-poll]}${BENCH_DISK_GW_B:+, b ${I[gw-b]}} IOPS"
	fi
	unset I C K Q
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

mkdir -p "$(dirname "$BENCH_OUT")"
{
	echo
	echo "Disk rows, measured $(date -u '+%Y-%m-%d %H:%M') UTC on" \
		"$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), $NCPU CPUs, kernel" \
		"$(uname -r); $PIN_NOTE. Load average before $LOAD0, after $LOAD1."
	echo "LUN: $BENCH_DISK_SIZE file on $(df --output=source "$BENCH_DISK_DIR" | tail -n 1) ($FSTYPE)," \
		"written with random data, O_DIRECT in every target; ${BENCH_DISK_REPEAT} ${BENCH_SECS} s run(s) per row and way${BENCH_DISK_GW_B:+; gw-b is $BENCH_DISK_GW_B}."
	echo "Command: \`BENCH_SECS=$BENCH_SECS BENCH_DISK_WAYS=\"$BENCH_DISK_WAYS\" BENCH_DISK_ROWS=\"$(echo $BENCH_DISK_ROWS)\" tests/bench/disk.sh\` (part of \`make bench\`)"
	echo
	cat "$TABLE"
} | tee -a "$BENCH_OUT"
t_log "bench-disk: table appended to $BENCH_OUT"
t_end
