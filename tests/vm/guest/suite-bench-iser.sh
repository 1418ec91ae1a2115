#!/bin/bash
# bench-iser: `make bench`'s iSER rows, in one guest (tests/bench/vm-iser.sh starts it; it is
# not part of `make test-vm`). One LUN backing (a file on the guest's tmpfs, filled with random
# data) served in turn by each target, and one client: fio on the Linux kernel initiator
# (ib_iser for iSER, iscsi_tcp for TCP), O_DIRECT, libaio, on the disk the login attached.
#
#   targets: the gateway over iSER and over TCP, tgtd over iSER (--lld iser) and over TCP, LIO
#            over iSER (ib_isert, set up through configfs)
#   rows:    randread-4k-qd1, randread-4k-qd32 (IOPS), seqread-512k-qd8 (MiB/s)
#
# Each measured row is a line "TARGET TRANSPORT ROW IOPS KIBPS" in $VM_SHARE/bench-iser.txt; a
# target that cannot run writes "TARGET TRANSPORT - skip REASON". Soft-RoCE under TCG emulation
# makes absolute figures meaningless: the host prints ratios.
#
# Settings: BENCH_VM_SECS (seconds per fio run, default 8), read from $VM_BUILD/bench-iser.env
# when tests/bench/vm-iser.sh wrote one (the guest does not inherit the host's environment).
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/vm/guest/lib-tgt.sh
. "$(dirname "$0")/lib-tgt.sh"
vm_begin bench-iser

ADDR=10.200.7.1
BENCH_VM_SECS=8
# shellcheck disable=SC1091
[ -r "$VM_BUILD/bench-iser.env" ] && . "$VM_BUILD/bench-iser.env"
SECS=$BENCH_VM_SECS
OUT=$VM_SHARE/bench-iser.txt
LUN=$VM_WORK/lun.img
IQN_GW=iqn.2026-11.org.isergw:bench-gw
IQN_TGT=iqn.2026-11.org.isergw:bench-tgt
IQN_LIO=iqn.2026-11.org.isergw:bench-lio
# name rw bs qd
ROWS="
randread-4k-qd1 randread 4k 1
randread-4k-qd32 randread 4k 32
seqread-512k-qd8 read 512k 8
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

# measure NAME TRANSPORT IQN PORTAL: logs in with the kernel initiator (iser or tcp), runs
# every row with fio on the attached disk, logs out. The rows go to $OUT.
measure() {
	local name=$1 tr=$2 iqn=$3 portal=$4 iface=default dev row rw bs qd line iops kib
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
	else
		while read -r row rw bs qd; do
			[ -n "$row" ] || continue
			# Terse output v3: field 7 is the read bandwidth in KiB/s, field 8 the read IOPS.
			line=$(VM_TMO=$((SECS + 60)) run fio --name="$row" --filename="/dev/$dev" \
				--direct=1 --ioengine=libaio --rw="$rw" --bs="$bs" --iodepth="$qd" \
				--runtime="$SECS" --time_based --ramp_time=1 --size=240M \
				--output-format=terse --terse-version=3 2>"$VM_WORK/fio-$name-$tr-$row.err" |
				tail -n 1)
			iops=$(echo "$line" | cut -d';' -f8)
			kib=$(echo "$line" | cut -d';' -f7)
			if [ -n "$iops" ] && [ "${iops%%.*}" -gt 0 ] 2>/dev/null; then
				echo "$name $tr $row ${iops%%.*} $kib" >>"$OUT"
				pass "$name-$tr/$row" "$iops IOPS, $((kib / 1024)) MiB/s"
			else
				echo "$name $tr $row - -" >>"$OUT"
				fail "$name-$tr/$row" "fio: $(tail -n 2 "$VM_WORK/fio-$name-$tr-$row.err")"
			fi
		done <<<"$ROWS"
	fi
	run iscsiadm -m node -T "$iqn" -p "$portal" --logout >/dev/null 2>&1
	run iscsiadm -m node -o delete -T "$iqn" -p "$portal" >/dev/null 2>&1
	return 0
}

# ---- tgtd: iSER on every RDMA address port 3260, TCP on ADDR:3262 -------------------------
if check tgt-start vm_tgt_start "$IQN_TGT" "$LUN" "$ADDR:3262" "$VM_INITIATOR"; then
	measure tgtd iser "$IQN_TGT" "$ADDR:3260"
	# tgt keeps each transport's targets apart: a second target, same file, for TCP.
	if check tgt-tcp-target vm_tgt_add_tcp "$IQN_TGT-tcp" "$LUN"; then
		measure tgtd tcp "$IQN_TGT-tcp" "$ADDR:3262"
	fi
else
	echo "tgtd iser - skip tgtd did not start" >>"$OUT"
fi
vm_tgt_stop

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
	measure lio iser "$IQN_LIO" "$ADDR:3261"
else
	echo "lio iser - skip LIO with ib_isert could not be set up" >>"$OUT"
fi
lio_stop

# ---- the gateway: TCP on ADDR:3263, iSER on ADDR:3264 --------------------------------------
cat >"$VM_WORK/isergwd.json" <<JSON
{ "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$ADDR", "port": 3263 },
               { "name": "iser0", "transport": "iser", "address": "$ADDR", "port": 3264 } ],
  "targets": [ { "name": "$IQN_GW", "tpgt": 1, "portals": ["tcp0", "iser0"],
    "allow_any_initiator": true,
    "luns": [ { "lun": 0, "product": "bench", "write_cache": true,
      "backstore": { "type": "file", "path": "$LUN", "block_size": 512 } } ] } ] }
JSON
GW_LOG=$VM_WORK/isergwd.log
if check gateway-start vm_gw_start "$VM_WORK/isergwd.json" "$GW_LOG" "$ADDR" 3263; then
	measure isergwd tcp "$IQN_GW" "$ADDR:3263"
	# An iSER portal may come up a moment after the TCP one (it follows the RDMA device).
	for _ in $(seq 1 50); do
		grep -q "$ADDR:3264 (iser)" "$GW_LOG" && break
		grep -q 'portal iser0 skipped' "$GW_LOG" && break
		sleep 0.2
	done
	if grep -q "$ADDR:3264 (iser)" "$GW_LOG"; then
		measure isergwd iser "$IQN_GW" "$ADDR:3264"
	else
		why=$(grep -m1 'portal iser0' "$GW_LOG" | cut -c1-160)
		skip isergwd-iser "no iser datamover: ${why:-no iSER portal in the log}"
		echo "isergwd iser - skip no iser datamover" >>"$OUT"
	fi
	vm_gw_stop || fail gateway-stop "$VM_GW_STOP"
else
	echo "isergwd tcp - skip the gateway did not start" >>"$OUT"
fi
cat "$OUT"
vm_end
