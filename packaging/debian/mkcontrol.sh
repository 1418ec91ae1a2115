#!/bin/sh
# Prints DEBIAN/control for the staged tree: Depends lists the packages owning the shared
# libraries the staged programs load (dpkg -S), plus the RDMA providers rdma_cm needs at run time.
set -eu
version=$1 arch=$2 root=$3
deps=$(for b in "$root"/usr/sbin/* "$root"/usr/bin/*; do
	[ -f "$b" ] || continue
	# Direct dependencies only (NEEDED), each resolved to its file by ldd.
	libs=$(ldd "$b")
	objdump -p "$b" | awk '$1 == "NEEDED" {print $2}' | while read -r so; do
		printf '%s\n' "$libs" | awk -v so="$so" '$1 == so && $3 ~ /^\// {print $3}'
	done
done | sort -u | while read -r lib; do
	dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
done | cut -d: -f1 | sort -u | grep -v '^libc6$' | paste -sd, | sed 's/,/, /g')
size=$(du -sk "$root" | cut -f1)
cat <<CTL
Package: isergw
Version: $version
Architecture: $arch
Maintainer: isergw developers <isergw@localhost>
Installed-Size: $size
Depends: libc6, $deps, ibverbs-providers
Recommends: rdma-core, multipath-tools
Section: net
Priority: optional
Description: storage gateway: iSER and iSCSI/TCP target re-exporting multipath back ends
 isergw imports LUNs from back-end storage (iSCSI/TCP, iSER, local block devices and
 dm-multipath maps) and re-exports them as iSCSI targets over iSER (RoCE, InfiniBand)
 and iSCSI/TCP, failing back-end paths over without surfacing errors to hosts.
CTL
