#!/bin/bash
# tests/vm/run.sh: the VM rig. Boots Debian 12's stock kernel under qemu with this machine's root
# filesystem shared read-only (9p, tmpfs overlay in the guest), runs guest suites that need what
# the host kernel lacks (Soft-RoCE, bonding, the kernel iSCSI and iSER initiators), and reports.
#
#   tests/vm/run.sh [SUITE...]      suites: rxe kernel-tcp bond bond-failover bond-apply tgt-iser
#                                   dm-mpath iser iser-fault iser-loops remote-iser durable-crash (default:
#                                   all; bench-iser runs from make bench, soak-iser from
#                                   make soak SOAK_TRANSPORT=iser; cluster-mpath by name, and
#                                   from make bench)
#
# A suite whose file has a line "# rig: boots=2 disk=SIZE" (durable-crash) runs in guests of its
# own after the others: a fresh sparse disk image of SIZE (run/SUITE.disk.img) on a virtio disk
# with serial isergw-dur, boot 1 with VM_BOOT=1, which must end by writing "crash SUITE" to the
# share's suites file and resetting the guest, then boot 2 on the same image with VM_BOOT=2.
# SOAK_* variables and ISERGW_LOOPS of the environment reach the guest's suites (share/env).
#
# Prints each result, then "vm: N passed, N failed, N skipped"; exit status 1 on any failure,
# including a rig that cannot start (missing tool, no kernel package, too little memory).
#
# Environment:
#   BUILD        build tree whose isergwd and test tools the guest runs (default build)
#   VM_DIR       cache and run folder (default build/vm): kernel/<version>/ (the extracted
#                package, reused), initrd-<version>.img, run/ (the last run: console.log,
#                qemu.log, share/ with the guest's results and per-suite logs)
#   VM_MEM       guest memory (default 3G; tgtd's iSER pool alone asks for 1 GiB, and the
#                guest's files live in its memory)
#   VM_CPUS      guest vCPUs (default 2)
#   VM_ACCEL     qemu accelerator arguments (default: KVM when usable, else TCG)
#   VM_SUITE_TIMEOUT  seconds per suite inside the guest (default: each suite's own budget)
#   VM_TIMEOUT   seconds for the whole guest before qemu is killed (default: boot + suites)
#   VM_KERNEL    a kernel package name to use instead of linux-image-amd64's dependency
#
# The guest has no network device (-nic none): every address it uses lives on veth, dummy or
# bond devices inside it. The host is changed only under VM_DIR.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
BUILD=${BUILD:-build}
case "$BUILD" in
/*) VM_BUILD=$BUILD ;;
*) VM_BUILD=$ROOT/$BUILD ;;
esac
VM_DIR=${VM_DIR:-$ROOT/build/vm}
VM_MEM=${VM_MEM:-3G}
VM_CPUS=${VM_CPUS:-2}
ALL_SUITES="rxe kernel-tcp bond bond-failover bond-apply tgt-iser dm-mpath iser iser-fault iser-loops remote-iser durable-crash"
T0=$SECONDS

say() {
	printf 'vm: %s\n' "$*"
}

# The rig itself cannot run: one failure, said plainly, with the usual final line.
die() {
	printf '  FAIL  rig: %s\n' "$*"
	echo "vm: 0 passed, 1 failed, 0 skipped"
	exit 1
}

# Each suite's time budget inside the guest, in seconds (TCG on 2 cores; a suite normally
# needs a third of this). The guest kills a suite that overruns and counts it as failed.
suite_budget() {
	if [ -n "${VM_SUITE_TIMEOUT:-}" ]; then
		echo "$VM_SUITE_TIMEOUT"
		return
	fi
	case "$1" in
	rxe) echo 120 ;;
	kernel-tcp) echo 420 ;;
	bond) echo 180 ;;
	bond-failover) echo 300 ;;
	bond-apply) echo 300 ;;
	tgt-iser) echo 360 ;;
	dm-mpath) echo 360 ;;
	iser) echo 720 ;;
	iser-fault) echo 420 ;;
	remote-iser) echo 600 ;;
	bench-iser) echo 2400 ;;
	durable-crash) echo 300 ;;
	soak-iser) echo $((${SOAK_SECS:-${SOAK_SECONDS:-1800}} + 600)) ;;
	cluster-mpath) echo 900 ;;
	*) echo 300 ;;
	esac
}

# suite_rig SUITE KEY: the value of KEY on the suite's "# rig:" line (boots, disk), or nothing.
suite_rig() {
	sed -n 's/^# rig: //p' "tests/vm/guest/suite-$1.sh" | head -n 1 | tr ' ' '\n' |
		sed -n "s/^$2=//p"
}

# ---- arguments ----------------------------------------------------------------------------

suites=()
if [ $# -eq 0 ]; then
	read -r -a suites <<<"$ALL_SUITES"
else
	for s in "$@"; do
		[ -r "tests/vm/guest/suite-$s.sh" ] || die "unknown suite '$s' (suites: $ALL_SUITES)"
		suites+=("$s")
	done
fi

# ---- host prerequisites -------------------------------------------------------------------

for t in qemu-system-x86_64 cpio gzip depmod modprobe apt-get apt-cache dpkg-deb timeout; do
	command -v "$t" >/dev/null 2>&1 ||
		die "$t is missing (deploy/install-deps.sh test installs the rig's packages)"
done
# The initramfs runs busybox before any library is reachable: it must be the static one.
BUSYBOX=/bin/busybox
if [ ! -x "$BUSYBOX" ] || ! LC_ALL=C ldd "$BUSYBOX" 2>&1 | grep -q 'not a dynamic'; then
	die "$BUSYBOX is missing or not static (install busybox-static)"
fi
[ -x "$VM_BUILD/isergwd" ] || die "no gateway at $VM_BUILD/isergwd (run make first)"
# qemu peaks near the guest's memory plus ~0.7 GB; refuse rather than be OOM-killed halfway.
mem_mib=$(numfmt --from=iec --to-unit=Mi "${VM_MEM}i" 2>/dev/null || echo 3072)
avail_mib=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
if [ "${avail_mib:-0}" -lt $((mem_mib + 700)) ]; then
	die "needs about $((mem_mib + 700)) MiB free memory for a $VM_MEM guest, $avail_mib MiB available"
fi

# ---- kernel: Debian's stock linux-image, fetched once into VM_DIR/kernel/ ------------------

# The stock flavour has what the rig needs as modules (rdma_rxe, ib_iser, bonding, iscsi_tcp,
# 9p, overlay); the cloud flavour lacks rdma_rxe, ib_iser and 9p.
kernel_package() {
	if [ -n "${VM_KERNEL:-}" ]; then
		echo "$VM_KERNEL"
		return
	fi
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}

newest_cached_kernel() {
	local d v best=
	for d in "$VM_DIR"/kernel/*/; do
		v=$(basename "$d")
		[ -f "$d/boot/vmlinuz-$v" ] && best=$(printf '%s\n%s\n' "$best" "$v" | sort -V | tail -n 1)
	done
	[ -n "$best" ] && echo "$best"
}

# fetch_kernel PACKAGE VERSION: downloads and unpacks into VM_DIR/kernel/VERSION, with the
# module index built; an interrupted fetch leaves only a .fetch-* folder, never a half kernel.
fetch_kernel() {
	local pkg=$1 ver=$2 tmp=$VM_DIR/kernel/.fetch-$2 deb
	say "fetching $pkg with apt-get download into $VM_DIR/kernel/"
	rm -rf "$tmp" && mkdir -p "$tmp/deb" || return 1
	# As root, apt-get warns that the download is unsandboxed: expected, not worth showing.
	(cd "$tmp/deb" && apt-get download -q "$pkg" 2>&1) | grep -v unsandboxed
	deb=$(ls "$tmp"/deb/*.deb 2>/dev/null | head -n 1)
	if [ -z "$deb" ] || ! dpkg-deb -x "$deb" "$tmp/root" || ! depmod -b "$tmp/root" "$ver"; then
		rm -rf "$tmp"
		return 1
	fi
	rm -rf "${VM_DIR:?}/kernel/$ver" && mv "$tmp/root" "$VM_DIR/kernel/$ver" && rm -rf "$tmp"
}

mkdir -p "$VM_DIR/kernel" || die "cannot create $VM_DIR/kernel"
kpkg=$(kernel_package)
if [ -z "$kpkg" ] && [ -z "$(newest_cached_kernel)" ]; then
	# No package list yet (a fresh machine) and nothing cached: refresh the list once.
	say "apt-cache knows no linux-image-amd64; apt-get update"
	apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed"
	kpkg=$(kernel_package)
fi
if [ -n "$kpkg" ]; then
	kver=${kpkg#linux-image-}
	if [ ! -f "$VM_DIR/kernel/$kver/boot/vmlinuz-$kver" ] && ! fetch_kernel "$kpkg" "$kver"; then
		# Offline, or the archive moved on: an older cached kernel still tests the same things.
		kver=$(newest_cached_kernel)
		[ -n "$kver" ] || die "apt-get download $kpkg failed and no kernel is cached"
		say "apt-get download $kpkg failed; using the cached $kver"
	fi
else
	kver=$(newest_cached_kernel)
	[ -n "$kver" ] || die "no linux-image-amd64 dependency in the package lists"
fi
# Another version's 400 MB are dead weight once this one is unpacked.
for d in "$VM_DIR"/kernel/*/; do
	[ -d "$d" ] || continue
	v=$(basename "$d")
	[ "$v" = "$kver" ] || rm -rf "$d" "$VM_DIR/initrd-$v.img"
done
KDIR=$VM_DIR/kernel/$kver
VMLINUZ=$KDIR/boot/vmlinuz-$kver
[ -d "$KDIR/lib/modules/$kver" ] || die "$KDIR has no lib/modules/$kver"

# ---- initramfs: busybox, the modules to reach the host root, and tests/vm/initramfs/init ----

INITRD=$VM_DIR/initrd-$kver.img
if [ ! -f "$INITRD" ] || [ "$INITRD" -ot tests/vm/initramfs/init ] || [ "$INITRD" -ot "$0" ]; then
	w=$(mktemp -d "$VM_DIR/initrd.XXXXXX") || die "mktemp failed"
	mkdir -p "$w"/bin "$w"/dev "$w"/proc "$w"/sys "$w"/mods "$w"/host "$w"/rw "$w"/root
	cp "$BUSYBOX" "$w/bin/busybox"
	for a in sh mount umount mkdir insmod switch_root sed cat sleep; do
		ln -s busybox "$w/bin/$a"
	done
	# The modules in load order, dependencies first; built-ins print no insmod line.
	for m in virtio_pci 9pnet_virtio 9p overlay; do
		modprobe -d "$KDIR" -S "$kver" --show-depends "$m" >>"$w/mods.deps" ||
			die "module $m not in kernel $kver"
	done
	awk '$1 == "insmod" && !seen[$2]++ { print $2 }' "$w/mods.deps" >"$w/mods.paths"
	rm -f "$w/mods.deps"
	while read -r f; do
		case "$f" in
		*.ko.xz) xz -dc "$f" >"$w/mods/$(basename "$f" .xz)" ;;
		*.ko.zst) zstd -qdc "$f" >"$w/mods/$(basename "$f" .zst)" ;;
		*) cp "$f" "$w/mods/" ;;
		esac || die "cannot copy module $f"
		basename "${f%.xz}" | sed 's/\.zst$//' >>"$w/mods.list"
	done <"$w/mods.paths"
	rm -f "$w/mods.paths"
	install -m 0755 tests/vm/initramfs/init "$w/init"
	(cd "$w" && find . | cpio -o -H newc --quiet | gzip -1) >"$INITRD.tmp" &&
		mv "$INITRD.tmp" "$INITRD" || die "cannot write $INITRD"
	rm -rf "$w"
fi

# ---- accelerator --------------------------------------------------------------------------

# KVM only when it is real hardware virtualisation: a paravirtual KVM (kvm_pvm) cannot run a
# stock kernel, so the default there, as everywhere else without /dev/kvm, is TCG.
if [ -z "${VM_ACCEL:-}" ]; then
	if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo && [ ! -d /sys/module/kvm_pvm ]; then
		VM_ACCEL="-accel kvm -cpu host"
	else
		VM_ACCEL="-accel tcg,thread=multi -cpu max"
	fi
fi

# ---- boot ---------------------------------------------------------------------------------

RUN=$VM_DIR/run
SHARE=$RUN/share
rm -rf "$RUN" && mkdir -p "$SHARE/logs" || die "cannot create $RUN"
# The soak's knobs reach the guest's suites (guest/main.sh sources this).
# ISERGW_LOOPS: every guest gateway started by vm_gw_start runs with that many event loops.
env | grep -E '^(SOAK_[A-Z_]*|ISERGW_LOOPS)=[A-Za-z0-9_.:/-]*$' | sed 's/^/export /' >"$SHARE/env"

# vm_boot CONSOLE BOOT DISK SUITE...: one guest runs the SUITEs (boot number BOOT; DISK: an
# image on a virtio disk with serial isergw-dur, or empty), killed past the sum of their
# budgets. A qemu failure is kept in QEMU_FAILS for the results.
QEMU_FAILS=()
vm_boot() {
	local console=$1 boot=$2 disk=$3 budget=90 timeouts="" list s cmdline qrc drive=()
	shift 3
	for s in "$@"; do
		budget=$((budget + $(suite_budget "$s") + 20))
		timeouts="$timeouts${timeouts:+,}$s:$(suite_budget "$s")"
	done
	budget=${VM_TIMEOUT:-$budget}
	list=$(
		IFS=,
		echo "$*"
	)
	cmdline="console=ttyS0 panic=-1 loglevel=4 isergw.init=$ROOT/tests/vm/guest/main.sh"
	cmdline="$cmdline isergw.suites=$list isergw.timeouts=$timeouts isergw.build=$VM_BUILD"
	cmdline="$cmdline isergw.boot=$boot"
	# The disk's write cache is the host's page cache (cache=writeback: the guest sees a
	# volatile cache and must flush it); a guest reset keeps it, as a power cut keeps a disk's
	# written sectors. What the crash loses is what never left the guest.
	# shellcheck disable=SC2054 # the commas separate qemu's suboptions
	[ -n "$disk" ] && drive=(-drive "file=$disk,if=none,id=dur,format=raw,cache=writeback"
		-device virtio-blk-pci,drive=dur,serial=isergw-dur)

	say "kernel $kver, $VM_MEM, $VM_CPUS vCPUs, ${VM_ACCEL}; suites: $*${disk:+ (boot $boot, disk $disk)}"
	say "guest budget ${budget}s; console: $console"
	# shellcheck disable=SC2086 # VM_ACCEL is a list of arguments
	timeout -k 10 "$budget" qemu-system-x86_64 $VM_ACCEL -m "$VM_MEM" -smp "$VM_CPUS" \
		-display none -monitor none -serial "file:$console" -no-reboot -nic none \
		-kernel "$VMLINUZ" -initrd "$INITRD" \
		-append "$cmdline" \
		-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
		-fsdev local,id=kmods,path="$KDIR/lib/modules",security_model=none,readonly=on \
		-device virtio-9p-pci,fsdev=kmods,mount_tag=kmods \
		-fsdev local,id=share,path="$SHARE",security_model=none \
		-device virtio-9p-pci,fsdev=share,mount_tag=share \
		"${drive[@]}" >>"$RUN/qemu.log" 2>&1
	qrc=$?
	if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
		QEMU_FAILS+=("did not power off within ${budget}s and was killed (see $console)")
	elif [ "$qrc" -ne 0 ]; then
		QEMU_FAILS+=("qemu exited with status $qrc: $(tail -n 3 "$RUN/qemu.log" | tr '\n' ' ')")
	fi
}

# The suites of one boot share a guest; each two-boot suite gets two guests of its own.
plain=() twice=()
for s in "${suites[@]}"; do
	if [ "$(suite_rig "$s" boots)" = 2 ]; then
		twice+=("$s")
	else
		plain+=("$s")
	fi
done
[ ${#plain[@]} -gt 0 ] && vm_boot "$RUN/console.log" 1 "" "${plain[@]}"
CRASH_FAILS=()
for s in "${twice[@]}"; do
	disk=$RUN/$s.disk.img
	truncate -s "$(suite_rig "$s" disk)" "$disk" || die "cannot create $disk"
	vm_boot "$RUN/console-$s-1.log" 1 "$disk" "$s"
	if grep -q "^crash $s\$" "$SHARE/suites" 2>/dev/null; then
		vm_boot "$RUN/console-$s-2.log" 2 "$disk" "$s"
	else
		CRASH_FAILS+=("$s")
	fi
done

# ---- results ------------------------------------------------------------------------------

# The guest writes "pass|fail|skip NAME DETAIL" lines to share/results and "begin SUITE" /
# "end SUITE STATUS SECONDS" lines to share/suites; whatever it did not get to write counts as
# failed. NAME is SUITE/CHECK, or SUITE alone for a suite-wide verdict.
p=0 f=0 k=0
declare -A sp=() sf=() sk=()
report() {
	local suite=${2%%/*}
	case "$1" in
	pass)
		p=$((p + 1)) sp[$suite]=$((${sp[$suite]:-0} + 1))
		printf '  ok    %s%s\n' "$2" "${3:+  ($3)}"
		;;
	fail)
		f=$((f + 1)) sf[$suite]=$((${sf[$suite]:-0} + 1))
		printf '  FAIL  %s: %s\n' "$2" "$3"
		;;
	skip)
		# Inside `make test` a skip must have a reason on tests/allowed-skips.txt.
		if [ "${ISERGW_MAKE_TEST:-0}" = 1 ] &&
			! grep -vE '^(#|[[:space:]]*$)' tests/allowed-skips.txt 2>/dev/null |
			grep -qE -f - <(printf '%s: %s\n' "$2" "$3"); then
			report fail "$2" "skipped inside make test, and not for a reason in tests/allowed-skips.txt: $3"
			return
		fi
		k=$((k + 1)) sk[$suite]=$((${sk[$suite]:-0} + 1))
		printf '  skip  %s: %s\n' "$2" "$3"
		;;
	*)
		f=$((f + 1))
		printf '  FAIL  guest: unreadable result line: %s %s %s\n' "$1" "$2" "$3"
		;;
	esac
}

if [ -f "$SHARE/results" ]; then
	while read -r kind name detail; do
		report "$kind" "$name" "$detail"
	done <"$SHARE/results"
fi
for m in "${QEMU_FAILS[@]}"; do
	report fail guest "$m"
done
for m in "${CRASH_FAILS[@]}"; do
	report fail "$m" "boot 1 did not end in its crash, so there was no boot 2 (see console-$m-1.log)"
done
if [ ! -s "$SHARE/results" ]; then
	report fail guest "no results: the guest never reached its suites (see the console log)"
fi
for s in "${suites[@]}"; do
	if ! grep -q "^begin $s\$" "$SHARE/suites" 2>/dev/null; then
		report fail "$s" "did not run (the guest stopped before it)"
	elif ! grep -q "^end $s " "$SHARE/suites" 2>/dev/null; then
		report fail "$s" "did not finish (the guest stopped during it)"
	fi
done

# Per suite: its counts and how long it ran inside the guest.
echo
failed_suites=()
for s in "${suites[@]}"; do
	secs=$(awk -v s="$s" '$1 == "end" && $2 == s { print $4 }' "$SHARE/suites" 2>/dev/null)
	printf '  %-12s %3d passed %3d failed %3d skipped %6s\n' "$s" "${sp[$s]:-0}" \
		"${sf[$s]:-0}" "${sk[$s]:-0}" "${secs:--}"
	[ "${sf[$s]:-0}" -ne 0 ] && failed_suites+=("$s")
done

if [ "$f" -ne 0 ]; then
	echo
	say "kept for the failure: $RUN (console.log, qemu.log, share/logs/)"
	for s in "${failed_suites[@]}"; do
		if [ -s "$SHARE/logs/$s.log" ]; then
			say "last lines of share/logs/$s.log:"
			tail -n 15 "$SHARE/logs/$s.log" | sed 's/^/    /'
		fi
	done
	if [ ! -s "$SHARE/results" ] || [ ${#QEMU_FAILS[@]} -ne 0 ]; then
		say "last lines of console.log:"
		tail -n 25 "$RUN/console.log" 2>/dev/null | sed 's/^/    /'
	fi
fi
say "wall time $((SECONDS - T0))s"
echo "vm: $p passed, $f failed, $k skipped"
[ "$f" -eq 0 ]
