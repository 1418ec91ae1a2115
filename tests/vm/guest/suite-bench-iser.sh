#!/bin/bash
# bench-iser: `make bench`'s iSER rows, in one guest (tests/bench/vm-iser.sh starts it; it is
# not part of `make test-vm`). One LUN backing (a file on the guest's tmpfs, filled with random
# data) served in turn by each target, and one client: fio on the Linux kernel initiator
# (ib_iser for iSER, iscsi_tcp for TCP), O_DIRECT, libaio, on the disk the login attached.
# Every target runs at once, each with its session logged in, and the runs interleave: round
# after round, each row on every target in turn (the order rotated each round), so a drift of
# the emulated machine's speed hits them all alike and the host compares runs of one round.
#
#   targets: the gateway over iSER and over TCP, tgtd over iSER (--lld iser) and over TCP, LIO
#            over iSER (ib_isert, set up through configfs)
#   rows:    randread-4k-qd1, randread-4k-qd32, randwrite-4k-qd32 (IOPS), seqread-512k-qd8,
#            seqwrite-512k-qd8 (MiB/s) on every target; reads move by RDMA Write, writes by RDMA
#            Read. Over TCP also randwrite-4k-qd1, seqread-512k-qd32 and seqwrite-512k-qd32: the
#            kernel initiator's rows, printed beside the host bench's libiscsi rows.
#
# Each measured run is a line "TARGET TRANSPORT ROW IOPS KIBPS ROUND" in
# $VM_SHARE/bench-iser.txt; a target that cannot run writes "TARGET TRANSPORT - skip REASON".
# After the runs the gateway's state (each LUN's backstore counters: which engine, how many I/Os
# went inline, to the ring, to the workers) is $VM_SHARE/bench-iser-state.json and its log
# $VM_SHARE/bench-iser-isergwd.log.
# Soft-RoCE under TCG emulation makes absolute figures meaningless: the host prints ratios.
#
# Settings: BENCH_VM_SECS (seconds per fio run, default 5), BENCH_VM_ROUNDS (3), and to narrow
# a run: BENCH_VM_ROWS (row names), BENCH_VM_TARGETS (NAME:TRANSPORT words, e.g. "isergwd:tcp
# tgtd:tcp"; the others stay logged in, idle), BENCH_VM_SKIP ("tgtd:iser" leaves that login
# out), BENCH_VM_CELLS (ROW@NAME:TRANSPORT words: only these rows on these targets, e.g.
# "seqread-512k-qd8@isergwd:tcp seqread-512k-qd8@tgtd:tcp"), BENCH_VM_GW_B (a second isergwd
# binary, measured as isergwb over iSER and TCP: two builds side by side in one run),
# BENCH_VM_GW_ENGINE (the gateway's file backstore io_engine: uring or threads); all read from
# $VM_BUILD/bench-iser.env when tests/bench/vm-iser.sh wrote one (the guest does not inherit
# the host's environment).
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/vm/guest/lib-tgt.sh
. "$(dirname "$0")/lib-tgt.sh"
vm_begin bench-iser

ADDR=10.200.7.1
BENCH_VM_SECS=5
BENCH_VM_ROUNDS=3
# shellcheck disable=SC1091
[ -r "$VM_BUILD/bench-iser.env" ] && . "$VM_BUILD/bench-iser.env"
SECS=$BENCH_VM_SECS
ROUNDS=$BENCH_VM_ROUNDS
OUT=$VM_SHARE/bench-iser.txt
LUN=$VM_WORK/lun.img
IQN_GW=iqn.2026-11.org.isergw:bench-gw
IQN_TGT=iqn.2026-11.org.isergw:bench-tgt
IQN_LIO=iqn.2026-11.org.isergw:bench-lio
# name rw bs qd transports: every row runs over TCP (the kernel initiator's rows beside
# libiscsi's on the host); the iSER columns carry the first five.
ROWS="
randread-4k-qd1 randread 4k 1 all
randread-4k-qd32 randread 4k 32 all
seqread-512k-qd8 read 512k 8 all
seqread-512k-qd32 read 512k 32 tcp
randwrite-4k-qd1 randwrite 4k 1 tcp
randwrite-4k-qd32 randwrite 4k 32 all
seqwrite-512k-qd8 write 512k 8 all
seqwrite-512k-qd32 write 512k 32 tcp
"
: >"$OUT"

if ! vm_need fio tgtd tgtadm rdma iscsiadm iscsid "$VM_BUILD/isergwd"; then
	skip all "$VM_MISSING is not installed (fio, tgt, iproute2, open-iscsi; make)"
	echo "all - - skip $VM_MISSING is not installed" >>"$OUT"
	vm_end
fi
if ! vm_modprobe rdma_rxe ib_uverbs rdma_ucm ib_iser; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi
if ! vm_veth vb0 "$ADDR" || ! check rxe vm_rxe_add rxeb vb0; then
	vm_end
fi
if ! check iscsid vm_iscsid_start; then
	vm_end
fi
# 256 MiB of random data: reads touch real pages, not tmpfs holes.
if ! run dd if=/dev/urandom of="$LUN" bs=4M count=64 status=none; then
	fail lun "cannot write $LUN"
	vm_end
fi

# attach NAME TRANSPORT IQN PORTAL: logs in with the kernel initiator (iser or tcp) and records
# the disk it attached in DISKS ("NAME|TRANSPORT|DEV|IQN|PORTAL" words); or writes the skip.
DISKS=
attach() {
	local name=$1 tr=$2 iqn=$3 portal=$4 iface=default dev
	[ "$tr" = iser ] && iface=iser
	run iscsiadm -m node -o new -T "$iqn" -p "$portal" -I "$iface" >/dev/null
	if ! VM_TMO=60 run iscsiadm -m node -T "$iqn" -p "$portal" -I "$iface" --login \
		>"$VM_WORK/login-$name-$tr.out" 2>&1; then
		fail "$name-$tr/login" "$(tail -n 2 "$VM_WORK/login-$name-$tr.out")"
		echo "$name $tr - skip login failed" >>"$OUT"
		run iscsiadm -m node -o delete -T "$iqn" -p "$portal" >/dev/null 2>&1
		return 1
	fi
	if ! dev=$(vm_wait_disk "$iqn" 30); then
		fail "$name-$tr/disk" "no disk attached within 30 s"
		echo "$name $tr - skip no disk" >>"$OUT"
		detach "$iqn" "$portal"
		return 1
	fi
	DISKS="$DISKS $name|$tr|$dev|$iqn|$portal"
}

detach() {
	run iscsiadm -m node -T "$1" -p "$2" --logout >/dev/null 2>&1
	run iscsiadm -m node -o delete -T "$1" -p "$2" >/dev/null 2>&1
}

# fio_row NAME TRANSPORT DEV ROUND ROW RW BS QD: one fio run; its line goes to $OUT.
fio_row() {
	local name=$1 tr=$2 dev=$3 round=$4 row=$5 rw=$6 bs=$7 qd=$8 line iops kib
	# Terse output v3: fields 7 and 8 are the read bandwidth in KiB/s and IOPS, 48 and 49
	# the write ones; a row does one of the two, the other is 0.
	line=$(VM_TMO=$((SECS + 60)) run fio --name="$row" --filename="/dev/$dev" \
		--direct=1 --ioengine=libaio --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--runtime="$SECS" --time_based --ramp_time=1 --size=240M \
		--output-format=terse --terse-version=3 </dev/null 2>"$VM_WORK/fio-$name-$tr-$row.err" |
		tail -n 1)
	iops=$(echo "$line" | awk -F';' '{ printf "%d", $8 + $49 }')
	kib=$(echo "$line" | awk -F';' '{ printf "%d", $7 + $48 }')
	if [ -n "$iops" ] && [ "${iops%%.*}" -gt 0 ] 2>/dev/null; then
		echo "$name $tr $row ${iops%%.*} $kib $round" >>"$OUT"
		echo "round $round: $name over $tr, $row: $iops IOPS, $((kib / 1024)) MiB/s"
	else
		echo "$name $tr $row - - $round" >>"$OUT"
		fail "$name-$tr/$row-$round" "fio: $(tail -n 2 "$VM_WORK/fio-$name-$tr-$row.err")"
	fi
}

# ---- tgtd: iSER on every RDMA address port 3260, TCP on ADDR:3262 -------------------------
if check tgt-start vm_tgt_start "$IQN_TGT" "$LUN" "$ADDR:3262" "$VM_INITIATOR"; then
	case " ${BENCH_VM_SKIP:-} " in *" tgtd:iser "*) ;; *) attach tgtd iser "$IQN_TGT" "$ADDR:3260" ;; esac
	# tgt keeps each transport's targets apart: a second target, same file, for TCP.
	if check tgt-tcp-target vm_tgt_add_tcp "$IQN_TGT-tcp" "$LUN"; then
		attach tgtd tcp "$IQN_TGT-tcp" "$ADDR:3262"
	fi
else
	echo "tgtd iser - skip tgtd did not start" >>"$OUT"
fi

# ---- LIO over iSER: fileio backstore on the same file, ib_isert portal ADDR:3261 ----------
LIO=/sys/kernel/config/target
LIO_TPG=$LIO/iscsi/$IQN_LIO/tpgt_1
lio_stop() {
	[ -d "$LIO_TPG" ] || return 0
	echo 0 >"$LIO_TPG/enable" 2>/dev/null
	rmdir "$LIO_TPG/np/$ADDR:3261" 2>/dev/null
	rm -f "$LIO_TPG/lun/lun_0/bench" 2>/dev/null
	rmdir "$LIO_TPG/lun/lun_0" "$LIO_TPG" "$LIO/iscsi/$IQN_LIO" 2>/dev/null
	rmdir "$LIO/core/fileio_0/bench" "$LIO/core/fileio_0" 2>/dev/null
	return 0
}
lio_start() {
	local size
	size=$(stat -c %s "$LUN")
	vm_modprobe configfs target_core_mod iscsi_target_mod target_core_file ib_isert || return 1
	mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config || return 1
	vm_on_exit lio_stop
	mkdir -p "$LIO/core/fileio_0/bench" || return 1
	echo "fd_dev_name=$LUN,fd_dev_size=$size" >"$LIO/core/fileio_0/bench/control" || return 1
	echo 1 >"$LIO/core/fileio_0/bench/enable" || return 1
	mkdir -p "$LIO_TPG/lun/lun_0" || return 1
	ln -s "$LIO/core/fileio_0/bench" "$LIO_TPG/lun/lun_0/bench" || return 1
	mkdir "$LIO_TPG/np/$ADDR:3261" || return 1
	echo 1 >"$LIO_TPG/np/$ADDR:3261/iser" || return 1
	echo 0 >"$LIO_TPG/attrib/authentication"
	echo 1 >"$LIO_TPG/attrib/generate_node_acls"
	echo 0 >"$LIO_TPG/attrib/demo_mode_write_protect"
	echo 1 >"$LIO_TPG/attrib/cache_dynamic_acls"
	echo 1 >"$LIO_TPG/enable"
}
if check lio-start lio_start; then
	attach lio iser "$IQN_LIO" "$ADDR:3261"
else
	echo "lio iser - skip LIO with ib_isert could not be set up" >>"$OUT"
fi

# ---- the gateway: TCP on ADDR:3263, iSER on ADDR:3264 --------------------------------------
# Two targets on the same file, one per portal: both sessions are logged in at once, and a
# disk is found by its target's name.
# BENCH_VM_GW_ENGINE (uring or threads) sets the file backstore's io_engine (default: auto).
gw_target() {
	printf '{ "name": "%s", "tpgt": 1, "portals": ["%s"], "allow_any_initiator": true,
	  "luns": [ { "lun": 0, "product": "bench", "write_cache": true,
	  "backstore": { "type": "file", "path": "%s", "block_size": 512%s } } ] }' "$1" "$2" \
		"$LUN" "${BENCH_VM_GW_ENGINE:+, \"io_engine\": \"$BENCH_VM_GW_ENGINE\"}"
}
cat >"$VM_WORK/isergwd.json" <<JSON
{ "gateway": { "control_socket": "$VM_WORK/isergwd.sock" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$ADDR", "port": 3263 },
               { "name": "iser0", "transport": "iser", "address": "$ADDR", "port": 3264 } ],
  "targets": [ $(gw_target "$IQN_GW" iser0), $(gw_target "$IQN_GW-tcp" tcp0) ] }
JSON
GW_LOG=$VM_WORK/isergwd.log
if check gateway-start vm_gw_start "$VM_WORK/isergwd.json" "$GW_LOG" "$ADDR" 3263; then
	attach isergwd tcp "$IQN_GW-tcp" "$ADDR:3263"
	# An iSER portal may come up a moment after the TCP one (it follows the RDMA device).
	for _ in $(seq 1 50); do
		grep -q "$ADDR:3264 (iser)" "$GW_LOG" && break
		grep -q 'portal iser0 skipped' "$GW_LOG" && break
		sleep 0.2
	done
	if grep -q "$ADDR:3264 (iser)" "$GW_LOG"; then
		attach isergwd iser "$IQN_GW" "$ADDR:3264"
	else
		why=$(grep -m1 'portal iser0' "$GW_LOG" | cut -c1-160)
		skip isergwd-iser "no iser datamover: ${why:-no iSER portal in the log}"
		echo "isergwd iser - skip no iser datamover" >>"$OUT"
	fi
else
	echo "isergwd tcp - skip the gateway did not start" >>"$OUT"
fi

# ---- optional: a second gateway build, iSER and TCP (an A/B of two builds in one run) -----
# BENCH_VM_GW_B: another isergwd binary (another build tree's); it serves the same file over
# iSER on ADDR:3266 and TCP on ADDR:3265, measured as "isergwb iser" and "isergwb tcp".
if [ -n "${BENCH_VM_GW_B:-}" ]; then
	cat >"$VM_WORK/isergwb.json" <<JSON
{ "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$ADDR", "port": 3265 },
               { "name": "iser0", "transport": "iser", "address": "$ADDR", "port": 3266 } ],
  "targets": [ $(gw_target "$IQN_GW-b" iser0), $(gw_target "$IQN_GW-b-tcp" tcp0) ] }
JSON
	"$BENCH_VM_GW_B" --config "$VM_WORK/isergwb.json" >"$VM_WORK/isergwb.log" 2>&1 &
	GWB_PID=$!
	vm_on_exit "kill $GWB_PID 2>/dev/null"
	for _ in $(seq 1 100); do
		grep -q "$ADDR:3266 (iser)" "$VM_WORK/isergwb.log" && break
		kill -0 "$GWB_PID" 2>/dev/null || break
		sleep 0.2
	done
	if grep -q "$ADDR:3266 (iser)" "$VM_WORK/isergwb.log"; then
		attach isergwb iser "$IQN_GW-b" "$ADDR:3266"
		attach isergwb tcp "$IQN_GW-b-tcp" "$ADDR:3265"
	else
		fail isergwb-start "$(tail -n 3 "$VM_WORK/isergwb.log")"
		echo "isergwb iser - skip the second gateway did not listen" >>"$OUT"
	fi
fi

# ---- the runs: ROUNDS rounds, each row on every attached disk, the order rotated ----------
# shellcheck disable=SC2086 # one word per disk
set -- $DISKS
n=$#
for round in $(seq 1 "$ROUNDS"); do
	while read -r row rw bs qd trs; do
		[ -n "$row" ] || continue
		case " ${BENCH_VM_ROWS:-$row} " in *" $row "*) ;; *) continue ;; esac
		for k in $(seq 0 $((n - 1))); do
			idx=$(((k + round - 1) % n + 1))
			IFS="|" read -r name tr dev _ _ <<<"${!idx}"
			[ "$trs" = all ] || [ "$trs" = "$tr" ] || continue
			case " ${BENCH_VM_TARGETS:-$name:$tr} " in *" $name:$tr "*) ;; *) continue ;; esac
			case " ${BENCH_VM_CELLS:-$row@$name:$tr} " in *" $row@$name:$tr "*) ;; *) continue ;; esac
			fio_row "$name" "$tr" "$dev" "$round" "$row" "$rw" "$bs" "$qd"
		done
	done <<<"$ROWS"
done
# The gateway's state after the runs (each LUN's backstore counters: ring_ios, thread_ios,
# inline_ios) and its log, beside the figures: what served the reads.
if [ -n "$VM_GW_PID" ]; then
	SOCK=$VM_WORK/isergwd.sock vm_ctl_state >"$VM_SHARE/bench-iser-state.json" 2>/dev/null
	cp "$GW_LOG" "$VM_SHARE/bench-iser-isergwd.log"
fi
for d in $DISKS; do
	IFS="|" read -r name tr _ iqn portal <<<"$d"
	detach "$iqn" "$portal"
	pass "$name-$tr" "$(awk -v t="$name" -v tr="$tr" '$1 == t && $2 == tr && $4 != "-"' "$OUT" |
		wc -l) runs measured"
done
[ -n "$VM_GW_PID" ] && { vm_gw_stop || fail gateway-stop "$VM_GW_STOP"; }
[ -n "${GWB_PID:-}" ] && kill "$GWB_PID" 2>/dev/null
lio_stop
vm_tgt_stop
cat "$OUT"
vm_end
