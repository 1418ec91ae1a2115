#!/bin/bash
# tgt-iser: the reference the gateway's iSER datamover will be measured against. tgtd serves a
# LUN over iSER (--lld iser) on an rxe device inside the guest, and both iSER initiators read and
# write it: libiscsi's (iser:// URLs: iscsi-inq, iscsi-perf, the project's isergw-verify) and
# the Linux kernel's (ib_iser, iscsiadm -I iser). When one of these fails against tgt, the rig
# or the tool is at fault, not the gateway: that is what this suite is for.
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/vm/guest/lib-tgt.sh
. "$(dirname "$0")/lib-tgt.sh"
vm_begin tgt-iser

ADDR=10.200.3.1
IQN=iqn.2026-11.org.isergw:vm-tgt-iser
LIBISCSI_INI=iqn.2026-11.org.isergw:vm-libiscsi
VERIFY_INI=iqn.2026-11.org.isergw:verify
URL=iser://$ADDR/$IQN/1

if ! vm_need tgtd tgtadm rdma iscsi-inq iscsi-perf iscsiadm iscsid; then
	skip all "$VM_MISSING is not installed (tgt, iproute2, libiscsi-bin, open-iscsi)"
	vm_end
fi
if ! vm_modprobe rdma_rxe ib_uverbs rdma_ucm ib_iser; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi
# tgtd's iSER driver needs an RDMA device when it starts, or it does not listen at all.
if ! vm_veth vt0 "$ADDR" || ! check rxe vm_rxe_add rxet vt0; then
	vm_end
fi

truncate -s 256M "$VM_WORK/tgt.img"
# Its iSCSI/TCP portal is kept on loopback, out of the way; iSER listens on every RDMA address,
# port 3260. tgt 1.0.85 refuses an iSER login unless the initiator's name is bound too.
if ! check tgtd vm_tgt_start "$IQN" "$VM_WORK/tgt.img" 127.0.0.1:3262 "$VM_INITIATOR" \
	"$LIBISCSI_INI" "$VERIFY_INI"; then
	vm_end
fi

# ---- libiscsi's iSER transport ------------------------------------------------------------

VM_TMO=60 run iscsi-inq -i "$LIBISCSI_INI" "$URL" >"$VM_WORK/inq.out" 2>&1
rc=$?
cat "$VM_WORK/inq.out"
if [ "$rc" -eq 0 ] && grep -q '^Vendor:IET' "$VM_WORK/inq.out"; then
	pass libiscsi/inq "$(grep -E '^(Vendor|Product):' "$VM_WORK/inq.out")"
else
	fail libiscsi/inq "exit $rc: $(tail -n 3 "$VM_WORK/inq.out")"
fi

# iscsi-perf runs until its -t timeout and prints a summary; it reports the timeout itself
# as its exit status, so the summary line is what counts.
VM_TMO=30 run iscsi-perf -i "$LIBISCSI_INI" -t 2 -b 8 -m 8 "$URL" >"$VM_WORK/perf.out" 2>&1
rc=$?
tail -n 4 "$VM_WORK/perf.out"
if grep -qi 'iops average' "$VM_WORK/perf.out" && ! grep -qi 'error\|failed' "$VM_WORK/perf.out"
then
	pass libiscsi/perf "$(grep -i 'iops average' "$VM_WORK/perf.out" | tail -n 1)"
else
	fail libiscsi/perf "exit $rc: $(tail -n 3 "$VM_WORK/perf.out")"
fi

# Seeded writes of 512 B to 256 KiB read back. libiscsi 1.19's iSER transport fails to send any
# command over 256 KiB ("Failed to send Write16 command", whatever the target's MaxBurstLength)
# and then crashes freeing it (double free), so larger I/O is not tried here.
VERIFY=$VM_BUILD/tests/tools/isergw-verify
if [ -x "$VERIFY" ]; then
	VM_TMO=120 run "$VERIFY" -q -n 40 -m 262144 -S 64M -i "$VERIFY_INI" "$URL" \
		>"$VM_WORK/verify.out" 2>&1
	rc=$?
	cat "$VM_WORK/verify.out"
	if [ "$rc" -eq 0 ]; then
		pass libiscsi/verify "$(tail -n 1 "$VM_WORK/verify.out")"
	else
		fail libiscsi/verify "exit $rc: $(tail -n 3 "$VM_WORK/verify.out")"
	fi
else
	skip libiscsi/verify "no $VERIFY (make builds the test tools)"
fi
skip libiscsi/over-256k "libiscsi 1.19's iSER fails commands over 256 KiB and then double-frees"

# ---- the kernel's iSER initiator ----------------------------------------------------------

if ! check iscsid vm_iscsid_start; then
	vm_end
fi
VM_TMO=30 run iscsiadm -m discovery -t st -p "$ADDR" -I iser >"$VM_WORK/discovery.out" 2>&1
rc=$?
cat "$VM_WORK/discovery.out"
if [ "$rc" -eq 0 ] && grep -q "^$ADDR:3260,1 $IQN\$" "$VM_WORK/discovery.out"; then
	pass kernel/discovery "$(grep -m1 "$IQN" "$VM_WORK/discovery.out")"
else
	fail kernel/discovery "exit $rc: $(tail -n 3 "$VM_WORK/discovery.out")"
fi

if VM_TMO=60 run iscsiadm -m node -T "$IQN" -p "$ADDR:3260" -I iser --login \
	>"$VM_WORK/login.out" 2>&1; then
	transport=$(iscsiadm -m session -P1 2>/dev/null | awk '/Iface Transport:/ { print $3; exit }')
	if [ "$transport" = iser ]; then
		pass kernel/login "session over $transport"
	else
		fail kernel/login "logged in, but the session's transport is '$transport'"
	fi
	if dev=$(vm_wait_disk "$IQN" 30); then
		if check kernel/direct-io vm_io_check "/dev/$dev" 8; then
			# What the kernel wrote is in tgt's backing file, where it was written.
			if dd if="$VM_WORK/tgt.img" bs=1M skip=1 count=8 status=none |
				cmp - "$VM_WORK/pattern"; then
				pass kernel/backing-file "8 MiB at 1 MiB match"
			else
				fail kernel/backing-file "tgt's backing file differs from what was written"
			fi
		fi
	else
		fail kernel/direct-io "no disk attached within 30 s"
	fi
	check kernel/logout iscsiadm -m node -T "$IQN" -p "$ADDR:3260" -I iser --logout
else
	fail kernel/login "$(tail -n 3 "$VM_WORK/login.out"); dmesg: $(dmesg | grep -i iser | tail -n 2)"
fi
vm_end
