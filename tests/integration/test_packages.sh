#!/bin/bash
# The DEB and RPM packages: built from this tree, they hold the programs, the systemd unit and
# the default configuration, name their runtime dependencies, and what they install runs: the
# packaged isergwd validates the packaged configuration. Nothing is installed on this machine;
# packages are unpacked into the run folder.
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
VERSION=$(cat VERSION)

if make --no-print-directory -s deb >"$T_DIR/deb.out" 2>&1; then
	pass "make deb"
else
	fail "make deb" "$(tail -n 5 "$T_DIR/deb.out" | tr '\n' ' ')"
fi
deb=$(ls build/pkg/isergw_"$VERSION"_*.deb 2>/dev/null | head -n 1)
if [ -n "$deb" ]; then
	files=$(dpkg-deb -c "$deb")
	miss=
	for f in ./usr/sbin/isergwd ./usr/sbin/isergw-agent ./usr/bin/isergwctl \
		./lib/systemd/system/isergwd.service ./lib/systemd/system/isergw-agent.service \
		./etc/isergw/isergwd.json \
		./usr/share/doc/isergw/README.md \
		./usr/share/isergw/webui/index.html ./usr/share/isergw/webui/app.js; do
		printf '%s\n' "$files" | grep -q " $f\$" || miss="$miss $f"
	done
	[ -z "$miss" ] && pass "deb holds the programs, unit, config and docs" ||
		fail "deb contents" "missing:$miss"
	deps=$(dpkg-deb -f "$deb" Depends)
	case "$deps" in
	*libiscsi7*libjansson4* | *libjansson4*libiscsi7*) pass "deb depends on the libraries it links ($deps)" ;;
	*) fail "deb Depends" "got: $deps" ;;
	esac
	dpkg-deb -I "$deb" conffiles 2>/dev/null | grep -qx /etc/isergw/isergwd.json &&
		pass "deb marks /etc/isergw/isergwd.json as a conffile" || fail "deb conffiles" "none"
	mkdir -p "$T_DIR/deb"
	dpkg-deb -x "$deb" "$T_DIR/deb"
	check "packaged isergwd accepts the packaged config" \
		"$T_DIR/deb/usr/sbin/isergwd" --check --config "$T_DIR/deb/etc/isergw/isergwd.json"
else
	fail "deb" "no package in build/pkg"
fi

if ! t_need rpmbuild rpm2cpio cpio; then
	skip rpm "rpmbuild, rpm2cpio or cpio is missing (deploy/install-deps.sh installs rpm)"
	t_end
fi
if make --no-print-directory -s rpm >"$T_DIR/rpm.out" 2>&1; then
	pass "make rpm"
else
	fail "make rpm" "$(tail -n 5 "$T_DIR/rpm.out" | tr '\n' ' ')"
fi
rpmf=$(ls build/pkg/isergw-"$VERSION"-1.*.rpm 2>/dev/null | head -n 1)
if [ -n "$rpmf" ]; then
	req=$(rpm -qp --requires "$rpmf" 2>/dev/null)
	printf '%s\n' "$req" | grep -q 'libiscsi.so' &&
		pass "rpm requires the libraries it links" || fail "rpm requires" "$req"
	rpm -qp --configfiles "$rpmf" 2>/dev/null | grep -q /etc/isergw/isergwd.json &&
		pass "rpm marks the config as a config file" || fail "rpm configfiles" "missing"
	mkdir -p "$T_DIR/rpm"
	(cd "$T_DIR/rpm" && rpm2cpio "$T_ROOT/$rpmf" | cpio -idm --quiet)
	check "rpm holds the dashboard in /usr/share/isergw/webui" \
		test -s "$T_DIR/rpm/usr/share/isergw/webui/index.html"
	check "rpm's isergwd accepts its config" \
		"$T_DIR/rpm/usr/sbin/isergwd" --check --config "$T_DIR/rpm/etc/isergw/isergwd.json"
else
	fail "rpm" "no package in build/pkg"
fi
t_end
