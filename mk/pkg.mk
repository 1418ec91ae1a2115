# Installation and packages:
#   make install           install into $(DESTDIR)$(PREFIX) (default /usr) and /etc, /lib/systemd
#   make dist              build/pkg/isergw-<version>.tar.gz: the source tree git tracks
#   make deb               build/pkg/*.deb: dpkg-buildpackage from packaging/debian (DEB_VERSION=)
#   make rpm               build/pkg/*.rpm: rpmbuild of the dist tarball (packaging/rpm)

VERSION := $(shell cat VERSION)
# A rebuilt package of the same source gets a higher version with DEB_VERSION=0.1.0+1.
DEB_VERSION ?= $(VERSION)
RPM_RELEASE ?= 1
UNITDIR ?= /lib/systemd/system
DIST := isergw-$(VERSION)
MAN_PAGES := $(wildcard docs/man/*.[0-9])

.PHONY: install dist deb rpm

install: all
	install -D -m 0755 $(BUILD)/isergwd $(DESTDIR)$(PREFIX)/sbin/isergwd
	$(if $(wildcard $(BUILD)/isergw-agent),install -D -m 0755 $(BUILD)/isergw-agent $(DESTDIR)$(PREFIX)/sbin/isergw-agent)
	$(if $(wildcard $(BUILD)/isergwctl),install -D -m 0755 $(BUILD)/isergwctl $(DESTDIR)$(PREFIX)/bin/isergwctl)
	install -D -m 0644 deploy/isergwd.service $(DESTDIR)$(UNITDIR)/isergwd.service
	install -D -m 0644 deploy/isergw-agent.service $(DESTDIR)$(UNITDIR)/isergw-agent.service
	install -D -m 0600 deploy/isergwd.json $(DESTDIR)/etc/isergw/isergwd.json
	install -D -m 0600 deploy/isergw-agent.conf $(DESTDIR)/etc/isergw/isergw-agent.conf
	install -D -m 0644 deploy/bash-completion/isergwctl \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/isergwctl
	$(foreach m,$(MAN_PAGES),install -D -m 0644 $(m) \
		$(DESTDIR)$(PREFIX)/share/man/man$(subst .,,$(suffix $(m)))/$(notdir $(m)) &&) true
	install -d -m 0755 $(DESTDIR)$(PREFIX)/share/isergw/webui
	install -m 0644 $(wildcard webui/*.html webui/*.css webui/*.js) $(DESTDIR)$(PREFIX)/share/isergw/webui/

# The tarball holds what git tracks plus files not yet added (but not ignored ones), so a
# working tree packs as it is; the version folder is its top.
dist:
	@mkdir -p build/pkg
	$(call say,TAR,build/pkg/$(DIST).tar.gz)git ls-files -z --cached --others --exclude-standard | \
		xargs -0 sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done' sh | \
		tar --null -T - --transform 's,^,$(DIST)/,' --owner=0 --group=0 --numeric-owner \
			--mtime="$$(git log -1 --format=@%ct 2>/dev/null || echo @0)" --sort=name \
			-czf build/pkg/$(DIST).tar.gz

# dpkg-buildpackage in a copy unpacked from the dist tarball, with packaging/debian as its
# debian/ folder: what is built is what the tarball holds.
deb: dist
	rm -rf build/deb && mkdir -p build/deb
	tar -xzf build/pkg/$(DIST).tar.gz -C build/deb
	cp -a build/deb/$(DIST)/packaging/debian build/deb/$(DIST)/debian
	if [ "$(DEB_VERSION)" != "$$(cd build/deb/$(DIST) && dpkg-parsechangelog -S Version)" ]; then \
		{ printf 'isergw (%s) unstable; urgency=medium\n\n  * Rebuild.\n\n -- %s  %s\n\n' \
			'$(DEB_VERSION)' 'isergw developers <isergw@example.org>' "$$(date -R)"; \
		  cat build/deb/$(DIST)/debian/changelog; } >build/deb/changelog && \
		mv build/deb/changelog build/deb/$(DIST)/debian/changelog; fi
	cd build/deb/$(DIST) && DEB_BUILD_OPTIONS="parallel=2 noautodbgsym $(DEB_BUILD_OPTIONS)" \
		dpkg-buildpackage -us -uc -b >../build.log 2>&1 || { tail -n 30 ../build.log; exit 1; }
	rm -f build/pkg/*.deb && cp build/deb/*.deb build/deb/*.changes build/pkg/
	@# The copy's own build/ holds *.d files the top Makefile would pick up (-include).
	rm -rf build/deb/$(DIST)

# rpmbuild from the dist tarball (Source0) and packaging/rpm/isergw.spec. On Debian the host's
# libraries have no RPM provides, so build dependencies are not checked there (--nodeps);
# Fedora/RHEL build it as is (docs/INSTALL.md).
rpm: dist
	rm -rf build/rpmbuild && mkdir -p build/rpmbuild/SOURCES
	cp build/pkg/$(DIST).tar.gz build/rpmbuild/SOURCES/
	rpmbuild -bb --quiet $(if $(wildcard /etc/debian_version),--nodeps) \
		--define "_topdir $(CURDIR)/build/rpmbuild" --define "_build_id_links none" \
		--define "version $(VERSION)" --define "rel $(RPM_RELEASE)" packaging/rpm/isergw.spec
	rm -f build/pkg/*.rpm && cp build/rpmbuild/RPMS/*/*.rpm build/pkg/
	rm -rf build/rpmbuild/BUILD build/rpmbuild/BUILDROOT
