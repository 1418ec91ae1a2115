#!/bin/sh
# Installs, with apt-get, every Debian 12 package isergw needs to build, run and test.
# Idempotent: when everything is present it installs nothing and touches no network.
#
#   deploy/install-deps.sh [--list] [build|run|test|all]...    (default: all; several add up)
# build: compile; run: start the programs built here (make run) and the clients its "Try it"
# lines use (iscsi-ls and iscsi-inq from libiscsi-bin, curl); test: build, run and every
# suite's tools, the packaging ones (debhelper, lintian, debootstrap, nspawn, rpm) included.
# --list prints the packages, one a line, and installs nothing.
# apt-get runs quietly: its output goes to a log file, printed only when it fails.
set -eu

BUILD="make gcc pkg-config libibverbs-dev librdmacm-dev libiscsi-dev libmicrohttpd-dev
libjansson-dev libcurl4-openssl-dev libsystemd-dev libssl-dev zlib1g-dev libnl-3-dev
libnl-route-3-dev liburing-dev"
RUN="libibverbs1 librdmacm1 libiscsi7 libmicrohttpd12 libjansson4 libcurl4 libsystemd0
libssl3 rdma-core ibverbs-providers zlib1g libnl-3-200 libnl-route-3-200 liburing2
libiscsi-bin curl"
TEST="libcriterion-dev libiscsi-bin tgt curl iproute2 iptables procps psmisc
clang libclang-rt-14-dev rpm cpio
qemu-system-x86 busybox-static kmod open-iscsi ibverbs-utils rdmacm-utils e2fsprogs
etcd-server openssl wrk util-linux multipath-tools jq python3
chromium chromium-driver nodejs fio valgrind libtsan2
debhelper dpkg-dev fakeroot lintian debootstrap systemd-container rpmlint graphviz
systemd udev dbus"

list=0
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
[ $# -eq 0 ] && set -- all
want=""
for what in "$@"; do
	case "$what" in
	build) want="$want $BUILD" ;;
	run) want="$want $RUN" ;;
	test | all) want="$want $BUILD $RUN $TEST" ;;
	*) echo "usage: $0 [--list] [build|run|test|all]..." >&2; exit 2 ;;
	esac
done
want=$(printf '%s\n' $want | sort -u)
if [ "$list" = 1 ]; then
	printf '%s\n' $want
	exit 0
fi

missing=""
for p in $want; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in
	*" installed") ;;
	*) missing="$missing $p" ;;
	esac
done
# npm installs the browser suite's playwright-core; a nodejs from elsewhere may bundle it.
case " $* " in
*" test "* | *" all "*) command -v npm >/dev/null 2>&1 || missing="$missing npm" ;;
esac
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "isergw: missing packages:$missing" >&2
	echo "isergw: run this script as root (or: sudo apt-get install$missing)" >&2
	exit 1
fi
log=$(mktemp "${TMPDIR:-/tmp}/isergw-install-deps.XXXXXX.log")
echo "isergw: installing:$missing (apt-get's output: $log)"
export DEBIAN_FRONTEND=noninteractive
apt_get() {
	echo "+ apt-get $*" >>"$log"
	apt-get -qq -o Dpkg::Use-Pty=0 "$@" >>"$log" 2>&1 </dev/null
}
# An old or empty package list fails the install; refresh it once and try again.
if ! apt_get install -y --no-install-recommends $missing; then
	if ! apt_get update || ! apt_get install -y --no-install-recommends $missing; then
		cat "$log" >&2
		echo "isergw: apt-get failed (above; kept in $log)" >&2
		exit 1
	fi
fi
rm -f "$log"
echo "isergw: installed:$missing"
