#!/bin/bash
# durable-crash: an acknowledged durable write survives a crash of the whole machine, not only
# of the gateway (tests/integration/test_durability.sh kills the gateway alone, which leaves
# the kernel's page cache standing). Two boots of the guest over one persistent virtio disk:
#
# boot 1: ext4 made on the disk, four file LUNs on it served over TCP (loopback) by the
#   gateway, each written by its own `isergw-durable stress` (random writes of 1-32 blocks,
#   one command at a time, each a new generation): LUN 0 with the write cache on, a mix of
#   writes with FUA, plain writes, and plain writes followed by SYNCHRONIZE CACHE; LUN 1 with
#   "write_cache": false, plain writes (every acknowledged write is durable); LUN 2 with the
#   write cache on, every write with FUA and nothing else (a FUA the gateway ignored would lose
#   nearly all of them); LUN 3, the control, the write cache on and plain writes never
#   synced. The guest's periodic writeback
#   is off, so what nobody synced stays in its page cache. Each writer records every step in a
#   journal on the rig's share: a host folder, written with write(2) and fdatasync(2) through
#   9p before the next step, so the record is outside the guest before the writer goes on and a
#   line never claims more than what happened. Once each has enough acknowledged, the guest is
#   reset with sysrq-b (no sync, no unmount) while the four writers are still writing.
# boot 2: the same disk: the file system must need journal recovery (the crash was real), the
#   gateway starts on the same LUN files, `isergw-durable scan` reads every block of the four
#   regions through it, and tests/vm/guest/durable-check.py judges them against the journals:
#   every block whose last durable write (FUA, acknowledged before an acknowledged SYNCHRONIZE
#   CACHE, or any acknowledged write on LUN 1) holds that write or a later one, none holds
#   garbage (old or new data only); the control must have lost some acknowledged blocks (else the crash proved
#   nothing). Then the gateway exits 0 on SIGTERM and e2fsck finds the file system clean.
#
# rig: boots=2 disk=1G
# (tests/vm/run.sh reads the line above: a fresh sparse disk image for this suite alone, the
# guest booted twice with it, boot 2 only if boot 1 wrote "crash durable-crash" to the share.)
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin durable-crash

BOOT=${VM_BOOT:-1}
REC=$VM_SHARE/durable-crash
MNT=/run/isergw-dur
IQN=iqn.2026-11.org.isergw:vm-durable
ADDR=127.0.0.1
PORT=3260
REGION=8192			# blocks of 512 B per LUN (4 MiB), writes of 1-32 blocks
TOOL=$VM_BUILD/tests/tools/isergw-durable
CHECK=$VM_LIB_DIR/durable-check.py
url() { echo "iscsi://$ADDR:$PORT/$IQN/$1"; }

if ! vm_need mkfs.ext4 dumpe2fs e2fsck python3 "$TOOL"; then
	fail "boot$BOOT/tools" "$VM_MISSING is missing (e2fsprogs, python3, make test-build)"
	vm_end
fi
if ! vm_modprobe virtio_blk ext4; then
	fail "boot$BOOT/modules" "modprobe $VM_MISSING failed"
	vm_end
fi

# The rig's disk: the virtio disk with the serial run.sh gave it.
dur_disk() {
	local d i
	for i in $(seq 1 40); do
		for d in /sys/block/vd*; do
			[ "$(cat "$d/serial" 2>/dev/null)" = isergw-dur ] && echo "${d##*/}" && return 0
		done
		sleep 0.25
	done
	return 1
}
if ! DEV=$(dur_disk); then
	fail "boot$BOOT/disk" "no virtio disk with serial isergw-dur (tests/vm/run.sh gives this suite one)"
	vm_end
fi
echo "disk /dev/$DEV, $(($(cat "/sys/block/$DEV/size") / 2048)) MiB, boot $BOOT"
mkdir -p "$MNT"

# ---- boot 1: write, then crash ------------------------------------------------------------

# count KIND FILE: journal lines of KIND (w, a, s) so far.
count() {
	grep -c "^$1 " "$2" 2>/dev/null
}

boot1() {
	local lun pid ok i pids=()
	check boot1/mkfs mkfs.ext4 -q -F -L isergw-dur "/dev/$DEV" || return
	check boot1/mount mount -t ext4 "/dev/$DEV" "$MNT" || return
	# What nobody synced stays in the page cache until the crash: no periodic writeback.
	echo 0 >/proc/sys/vm/dirty_writeback_centisecs
	echo 360000 >/proc/sys/vm/dirty_expire_centisecs
	echo 1 >/proc/sys/kernel/sysrq
	rm -rf "$REC" && mkdir -p "$REC" || return
	for lun in 0 1 2 3; do
		truncate -s 64M "$MNT/lun$lun.img"
	done
	cat >"$REC/isergwd.json" <<-EOF
		{
		  "gateway": { },
		  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$ADDR", "port": $PORT } ],
		  "targets": [ { "name": "$IQN", "tpgt": 1, "portals": ["tcp0"], "allow_any_initiator": true,
		    "luns": [
		      { "lun": 0, "write_cache": true, "backstore": { "type": "file",
		        "path": "$MNT/lun0.img", "size": "64M", "block_size": 512 } },
		      { "lun": 1, "write_cache": false, "backstore": { "type": "file",
		        "path": "$MNT/lun1.img", "size": "64M", "block_size": 512 } },
		      { "lun": 2, "write_cache": true, "backstore": { "type": "file",
		        "path": "$MNT/lun2.img", "size": "64M", "block_size": 512 } },
		      { "lun": 3, "write_cache": true, "backstore": { "type": "file",
		        "path": "$MNT/lun3.img", "size": "64M", "block_size": 512 } } ] } ]
		}
	EOF
	check boot1/gateway-start vm_gw_start "$REC/isergwd.json" "$REC/isergwd.1.log" "$ADDR" \
		"$PORT" || return
	if [ "$(VM_TMO=30 run "$TOOL" wce "$(url 0)" 2>&1 | tail -n 1)" = "wce 1" ] &&
		[ "$(VM_TMO=30 run "$TOOL" wce "$(url 1)" 2>&1 | tail -n 1)" = "wce 0" ]; then
		pass boot1/wce "LUN 0 reports WCE=1, LUN 1 (write_cache false) WCE=0"
	else
		fail boot1/wce "the caching mode page does not say what the configuration does"
	fi
	# Four writers, each its own session, until the machine goes down under them.
	"$TOOL" stress -m mix -s 1 -n "$REGION" -j "$REC/lun0.journal" "$(url 0)" \
		>"$REC/lun0.stress.out" 2>&1 &
	pids+=($!)
	"$TOOL" stress -m plain -s 2 -n "$REGION" -j "$REC/lun1.journal" "$(url 1)" \
		>"$REC/lun1.stress.out" 2>&1 &
	pids+=($!)
	"$TOOL" stress -m fua -s 3 -n "$REGION" -j "$REC/lun2.journal" "$(url 2)" \
		>"$REC/lun2.stress.out" 2>&1 &
	pids+=($!)
	"$TOOL" stress -m plain -s 4 -n "$REGION" -j "$REC/lun3.journal" "$(url 3)" \
		>"$REC/lun3.stress.out" 2>&1 &
	pids+=($!)
	# Enough of each kind acknowledged (bounded: TCG is slow, the machine shared).
	ok=0
	for i in $(seq 1 600); do
		if [ "$(count s "$REC/lun0.journal")" -ge 6 ] &&
			[ "$(count a "$REC/lun0.journal")" -ge 64 ] &&
			[ "$(count a "$REC/lun1.journal")" -ge 48 ] &&
			[ "$(count a "$REC/lun2.journal")" -ge 48 ] &&
			[ "$(count a "$REC/lun3.journal")" -ge 48 ]; then
			ok=1
			break
		fi
		for pid in "${pids[@]}"; do
			kill -0 "$pid" 2>/dev/null || break 2
		done
		sleep 0.25
	done
	for lun in 0 1 2 3; do
		echo "lun $lun: $(count w "$REC/lun$lun.journal") sent, $(count a "$REC/lun$lun.journal") acknowledged, $(count s "$REC/lun$lun.journal") synced"
	done
	for pid in "${pids[@]}"; do
		kill -0 "$pid" 2>/dev/null || ok=0
	done
	if [ "$ok" != 1 ]; then
		fail boot1/writers "not enough acknowledged within 150 s, or a writer stopped: $(tail -q -n 1 "$REC"/lun*.stress.out | tr '\n' ' ')"
		return
	fi
	pass boot1/writers "$(count a "$REC/lun0.journal") + $(count a "$REC/lun1.journal") + $(count a "$REC/lun2.journal") + $(count a "$REC/lun3.journal") writes acknowledged on LUNs 0-3 ($(count s "$REC/lun0.journal") SYNCHRONIZE CACHE on LUN 0); $(awk '/^Dirty:/ { print $2 " kB" }' /proc/meminfo) dirty in the page cache"
	# The host learns that boot 1 got this far, then the machine goes down, writers and all.
	echo "crash durable-crash" >>"$VM_SHARE/suites"
	echo "=== durable-crash: sysrq-b (reset, no sync) at uptime $(cut -d' ' -f1 /proc/uptime)s"
	echo b >/proc/sysrq-trigger
	sleep 60
	fail boot1/crash "still running 60 s after sysrq-b"
}

# ---- boot 2: recover and judge --------------------------------------------------------------

boot2() {
	local lun flags out rc what
	if [ ! -s "$REC/lun0.journal" ] || [ ! -s "$REC/isergwd.json" ]; then
		fail boot2/journal "boot 1 left no journals in $REC"
		return
	fi
	if dumpe2fs -h "/dev/$DEV" 2>/dev/null | grep -q '^Filesystem features:.*needs_recovery'; then
		pass boot2/unclean "the file system was left mid-journal (needs_recovery): a real crash"
	else
		fail boot2/unclean "ext4 on /dev/$DEV does not need recovery: boot 1 did not crash under I/O"
	fi
	check boot2/mount mount -t ext4 "/dev/$DEV" "$MNT" || return
	dmesg | grep -E "EXT4-fs \($DEV\)" | tail -n 3
	check boot2/gateway-start vm_gw_start "$REC/isergwd.json" "$REC/isergwd.2.log" "$ADDR" \
		"$PORT" || return
	for lun in 0 1 2 3; do
		case $lun in
		0 | 2) flags= ;;
		1) flags=--all-acked-durable ;;
		3) flags=--expect-loss ;;
		esac
		echo "+ $TOOL scan -n $REGION $(url "$lun")"
		if ! timeout -k 5 120 "$TOOL" scan -n "$REGION" "$(url "$lun")" >"$REC/lun$lun.scan" \
			2>"$REC/lun$lun.scan.err"; then
			fail "boot2/lun$lun" "scan failed: $(tail -n 2 "$REC/lun$lun.scan.err")"
			continue
		fi
		# shellcheck disable=SC2086 # flags is one option or none
		out=$(python3 "$CHECK" $flags "$REC/lun$lun.journal" "$REC/lun$lun.scan")
		rc=$?
		echo "$out" | tee "$REC/lun$lun.check"
		case $lun in
		0) what="LUN 0 (write cache on: FUA, SYNCHRONIZE CACHE)" ;;
		1) what="LUN 1 (write_cache false: every acknowledged write)" ;;
		2) what="LUN 2 (write cache on, every write with FUA)" ;;
		3) what="LUN 3 (control: write cache on, never synced)" ;;
		esac
		if [ "$rc" -eq 0 ]; then
			pass "boot2/lun$lun" "$what: $(echo "$out" | sed -n 's/^durable-check: ok: //p'); $(echo "$out" | grep '^journal:' | cut -d';' -f1)"
		else
			fail "boot2/lun$lun" "$what: $(echo "$out" | grep -E '^(LOST|GARBAGE|UNEXPECTED|durable-check)' | head -n 4)"
		fi
	done
	if vm_gw_stop; then
		pass boot2/gateway-stop "$VM_GW_STOP"
	else
		fail boot2/gateway-stop "$VM_GW_STOP"
	fi
	check boot2/umount umount "$MNT"
	check boot2/fsck e2fsck -f -n "/dev/$DEV"
}

case "$BOOT" in
1) boot1 ;;
2) boot2 ;;
*) fail boot "VM_BOOT=$BOOT: this suite has boots 1 and 2" ;;
esac
vm_end
