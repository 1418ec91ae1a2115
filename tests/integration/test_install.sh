#!/bin/bash
# The appliance install, for real: the Debian packages built from this tree go into a fresh
# Debian 12 root the way an image builder puts them there (apt-get with the mirror, systemd not
# running), that root boots under systemd-nspawn with systemd as PID 1, and both units must come
# up by themselves through their own unit files. Then, inside the booted system: the token the
# postinst created works with isergwctl, a LUN provisioned over REST is read with iscsi-inq from
# the host's libiscsi, `systemctl reload` applies a configuration edit (gateway) and a new token
# (agent), an upgrade to a rebuilt package keeps configuration and tokens and restarts both
# daemons, remove stops them and purge leaves no file of theirs. Last, the RPMs install into the
# same root with `rpm -i --nodeps --root`: their scriptlets run and their file modes hold.
#
#   tests/integration/test_install.sh
#
# The Debian 12 root (debootstrap --variant=minbase from the mirror apt uses here, with systemd)
# is cached in build/install-root.tar: delete it to make a new one (about a minute). The
# container has its own network namespace (--private-network): its portals and agent use their
# default ports without meeting the host's; the host's tools reach it with nsenter -n.
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin install
cd "$T_ROOT" || exit 1
if [ "$BUILD" != build ]; then
	skip install "packages are built from the release tree only (BUILD=$BUILD)"
	t_end
fi
if [ "$(id -u)" -ne 0 ]; then
	skip install "needs root: debootstrap, systemd-nspawn and nsenter"
	t_end
fi
if ! t_need debootstrap systemd-nspawn nsenter dpkg-buildpackage curl iscsi-inq python3; then
	skip install "deploy/install-deps.sh test installs debootstrap, systemd-container, debhelper"
	t_end
fi
VERSION=$(cat VERSION)
V2="$VERSION+t1"
ARCH=$(dpkg --print-architecture)
ROOT=$T_DIR/root
CACHE=$T_ROOT/build/install-root.tar
IQN=iqn.2026-11.org.isergw:install
STATE=/var/lib/isergw/agent
NS_PID=
CPID=
t0=$SECONDS

# ---- the packages ------------------------------------------------------------------------

if make --no-print-directory -s deb >"$T_DIR/deb.out" 2>&1; then
	pass "make deb (dpkg-buildpackage -us -uc -b from the dist tarball)"
else
	fail "make deb" "$(tail -n 5 "$T_DIR/deb.out" | tr '\n' ' ')"
	t_end
fi
DEBS=()
for p in isergw-gateway_"$VERSION"_"$ARCH" isergw-agent_"$VERSION"_"$ARCH" \
	isergw-webui_"$VERSION"_all isergw_"$VERSION"_all; do
	[ -s "build/pkg/$p.deb" ] && DEBS+=("build/pkg/$p.deb")
done
if [ "${#DEBS[@]}" -eq 4 ]; then
	pass "four packages: isergw-gateway, isergw-agent, isergw-webui, isergw"
else
	fail "packages" "found: $(ls build/pkg/*.deb 2>/dev/null | tr '\n' ' ')"
	t_end
fi

# The upgrade's package: the same build with a higher version in every control file (what a
# rebuild with DEB_VERSION= gives, without building twice).
mkdir -p "$T_DIR/v2"
for d in "${DEBS[@]}"; do
	rm -rf "$T_DIR/repack"
	dpkg-deb -R "$d" "$T_DIR/repack"
	sed -i -e "s/^Version: .*/Version: $V2/" -e "s/(\([=>]*\) $VERSION)/(\1 $V2)/g" \
		"$T_DIR/repack/DEBIAN/control"
	dpkg-deb -Zgzip --root-owner-group -b "$T_DIR/repack" "$T_DIR/v2/" >/dev/null
done
rm -rf "$T_DIR/repack"

# ---- the root: debootstrap once, then a fresh copy each run ---------------------------------

mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Identifier: Packages' \
	2>/dev/null | awk '$2 == "bookworm" { print $1; exit }')
mirror=${mirror:-http://deb.debian.org/debian/}
if [ ! -s "$CACHE" ]; then
	t_log "install: debootstrap bookworm from $mirror into $CACHE"
	rm -rf "$T_DIR/boot-root"
	if debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm \
		"$T_DIR/boot-root" "$mirror" >"$T_DIR/debootstrap.out" 2>&1 &&
		tar -C "$T_DIR/boot-root" --numeric-owner -cf "$CACHE.tmp" . && mv "$CACHE.tmp" "$CACHE"; then
		pass "debootstrap a minbase Debian 12 root (cached in build/install-root.tar)"
	else
		fail "debootstrap" "$(tail -n 3 "$T_DIR/debootstrap.out" | tr '\n' ' ')"
		rm -rf "$T_DIR/boot-root" "$CACHE.tmp"
		t_end
	fi
	rm -rf "$T_DIR/boot-root"
fi
mkdir -p "$ROOT"
if ! tar -C "$ROOT" -xf "$CACHE"; then
	fail "root" "cannot unpack $CACHE"
	t_end
fi
# The host's package sources (the mirror CI reaches), in place of debootstrap's.
rm -f "$ROOT/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] && cp "$f" "$ROOT$f"
done
find "$ROOT/etc" -path '*isergw*' >"$T_DIR/pre-install.txt"

NSPAWN=(systemd-nspawn -q -D "$ROOT" --register=no --keep-unit)
# in_root CMD...: CMD in the root without booting it (no systemd running: an image build).
in_root() {
	"${NSPAWN[@]}" --pipe -E DEBIAN_FRONTEND=noninteractive "$@"
}
# C CMD...: CMD inside the booted container; N CMD...: a host program in its network.
C() {
	nsenter -t "$CPID" -a env DEBIAN_FRONTEND=noninteractive "$@"
}
N() {
	nsenter -t "$CPID" -n "$@"
}
boot() {
	local i
	t_daemon_start nspawn nspawn "$T_DIR/boot.log" "${NSPAWN[@]}" --boot --private-network
	NS_PID=$T_LAST_PID
	CPID=
	for i in $(seq 1 100); do
		CPID=$(pgrep -P "$NS_PID" -x systemd | head -n 1)
		[ -n "$CPID" ] && break
		sleep 0.1
	done
	[ -n "$CPID" ] || return 1
	# Booted: every start job is done (running, or degraded if some unit failed). Until its
	# bus is up, systemctl cannot ask.
	for i in $(seq 1 300); do
		timeout 60 nsenter -t "$CPID" -a systemctl is-system-running --wait \
			>"$T_DIR/boot-state.out" 2>&1
		grep -q '^Failed to connect' "$T_DIR/boot-state.out" || return 0
		t_alive "$NS_PID" || return 1
		sleep 0.1
	done
	return 1
}
halt() {
	[ -n "$NS_PID" ] || return 0
	# nspawn turns SIGTERM into an orderly poweroff of the container.
	t_stop_pid "$NS_PID" 60
	NS_PID=
}
# port_open PORT: a connect to 127.0.0.1:PORT in the container's network.
port_open() {
	N timeout -k 2 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}
api() {
	N curl -s -o "$T_DIR/api.out" -w '%{http_code}' -H "Authorization: Bearer $1" -X "$2" \
		"http://127.0.0.1:8080$3" ${4:+-d "$4"}
}
# lun_reads SECONDS: iscsi-inq reads LUN 0 of the test target within SECONDS.
lun_reads() {
	local i
	for i in $(seq 1 "$1"); do
		N iscsi-inq "iscsi://127.0.0.1:3260/$IQN/0" >"$T_DIR/inq.out" 2>&1 &&
			grep -q "Product:installlun" "$T_DIR/inq.out" && return 0
		sleep 1
	done
	return 1
}

# ---- install into the image ---------------------------------------------------------------

mkdir -p "$ROOT/var/tmp/debs" "$ROOT/var/tmp/debs2"
cp "${DEBS[@]}" "$ROOT/var/tmp/debs/"
cp "$T_DIR"/v2/*.deb "$ROOT/var/tmp/debs2/"
if in_root sh -c 'apt-get update -qq && apt-get install -y --no-install-recommends \
		/var/tmp/debs/isergw_*.deb /var/tmp/debs/isergw-*.deb' >"$T_DIR/apt-install.out" 2>&1; then
	pass "apt-get install ./isergw_*.deb ./isergw-*.deb into the image (systemd not running)"
else
	fail "apt-get install" "$(grep -E '^(E|dpkg):' "$T_DIR/apt-install.out" | head -n 3 | tr '\n' ' ')"
	t_end
fi
dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f='${Status}\n' libiscsi7 libjansson4 \
	libmicrohttpd12 2>/dev/null | grep -c 'install ok installed' | grep -qx 3 &&
	pass "the dependencies came from the mirror (libiscsi7, libjansson4, libmicrohttpd12)" ||
	fail "dependencies" "libiscsi7, libjansson4 or libmicrohttpd12 not installed"
grep -q "first admin token is in $STATE/admin.token" "$T_DIR/apt-install.out" &&
	pass "the postinst says where the first admin token is" ||
	fail "postinst message" "no mention of $STATE/admin.token"
st=$(stat -c '%a %U' "$ROOT$STATE/admin.token" 2>/dev/null)
[ "$st" = "600 root" ] && [ -s "$ROOT$STATE/admin.token" ] &&
	pass "the first admin token is root-only (0600) before the agent ever ran" ||
	fail "admin.token" "stat: ${st:-missing}"
st=$(stat -c '%a' "$ROOT/etc/isergw/isergwd.json" 2>/dev/null)
[ "$st" = 600 ] && pass "/etc/isergw/isergwd.json is 0600 (CHAP secrets)" ||
	fail "isergwd.json mode" "${st:-missing}"
wants=$ROOT/etc/systemd/system/multi-user.target.wants
[ -L "$wants/isergwd.service" ] && [ -L "$wants/isergw-agent.service" ] &&
	pass "both units are enabled in the image although systemd was not running" ||
	fail "enabled offline" "$(ls "$wants" 2>/dev/null | tr '\n' ' ')"

# ---- boot ---------------------------------------------------------------------------------

if ! boot; then
	fail "boot" "no systemd in the container: $(tail -n 3 "$T_DIR/boot.log" | tr '\n' ' ')"
	halt
	t_end
fi
pass "systemd-nspawn --boot: systemd is PID 1 of the root ($(cat "$T_DIR/boot-state.out"))"
act=$(C systemctl is-active isergwd.service isergw-agent.service | tr '\n' ' ')
[ "$act" = "active active " ] && pass "isergwd and isergw-agent are active after boot" ||
	fail "units active" "$act; $(C journalctl -b -u isergwd -u isergw-agent --no-pager 2>&1 | tail -n 5 | tr '\n' ' ')"
frag=$(C systemctl show -p FragmentPath --value isergwd.service isergw-agent.service | grep . | tr '\n' ' ')
[ "$frag" = "/lib/systemd/system/isergwd.service /lib/systemd/system/isergw-agent.service " ] &&
	pass "started through the packaged unit files" || fail "unit files" "$frag"
typ=$(C systemctl show -p Type --value isergwd.service isergw-agent.service | grep . | tr '\n' ' ')
[ "$typ" = "notify notify " ] && pass "both are Type=notify (active means READY=1 was sent)" ||
	fail "Type" "$typ"
check "systemd-analyze verify on both units" \
	C systemd-analyze verify --man=no /lib/systemd/system/isergwd.service \
	/lib/systemd/system/isergw-agent.service
for u in isergwd isergw-agent; do
	score=$(C systemd-analyze security --no-pager "$u.service" 2>/dev/null |
		sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }'; then
		pass "systemd-analyze security $u.service: exposure $score (at most 3.0)"
	else
		fail "systemd-analyze security $u.service" "exposure ${score:-unknown}, above 3.0"
	fi
done

# ---- token, CLI, reload -------------------------------------------------------------------

TOK=$(cat "$ROOT$STATE/admin.token" 2>/dev/null)
if C isergwctl health >"$T_DIR/health.out" 2>&1 && grep -q "gateway: connected" "$T_DIR/health.out"; then
	pass "isergwctl health: the agent is up and connected to the gateway"
else
	fail "isergwctl health" "$(tr '\n' ' ' <"$T_DIR/health.out")"
fi
check "isergwctl target list with the postinst's token (default token file)" C isergwctl target list
# Refused as unauthorized (401), not any failure: a dead agent or a crash of isergwctl also
# fails the command.
check "a wrong token is refused: 401 unauthorized" \
	t_refused '^isergwctl: 401 unauthorized' C isergwctl --token-file /etc/hostname target list

# The gateway: a second portal in the file, then `systemctl reload` (SIGHUP, same process).
pid1=$(C systemctl show -p MainPID --value isergwd.service)
python3 - "$ROOT/etc/isergw/isergwd.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["portals"].append({"name": "tcp1", "transport": "tcp", "address": "127.0.0.1", "port": 3261})
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
if C systemctl reload isergwd.service >"$T_DIR/reload.out" 2>&1; then
	ok=0
	for i in $(seq 1 50); do
		port_open 3261 && ok=1 && break
		sleep 0.1
	done
	pid2=$(C systemctl show -p MainPID --value isergwd.service)
	[ "$ok" = 1 ] && [ "$pid1" = "$pid2" ] &&
		pass "systemctl reload isergwd applies a config edit (new portal listens, same process)" ||
		fail "reload isergwd" "port 3261 open: $ok, MainPID $pid1 -> $pid2"
else
	fail "systemctl reload isergwd" "$(tr '\n' ' ' <"$T_DIR/reload.out")"
fi

# A file with a mistake: the reload changes nothing, says why, and the gateway serves on.
cp "$ROOT/etc/isergw/isergwd.json" "$T_DIR/isergwd.json.good"
sed -i 's/"port": 3261/"port": 99999/' "$ROOT/etc/isergw/isergwd.json"
C systemctl reload isergwd.service >/dev/null 2>&1
journal_says() {
	C journalctl -u isergwd.service --no-pager 2>/dev/null | grep -q "$1"
}
t_wait_for 10 journal_says 'not applied.*99999 is out of range'
if journal_says 'not applied.*99999 is out of range' &&
	port_open 3261 && [ "$(C systemctl is-active isergwd.service)" = active ]; then
	pass "a reload of a file with a mistake changes nothing and names the mistake in the journal"
else
	fail "reload of a bad file" "$(C journalctl -u isergwd.service --no-pager | tail -n 2 | tr '\n' ' ')"
fi
cp "$T_DIR/isergwd.json.good" "$ROOT/etc/isergw/isergwd.json"

# The agent: a token added on disk counts after `systemctl reload isergw-agent`.
RTOK=$(C isergw-agent --state-dir "$STATE" --add-token install-read --role read 2>/dev/null)
c1=$(api "$RTOK" GET /api/v1/targets)
C systemctl reload isergw-agent.service >"$T_DIR/reload-agent.out" 2>&1
# The reload's SIGHUP is handled on the agent's loop after systemctl returns: asked again
# until it answers 200 (10 s).
read_ok() { [ "$(api "$RTOK" GET /api/v1/targets)" = 200 ]; }
t_wait_for 10 read_ok
c2=$(api "$RTOK" GET /api/v1/targets)
[ "$c1" = 401 ] && [ "$c2" = 200 ] &&
	pass "systemctl reload isergw-agent reads the token list again (401 before, 200 after)" ||
	fail "reload isergw-agent" "HTTP $c1 before, $c2 after"

# ---- a LUN over REST, read from the host --------------------------------------------------

c1=$(api "$TOK" POST /api/v1/targets "{\"name\":\"$IQN\",\"allow_any_initiator\":true}")
c2=$(api "$TOK" POST /api/v1/targets/$IQN/luns \
	'{"backstore":{"type":"ram","size":"8M"},"product":"installlun"}')
[ "$c1" = 201 ] && [ "$c2" = 201 ] && pass "POST target and LUN with the admin token (201, 201)" ||
	fail "REST provisioning" "HTTP $c1, $c2: $(tr '\n' ' ' <"$T_DIR/api.out")"
lun_reads 10 && pass "iscsi-inq from the host reads the LUN through the packaged gateway" ||
	fail "iscsi-inq" "$(tail -n 3 "$T_DIR/inq.out" | tr '\n' ' ')"

# ---- upgrade ------------------------------------------------------------------------------

sums() {
	(cd "$ROOT" && sha256sum ".$STATE/admin.token" ".$STATE/tokens.json" etc/isergw/isergwd.json \
		etc/isergw/isergw-agent.conf 2>&1)
}
sums >"$T_DIR/sums.before"
gpid=$(C systemctl show -p MainPID --value isergwd.service)
apid=$(C systemctl show -p MainPID --value isergw-agent.service)
if C sh -c 'apt-get install -y --no-install-recommends /var/tmp/debs2/isergw_*.deb \
	/var/tmp/debs2/isergw-*.deb' >"$T_DIR/apt-upgrade.out" 2>&1; then
	pass "apt-get install of the rebuilt packages ($VERSION -> $V2) in the running system"
else
	fail "upgrade" "$(grep -E '^(E|dpkg):' "$T_DIR/apt-upgrade.out" | head -n 3 | tr '\n' ' ')"
fi
v=$(C dpkg-query -W -f='${Version} ' isergw isergw-gateway isergw-agent isergw-webui)
[ "$v" = "$V2 $V2 $V2 $V2 " ] && pass "all four packages are at $V2" || fail "upgraded versions" "$v"
sums >"$T_DIR/sums.after"
cmp -s "$T_DIR/sums.before" "$T_DIR/sums.after" &&
	pass "upgrade keeps the configuration (with its edit), the token list and the admin token" ||
	fail "upgrade kept files" "$(diff "$T_DIR/sums.before" "$T_DIR/sums.after" | tr '\n' ' ')"
act=$(C systemctl is-active isergwd.service isergw-agent.service | tr '\n' ' ')
gpid2=$(C systemctl show -p MainPID --value isergwd.service)
apid2=$(C systemctl show -p MainPID --value isergw-agent.service)
[ "$act" = "active active " ] && [ "$gpid2" != "$gpid" ] && [ "$apid2" != "$apid" ] &&
	pass "upgrade restarted both daemons (new processes, active)" ||
	fail "restart on upgrade" "$act; isergwd $gpid -> $gpid2, agent $apid -> $apid2"
lun_reads 15 && pass "after the upgrade the agent re-applied its LUN and the host reads it" ||
	fail "iscsi-inq after upgrade" "$(tail -n 3 "$T_DIR/inq.out" | tr '\n' ' ')"

# ---- remove, purge ------------------------------------------------------------------------

PKGS=(isergw isergw-agent isergw-gateway isergw-webui)
C apt-get remove -y "${PKGS[@]}" >"$T_DIR/apt-remove.out" 2>&1
act=$(C systemctl is-active isergwd.service isergw-agent.service | tr '\n' ' ')
# The root has no procps: the host's pgrep looks into the container's PID namespace.
if ! printf '%s\n' $act | grep -qx active &&
	! pgrep --ns "$CPID" --nslist pid isergw >/dev/null; then
	pass "remove stops both daemons"
else
	fail "remove" "units: $act; processes: $(pgrep --ns "$CPID" --nslist pid -l isergw | tr '\n' ' ')"
fi
[ -s "$ROOT/etc/isergw/isergwd.json" ] && [ -s "$ROOT$STATE/tokens.json" ] &&
	pass "remove keeps configuration and tokens" || fail "remove kept files" "gone"
# dpkg, not apt: the metapackage (no conffiles) is gone entirely after remove and apt would
# refuse the whole command for it.
C dpkg --purge "${PKGS[@]}" >"$T_DIR/dpkg-purge.out" 2>&1
rm -rf "$ROOT/var/tmp/debs" "$ROOT/var/tmp/debs2"
C find / -xdev \( -path /proc -o -path /sys \) -prune -o -path '*isergw*' -print \
	>"$T_DIR/left.txt" 2>/dev/null
C find /run -path '*isergw*' >>"$T_DIR/left.txt" 2>/dev/null
if [ ! -s "$T_DIR/left.txt" ]; then
	pass "purge leaves no file behind (no path with isergw in it, /run included)"
else
	fail "purge" "left: $(head -n 5 "$T_DIR/left.txt" | tr '\n' ' ')"
fi
missing=
for d in "${DEBS[@]}"; do
	while read -r f; do
		[ -e "$ROOT$f" ] || [ -L "$ROOT$f" ] && missing="$missing $f"
	done < <(dpkg-deb --fsys-tarfile "$d" | tar -t | sed -n 's|^\./|/|p' | grep -v '/$')
done
[ -z "$missing" ] && pass "purge removed every file the packages shipped" ||
	fail "purge: shipped files left" "$missing"

halt
[ "$T_STOP_KILLED" = 0 ] && pass "the container powers off cleanly" ||
	fail "container poweroff" "needed SIGKILL"

# ---- RPM into the same root ---------------------------------------------------------------

if ! t_need rpm rpmbuild; then
	skip rpm "rpm and rpmbuild are missing (deploy/install-deps.sh installs rpm)"
elif ! make --no-print-directory -s rpm >"$T_DIR/rpm.out" 2>&1; then
	fail "make rpm" "$(tail -n 5 "$T_DIR/rpm.out" | tr '\n' ' ')"
else
	RPMS=$(ls build/pkg/isergw-gateway-"$VERSION"-*.rpm build/pkg/isergw-agent-"$VERSION"-*.rpm \
		build/pkg/isergw-webui-"$VERSION"-*.rpm build/pkg/isergw-"$VERSION"-*.rpm 2>/dev/null)
	[ "$(printf '%s\n' "$RPMS" | grep -c .)" = 4 ] && pass "make rpm: the same four packages" ||
		fail "rpms" "$RPMS"
	# The scriptlets run in the root (chroot): /bin/sh, systemctl and the agent's libraries
	# are there from the Debian install above.
	rpm --root "$ROOT" --initdb 2>/dev/null
	if rpm -i --nodeps --root "$ROOT" $RPMS >"$T_DIR/rpm-install.out" 2>&1; then
		pass "rpm -i --nodeps --root: all four install, scriptlets included"
	else
		fail "rpm -i" "$(tail -n 3 "$T_DIR/rpm-install.out" | tr '\n' ' ')"
	fi
	modes=$(cd "$ROOT" && stat -c '%n %a' etc/isergw etc/isergw/isergwd.json \
		etc/isergw/isergw-agent.conf var/lib/isergw var/lib/isergw/agent \
		var/lib/isergw/agent/admin.token usr/sbin/isergwd 2>&1 | tr '\n' ',')
	want="etc/isergw 750,etc/isergw/isergwd.json 600,etc/isergw/isergw-agent.conf 600,"
	want="${want}var/lib/isergw 750,var/lib/isergw/agent 700,var/lib/isergw/agent/admin.token 600,"
	want="${want}usr/sbin/isergwd 755,"
	[ "$modes" = "$want" ] &&
		pass "rpm: modes of config (0600), state (0700) and the %post's admin token (0600)" ||
		fail "rpm modes" "$modes"
	[ -L "$ROOT/etc/systemd/system/multi-user.target.wants/isergwd.service" ] &&
		[ -L "$ROOT/etc/systemd/system/multi-user.target.wants/isergw-agent.service" ] &&
		pass "rpm %post presets both units enabled (80-isergw.preset), systemd not running" ||
		fail "rpm preset" "$(ls "$ROOT/etc/systemd/system/multi-user.target.wants/")"
	grep -q "first admin token is in" "$T_DIR/rpm-install.out" &&
		pass "rpm %post created the first admin token and says where" ||
		fail "rpm %post" "$(tr '\n' ' ' <"$T_DIR/rpm-install.out")"
	rpm -e --nodeps --root "$ROOT" isergw isergw-agent isergw-gateway isergw-webui \
		>"$T_DIR/rpm-erase.out" 2>&1
	left=$(cd "$ROOT" && find . -xdev -path '*isergw*' 2>/dev/null | head -n 5)
	[ -z "$left" ] && pass "rpm -e: the scriptlets and file list leave nothing behind" ||
		fail "rpm -e" "left: $(echo $left)"
fi

[ "$T_KEEP" = 1 ] || rm -rf "$ROOT"
t_log "install: $((SECONDS - t0)) s"
t_end
