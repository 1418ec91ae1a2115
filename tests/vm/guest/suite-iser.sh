#!/bin/bash
# iser: the gateway's own iSER datamover (dmv_iser.c) under both iSER initiators on Soft-RoCE.
# One gateway serves an iSER portal and a TCP portal on the same guest address, with three
# targets (no authentication, CHAP, mutual CHAP). It is started BEFORE the rxe device exists:
# TCP must serve at once, the log must say why iSER is not listening, and iSER must come up by
# itself once rxe is added. Then libiscsi's iser:// tools (inquiry, capacity, seeded
# write/read-back) and the kernel initiator (discovery over iSER, login, direct I/O, ext4 with
# files checked after a remount with dropped caches, CHAP and mutual CHAP) use it. The targets'
# queue_depth (1024) is more than an iSER connection's receive buffers hold: the session's
# command window must stay within them, and 256 writes queued at once by the kernel must all
# complete and verify. Clients are
# killed mid-I/O (kill -9 of a libiscsi client, a kernel logout under I/O); the gateway must
# serve the next login, and once every session is gone its iSER resources (QPs, registered
# memory, data buffers in use) must be back to zero. It must exit 0 on SIGTERM.
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin iser

ADDR=10.200.5.1
PORT=3260
PORTAL=$ADDR:$PORT
IQN=iqn.2026-11.org.isergw:vm-iser
T_PLAIN=$IQN-plain
T_CHAP=$IQN-chap
T_MUTUAL=$IQN-mutual
CHAP_USER=vmhost
CHAP_SECRET=vm-secret-0123
MUTUAL_USER=vmgw
MUTUAL_SECRET=vm-gw-secret-4567
LIBISCSI_INI=iqn.2026-11.org.isergw:vm-libiscsi
URL=iser://$ADDR/$T_PLAIN/0
SOCK=$VM_WORK/ctl.sock
VERIFY=$VM_BUILD/tests/tools/isergw-verify

if ! vm_need rdma iscsiadm iscsid iscsi-inq iscsi-readcapacity16 mkfs.ext4 sha256sum python3; then
	skip all "$VM_MISSING is not installed (iproute2, open-iscsi, libiscsi-bin, e2fsprogs)"
	vm_end
fi
if ! vm_modprobe rdma_rxe ib_uverbs rdma_ucm ib_iser ext4; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi
# The address exists, its RDMA device does not yet.
if ! vm_veth vi0 "$ADDR"; then
	fail setup "cannot create the veth pair"
	vm_end
fi

lun_json() {
	printf '{ "lun": 0, "vendor": "ISERGW", "product": "vm-iser", "write_cache": true,
	  "thin": true, "backstore": { "type": "file", "path": "%s", "size": "256M",
	  "block_size": 512 } }' "$1"
}

target_json() {
	cat <<-EOF2
		{ "name": "$1", "tpgt": 1, "portals": ["tcp0", "iser0"], "allow_any_initiator": true,
		  "params": { "queue_depth": 1024 }, "chap": $2, "luns": [ $(lun_json "$3") ] }
	EOF2
}

no_chap='{ "user": "", "secret": "" }'
one_way="{ \"user\": \"$CHAP_USER\", \"secret\": \"$CHAP_SECRET\" }"
mutual="{ \"user\": \"$CHAP_USER\", \"secret\": \"$CHAP_SECRET\","
mutual="$mutual \"mutual_user\": \"$MUTUAL_USER\", \"mutual_secret\": \"$MUTUAL_SECRET\" }"
for t in plain chap mutual; do
	truncate -s 256M "$VM_WORK/$t.img"
done
cat >"$VM_WORK/isergwd.json" <<EOF
{
  "gateway": { "control_socket": "$SOCK" },
  "portals": [
    { "name": "tcp0", "transport": "tcp", "address": "$ADDR", "port": $PORT },
    { "name": "iser0", "transport": "iser", "address": "$ADDR", "port": $PORT }
  ],
  "targets": [
    $(target_json "$T_PLAIN" "$no_chap" "$VM_WORK/plain.img"),
    $(target_json "$T_CHAP" "$one_way" "$VM_WORK/chap.img"),
    $(target_json "$T_MUTUAL" "$mutual" "$VM_WORK/mutual.img")
  ]
}
EOF
cat "$VM_WORK/isergwd.json"

# ---- no RDMA device yet: TCP serves, iSER says why it waits --------------------------------

if ! check gateway-start vm_gw_start "$VM_WORK/isergwd.json" "$VM_WORK/isergwd.log" "$ADDR" "$PORT"
then
	vm_end
fi
VM_TMO=30 run iscsi-inq -i "$LIBISCSI_INI" "iscsi://$ADDR/$T_PLAIN/0" >"$VM_WORK/inq-tcp.out" 2>&1
if grep -q '^Vendor:ISERGW' "$VM_WORK/inq-tcp.out"; then
	pass no-rxe/tcp-serves "iscsi-inq over TCP: $(grep '^Product:' "$VM_WORK/inq-tcp.out")"
else
	fail no-rxe/tcp-serves "$(tail -n 3 "$VM_WORK/inq-tcp.out")"
fi
why=$(grep -m1 'iSER not listening' "$VM_WORK/isergwd.log")
if [ -n "$why" ] && [ "$(gw_state 'p["listening"]')" = False ]; then
	pass no-rxe/logged "$why"
else
	fail no-rxe/logged "no 'iSER not listening' line, or the portal claims to listen: $(tail -n 5 "$VM_WORK/isergwd.log")"
fi

# ---- rxe arrives: iSER listens by itself --------------------------------------------------

if ! check rxe vm_rxe_add rxei vi0; then
	vm_end
fi
if wait_state 'p["listening"]' 15 && grep -q "listening on $ADDR:$PORT (iser)" "$VM_WORK/isergwd.log"; then
	pass rxe-added/listening "$(grep -m1 "(iser)" "$VM_WORK/isergwd.log")"
else
	fail rxe-added/listening "iSER portal not listening 15 s after rxe was added: $(tail -n 5 "$VM_WORK/isergwd.log")"
	vm_end
fi

# ---- libiscsi's iSER initiator -----------------------------------------------------------

VM_TMO=60 run iscsi-inq -i "$LIBISCSI_INI" "$URL" >"$VM_WORK/inq.out" 2>&1
rc=$?
cat "$VM_WORK/inq.out"
if [ "$rc" -eq 0 ] && grep -q '^Vendor:ISERGW' "$VM_WORK/inq.out"; then
	pass libiscsi/inq "$(grep -E '^Product:' "$VM_WORK/inq.out")"
else
	fail libiscsi/inq "exit $rc: $(tail -n 3 "$VM_WORK/inq.out")"
fi
VM_TMO=60 run iscsi-readcapacity16 -i "$LIBISCSI_INI" "$URL" >"$VM_WORK/rc16.out" 2>&1
rc=$?
cat "$VM_WORK/rc16.out"
if [ "$rc" -eq 0 ] && grep -q 'Total size:268435456' "$VM_WORK/rc16.out"; then
	pass libiscsi/readcapacity16 "$(grep -E 'Total size' "$VM_WORK/rc16.out")"
else
	fail libiscsi/readcapacity16 "exit $rc: $(tail -n 3 "$VM_WORK/rc16.out")"
fi
if [ -x "$VERIFY" ]; then
	# Seeded writes of 512 B to 256 KiB, each read back, then random reads across them.
	VM_TMO=180 run "$VERIFY" -q -n 60 -m 262144 -S 64M -i "$LIBISCSI_INI" "$URL" \
		>"$VM_WORK/verify.out" 2>&1
	rc=$?
	cat "$VM_WORK/verify.out"
	if [ "$rc" -eq 0 ]; then
		pass libiscsi/verify "$(tail -n 1 "$VM_WORK/verify.out")"
	else
		fail libiscsi/verify "exit $rc: $(tail -n 3 "$VM_WORK/verify.out"); gateway: $(tail -n 4 "$VM_WORK/isergwd.log")"
	fi
else
	skip libiscsi/verify "no $VERIFY (make builds the test tools)"
fi
# Commands of up to one registered chunk (256 KiB) ran on their task buffer in place.
zc_lib=$(gw_state 'r["zero_copy_ops"]' 2>/dev/null)
if [ -x "$VERIFY" ] && [ "${zc_lib:-0}" -gt 0 ] 2>/dev/null; then
	pass libiscsi/zero-copy "$(gw_state '"zero_copy_ops=%d staged_ops=%d buffers_lent=%d" % (r["zero_copy_ops"], r["staged_ops"], r["buffers_lent"])')"
elif [ -x "$VERIFY" ]; then
	fail libiscsi/zero-copy "no RDMA operation ran on a lent task buffer: $(gw_state 'r' 2>&1)"
else
	zc_lib=0
fi
skip libiscsi/over-256k "libiscsi 1.19's iSER fails commands over 256 KiB and then double-frees (see tgt-iser); the kernel initiator covers large I/O"

# ---- the kernel's iSER initiator -----------------------------------------------------------

if ! check iscsid vm_iscsid_start; then
	vm_end
fi
VM_TMO=30 run iscsiadm -m discovery -t st -p "$PORTAL" -I iser >"$VM_WORK/discovery.out" 2>&1
rc=$?
cat "$VM_WORK/discovery.out"
found=0
for t in "$T_PLAIN" "$T_CHAP" "$T_MUTUAL"; do
	grep -q "^$PORTAL,1 $t\$" "$VM_WORK/discovery.out" && found=$((found + 1))
done
if [ "$rc" -eq 0 ] && [ "$found" -eq 3 ]; then
	pass kernel/discovery "SendTargets over iSER lists the 3 targets at $PORTAL,1"
else
	fail kernel/discovery "exit $rc, $found of 3 targets listed: $(head -n 3 "$VM_WORK/discovery.out")"
fi

node_set() {
	iscsiadm -m node -T "$1" -p "$PORTAL" -I iser -o update -n "$2" -v "$3"
}

login() {
	VM_TMO=60 run iscsiadm -m node -T "$1" -p "$PORTAL" -I iser --login
}

logout() {
	VM_TMO=40 run iscsiadm -m node -T "$1" -p "$PORTAL" -I iser --logout
}

# sizes_check DEV: a direct write and read-back of every power of two from 512 B to 4 MiB, then
# of the largest command the initiator sends (max_hw_sectors_kb: ib_iser on rxe stops at
# 2044 KiB, eight registered 256 KiB chunks), each compared byte for byte. That largest write
# must reach the target as one command (the disk's count of writes grows by one), and it and
# its read run in place on lent registered chunks, nothing staged through a copy.
sizes_check() {
	local dev=$1 bs=512 off=$((128 << 20)) max zc0 zc1 st0 st1
	max=$(($(cat "/sys/block/$dev/queue/max_hw_sectors_kb") * 1024))
	cat "/sys/block/$dev/queue/max_hw_sectors_kb" >"/sys/block/$dev/queue/max_sectors_kb"
	echo "max_sectors_kb $(cat "/sys/block/$dev/queue/max_sectors_kb")"
	while [ "$bs" -le $((4 << 20)) ]; do
		size_one "$dev" "$bs" "$off" || return 1
		off=$((off + (4 << 20)))
		bs=$((bs * 2))
	done
	[ "$max" -gt $((256 << 10)) ] || return 1
	zc0=$(gw_state 'r["zero_copy_ops"]') st0=$(gw_state 'r["staged_ops"]')
	size_one "$dev" "$max" "$off" && [ "$SIZE_CMDS" -eq 1 ] || return 1
	zc1=$(gw_state 'r["zero_copy_ops"]') st1=$(gw_state 'r["staged_ops"]')
	# Both ways in place on a run of lent chunks, one RDMA operation per 256 KiB chunk.
	echo "largest command: $((zc1 - zc0)) RDMA operations in place, $((st1 - st0)) staged"
	[ "$st1" -eq "$st0" ] && [ $((zc1 - zc0)) -ge $((2 * max / (256 << 10))) ]
}

# size_one DEV BYTES OFFSET: one direct write of BYTES at OFFSET, read back and compared; sets
# SIZE_CMDS to the number of write commands it took.
size_one() {
	local dev=$1 bs=$2 off=$3 w0 w1
	head -c "$bs" /dev/urandom >"$VM_WORK/sz" || return 1
	w0=$(awk '{ print $5 }' "/sys/block/$dev/stat")
	dd if="$VM_WORK/sz" of="/dev/$dev" bs="$bs" seek="$off" oflag=direct,seek_bytes \
		status=none || return 1
	w1=$(awk '{ print $5 }' "/sys/block/$dev/stat")
	dd if="/dev/$dev" of="$VM_WORK/sz.back" bs="$bs" skip="$off" count=1 \
		iflag=direct,skip_bytes status=none || return 1
	cmp "$VM_WORK/sz" "$VM_WORK/sz.back" || return 1
	SIZE_CMDS=$((w1 - w0))
	echo "$bs bytes at $off: read back intact, $SIZE_CMDS write command(s)"
}

# Let the kernel queue more commands than the window: 256 per session and per LUN.
node_set "$T_PLAIN" node.session.cmds_max 256
node_set "$T_PLAIN" node.session.queue_depth 256
# And send commands as large as the device allows (ib_iser's default is 512 KiB).
echo 8192 >/sys/module/ib_iser/parameters/max_sectors
if login "$T_PLAIN" >"$VM_WORK/login-plain.out" 2>&1; then
	transport=$(iscsiadm -m session -P1 2>/dev/null | awk '/Iface Transport:/ { print $3; exit }')
	if [ "$transport" = iser ]; then
		pass kernel/login "session over $transport"
	else
		fail kernel/login "logged in, but the session's transport is '$transport'"
	fi
	if dev=$(vm_wait_disk "$T_PLAIN" 30); then
		if check kernel/direct-io vm_io_check "/dev/$dev" 8 ||
			! echo "gateway: $(tail -n 5 "$VM_WORK/isergwd.log")"; then
			if dd if="$VM_WORK/plain.img" bs=1M skip=1 count=8 status=none |
				cmp - "$VM_WORK/pattern"; then
				pass kernel/backing-file "8 MiB at 1 MiB match"
			else
				fail kernel/backing-file "the backing file differs from what was written"
			fi
		fi
		check kernel/filesystem vm_fs_workflow "$dev"
		window=$(gw_state '[x["queue_depth"] for x in s["sessions"] if x.get("target") == "'"$T_PLAIN"'"]' 2>&1)
		if [ "$window" = "[144]" ]; then
			pass kernel/window "queue_depth 1024, command window $window: $(grep -m1 'command window' "$VM_WORK/isergwd.log")"
		else
			fail kernel/window "the session's window is $window, not [144] (160 receive buffers, 16 spare)"
		fi
		# Linux's iser offers its device's max_qp_rd_atom of RDMA Reads (asking for 1
		# itself): the gateway must keep 16 in flight, not wait out each one.
		# The newest connection is the kernel's session (libiscsi's came before).
		reads=$(grep -o 'iSER connection from [^,]*, [0-9]* RDMA Reads in flight' \
			"$VM_WORK/isergwd.log" | tail -n 1 | grep -o '[0-9]* RDMA Reads')
		if [ "$reads" = "16 RDMA Reads" ]; then
			pass kernel/read-depth "$reads in flight per connection"
		else
			fail kernel/read-depth "'${reads:-no connection line}', not 16 RDMA Reads in flight: $(grep 'iSER connection from' "$VM_WORK/isergwd.log" | tail -n 1)"
		fi
		check kernel/sizes-512b-4m sizes_check "$dev"
		if vm_need fio; then
			check kernel/deep-queue fio --name=qd256 --filename="/dev/$dev" --direct=1 \
				--ioengine=libaio --iodepth=256 --rw=randwrite --bs=4k --size=16M \
				--offset=64M --verify=crc32c --do_verify=1 --verify_fatal=1
		else
			skip kernel/deep-queue "$VM_MISSING is not installed"
		fi
		# The kernel's I/O ran zero copy too (and its 24 MiB file, beyond one chunk, may be
		# staged): the zero-copy count grew past what libiscsi left.
		st=$(gw_state '"zero_copy_ops=%d staged_ops=%d" % (r["zero_copy_ops"], r["staged_ops"])' 2>&1)
		if gw_state 'r["zero_copy_ops"] > '"${zc_lib:-0}" | grep -q True; then
			pass kernel/zero-copy "$st"
		else
			fail kernel/zero-copy "$st (libiscsi left $zc_lib)"
		fi
		# What the gateway holds for the session is visible, and RDMA moved the data.
		st=$(gw_state '"qps=%d buffers=%d writes=%d reads=%d" % (r["qps"], r["buffers"], r["rdma_writes"], r["rdma_reads"])' 2>&1)
		if gw_state 'r["qps"] >= 1 and r["rdma_writes"] > 0 and r["rdma_reads"] > 0' | grep -q True; then
			pass kernel/counters "$st"
		else
			fail kernel/counters "$st"
		fi
	else
		fail kernel/direct-io "no disk attached within 30 s"
	fi
	check kernel/logout logout "$T_PLAIN"
else
	fail kernel/login "$(tail -n 3 "$VM_WORK/login-plain.out"); $(tail -n 3 "$VM_WORK/isergwd.log"); dmesg: $(dmesg | grep -i iser | tail -n 2)"
fi

# ---- CHAP over iSER -----------------------------------------------------------------------

chap_target() {
	local name=$1 t=$2 mutual=$3 dev
	node_set "$t" node.session.auth.authmethod CHAP
	node_set "$t" node.session.auth.username "$CHAP_USER"
	node_set "$t" node.session.auth.password "$CHAP_SECRET"
	if [ "$mutual" = 1 ]; then
		node_set "$t" node.session.auth.username_in "$MUTUAL_USER"
		node_set "$t" node.session.auth.password_in "$MUTUAL_SECRET"
	fi
	if ! login "$t" >"$VM_WORK/login-$name.out" 2>&1; then
		fail "$name/login" "$(tail -n 3 "$VM_WORK/login-$name.out")"
		return
	fi
	pass "$name/login" "$(grep -m1 successful "$VM_WORK/login-$name.out")"
	if dev=$(vm_wait_disk "$t" 30); then
		check "$name/direct-io" vm_io_check "/dev/$dev" 4
	else
		fail "$name/direct-io" "no disk attached within 30 s"
	fi
	check "$name/logout" logout "$t"
}

chap_target chap "$T_CHAP" 0
node_set "$T_CHAP" node.session.auth.password wrong-secret-000
# Refused as a wrong secret is: iscsiadm's exit 24 (authorization failure), not any failure.
login "$T_CHAP" >"$VM_WORK/login-wrong.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
	fail chap/wrong-secret "login succeeded with a wrong secret"
	logout "$T_CHAP" >/dev/null 2>&1
elif [ "$rc" -ne 24 ]; then
	fail chap/wrong-secret "login failed with exit $rc, not 24 (authorization failure): $(grep \
		-m1 -iE 'error|fail' "$VM_WORK/login-wrong.out")"
else
	pass chap/wrong-secret "refused: $(grep -m1 -iE 'auth|fail' "$VM_WORK/login-wrong.out")"
fi
chap_target mutual "$T_MUTUAL" 1

# ---- clients killed mid-I/O ---------------------------------------------------------------

if [ -x "$VERIFY" ]; then
	"$VERIFY" -q -n 100000 -m 262144 -S 64M -i "$LIBISCSI_INI" "$URL" >"$VM_WORK/verify-kill.out" 2>&1 &
	vpid=$!
	sleep 4
	if kill -0 "$vpid" 2>/dev/null; then
		kill -9 "$vpid"
		wait "$vpid" 2>/dev/null
		if wait_state 'len([x for x in s["sessions"] if x["initiator"] == "'"$LIBISCSI_INI"'"]) == 0' 30; then
			pass kill/libiscsi "kill -9 mid-I/O; the gateway dropped the session"
		else
			fail kill/libiscsi "the killed client's session is still listed after 30 s"
		fi
	else
		wait "$vpid"
		fail kill/libiscsi "the client had already ended: $(tail -n 3 "$VM_WORK/verify-kill.out")"
	fi
else
	skip kill/libiscsi "no $VERIFY"
fi

if login "$T_PLAIN" >"$VM_WORK/login-kill.out" 2>&1 && dev=$(vm_wait_disk "$T_PLAIN" 30); then
	dd if=/dev/urandom of="/dev/$dev" bs=1M count=200 oflag=direct status=none 2>/dev/null &
	ddpid=$!
	sleep 3
	if logout "$T_PLAIN" >"$VM_WORK/logout-kill.out" 2>&1; then
		pass kill/kernel-logout "logout under direct writes"
	else
		fail kill/kernel-logout "$(tail -n 3 "$VM_WORK/logout-kill.out")"
	fi
	kill "$ddpid" 2>/dev/null
	wait "$ddpid" 2>/dev/null
else
	fail kill/kernel-logout "login before the cut failed: $(tail -n 3 "$VM_WORK/login-kill.out")"
fi

# The gateway still serves: a fresh login with verified I/O.
if login "$T_PLAIN" >"$VM_WORK/login-after.out" 2>&1 && dev=$(vm_wait_disk "$T_PLAIN" 30); then
	check kill/serves-after vm_io_check "/dev/$dev" 8
	logout "$T_PLAIN" >/dev/null 2>&1
else
	fail kill/serves-after "login after the cuts failed: $(tail -n 3 "$VM_WORK/login-after.out")"
fi

# ---- nothing leaked -------------------------------------------------------------------------

vm_iscsid_stop
if wait_state 'not s["sessions"] and r["connections"] == 0 and r["qps"] == 0 and r["mrs"] == 0 and r["buffers_in_use"] == 0 and r["buffers_lent"] == 0 and r["registered_bytes"] == 0' 30; then
	pass no-leak "$(gw_state 'r')"
else
	fail no-leak "after every session ended: sessions $(gw_state 'len(s["sessions"])' 2>&1), resources $(gw_state 'r' 2>&1)"
fi

if vm_gw_stop; then
	pass gateway-stop "$VM_GW_STOP"
else
	fail gateway-stop "$VM_GW_STOP; log: $(tail -n 3 "$VM_WORK/isergwd.log")"
fi
vm_end
