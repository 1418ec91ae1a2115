#!/bin/bash
# The host-side files in deploy/host/ are read by the programs they are for, and each check
# also feeds that program a copy with one wrong line to prove it read the file:
# multipath.conf snippets by multipath (libmultipath's parser; the host has no device-mapper,
# so the parse is what is checked), the systemd-networkd bond by systemd-networkd itself in a
# private mount and network namespace, the sysctl snippet applied with sysctl -p in a private
# network namespace and read back, the modprobe snippet by modprobe --showconfig, and the
# iscsid.conf snippets against the keys open-iscsi's iscsid.conf documents.
#
#   tests/integration/test_hostconf.sh
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin hostconf
cd "$T_ROOT" || exit 1
H=deploy/host

if [ "$(id -u)" -ne 0 ]; then
	skip hostconf "needs root: private mount and network namespaces"
	t_end
fi

# in_etc SCRIPT: runs SCRIPT (sh) in a private mount namespace whose /etc is an overlay of the
# host's (writes vanish with the namespace) and whose /run is empty.
in_etc() {
	rm -rf "$T_DIR/up" "$T_DIR/wk"
	mkdir -p "$T_DIR/up" "$T_DIR/wk"
	unshare -m -n --propagation private sh -c "
		mount -t overlay overlay -o lowerdir=/etc,upperdir=$T_DIR/up,workdir=$T_DIR/wk /etc &&
		mount -t tmpfs tmpfs /run && $1"
}

# ---- multipath.conf -----------------------------------------------------------------------
if t_need multipath; then
	for f in multipath-one-gateway.conf multipath-alua-pair.conf; do
		in_etc "cp $H/$f /etc/multipath.conf && multipath -T" >"$T_DIR/$f.out" 2>&1
		bad=$(grep -E '/etc/multipath.conf( line [0-9]+)?[,:]' "$T_DIR/$f.out")
		sed 's/^\( *\)path_checker .*/&\n\1bogus_isergw_keyword 1/' "$H/$f" >"$T_DIR/bad-$f"
		in_etc "cp $T_DIR/bad-$f /etc/multipath.conf && multipath -T" >"$T_DIR/bad-$f.out" 2>&1
		if [ -z "$bad" ] && grep -q "invalid keyword.*bogus_isergw_keyword" "$T_DIR/bad-$f.out"; then
			pass "multipath parses $f without a complaint (and names a wrong keyword in a copy)"
		else
			fail "multipath $f" "${bad:-the parser did not see the wrong keyword}"
		fi
	done
else
	skip multipath "multipath-tools is not installed"
fi

# ---- systemd-networkd bond ----------------------------------------------------------------
ND=/lib/systemd/systemd-networkd
if [ -x "$ND" ]; then
	# networkd logs FILE:LINE for every key or value it does not accept.
	run_networkd() {
		in_etc "rm -rf /etc/systemd/network && mkdir -p /etc/systemd/network /run/systemd/netif &&
			cp $1/*.netdev $1/*.network /etc/systemd/network/ &&
			SYSTEMD_LOG_LEVEL=debug SYSTEMD_LOG_TARGET=console timeout 3 $ND; true"
	}
	run_networkd "$H" >"$T_DIR/networkd.out" 2>&1
	bad=$(grep -E '^/etc/systemd/network/[^:]+:[0-9]+:' "$T_DIR/networkd.out")
	mkdir -p "$T_DIR/badnet"
	cp "$H"/*.netdev "$H"/*.network "$T_DIR/badnet/"
	for f in "$T_DIR"/badnet/*; do
		sed -i '0,/^\[\(Bond\|Network\)\]/s//&\nBogusIsergwKey=1/' "$f"
	done
	run_networkd "$T_DIR/badnet" >"$T_DIR/networkd-bad.out" 2>&1
	nbad=$(grep -c "Unknown key 'BogusIsergwKey'" "$T_DIR/networkd-bad.out")
	nfiles=$(ls "$T_DIR"/badnet | wc -l)
	if [ -z "$bad" ] && grep -q 'bond0: loaded "bond"' "$T_DIR/networkd.out" &&
		[ "$nbad" = "$nfiles" ]; then
		pass "systemd-networkd loads the bond .netdev and both .network files with no complaint"
	else
		fail "networkd" "${bad:-bond loaded: $(grep -c 'bond0: loaded' "$T_DIR/networkd.out"), wrong keys seen in $nbad of $nfiles files}"
	fi
	grep -qx 'FailOverMACPolicy=active' "$H/10-isergw-bond0.netdev" &&
		grep -qx 'Mode=active-backup' "$H/10-isergw-bond0.netdev" &&
		pass "the bond is active-backup with fail_over_mac=active" ||
		fail "bond settings" "not active-backup with FailOverMACPolicy=active"
else
	skip networkd "no $ND"
fi

# ---- sysctl, modprobe ---------------------------------------------------------------------
got=$(unshare -n sh -c "sysctl -q -p $H/90-isergw.conf >/dev/null &&
	sysctl -n net.ipv4.conf.all.arp_ignore net.ipv4.conf.all.arp_announce \
		net.ipv4.conf.all.rp_filter net.ipv4.conf.default.arp_ignore" 2>&1 | tr '\n' ' ')
[ "$got" = "1 2 2 1 " ] &&
	pass "sysctl -p applies 90-isergw.conf (arp_ignore 1, arp_announce 2, rp_filter 2)" ||
	fail "sysctl" "$got"
if t_need modprobe; then
	cfg=$(modprobe -C "$H/isergw-modprobe.conf" --showconfig 2>&1)
	printf '%s\n' "$cfg" | grep -qx 'options bonding max_bonds=0' &&
		printf '%s\n' "$cfg" | grep -qx 'softdep ib_uverbs post: rdma_ucm' &&
		pass "modprobe reads isergw-modprobe.conf (bonding max_bonds=0, rdma_ucm after ib_uverbs)" ||
		fail "modprobe" "$(printf '%s\n' "$cfg" | grep -E 'bonding|rdma' | tr '\n' ' ')"
fi
bad=$(grep -Ev '^(#|$|[a-z0-9_]+$)' "$H/isergw-modules-load.conf")
[ -z "$bad" ] && pass "modules-load.d file: one module name a line" || fail "modules-load" "$bad"

# ---- iscsid.conf --------------------------------------------------------------------------
# Every key set is one open-iscsi's own iscsid.conf carries (as a setting or a comment).
REF=/etc/iscsi/iscsid.conf
if [ -r "$REF" ]; then
	for f in iscsid-one-gateway.conf iscsid-alua-pair.conf; do
		unknown=
		while read -r key; do
			awk -v k="$key" '{ sub(/^# */, ""); if (index($0, k " =") == 1 || index($0, k "=") == 1) f = 1 }
				END { exit !f }' "$REF" || unknown="$unknown $key"
		done < <(sed -n 's/^\([a-z][^ =]*\) *=.*/\1/p' "$H/$f")
		[ -z "$unknown" ] && pass "$f sets only keys open-iscsi's iscsid.conf knows" ||
			fail "$f" "unknown keys:$unknown"
	done
	r1=$(sed -n 's/^node.session.timeo.replacement_timeout = //p' "$H/iscsid-one-gateway.conf")
	r2=$(sed -n 's/^node.session.timeo.replacement_timeout = //p' "$H/iscsid-alua-pair.conf")
	[ "${r1:-0}" -ge 60 ] && [ "${r2:-99}" -le 15 ] &&
		pass "one gateway rides out a restart (replacement_timeout $r1 s), a pair fails over fast ($r2 s)" ||
		fail "replacement_timeout" "one gateway ${r1:-?}, pair ${r2:-?}"
else
	skip iscsid "open-iscsi is not installed ($REF)"
fi
t_end
