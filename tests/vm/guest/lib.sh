# tests/vm/guest/lib.sh: sourced (bash) by every guest suite of the VM rig.
#
# It owns the result protocol with the host and the plumbing several suites share: results are
# lines "pass|fail|skip SUITE/CHECK DETAIL" appended to $VM_SHARE/results, which tests/vm/run.sh
# prints after the guest powers off. Helpers set up veth and rxe devices, the open-iscsi daemon
# and the gateway, always bounded in time, and each suite undoes them from its EXIT trap so the
# next suite in the same guest starts clean.
#
# Environment (set by guest/main.sh): VM_SHARE (results folder), VM_BUILD (build tree holding
# isergwd and the test tools). Everything a suite writes lives in its $VM_WORK (guest tmpfs).
# shellcheck disable=SC2034 # VM_MISSING, VM_RPING_COUNT, VM_GW_STOP are read by the suites

set -u
export LC_ALL=C
VM_SHARE=${VM_SHARE:-/vmshare}
VM_BUILD=${VM_BUILD:-/work/main/build}
VM_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# t_wait_for SECONDS CMD...: the host suites' wait (see there).
# shellcheck source=tests/lib/wait.sh
. "$VM_LIB_DIR/../../lib/wait.sh"
VM_RESULTS=$VM_SHARE/results
VM_SUITE=
VM_WORK=
VM_FAILED=0
VM_CLEANUPS=()

# ---- results ------------------------------------------------------------------------------

vm_result() {
	local kind=$1 name=$2 detail=${3:-}
	# One line per result: the host splits on the first two spaces.
	detail=$(printf '%s' "$detail" | tr '\n\t' '  ' | tr -s ' ' | cut -c1-300)
	printf '%s %s %s\n' "$kind" "$VM_SUITE/$name" "$detail" >>"$VM_RESULTS"
	printf '=== %s %s/%s %s\n' "$kind" "$VM_SUITE" "$name" "$detail"
	sync "$VM_RESULTS" 2>/dev/null
}

pass() {
	vm_result pass "$1" "${2:-}"
}

fail() {
	VM_FAILED=1
	vm_result fail "$1" "${2:-}"
}

skip() {
	vm_result skip "$1" "${2:-}"
}

# run CMD...: logs the command, runs it bounded by VM_TMO seconds (default 60). A shell function
# of this library runs as it is: it bounds its own steps.
run() {
	echo "+ $*"
	if declare -F "$1" >/dev/null; then
		"$@"
	else
		timeout -k 5 "${VM_TMO:-60}" "$@"
	fi
	local rc=$?
	[ "$rc" -ne 0 ] && echo "  -> exit $rc"
	return "$rc"
}

# check NAME CMD...: runs CMD bounded (output into the suite log), passes or fails on its status.
check() {
	local name=$1 out rc
	shift
	out=$VM_WORK/$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.-' '_').out
	run "$@" >"$out" 2>&1
	rc=$?
	cat "$out"
	if [ "$rc" -eq 0 ]; then
		pass "$name"
		return 0
	fi
	fail "$name" "exit $rc: $(tail -n 3 "$out")"
	return 1
}

# vm_need TOOL...: true when every tool is on PATH or an executable path; else VM_MISSING names
# the first one missing.
vm_need() {
	local t
	for t in "$@"; do
		if [ -x "$t" ] || command -v "$t" >/dev/null 2>&1; then
			continue
		fi
		VM_MISSING=$t
		return 1
	done
	return 0
}

# vm_begin SUITE: the suite's work folder and cleanup trap.
vm_begin() {
	VM_SUITE=$1
	VM_WORK=$(mktemp -d "/tmp/vm-$VM_SUITE.XXXXXX") || exit 1
	trap vm_exit EXIT
	trap 'VM_FAILED=1; echo "$VM_SUITE: terminated"; exit 143' TERM INT
	echo "=== suite $VM_SUITE on $(uname -r), $(nproc) CPUs, work in $VM_WORK"
}

# vm_on_exit CMD...: registers a cleanup step; they run last-registered first.
vm_on_exit() {
	VM_CLEANUPS+=("$*")
}

vm_exit() {
	local rc=$? i
	trap - EXIT TERM INT
	for ((i = ${#VM_CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${VM_CLEANUPS[$i]}" || echo "cleanup failed: ${VM_CLEANUPS[$i]}"
	done
	# Everything a failed suite left is useful to whoever looks at it from the host.
	if [ "$VM_FAILED" = 1 ] && [ -n "$VM_WORK" ]; then
		mkdir -p "$VM_SHARE/logs/$VM_SUITE"
		cp -a "$VM_WORK"/. "$VM_SHARE/logs/$VM_SUITE/" 2>/dev/null
		dmesg >"$VM_SHARE/logs/$VM_SUITE/dmesg.txt" 2>/dev/null
	fi
	# The guest's files live in its memory: what a suite wrote must not crowd the next ones.
	[ -n "$VM_WORK" ] && rm -rf --one-file-system "$VM_WORK"
	exit "$rc"
}

# ---- networking ---------------------------------------------------------------------------

# vm_modprobe MODULE...: loads each module; says which one failed.
vm_modprobe() {
	local m
	for m in "$@"; do
		if ! run modprobe "$m"; then
			VM_MISSING=$m
			return 1
		fi
	done
	return 0
}

# vm_veth NAME ADDR: a veth pair NAME / NAME-p, both up, ADDR/24 on NAME. The peer end only
# gives NAME a carrier; nothing listens behind it.
vm_veth() {
	local n=$1 addr=$2
	run ip link add "$n" type veth peer name "$n-p" || return 1
	vm_on_exit "ip link del $n 2>/dev/null"
	run ip link set "$n-p" up && run ip link set "$n" up &&
		run ip addr add "$addr/24" dev "$n"
}

# vm_bond_up BOND ADDR [FAIL_OVER_MAC]: an active-backup bond with fail_over_mac=active (or as
# given) over two veths (BONDa, BONDb; their peers BONDa-p, BONDb-p are what a test takes
# down), ADDR/24 on it, up once the link monitor has chosen an active slave. Removed when the
# suite ends.
vm_bond_up() {
	local bond=$1 addr=$2 fom=${3:-active} s
	run ip link add "$bond" type bond mode active-backup miimon 50 fail_over_mac "$fom" || return 1
	vm_on_exit "ip link del $bond 2>/dev/null"
	for s in a b; do
		run ip link add "$bond$s" type veth peer name "$bond$s-p" || return 1
		vm_on_exit "ip link del $bond$s 2>/dev/null"
		run ip link set "$bond$s" master "$bond" || return 1
		run ip link set "$bond$s-p" up || return 1
	done
	run ip link set "$bond" up && run ip addr add "$addr/24" dev "$bond" || return 1
	for s in $(seq 1 50); do
		[ -n "$(cat "/sys/class/net/$bond/bonding/active_slave")" ] && return 0
		sleep 0.1
	done
	echo "no active slave after 5 s"
	return 1
}

# vm_rxe_add RXE NETDEV: a Soft-RoCE device on NETDEV, waited for until its port is ACTIVE.
vm_rxe_add() {
	local rxe=$1 dev=$2 i
	run rdma link add "$rxe" type rxe netdev "$dev" || return 1
	vm_on_exit "rdma link del $rxe 2>/dev/null"
	for i in $(seq 1 50); do
		rdma link show "$rxe/1" 2>/dev/null | grep -q 'state ACTIVE' && return 0
		sleep 0.2
	done
	echo "$rxe did not become ACTIVE: $(rdma link show "$rxe/1" 2>&1)"
	return 1
}

# vm_rxe_has_gid RXE ADDR: the device's GID table holds ADDR's IPv4-mapped RoCE v2 GID.
vm_rxe_has_gid() {
	ibv_devinfo -d "$1" -v 2>/dev/null | grep -q "::ffff:$2"
}

# vm_rping ADDR COUNT [PORT]: an rping server and client over ADDR (rdma_cm connect, COUNT
# RDMA ping-pongs). A client started before the server listens is retried, twice at most.
vm_rping() {
	local addr=$1 count=$2 port=${3:-7174} spid rc try
	for try in 1 2 3; do
		timeout 60 rping -s -a "$addr" -p "$port" -C "$count" >"$VM_WORK/rping-s.$port.log" 2>&1 &
		spid=$!
		sleep 1
		timeout 60 rping -c -a "$addr" -p "$port" -C "$count" -S 64 -v \
			>"$VM_WORK/rping-c.$port.log" 2>&1
		rc=$?
		wait "$spid"
		if [ "$rc" -eq 0 ]; then
			VM_RPING_COUNT=$(grep -c 'ping data' "$VM_WORK/rping-c.$port.log")
			return 0
		fi
		echo "rping try $try: exit $rc: $(tail -n 2 "$VM_WORK/rping-c.$port.log" | tr '\n' ' ')"
		sleep 1
	done
	return "$rc"
}

# ---- open-iscsi ---------------------------------------------------------------------------

VM_INITIATOR=iqn.2026-11.org.isergw:vm-kernel
VM_ISCSID_PID=

# vm_iscsid_start: a fresh open-iscsi node database with short timeouts (a dead target costs
# seconds, not open-iscsi's default minutes), then iscsid in the foreground as our child.
vm_iscsid_start() {
	local i
	vm_modprobe iscsi_tcp sd_mod || return 1
	mkdir -p /etc/iscsi /var/lib/iscsi /run/lock/iscsi
	rm -rf /etc/iscsi/nodes /etc/iscsi/send_targets /etc/iscsi/ifaces /var/lib/iscsi/*
	echo "InitiatorName=$VM_INITIATOR" >/etc/iscsi/initiatorname.iscsi
	cat >/etc/iscsi/iscsid.conf <<-EOF
		node.startup = manual
		node.session.timeo.replacement_timeout = 15
		node.conn[0].timeo.login_timeout = 15
		node.conn[0].timeo.logout_timeout = 15
		node.conn[0].timeo.noop_out_interval = 5
		node.conn[0].timeo.noop_out_timeout = 10
		node.session.initial_login_retry_max = 2
		node.session.cmds_max = 128
		node.session.queue_depth = 32
	EOF
	# Its own process group: iscsid signals its whole group when it is told to stop.
	setsid iscsid -f >"$VM_WORK/iscsid.log" 2>&1 &
	VM_ISCSID_PID=$!
	vm_on_exit vm_iscsid_stop
	# Ready when its management socket is bound (an abstract unix socket).
	for i in $(seq 1 50); do
		grep -q '@ISCSIADM_ABSTRACT_NAMESPACE' /proc/net/unix && return 0
		kill -0 "$VM_ISCSID_PID" 2>/dev/null || break
		sleep 0.2
	done
	echo "iscsid did not start: $(tail -n 3 "$VM_WORK/iscsid.log")"
	return 1
}

vm_iscsid_stop() {
	[ -n "$VM_ISCSID_PID" ] || return 0
	timeout 30 iscsiadm -m node --logoutall=all >/dev/null 2>&1
	kill -TERM "$VM_ISCSID_PID" 2>/dev/null
	timeout 10 tail --pid="$VM_ISCSID_PID" -f /dev/null 2>/dev/null
	kill -KILL "$VM_ISCSID_PID" 2>/dev/null
	wait "$VM_ISCSID_PID" 2>/dev/null
	VM_ISCSID_PID=
	return 0
}

# vm_disk_of ADDR: the sd disk of the kernel initiator's session through portal ADDR:3260.
vm_disk_of() {
	iscsiadm -m session -P3 2>/dev/null | awk -v p="$1" '
		/Current Portal: / { cur = $3 }
		/Attached scsi disk/ && index(cur, p ":") == 1 { print $4; exit }'
}

# vm_mpath_sessions IQN ADDR...: the kernel initiator logged in to IQN through each portal
# ADDR:3260 with a multipath host's settings (docs/FAILOVER.md: NOP-Out every 2 s, I/O failed
# over after 5 s of recovery); prints "ADDR: /dev/sdX" for each once its disk is attached.
vm_mpath_sessions() {
	local iqn=$1 p d
	shift
	for p in "$@"; do
		VM_TMO=30 run iscsiadm -m discovery -t st -p "$p:3260" >/dev/null || return 1
	done
	iscsiadm -m node -T "$iqn" -o update -n node.session.timeo.replacement_timeout -v 5
	iscsiadm -m node -T "$iqn" -o update -n 'node.conn[0].timeo.noop_out_interval' -v 2
	iscsiadm -m node -T "$iqn" -o update -n 'node.conn[0].timeo.noop_out_timeout' -v 2
	for p in "$@"; do
		VM_TMO=60 run iscsiadm -m node -T "$iqn" -p "$p:3260" --login || return 1
	done
	for p in "$@"; do
		d=
		for _ in $(seq 1 120); do
			d=$(vm_disk_of "$p")
			[ -n "$d" ] && [ -b "/dev/$d" ] && break
			sleep 0.25
		done
		[ -n "$d" ] || return 1
		echo "$p: /dev/$d"
	done
}

# vm_wait_disk TARGET [SECONDS]: prints sdX once TARGET's session has its disk attached; the
# SCSI scan after login is asynchronous and there is no udev to wait on.
vm_wait_disk() {
	local t=$1 secs=${2:-30} i d
	for i in $(seq 1 $((secs * 4))); do
		d=$(iscsiadm -m session -P3 2>/dev/null | awk -v t="$t" '
			/^Target: / { cur = $2 }
			/Attached scsi disk/ && cur == t { print $4; exit }')
		if [ -n "$d" ] && [ -b "/dev/$d" ] && [ "$(cat "/sys/block/$d/size" 2>/dev/null)" != 0 ]; then
			echo "$d"
			return 0
		fi
		sleep 0.25
	done
	return 1
}

# vm_io_check DEV MIB: MIB MiB of random data written with O_DIRECT at a 1 MiB offset, read
# back the same way and compared: what a host's I/O through this disk would see.
vm_io_check() {
	local dev=$1 mib=$2
	head -c "${mib}M" /dev/urandom >"$VM_WORK/pattern" || return 1
	dd if="$VM_WORK/pattern" of="$dev" bs=1M seek=1 oflag=direct conv=fsync status=none ||
		return 1
	dd if="$dev" of="$VM_WORK/readback" bs=1M skip=1 count="$mib" iflag=direct status=none ||
		return 1
	cmp "$VM_WORK/pattern" "$VM_WORK/readback"
}

# vm_fs_workflow DEV: what a host does with a new disk: ext4 on /dev/DEV, files of 4 KiB,
# 1 MiB, 24 MiB and 64 small odd sizes, checksums, unmount; then, with the page cache and the
# device's buffers dropped so nothing comes from memory, mount again and verify every file.
vm_fs_workflow() {
	local dev=/dev/$1 mnt=$VM_WORK/mnt f
	mkdir -p "$mnt"
	run mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=1 "$dev" || return 1
	run mount "$dev" "$mnt" || return 1
	mkdir -p "$mnt/data/small"
	head -c 4096 /dev/urandom >"$mnt/data/f4k"
	head -c 1M /dev/urandom >"$mnt/data/f1m"
	head -c 24M /dev/urandom >"$mnt/data/f24m"
	for f in $(seq 1 64); do
		head -c $((f * 521)) /dev/urandom >"$mnt/data/small/$f"
	done
	(cd "$mnt" && find data -type f | sort | xargs sha256sum) >"$VM_WORK/sums"
	sync
	run umount "$mnt" || return 1
	echo 3 >/proc/sys/vm/drop_caches
	blockdev --flushbufs "$dev"
	run mount "$dev" "$mnt" || return 1
	if ! (cd "$mnt" && sha256sum --quiet -c "$VM_WORK/sums"); then
		umount "$mnt"
		return 1
	fi
	run umount "$mnt"
}

# ---- udev and multipathd (the host side of dm-multipath) ---------------------------------

VM_UDEVD_PID=
VM_MPD_PID=

# vm_udevd_start: systemd-udevd as our child (the guest has no systemd to start it), the block
# devices that exist triggered and settled: multipath needs udev's view of the disks.
vm_udevd_start() {
	local udevd=/lib/systemd/systemd-udevd
	"$udevd" >"$VM_WORK/udevd.log" 2>&1 &
	VM_UDEVD_PID=$!
	vm_on_exit vm_udevd_stop
	sleep 1
	timeout 30 udevadm trigger --subsystem-match=block --action=add
	timeout 30 udevadm settle -t 20
	kill -0 "$VM_UDEVD_PID"
}

vm_udevd_stop() {
	[ -n "$VM_UDEVD_PID" ] || return 0
	kill -TERM "$VM_UDEVD_PID" 2>/dev/null
	timeout 10 tail --pid="$VM_UDEVD_PID" -f /dev/null
	kill -KILL "$VM_UDEVD_PID" 2>/dev/null
	wait "$VM_UDEVD_PID" 2>/dev/null
	VM_UDEVD_PID=
	return 0
}

# vm_mpathd_start: multipathd in the foreground as our child, on the /etc/multipath.conf the
# suite wrote; true once its socket is bound. Its log: $VM_WORK/multipathd.log.
vm_mpathd_start() {
	multipathd -d -s >"$VM_WORK/multipathd.log" 2>&1 &
	VM_MPD_PID=$!
	vm_on_exit vm_mpathd_stop
	for _ in $(seq 1 50); do
		grep -q '@/org/kernel/linux/storage/multipathd' /proc/net/unix && return 0
		kill -0 "$VM_MPD_PID" 2>/dev/null || break
		sleep 0.2
	done
	echo "multipathd did not bind its socket: $(tail -n 5 "$VM_WORK/multipathd.log")"
	return 1
}

# vm_mpathd_stop: every map told to fail what it queues (a map without paths would hold its
# I/O, and whoever waits on it, for ever), flushed, then multipathd stopped.
vm_mpathd_stop() {
	local m
	[ -n "$VM_MPD_PID" ] || return 0
	for m in $(timeout 10 dmsetup ls --target multipath 2>/dev/null | awk '{ print $1 }'); do
		timeout 10 dmsetup message "$m" 0 fail_if_no_path >/dev/null 2>&1
	done
	timeout 20 multipath -F >/dev/null 2>&1
	kill -TERM "$VM_MPD_PID" 2>/dev/null
	timeout 10 tail --pid="$VM_MPD_PID" -f /dev/null
	kill -KILL "$VM_MPD_PID" 2>/dev/null
	wait "$VM_MPD_PID" 2>/dev/null
	VM_MPD_PID=
	return 0
}

# ---- the gateway --------------------------------------------------------------------------

VM_GW_PID=

# vm_port_open ADDR PORT: a TCP connect succeeds within 1 s.
vm_port_open() {
	timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# vm_gw_start CONFIG LOG ADDR PORT: isergwd on CONFIG, waited for until ADDR:PORT accepts;
# with ISERGW_LOOPS set, CONFIG gets "loops" first (tests/lib/conf_loops.py).
vm_gw_start() {
	local conf=$1 log=$2 addr=$3 port=$4 i
	# ISERGW_LOOPS (from the host, share/env): that many event loops unless CONFIG says.
	[ -n "${ISERGW_LOOPS:-}" ] &&
		python3 "$VM_LIB_DIR/../../lib/conf_loops.py" "$conf" "$ISERGW_LOOPS"
	"$VM_BUILD/isergwd" --config "$conf" >"$log" 2>&1 &
	VM_GW_PID=$!
	vm_on_exit vm_gw_kill
	for i in $(seq 1 100); do
		vm_port_open "$addr" "$port" && return 0
		kill -0 "$VM_GW_PID" 2>/dev/null || break
		sleep 0.2
	done
	echo "isergwd did not open $addr:$port; its log:"
	tail -n 20 "$log"
	return 1
}

# vm_ctl_state: the gateway's control-socket "state" reply (JSON) on stdout; the socket is $SOCK.
vm_ctl_state() {
	python3 "$VM_LIB_DIR/../../lib/gw_ctl.py" "$SOCK" '{"op":"state"}'
}

# gw_state EXPR: a python expression over the gateway's state (`s`), the portal named
# $GW_PORTAL (iser0 unless set) as `p` and its resources as `r`, printed.
gw_state() {
	vm_ctl_state | python3 -c '
import json, sys
s = json.load(sys.stdin)
p = [x for x in s.get("portals", []) if x.get("name") == sys.argv[1]][0]
r = p.get("resources", {})
print(eval(sys.argv[2]))
' "${GW_PORTAL:-iser0}" "$1"
}

# gw_state_holds EXPR: true when EXPR (see gw_state) is True now.
gw_state_holds() {
	[ "$(gw_state "$1" 2>/dev/null)" = True ]
}

# wait_state EXPR SECONDS: true once EXPR (see gw_state) holds.
wait_state() {
	t_wait_for "$2" gw_state_holds "$1"
}

# vm_gw_stop: SIGTERM; the gateway must exit 0 within 15 s (10 s on real hardware, plus
# emulation). Sets VM_GW_STOP to what happened.
vm_gw_stop() {
	local rc
	if ! kill -0 "$VM_GW_PID" 2>/dev/null; then
		wait "$VM_GW_PID"
		VM_GW_STOP="had already exited with status $?"
		VM_GW_PID=
		return 1
	fi
	kill -TERM "$VM_GW_PID"
	timeout 15 tail --pid="$VM_GW_PID" -f /dev/null
	if kill -0 "$VM_GW_PID" 2>/dev/null; then
		kill -KILL "$VM_GW_PID"
		wait "$VM_GW_PID"
		VM_GW_STOP="did not exit within 15 s of SIGTERM"
		VM_GW_PID=
		return 1
	fi
	wait "$VM_GW_PID"
	rc=$?
	VM_GW_PID=
	VM_GW_STOP="exit status $rc after SIGTERM"
	[ "$rc" -eq 0 ]
}

vm_gw_kill() {
	[ -n "$VM_GW_PID" ] || return 0
	kill -KILL "$VM_GW_PID" 2>/dev/null
	wait "$VM_GW_PID" 2>/dev/null
	VM_GW_PID=
	return 0
}

# vm_end: the suite's status is 1 when any of its checks failed.
vm_end() {
	exit "$VM_FAILED"
}
