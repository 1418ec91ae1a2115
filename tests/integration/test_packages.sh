#!/bin/bash
# The DEB and RPM packages as files: both build from a clean tree (the dist tarball), split the
# same way (isergw-gateway, isergw-agent, isergw-webui, the isergw metapackage), hold the
# programs, units, configuration (as conffiles), man pages and completion where they belong,
# take their library dependencies from the build (shlibs / RPM's automatic requires), carry
# the maintainer scripts that enable units offline and restart after an upgrade, and pass
# lintian and rpmlint as docs/INSTALL.md states. Nothing is installed on this machine; the
# install suite (test_install.sh) installs and boots them.
#
#   tests/integration/test_packages.sh
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin packages
cd "$T_ROOT" || exit 1
if [ "$BUILD" != build ]; then
	# Packages carry the release build; the sanitized rerun covers the same programs' code.
	skip packages "packages are built from the release tree only (BUILD=$BUILD)"
	t_end
fi
if ! t_need dpkg-buildpackage dh lintian; then
	skip packages "deploy/install-deps.sh test installs debhelper, dpkg-dev and lintian"
	t_end
fi
VERSION=$(cat VERSION)
ARCH=$(dpkg --print-architecture)

# ---- the tarball ----------------------------------------------------------------------------
if make --no-print-directory -s dist >"$T_DIR/dist.out" 2>&1; then
	list=$(tar -tzf "build/pkg/isergw-$VERSION.tar.gz")
	if printf '%s\n' "$list" | grep -qx "isergw-$VERSION/packaging/debian/control" &&
		printf '%s\n' "$list" | grep -qx "isergw-$VERSION/packaging/rpm/isergw.spec" &&
		! printf '%s\n' "$list" | grep -q "^isergw-$VERSION/build/"; then
		pass "make dist: isergw-$VERSION.tar.gz holds the source and packaging, no build output"
	else
		fail "make dist contents" "$(printf '%s\n' "$list" | grep -c .) entries"
	fi
else
	fail "make dist" "$(tail -n 3 "$T_DIR/dist.out" | tr '\n' ' ')"
fi
check "debian/control takes library dependencies from shlibs only" \
	sh -c '! grep -E "^ *(Depends|Pre-Depends):.*(^|[ ,])lib[a-z]" packaging/debian/control &&
		[ "$(grep -c "\${shlibs:Depends}" packaging/debian/control)" = 2 ]'
sv=$(sed -n 's/^%{!?version: %global version \(.*\)}$/\1/p' packaging/rpm/isergw.spec)
[ "$sv" = "$VERSION" ] && pass "isergw.spec's own version (for rpmbuild -ta) is VERSION" ||
	fail "spec version" "$sv, VERSION $VERSION"
mv=$(grep -L "^\.TH .* \"isergw $VERSION\"" docs/man/*.[0-9])
[ -z "$mv" ] && pass "the man pages name isergw $VERSION" || fail "man page versions" "$mv"
cv=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
[ "$cv" = "$VERSION" ] && pass "debian/changelog is at VERSION ($VERSION)" ||
	fail "changelog version" "$cv, VERSION $VERSION"

# The completion, with bash-completion's two helpers it calls stood in for (the host need not
# have bash-completion installed): commands, sub-commands and options complete.
comp() {
	bash -c '_init_completion() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
		words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
		_filedir() { :; }
		. deploy/bash-completion/isergwctl
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _isergwctl; echo "${COMPREPLY[*]}"' comp "$@"
}
c1=$(comp isergwctl ta) c2=$(comp isergwctl lun p) c3=$(comp isergwctl --js)
c4=$(comp isergwctl --json config ex)
[ "$c1" = target ] && [ "$c2" = paths ] && [ "$c3" = --json ] && [ "$c4" = export ] &&
	pass "bash completion: isergwctl ta -> target, lun p -> paths, --js -> --json, config ex -> export" ||
	fail "bash completion" "got '$c1' '$c2' '$c3' '$c4'"

# ---- Debian ---------------------------------------------------------------------------------
if make --no-print-directory -s deb >"$T_DIR/deb.out" 2>&1; then
	pass "make deb: dpkg-buildpackage -us -uc -b from the tarball"
else
	fail "make deb" "$(tail -n 5 "$T_DIR/deb.out" | tr '\n' ' ')"
	t_end
fi
G=build/pkg/isergw-gateway_"$VERSION"_"$ARCH".deb
A=build/pkg/isergw-agent_"$VERSION"_"$ARCH".deb
W=build/pkg/isergw-webui_"$VERSION"_all.deb
M=build/pkg/isergw_"$VERSION"_all.deb
# has DEB FILE...: every FILE is in DEB.
has() {
	local deb=$1 files miss= f
	shift
	files=$(dpkg-deb -c "$deb" | awk '{ print $6 }')
	for f in "$@"; do
		printf '%s\n' "$files" | grep -qx "./$f" || miss="$miss $f"
	done
	[ -z "$miss" ] && return 0
	echo "missing:$miss"
	return 1
}
check "isergw-gateway: isergwd, its unit, config, man pages isergwd(8) and isergwd.json(5)" \
	has "$G" usr/sbin/isergwd lib/systemd/system/isergwd.service etc/isergw/isergwd.json \
	usr/share/man/man8/isergwd.8.gz usr/share/man/man5/isergwd.json.5.gz
check "isergw-agent: agent, isergwctl, unit, options file, man pages, bash completion" \
	has "$A" usr/sbin/isergw-agent usr/bin/isergwctl lib/systemd/system/isergw-agent.service \
	etc/isergw/isergw-agent.conf usr/share/man/man8/isergw-agent.8.gz \
	usr/share/man/man8/isergwctl.8.gz usr/share/bash-completion/completions/isergwctl
check "isergw-webui: the dashboard in /usr/share/isergw/webui" \
	has "$W" usr/share/isergw/webui/index.html usr/share/isergw/webui/app.js
[ "$(dpkg-deb -f "$W" Architecture)" = all ] && [ "$(dpkg-deb -f "$M" Architecture)" = all ] &&
	pass "isergw-webui and the isergw metapackage are Architecture: all" ||
	fail "Architecture" "webui $(dpkg-deb -f "$W" Architecture), isergw $(dpkg-deb -f "$M" Architecture)"
gd=$(dpkg-deb -f "$G" Depends)
ad=$(dpkg-deb -f "$A" Depends)
case "$gd" in
*libiscsi7*libjansson4* | *libjansson4*libiscsi7*) pass "isergw-gateway depends on what it links ($gd)" ;;
*) fail "isergw-gateway Depends" "$gd" ;;
esac
case "$ad" in
*libmicrohttpd12*"isergw-gateway (= $VERSION)"*) pass "isergw-agent depends on its libraries and the gateway" ;;
*) fail "isergw-agent Depends" "$ad" ;;
esac
[ "$(dpkg-deb -f "$A" Recommends)" = "isergw-webui (= $VERSION)" ] &&
	pass "isergw-agent recommends isergw-webui" || fail "agent Recommends" "$(dpkg-deb -f "$A" Recommends)"
md=$(dpkg-deb -f "$M" Depends)
case "$md" in
*isergw-agent*isergw-gateway*isergw-webui*) pass "isergw depends on the three packages" ;;
*) fail "isergw Depends" "$md" ;;
esac
dpkg-deb -I "$G" conffiles 2>/dev/null | grep -qx /etc/isergw/isergwd.json &&
	dpkg-deb -I "$A" conffiles 2>/dev/null | grep -qx /etc/isergw/isergw-agent.conf &&
	pass "conffiles: /etc/isergw/isergwd.json, /etc/isergw/isergw-agent.conf" ||
	fail "conffiles" "$(dpkg-deb -I "$G" conffiles; dpkg-deb -I "$A" conffiles)"
mode=$(dpkg-deb -c "$G" | awk '$6 == "./etc/isergw/isergwd.json" { print $1 }')
[ "$mode" = "-rw-------" ] && pass "isergwd.json ships 0600 (CHAP secrets)" || fail "config mode" "$mode"
pi=$(dpkg-deb -I "$A" postinst)
printf '%s\n' "$pi" | grep -q "deb-systemd-helper enable 'isergw-agent.service'" &&
	printf '%s\n' "$pi" | grep -q -- '--init-tokens' &&
	printf '%s\n' "$pi" | grep -q '_dh_action=restart' &&
	pass "agent postinst: first admin token, enable (offline too), restart after upgrade" ||
	fail "agent postinst" "missing enable, --init-tokens or restart"
dpkg-deb -I "$G" prerm 2>/dev/null | grep -q "deb-systemd-invoke stop 'isergwd.service'" &&
	pass "gateway prerm stops isergwd on remove" || fail "gateway prerm" "no stop"
dpkg-deb -I "$A" postrm 2>/dev/null | grep -q 'rm -rf /var/lib/isergw/agent' &&
	dpkg-deb -I "$G" postrm 2>/dev/null | grep -q 'rm -rf /var/lib/isergw /run/isergw' &&
	pass "postrm purge removes what the services created" || fail "postrm purge" "missing"
mkdir -p "$T_DIR/deb"
dpkg-deb -x "$G" "$T_DIR/deb"
check "packaged isergwd accepts the packaged config" \
	"$T_DIR/deb/usr/sbin/isergwd" --check --config "$T_DIR/deb/etc/isergw/isergwd.json"
# lintian's own verdict: with --fail-on error,warning it exits 1 on such a tag and 2 when it
# could not check at all (an unreadable .changes); the tags are shown either way.
lintian --pedantic --fail-on error,warning build/deb/isergw_"$VERSION"_"$ARCH".changes \
	>"$T_DIR/lintian.out" 2>&1
lrc=$?
lw=$(grep -E '^[EW]: ' "$T_DIR/lintian.out")
[ "$lrc" = 0 ] && [ -z "$lw" ] && pass "lintian --pedantic: no error or warning (overrides say why)" ||
	fail "lintian" "exit $lrc: $(printf '%s\n' "${lw:-$(tail -n 3 "$T_DIR/lintian.out")}" | head -n 5 | tr '\n' ' ')"

# ---- RPM ------------------------------------------------------------------------------------
if ! t_need rpmbuild rpm; then
	skip rpm "rpmbuild is missing (deploy/install-deps.sh installs rpm)"
	t_end
fi
if make --no-print-directory -s rpm >"$T_DIR/rpm.out" 2>&1; then
	pass "make rpm: rpmbuild from the dist tarball and packaging/rpm/isergw.spec"
else
	fail "make rpm" "$(tail -n 5 "$T_DIR/rpm.out" | tr '\n' ' ')"
	t_end
fi
RG=$(ls build/pkg/isergw-gateway-"$VERSION"-*.rpm 2>/dev/null)
RA=$(ls build/pkg/isergw-agent-"$VERSION"-*.rpm 2>/dev/null)
RW=$(ls build/pkg/isergw-webui-"$VERSION"-*.noarch.rpm 2>/dev/null)
if [ -n "$RG" ] && [ -n "$RA" ] && [ -n "$RW" ]; then
	rpm -qp --requires "$RG" 2>/dev/null | grep -q 'libiscsi.so' &&
		pass "rpm: isergw-gateway requires the libraries it links" || fail "rpm requires" "no libiscsi"
	cf=$(rpm -qp --configfiles "$RG" "$RA" 2>/dev/null | tr '\n' ' ')
	[ "$cf" = "/etc/isergw/isergwd.json /etc/isergw/isergw-agent.conf " ] &&
		pass "rpm: %config(noreplace) for both files in /etc/isergw" || fail "rpm configfiles" "$cf"
	sc=$(rpm -qp --scripts "$RA" 2>/dev/null)
	printf '%s\n' "$sc" | grep -q -- '--init-tokens' &&
		printf '%s\n' "$sc" | grep -q 'preset isergw-agent.service' &&
		printf '%s\n' "$sc" | grep -q 'try-restart isergw-agent.service' &&
		pass "rpm agent scriptlets: first token, preset (enable), try-restart on upgrade" ||
		fail "rpm scriptlets" "$(printf '%s\n' "$sc" | head -n 5 | tr '\n' ' ')"
	rpm -qpl "$RG" "$RA" | grep -q '^/usr/share/man/man8/isergwd.8' &&
		rpm -qpl "$RA" | grep -q '^/usr/share/man/man8/isergwctl.8' &&
		pass "rpm: the same man pages" || fail "rpm man pages" "missing"
else
	fail "rpm" "missing sub-packages: $(ls build/pkg/*.rpm 2>/dev/null | tr '\n' ' ')"
fi
if t_need rpmlint; then
	# rpmlint's own verdict: exit 0, and its summary names the packages it checked with 0
	# errors (64: errors, 66: over the badness threshold, anything else: it did not check).
	rpmlint -r packaging/rpm/isergw.rpmlintrc build/pkg/*.rpm >"$T_DIR/rpmlint.out" 2>&1
	rrc=$?
	errs=$(grep -E ': E: ' "$T_DIR/rpmlint.out")
	sum=$(tail -n 1 "$T_DIR/rpmlint.out" | sed 's/^ *//; s/ *$//')
	[ "$rrc" = 0 ] && [ -z "$errs" ] && [[ "$sum" =~ ^[1-9][0-9]*\ packages\ .*\ 0\ errors ]] &&
		pass "rpmlint: no errors ($sum)" ||
		fail "rpmlint" "exit $rrc: $(printf '%s\n' "${errs:-$sum}" | head -n 5 | tr '\n' ' ')"
else
	skip rpmlint "rpmlint is not installed"
fi
t_end
