#!/bin/bash
# kernel-tcp: the gateway under the Linux kernel's iSCSI initiator (open-iscsi, iscsi_tcp), the
# initiator every Linux host uses. One gateway on a guest address serves three targets: without
# authentication, with one-way CHAP and with mutual CHAP. The first gets the full host workflow
# (discovery, login, raw direct I/O, mkfs.ext4, files written, a remount with dropped caches,
# checksums, logout, and the filesystem found intact in the gateway's backing file); the CHAP
# targets get login, direct I/O and logout, and a wrong secret must be refused. The gateway
# must exit 0 on SIGTERM at the end.
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin kernel-tcp

ADDR=10.200.4.1
PORT=3260
PORTAL=$ADDR:$PORT
IQN=iqn.2026-11.org.isergw:vm
T_PLAIN=$IQN-plain
T_CHAP=$IQN-chap
T_MUTUAL=$IQN-mutual
CHAP_USER=vmhost
CHAP_SECRET=vm-secret-0123
MUTUAL_USER=vmgw
MUTUAL_SECRET=vm-gw-secret-4567

if ! vm_need iscsiadm iscsid mkfs.ext4 e2fsck debugfs sha256sum; then
	skip all "$VM_MISSING is not installed (open-iscsi, e2fsprogs)"
	vm_end
fi
if ! vm_modprobe ext4 dummy; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi

# The portal's address lives on a dummy device: a guest address that is not loopback, as a
# host would reach the gateway.
run ip link add gw0 type dummy && vm_on_exit "ip link del gw0 2>/dev/null"
run ip link set gw0 up && run ip addr add "$ADDR/24" dev gw0

lun_json() {
	local path=$1
	printf '{ "lun": 0, "vendor": "ISERGW", "product": "vm", "write_cache": true, "thin": true,
	  "backstore": { "type": "file", "path": "%s", "size": "256M", "block_size": 512 } }' "$path"
}

target_json() {
	local name=$1 chap=$2 lun=$3
	cat <<-EOF2
		{ "name": "$name", "tpgt": 1, "portals": ["tcp0"], "allow_any_initiator": true,
		  "chap": $chap,
		  "luns": [ $(lun_json "$lun") ] }
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
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$ADDR", "port": $PORT } ],
  "targets": [
    $(target_json "$T_PLAIN" "$no_chap" "$VM_WORK/plain.img"),
    $(target_json "$T_CHAP" "$one_way" "$VM_WORK/chap.img"),
    $(target_json "$T_MUTUAL" "$mutual" "$VM_WORK/mutual.img")
  ]
}
EOF
cat "$VM_WORK/isergwd.json"

if ! check gateway-start vm_gw_start "$VM_WORK/isergwd.json" "$VM_WORK/isergwd.log" "$ADDR" "$PORT"
then
	vm_end
fi
if ! check iscsid vm_iscsid_start; then
	vm_end
fi

# ---- discovery ----------------------------------------------------------------------------

VM_TMO=30 run iscsiadm -m discovery -t st -p "$PORTAL" >"$VM_WORK/discovery.out" 2>&1
rc=$?
cat "$VM_WORK/discovery.out"
found=0
for t in "$T_PLAIN" "$T_CHAP" "$T_MUTUAL"; do
	grep -q "^$PORTAL,1 $t\$" "$VM_WORK/discovery.out" && found=$((found + 1))
done
if [ "$rc" -eq 0 ] && [ "$found" -eq 3 ]; then
	pass discovery "SendTargets lists the 3 targets at $PORTAL,1"
else
	fail discovery "exit $rc, $found of 3 targets listed: $(head -n 3 "$VM_WORK/discovery.out")"
fi

node_set() {
	local t=$1 key=$2 val=$3
	iscsiadm -m node -T "$t" -p "$PORTAL" -o update -n "$key" -v "$val"
}

login() {
	VM_TMO=60 run iscsiadm -m node -T "$1" -p "$PORTAL" --login
}

logout() {
	VM_TMO=40 run iscsiadm -m node -T "$1" -p "$PORTAL" --logout
}

# ---- no authentication: the whole host workflow -------------------------------------------

if login "$T_PLAIN" >"$VM_WORK/login-plain.out" 2>&1; then
	pass login "$(grep -m1 successful "$VM_WORK/login-plain.out")"
	if dev=$(vm_wait_disk "$T_PLAIN" 30); then
		size=$(($(cat "/sys/block/$dev/size") * 512))
		if [ "$size" -eq $((256 << 20)) ]; then
			pass disk "/dev/$dev, $size bytes"
		else
			fail disk "/dev/$dev is $size bytes, the LUN has $((256 << 20))"
		fi
		check direct-io vm_io_check "/dev/$dev" 8
		check filesystem vm_fs_workflow "$dev"
	else
		fail disk "no disk attached within 30 s: $(iscsiadm -m session -P3 2>&1 | tail -n 4)"
	fi
	check logout logout "$T_PLAIN"
	# The data is where the gateway says it put it: the backing file holds a clean ext4 with
	# the same files.
	if [ -f "$VM_WORK/sums" ] && run e2fsck -fn "$VM_WORK/plain.img" >"$VM_WORK/fsck.out" 2>&1; then
		bad=0
		while read -r sum f; do
			got=$(debugfs -R "cat /$f" "$VM_WORK/plain.img" 2>/dev/null | sha256sum | cut -d' ' -f1)
			[ "$got" = "$sum" ] || bad=$((bad + 1))
		done <"$VM_WORK/sums"
		if [ "$bad" -eq 0 ]; then
			pass backing-file "e2fsck clean, $(wc -l <"$VM_WORK/sums") files match"
		else
			fail backing-file "$bad files differ in the backing file"
		fi
	elif [ -f "$VM_WORK/sums" ]; then
		fail backing-file "e2fsck on the backing file: $(tail -n 3 "$VM_WORK/fsck.out")"
	else
		skip backing-file "the filesystem check did not get far enough"
	fi
else
	fail login "$(tail -n 3 "$VM_WORK/login-plain.out")"
fi

# ---- CHAP ---------------------------------------------------------------------------------

# chap_target NAME TARGET MUTUAL: node settings, login, direct I/O, logout.
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

# refused NAME TARGET KEY VALUE RC [ISCSID]: with one CHAP setting wrong, the login must fail
# the way that setting fails: iscsiadm's exit RC (24 ISCSI_ERR_LOGIN_AUTH_FAILED when the target
# refuses the initiator's secret; 19 ISCSI_ERR_FATAL_LOGIN when the initiator refuses the
# target's proof) and, when given, ISCSID in iscsid's log. Any other failure (a dead gateway:
# exit 8 or a timeout) proves nothing. No session may be left behind.
refused() {
	local name=$1 t=$2 key=$3 val=$4 want=$5 why=${6:-} good rc out
	out=$VM_WORK/refused-${name//\//-}.out
	good=$(iscsiadm -m node -T "$t" -p "$PORTAL" -S | awk -v k="$key" '$1 == k { print $3 }')
	node_set "$t" "$key" "$val"
	login "$t" >"$out" 2>&1
	rc=$?
	cat "$out"
	if [ "$rc" -eq 0 ]; then
		fail "$name" "login succeeded with a wrong $key"
		logout "$t" >/dev/null 2>&1
	elif [ "$rc" -ne "$want" ]; then
		fail "$name" "login failed with exit $rc, not $want: $(grep -m1 -iE 'error|fail' "$out")"
	elif [ -n "$why" ] && ! grep -qF "$why" "$VM_WORK/iscsid.log"; then
		fail "$name" "exit $rc, but iscsid did not log '$why'"
	elif iscsiadm -m session 2>/dev/null | grep -q " $t "; then
		fail "$name" "login failed but a session to $t remains"
	else
		pass "$name" "refused: $(grep -m1 -iE 'auth|fail' "$out")${why:+; iscsid: $why}"
	fi
	node_set "$t" "$key" "$good"
}

chap_target chap "$T_CHAP" 0
refused chap/wrong-secret "$T_CHAP" node.session.auth.password wrong-secret-000 24
chap_target mutual "$T_MUTUAL" 1
# The initiator checks the target's answer: a target that proves a different secret is refused.
refused mutual/wrong-target-secret "$T_MUTUAL" node.session.auth.password_in wrong-secret-111 \
	19 "received incorrect CHAP response from target $T_MUTUAL"

# ---- the gateway stops cleanly ------------------------------------------------------------

vm_iscsid_stop
if vm_gw_stop; then
	pass gateway-stop "$VM_GW_STOP"
else
	fail gateway-stop "$VM_GW_STOP; log: $(tail -n 3 "$VM_WORK/isergwd.log")"
fi
vm_end
