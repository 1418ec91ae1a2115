#!/bin/bash
# tests/vm/guest/main.sh: PID 1 of the VM rig's guest, started by the initramfs on an overlay of
# the host's root filesystem. It mounts what a Debian system expects, runs each suite named by
# isergw.suites= in turn, bounded by its isergw.timeouts= entry, records "begin SUITE" and
# "end SUITE STATUS" in the share so the host knows how far it got, and powers the guest off.
# The suites' output goes to the serial console (the host's console.log) and to
# share/logs/SUITE.log (appended: a two-boot suite logs both boots there). isergw.boot=N
# reaches the suites as VM_BOOT (1, or 2 for the second boot of a two-boot suite), and the
# share's env file (SOAK_* variables of the host) is sourced.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL=C HOME=/root TERM=dumb

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
# The host's /run and /tmp must not show through: its daemons' sockets and locks are not ours.
# Except when this checkout lives under /tmp (a CI clone may): hiding it would hide the suites
# and the binaries. The root is an overlay with a guest-private upper layer either way, so
# nothing the guest writes there reaches the host.
mount -t tmpfs tmpfs /run
case "$(readlink -f "$0")" in
/tmp/*) ;;
*) mount -t tmpfs -o size=50% tmpfs /tmp ;;
esac
mkdir -p /run/lock
exec >/dev/ttyS0 2>&1 </dev/null

GUEST_DIR=$(dirname "$(readlink -f "$0")")
export VM_SHARE=/vmshare
RESULTS=$VM_SHARE/results
SUITES=$VM_SHARE/suites

poweroff_now() {
	sync
	echo "=== guest done at uptime $(cut -d' ' -f1 /proc/uptime)s"
	echo o >/proc/sysrq-trigger
	sleep 60
}
trap poweroff_now EXIT

suites=
declare -A budget=()
for w in $(cat /proc/cmdline); do
	case "$w" in
	isergw.suites=*) suites=${w#isergw.suites=} ;;
	isergw.build=*) export VM_BUILD=${w#isergw.build=} ;;
	isergw.boot=*) export VM_BOOT=${w#isergw.boot=} ;;
	isergw.timeouts=*)
		for st in $(echo "${w#isergw.timeouts=}" | tr ',' ' '); do
			budget[${st%%:*}]=${st##*:}
		done
		;;
	esac
done

# shellcheck disable=SC1091 # written by tests/vm/run.sh
[ -r "$VM_SHARE/env" ] && . "$VM_SHARE/env"

hostname isergw-vm
ip link set lo up
up=$(cut -d' ' -f1 /proc/uptime)
mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
echo "=== guest up: kernel $(uname -r), uptime ${up}s, ${mem} MiB, suites $suites"
if [ -d "/lib/modules/$(uname -r)/kernel" ]; then
	echo "pass boot kernel $(uname -r) up in ${up}s, ${mem} MiB" >>"$RESULTS"
else
	echo "fail boot no modules for $(uname -r) under /lib/modules" >>"$RESULTS"
	exit 1
fi

for s in $(echo "$suites" | tr ',' ' '); do
	t=${budget[$s]:-300}
	echo "begin $s" >>"$SUITES"
	t0=$(cut -d' ' -f1 /proc/uptime)
	# timeout puts the suite in its own process group: the daemons it started die with it.
	timeout -k 20 "$t" bash "$GUEST_DIR/suite-$s.sh" 2>&1 | tee -a "$VM_SHARE/logs/$s.log"
	rc=${PIPESTATUS[0]}
	t1=$(cut -d' ' -f1 /proc/uptime)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", b - a }')
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		echo "fail $s timed out after ${t}s (the guest killed it)" >>"$RESULTS"
	elif ! grep -q "^[a-z]* $s/" "$RESULTS"; then
		echo "fail $s printed no results (exit status $rc)" >>"$RESULTS"
	elif [ "$rc" -ne 0 ] && ! grep -q "^fail $s/" "$RESULTS"; then
		echo "fail $s exited with status $rc" >>"$RESULTS"
	fi
	echo "end $s $rc ${secs}s" >>"$SUITES"
	echo "=== suite $s: exit $rc after ${secs}s"
done
