# Installation and packages:
#   make install           install into $(DESTDIR)$(PREFIX) (default /usr) and /etc, /lib/systemd
#   make deb               build/pkg/isergw_<version>_<arch>.deb (dpkg-deb)
#   make rpm               build/pkg/isergw-<version>-1.<arch>.rpm (rpmbuild)

VERSION := $(shell cat VERSION)
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
RPM_ARCH := $(shell uname -m)
PKGROOT := build/pkg/root
UNITDIR ?= /lib/systemd/system

.PHONY: install deb rpm

install: all
	install -D -m 0755 $(BUILD)/isergwd $(DESTDIR)$(PREFIX)/sbin/isergwd
	$(if $(wildcard $(BUILD)/isergw-agent),install -D -m 0755 $(BUILD)/isergw-agent $(DESTDIR)$(PREFIX)/sbin/isergw-agent)
	$(if $(wildcard $(BUILD)/isergwctl),install -D -m 0755 $(BUILD)/isergwctl $(DESTDIR)$(PREFIX)/bin/isergwctl)
	install -D -m 0644 deploy/isergwd.service $(DESTDIR)$(UNITDIR)/isergwd.service
	install -D -m 0644 deploy/isergw-agent.service $(DESTDIR)$(UNITDIR)/isergw-agent.service
	install -D -m 0600 deploy/isergwd.json $(DESTDIR)/etc/isergw/isergwd.json
	install -d -m 0755 $(DESTDIR)/var/lib/isergw
	install -D -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/isergw/README.md
	install -d -m 0755 $(DESTDIR)$(PREFIX)/share/isergw/webui
	install -m 0644 $(wildcard webui/*.html webui/*.css webui/*.js) $(DESTDIR)$(PREFIX)/share/isergw/webui/
	install -d -m 0755 $(DESTDIR)$(PREFIX)/share/doc/isergw/docs
	install -m 0644 $(wildcard docs/*.md) $(DESTDIR)$(PREFIX)/share/doc/isergw/docs/

# The runtime dependencies are the Debian packages that own the shared libraries the programs
# load, found with dpkg -S, so the list cannot drift from what the build links.
deb: all
	rm -rf $(PKGROOT) && $(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(PKGROOT)
	mkdir -p $(PKGROOT)/DEBIAN
	packaging/debian/mkcontrol.sh $(VERSION) $(DEB_ARCH) $(PKGROOT) > $(PKGROOT)/DEBIAN/control
	install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm $(PKGROOT)/DEBIAN/
	echo /etc/isergw/isergwd.json > $(PKGROOT)/DEBIAN/conffiles
	dpkg-deb --root-owner-group --build $(PKGROOT) build/pkg/isergw_$(VERSION)_$(DEB_ARCH).deb

rpm: all
	rm -rf $(PKGROOT) && $(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(PKGROOT)
	mkdir -p build/pkg/rpmbuild
	(cd $(PKGROOT) && ls usr/sbin/* usr/bin/* 2>/dev/null | sed 's|^|/|') > build/pkg/rpm-files.txt
	rpmbuild -bb --quiet --define "_topdir $(CURDIR)/build/pkg/rpmbuild" \
		--define "stage $(CURDIR)/$(PKGROOT)" --define "version $(VERSION)" \
		--define "filelist $(CURDIR)/build/pkg/rpm-files.txt" \
		--define "_build_id_links none" packaging/rpm/isergw.spec
	cp build/pkg/rpmbuild/RPMS/$(RPM_ARCH)/isergw-$(VERSION)-1.$(RPM_ARCH).rpm build/pkg/
