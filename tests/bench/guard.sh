#!/bin/bash
# `make bench-guard`: a short subset of `make bench`, the gateway side by side with its peers in
# one run, each ratio held against its floor in tests/bench/guard-floors.txt. Run it before a
# data-path change is merged and put its result in the commit message; it is not part of `make
# test` (about 10 minutes: 2 of them on the host, the rest the VM rig's boot and runs).
#
#   host: the libiscsi rows against tgtd (tests/bench/run.sh, pinned as there), 4 KiB QD 32 reads,
#         4 KiB QD 32 writes and 512 KiB QD 8 reads, BENCH_RUNS runs of BENCH_SECS each
#   vm:   the kernel initiator (tests/bench/vm-iser.sh): 4 KiB QD 32 and 512 KiB QD 8 reads over
#         TCP against tgtd, 4 KiB QD 1 reads over iSER against LIO, BENCH_VM_ROUNDS interleaved
#         rounds; and where the gateway served the 512 KiB reads (its LUN's counters after the
#         run: reads copied on the backstore's workers per 512 KiB read fio counted), which the
#         host's load cannot hide (a loaded host gives the guest less than its two CPUs, and
#         then the gateway leads that row with or without the overlap: issue 28)
#
# A ratio is the median over the runs (host) or over the rounds of the ratios within a round
# (VM). Prints each check as "ok" or "FAIL" with its figure and floor, then "bench-guard: N
# passed, N failed, N skipped"; exits 1 when a figure is under its floor or was not measured (a
# guard that cannot run says so and fails: it is run on purpose).
#
# Environment: BUILD, BENCH_SECS [4], BENCH_RUNS [3], BENCH_VM_SECS [5], BENCH_VM_ROUNDS [3],
# BENCH_GUARD_PARTS ("host vm"), BENCH_GUARD_FLOORS (the floors file), VM_* as for
# tests/vm/run.sh. The guest's gateway runs with its default loops (one per vCPU: two).
set -u
. "$(dirname "$0")/../lib/common.sh"
# shellcheck source=tests/bench/round-ratio.sh
. "$(dirname "$0")/round-ratio.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FLOORS=${BENCH_GUARD_FLOORS:-$ROOT/tests/bench/guard-floors.txt}
PARTS=${BENCH_GUARD_PARTS:-host vm}
HOST_ROWS="randread-4k-qd32 randwrite-4k-qd32 seqread-512k-qd8"
VM_CELLS="randread-4k-qd32@isergwd:tcp randread-4k-qd32@tgtd:tcp seqread-512k-qd8@isergwd:tcp"
VM_CELLS="$VM_CELLS seqread-512k-qd8@tgtd:tcp randread-4k-qd1@isergwd:iser randread-4k-qd1@lio:iser"

# shellcheck disable=SC2034 # read by tests/lib/common.sh
TARGET=guard
t_begin bench-guard
if [ ! -r "$FLOORS" ]; then
	fail floors "cannot read $FLOORS"
	t_end
fi

# check NAME FIGURE: FIGURE against NAME's floor; "-" (not measured) fails.
check() {
	local name=$1 fig=$2 floor measured
	floor=$(awk -v n="$name" '$1 == n { print $2; exit }' "$FLOORS")
	measured=$(awk -v n="$name" '$1 == n { $1 = $2 = ""; sub(/^ +/, ""); print; exit }' \
		"$FLOORS")
	if [ -z "$floor" ]; then
		fail "$name" "no floor in $FLOORS"
	elif [ -z "$fig" ] || [ "$fig" = - ]; then
		fail "$name" "not measured (see $T_DIR)"
	elif awk -v f="$fig" -v l="$floor" 'BEGIN { exit !(f + 0 >= l + 0) }'; then
		pass "$name: $fig (floor $floor; $measured)"
	else
		fail "$name" "$fig is under its floor $floor ($measured)"
	fi
}

t_log "bench-guard: load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
# ---- host: tests/bench/run.sh's libiscsi rows against tgtd ---------------------------------
case " $PARTS " in
*" host "*)
	HOST_MD=$T_DIR/host.md
	BENCH_VM=0 BENCH_LOOPS=0 BENCH_ROWS=$HOST_ROWS BENCH_SECS=${BENCH_SECS:-4} \
		BENCH_RUNS=${BENCH_RUNS:-3} BENCH_OUT=$HOST_MD "$ROOT/tests/bench/run.sh" \
		>"$T_DIR/host.log" 2>&1
	grep -E "^  (ok|FAIL|skip)" "$T_DIR/host.log" | sed "s/^  /  host: /"
	for r in $HOST_ROWS; do
		# The last column of the row: IOPS gateway/tgt.
		x=$(awk -F'|' -v r="$r" '$2 == " " r " " { x = $(NF - 1); gsub(/ /, "", x)
			print x }' "$HOST_MD" 2>/dev/null)
		check "host/$r/gateway-tgt" "$x"
	done
	;;
esac

# ---- vm: the kernel initiator in the VM rig --------------------------------------------------
case " $PARTS " in
*" vm "*)
	VM_MD=$T_DIR/vm.md
	BENCH_VM_CELLS=$VM_CELLS BENCH_VM_SKIP=tgtd:iser BENCH_OUT=$VM_MD \
		"$ROOT/tests/bench/vm-iser.sh" >"$T_DIR/vm.log" 2>&1
	grep -E '^  (ok|FAIL|skip)|^vm:' "$T_DIR/vm.log" | sed 's/^  /  vm: /'
	SHARE=${VM_DIR:-$ROOT/build/vm}/run/share
	DATA=$SHARE/bench-iser.txt
	# vratio A B ROW FIELD: the median over the rounds of A/B within a round, as vm-iser.sh.
	vratio() {
		[ -r "$DATA" ] || { echo -; return; }
		bench_round_ratio "$DATA" "$@"
	}
	x=$(vratio isergwd:tcp tgtd:tcp randread-4k-qd32 4)
	check vm/randread-4k-qd32/tcp/gateway-tgt "$x"
	x=$(vratio isergwd:tcp tgtd:tcp seqread-512k-qd8 5)
	check vm/seqread-512k-qd8/tcp/gateway-tgt "$x"
	x=$(vratio isergwd:iser lio:iser randread-4k-qd1 4)
	check vm/randread-4k-qd1/iser/gateway-lio "$x"
	# The TCP LUN's reads copied on the workers, per 512 KiB read fio counted over the rounds
	# (IOPS x BENCH_VM_SECS; the ramp's reads make it a little over 1 when all went there).
	workers=-
	if [ -r "$SHARE/bench-iser-state.json" ] && [ -r "$DATA" ]; then
		workers=$(python3 - "$SHARE/bench-iser-state.json" "$DATA" \
			"${BENCH_VM_SECS:-5}" <<-'EOF'
			import json, sys
			state = json.load(open(sys.argv[1]))
			runs = [l.split() for l in open(sys.argv[2])]
			row = ["isergwd", "tcp", "seqread-512k-qd8"]
			reads = sum(int(r[3]) * int(sys.argv[3]) for r in runs
			            if r[:3] == row and r[3] != "-")
			lun = [t for t in state.get("targets", []) if t["name"].endswith("-tcp")]
			st = lun[0]["luns"][0].get("status", {}) if lun else {}
			n = st.get("thread_ios")
			print("%.2f" % (n / reads) if reads and n is not None else "-")
		EOF
		)
	fi
	check vm/seqread-512k-qd8/tcp/on-workers "$workers"
	;;
esac
t_log "bench-guard: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
t_end
