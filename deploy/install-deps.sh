#!/bin/sh
# Installs, with apt-get, every Debian 12 package isergw needs to build, run and test.
# Idempotent: when everything is present it installs nothing and touches no network.
#
#   deploy/install-deps.sh [build|run|test|all]...    (default: all; several add up)
# build: compile; run: start the programs built here (make run); test: build, run and every
# suite's tools, the packaging ones (debhelper, lintian, debootstrap, nspawn, rpm) included.
set -eu

BUILD="make gcc pkg-config libibverbs-dev librdmacm-dev libiscsi-dev libmicrohttpd-dev
libjansson-dev libcurl4-openssl-dev libsystemd-dev libssl-dev zlib1g-dev libnl-3-dev
libnl-route-3-dev liburing-dev"
RUN="libibverbs1 librdmacm1 libiscsi7 libmicrohttpd12 libjansson4 libcurl4 libsystemd0
libssl3 rdma-core ibverbs-providers zlib1g libnl-3-200 libnl-route-3-200 liburing2"
TEST="libcriterion-dev libiscsi-bin tgt curl iproute2 iptables procps psmisc
clang libclang-rt-14-dev rpm cpio
qemu-system-x86 busybox-static kmod open-iscsi ibverbs-utils rdmacm-utils e2fsprogs
etcd-server openssl wrk util-linux multipath-tools jq python3
chromium chromium-driver nodejs fio valgrind libtsan2
debhelper dpkg-dev fakeroot lintian debootstrap systemd-container rpmlint graphviz
systemd udev dbus"

[ $# -eq 0 ] && set -- all
want=""
for what in "$@"; do
	case "$what" in
	build) want="$want $BUILD" ;;
	run) want="$want $RUN" ;;
	test | all) want="$want $BUILD $RUN $TEST" ;;
	*) echo "usage: $0 [build|run|test|all]..." >&2; exit 2 ;;
	esac
done
want=$(printf '%s\n' $want | sort -u)

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
echo "isergw: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
# An old or empty package list fails the install; refresh it once and try again.
if ! apt-get install -y --no-install-recommends $missing; then
	apt-get update
	apt-get install -y --no-install-recommends $missing
fi
