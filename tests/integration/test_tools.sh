#!/bin/bash
# The libiscsi command-line tools against the target: discovery (iscsi-ls), INQUIRY standard
# data and VPD pages (iscsi-inq), READ CAPACITY(16) (iscsi-readcapacity16) and a short load
# (iscsi-perf). What a user typing the README's commands would see.
#
#   tests/integration/test_tools.sh        (TARGET=isergwd|tgtd, BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin tools
if ! t_need iscsi-ls iscsi-inq iscsi-readcapacity16 iscsi-perf; then
	skip tools "libiscsi-bin is not installed"
	t_end
fi

tg_defaults
TG_SIZE=1G
if ! target_start tools; then
	fail start "$TARGET did not start"
	t_end
fi
case "$TARGET" in
isergwd) VENDOR=ISERGW PRODUCT=test ;;
tgtd) VENDOR=IET PRODUCT=VIRTUAL-DISK ;;
esac
SIZE=$(to_bytes "$TG_SIZE")

# run NAME CMD...: output in $T_DIR/NAME.out, status in $rc.
run() {
	local name=$1
	shift
	OUT=$T_DIR/$name.out
	timeout -k 5 30 "$@" >"$OUT" 2>&1
	rc=$?
}

# expect NAME PATTERN [why]: the last run's output has a line matching the ERE PATTERN.
expect() {
	if [ "$rc" -ne 0 ]; then
		fail "$1" "exit $rc: $(head -n 3 "$OUT" | tr '\n' ' ')"
	elif grep -Eq -- "$2" "$OUT"; then
		pass "$1"
	else
		fail "$1" "no line matches /$2/ in: $(head -n 5 "$OUT" | tr '\n' '|')"
	fi
}

# Discovery: SendTargets lists the target at the portal with TPGT 1.
run ls iscsi-ls "iscsi://$T_PORTAL/"
expect "iscsi-ls: SendTargets lists the target" "^Target:$TG_IQN Portal:$T_PORTAL,1\$"
run ls-s iscsi-ls -s "iscsi://$T_PORTAL/"
expect "iscsi-ls -s: LUN $T_LUN is a disk of 1 GiB" \
	"^Lun:$T_LUN +Type:DIRECT_ACCESS \\(Size:1023M\\)"

# A target name the portal does not serve: login refused with "not found" (0x0203).
run nosuch iscsi-inq "iscsi://$T_PORTAL/iqn.2026-11.org.isergw:no-such-target/0"
if [ "$rc" -ne 0 ] && grep -q "Target not found" "$OUT"; then
	pass "unknown target name refused with status 0x0203 (not found)"
else
	fail "unknown target name refused with status 0x0203 (not found)" \
		"exit $rc: $(head -n 2 "$OUT" | tr '\n' ' ')"
fi

# Standard INQUIRY.
run inq iscsi-inq "$T_URL"
expect "iscsi-inq: direct-access device" "^Peripheral Device Type:DIRECT_ACCESS"
expect "iscsi-inq: vendor $VENDOR" "^Vendor:$VENDOR *\$"
expect "iscsi-inq: product $PRODUCT" "^Product:$PRODUCT *\$"
expect "iscsi-inq: command queuing (CmdQue=1)" "^CmdQue:1"
expect "iscsi-inq: claims SPC-3 or later" "^Version:[5-7] "

# VPD pages: the supported list, then each page SPC/SBC require of a thin disk.
run vpd0 iscsi-inq -e 1 -c 0 "$T_URL"
for p in 0x00 0x80 0x83 0xb0 0xb2; do
	expect "VPD 0x00 lists page $p" "^Page:$p "
done
run vpd80 iscsi-inq -e 1 -c 128 "$T_URL"
expect "VPD 0x80: a non-empty unit serial number" "^Unit Serial Number:\\[ *[^] ]+\\]"
run vpd83 iscsi-inq -e 1 -c 131 "$T_URL"
expect "VPD 0x83: a logical-unit designator" "^Association:\\(0\\) LOGICAL_UNIT"
expect "VPD 0x83: an NAA, EUI-64 or T10 vendor designator" \
	"^Designator Type:\\([123]\\) (NAA|EUI_64|T10_VENDORT_ID)"
run vpdb0 iscsi-inq -e 1 -c 176 "$T_URL"
expect "VPD 0xb0: block limits with an UNMAP count (thin LUN)" \
	"^maximum unmap lba count:[1-9]"
run vpdb2 iscsi-inq -e 1 -c 178 "$T_URL"
expect "VPD 0xb2: UNMAP supported (lbpu=1)" "^lbpu:1"

# READ CAPACITY(16): exactly the configured size, 512-byte blocks, thin (LBPME=1).
run rc16 iscsi-readcapacity16 "$T_URL"
expect "READ CAPACITY(16): 512-byte blocks" "^LOGICAL BLOCK LENGTH IN BYTES:512\$"
expect "READ CAPACITY(16): size is the configured $TG_SIZE ($SIZE bytes)" "^Total size:$SIZE\$"
expect "READ CAPACITY(16): last LBA $((SIZE / 512 - 1))" \
	"^RETURNED LOGICAL BLOCK ADDRESS:$((SIZE / 512 - 1))\$"
expect "READ CAPACITY(16): thin provisioning enabled (LBPME=1)" "^LBPME:1"

# iscsi-perf: a second of sequential and one of random 4 KiB reads at QD 32, no errors.
perf() {
	local name=$1 avg
	shift
	run "$name" iscsi-perf -t 1 "$@" "$T_URL"
	avg=$(sed -n 's/.*iops average \([0-9]*\).*/\1/p' "$OUT" | tail -n 1)
	if [ "$rc" -eq 0 ] && grep -q '^finished' "$OUT" && [ "${avg:-0}" -gt 0 ]; then
		pass "$name: ${avg} IOPS for 1 s, no errors"
	else
		fail "$name" "exit $rc, average '${avg:-}' IOPS: $(tail -n 3 "$OUT" | tr '\n' ' ')"
	fi
}
perf "iscsi-perf sequential 4 KiB QD 32" -m 32
perf "iscsi-perf random 4 KiB QD 32" -m 32 -r
perf "iscsi-perf random 64 KiB QD 8" -m 8 -r -b 128

t_end
