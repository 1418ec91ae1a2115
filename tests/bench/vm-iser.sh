#!/bin/bash
# The iSER rows of `make bench` (tests/bench/run.sh runs this last; it also runs alone): boots
# the VM rig once with the guest bench tests/vm/guest/suite-bench-iser.sh, which measures the
# gateway (iSER and TCP), tgtd (iSER and TCP) and LIO (iSER) on one LUN backing with one client
# (fio on the kernel initiator), and prints the figures with their ratios. Skipped, with the
# reason, when the VM cannot run here (no qemu, no kernel package, too little memory).
#
# Environment: BUILD, BENCH_VM_SECS (seconds per fio run in the guest [5]), BENCH_VM_ROUNDS
# (interleaved rounds of every row on every target [3]), BENCH_OUT (Markdown
# output; the section is appended [$BUILD/bench-iser.md when run alone]; when it already holds
# the host bench's table, its libiscsi gateway/tgt ratios are printed beside the kernel
# initiator's TCP rows), BENCH_VM_ROWS / BENCH_VM_TARGETS / BENCH_VM_SKIP to narrow a run (see
# tests/vm/guest/suite-bench-iser.sh), BENCH_VM_GW_B (a second isergwd binary, another build's,
# measured beside the first as "isergwb iser" and "isergwb tcp": its raw lines are in the run's
# bench-iser.txt, its iSER ratio to the gateway and to LIO is printed), BENCH_VM_CELLS (only these ROW@NAME:TRANSPORT
# cells), BENCH_VM_GW_ENGINE (the gateway's io_engine), VM_* as for tests/vm/run.sh. The
# gateway's state after the runs (its LUNs' backstore counters) and its log are kept beside the
# figures: $VM_DIR/run/share/bench-iser-state.json and bench-iser-isergwd.log.
set -u
. "$(dirname "$0")/../lib/common.sh"
# shellcheck source=tests/bench/round-ratio.sh
. "$(dirname "$0")/round-ratio.sh"

BENCH_VM_SECS=${BENCH_VM_SECS:-5}
BENCH_VM_ROUNDS=${BENCH_VM_ROUNDS:-3}
OUT_MD=${BENCH_OUT:-$T_BUILD/bench-iser.md}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM_DIR=${VM_DIR:-$ROOT/build/vm}
SHARE=$VM_DIR/run/share

# shellcheck disable=SC2034 # read by tests/lib/common.sh
TARGET=vm
t_begin bench-iser
for t in qemu-system-x86_64 fio iscsiadm tgtd; do
	if ! command -v "$t" >/dev/null 2>&1; then
		skip "iser rows" "$t is missing (deploy/install-deps.sh test): the VM bench cannot run"
		t_end
	fi
done
avail=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
if [ "${avail:-0}" -lt 3000 ]; then
	skip "iser rows" "only ${avail} MiB of memory available; the VM needs about 3000"
	t_end
fi

t_log "bench-iser: booting the VM rig for the iSER rows (${BENCH_VM_ROUNDS} rounds, ${BENCH_VM_SECS}s per run)"
rm -f "$SHARE/bench-iser.txt"
# The guest reads its settings from the build tree (it sees the host's files, not its
# environment).
{
	printf 'BENCH_VM_SECS=%d\nBENCH_VM_ROUNDS=%d\n' "$BENCH_VM_SECS" "$BENCH_VM_ROUNDS"
	for v in BENCH_VM_ROWS BENCH_VM_TARGETS BENCH_VM_SKIP BENCH_VM_GW_B BENCH_VM_GW_ENGINE \
		BENCH_VM_CELLS; do
		[ -n "${!v:-}" ] && printf '%s="%s"\n' "$v" "${!v}"
	done
} >"$T_BUILD/bench-iser.env"
"$ROOT/tests/vm/run.sh" bench-iser >"$T_DIR/vm.log" 2>&1
vm_rc=$?
grep -E '^  (PASS|FAIL|SKIP)|^vm:' "$T_DIR/vm.log"
if [ ! -s "$SHARE/bench-iser.txt" ]; then
	if grep -q 'FAIL  rig:' "$T_DIR/vm.log"; then
		skip "iser rows" "the VM cannot run here: $(grep -m1 'FAIL  rig:' "$T_DIR/vm.log" |
			sed 's/.*rig: //')"
	else
		fail "iser rows" "the guest wrote no figures (exit $vm_rc; see $T_DIR/vm.log and" \
			"$VM_DIR/run/console.log)"
	fi
	t_end
fi
cp "$SHARE/bench-iser.txt" "$T_DIR/"
DATA=$T_DIR/bench-iser.txt

# median: the median of the numbers on stdin, "-" when there are none.
median() {
	sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "-";
		else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# fig TARGET TRANSPORT ROW FIELD: the median over the rounds of IOPS (field 4) or KiB/s
# (field 5), "-" when not measured.
fig() {
	awk -v t="$1" -v tr="$2" -v r="$3" -v f="$4" \
		'$1 == t && $2 == tr && $3 == r && $f != "-" { print $f }' "$DATA" | median
}
# rratio A B ROW FIELD: A/B per round, median and range (tests/bench/round-ratio.sh).
rratio() { bench_round_ratio "$DATA" "$@" range; }
# why TARGET TRANSPORT: the guest's reason for a target it skipped.
why() {
	awk -v t="$1" -v tr="$2" '$1 == t && $2 == tr && $4 == "skip" {
		$1 = $2 = $3 = $4 = ""; sub(/^ +/, ""); print; exit }' "$DATA"
}

COLS="isergwd:iser isergwd:tcp tgtd:iser tgtd:tcp lio:iser"
ROWS="randread-4k-qd1 randread-4k-qd32 randwrite-4k-qd32 seqread-512k-qd8 seqwrite-512k-qd8"
TABLE=$T_DIR/table.md
{
	printf '| workload | unit |'
	for c in $COLS; do printf ' %s |' "${c/:/ over }"; done
	printf ' gateway/tgt (iSER) | gateway/LIO (iSER) | gateway/tgt (TCP) | gateway iSER/TCP |'
	printf ' tgt iSER/TCP |\n'
	printf '| --- | --- |'
	for _ in $COLS; do printf ' ---: |'; done
	printf ' ---: | ---: | ---: | ---: | ---: |\n'
	for r in $ROWS; do
		field=4 unit=IOPS
		case "$r" in seq*) field=5 unit="MiB/s" ;; esac
		declare -A v=()
		for c in $COLS; do
			x=$(fig "${c%%:*}" "${c##*:}" "$r" $field)
			if [ "$x" != - ]; then
				if [ "$field" = 5 ]; then
					x=$(awk -v k="$x" 'BEGIN { printf "%.1f", k / 1024 }')
				else
					x=$(awk -v k="$x" 'BEGIN { printf "%d", k + 0.5 }')
				fi
			fi
			v[$c]=$x
		done
		printf '| %s | %s |' "$r" "$unit"
		for c in $COLS; do printf ' %s |' "${v[$c]}"; done
		printf ' %s | %s | %s | %s | %s |\n' \
			"$(rratio isergwd:iser tgtd:iser "$r" $field)" \
			"$(rratio isergwd:iser lio:iser "$r" $field)" \
			"$(rratio isergwd:tcp tgtd:tcp "$r" $field)" \
			"$(rratio isergwd:iser isergwd:tcp "$r" $field)" \
			"$(rratio tgtd:iser tgtd:tcp "$r" $field)"
		unset v
	done
} >"$TABLE"

# The kernel initiator over TCP beside libiscsi on the host: the same workload's gateway/tgt
# ratio from the host bench's table (the last column of its row in BENCH_OUT), when this run
# follows it; a row whose two ratios diverge is a client-specific difference.
TCP_ROWS="randread-4k-qd1 randread-4k-qd32 randwrite-4k-qd1 randwrite-4k-qd32 seqread-512k-qd8
seqread-512k-qd32 seqwrite-512k-qd8 seqwrite-512k-qd32"
host_ratio() {
	[ -r "$OUT_MD" ] || { echo -; return; }
	awk -F'|' -v r="$1" '$2 ~ "^ " r " $" && $3 ~ /iscsi-perf|isergw-bench/ {
		x = $(NF - 1); gsub(/ /, "", x); v = x } END { print v == "" ? "-" : v }' "$OUT_MD"
}
TCP_TABLE=$T_DIR/table-tcp.md
{
	echo '| workload | unit | isergwd kernel/TCP | tgtd kernel/TCP | gateway/tgt kernel initiator (VM) | gateway/tgt libiscsi (host) |'
	echo '| --- | --- | ---: | ---: | ---: | ---: |'
	for r in $TCP_ROWS; do
		field=4 unit=IOPS
		case "$r" in seq*) field=5 unit="MiB/s" ;; esac
		line="| $r | $unit |"
		for c in isergwd:tcp tgtd:tcp; do
			x=$(fig "${c%%:*}" tcp "$r" $field)
			if [ "$x" != - ] && [ "$field" = 5 ]; then
				x=$(awk -v k="$x" 'BEGIN { printf "%.1f", k / 1024 }')
			elif [ "$x" != - ]; then
				x=$(awk -v k="$x" 'BEGIN { printf "%d", k + 0.5 }')
			fi
			line="$line $x |"
		done
		echo "$line $(rratio isergwd:tcp tgtd:tcp "$r" $field) | $(host_ratio "$r") |"
	done
} >"$TCP_TABLE"

# BENCH_VM_GW_B's build beside the gateway: per row, gateway/LIO, B/LIO and gateway/B, each the
# median of the ratios within a round with their range.
AB_TABLE=
if grep -q '^isergwb iser [a-z]' "$DATA"; then
	AB_TABLE=$T_DIR/table-ab.md
	{
		echo '| workload | unit | gateway (this build)/LIO | B build/LIO | this build/B build |'
		echo '| --- | --- | ---: | ---: | ---: |'
		for r in $ROWS; do
			field=4 unit=IOPS
			case "$r" in seq*) field=5 unit="MiB/s" ;; esac
			grep -q "^isergwb iser $r " "$DATA" || continue
			printf '| %s | %s | %s | %s | %s |\n' "$r" "$unit" \
				"$(rratio isergwd:iser lio:iser "$r" $field)" \
				"$(rratio isergwb:iser lio:iser "$r" $field)" \
				"$(rratio isergwd:iser isergwb:iser "$r" $field)"
		done
	} >"$AB_TABLE"
fi

notes=""
for c in $COLS; do
	w=$(why "${c%%:*}" "${c##*:}")
	[ -n "$w" ] && notes="$notes- ${c/:/ over }: skipped: $w"$'\n'
done
{
	echo
	echo "### iSER in the VM (Soft-RoCE)"
	echo
	echo "Measured $(date -u +%Y-%m-%d) in the VM rig (Debian's stock kernel under qemu, $(
		grep -m1 -o 'accel [^ ]*\|-accel [^ ]*' "$T_DIR/vm.log" | head -n 1 || true)), rdma_rxe on a veth,"
	echo "both ends in one guest. Client: fio (libaio, O_DIRECT, ${BENCH_VM_SECS} s per run after 1 s"
	echo "of ramp) on the Linux kernel initiator: ib_iser for iSER, iscsi_tcp for TCP. One LUN backing:"
	echo "a 256 MiB file of random data on the guest's tmpfs (tgtd rdwr, LIO fileio, gateway file"
	echo "backstore). Every target runs at once with its session logged in; $BENCH_VM_ROUNDS rounds, each"
	echo "row on every target in turn (order rotated per round). Figures: the median over the rounds;"
	echo "ratios: the median of the ratios within a round, with their range. Absolute figures under"
	echo "TCG emulation are meaningless; the ratios are the point. Command: \`make bench\` (or"
	echo "\`BENCH_VM_SECS=$BENCH_VM_SECS BENCH_VM_ROUNDS=$BENCH_VM_ROUNDS tests/bench/vm-iser.sh\`)."
	echo
	cat "$TABLE"
	[ -n "$notes" ] && echo && printf '%s' "$notes"
	if [ -n "$AB_TABLE" ]; then
		echo
		echo "Two builds side by side (BENCH_VM_GW_B=$BENCH_VM_GW_B as \"B\"):"
		echo
		cat "$AB_TABLE"
	fi
	echo
	echo "### The kernel initiator over TCP beside libiscsi"
	echo
	echo "The same guest run: every row over TCP, fio on iscsi_tcp against the gateway and tgtd"
	echo "(figures and ratios as above), and the gateway/tgt ratio libiscsi measured for the same"
	echo "workload on the host in this \`make bench\` (\"-\" when the host bench did not run it)."
	echo "Load average at the end of the run: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	cat "$TCP_TABLE"
} >>"$OUT_MD"
t_log ""
cat "$TABLE"
[ -n "$notes" ] && printf '%s' "$notes"
[ -n "$AB_TABLE" ] && { t_log ""; cat "$AB_TABLE"; }
t_log ""
cat "$TCP_TABLE"
t_log ""
t_log "bench-iser: section appended to $OUT_MD"
if [ "$vm_rc" -ne 0 ]; then
	fail "vm" "the guest bench reported failures (see $T_DIR/vm.log)"
else
	pass "vm" "every target measured or skipped with its reason"
fi
t_end
