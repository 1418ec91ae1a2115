# Compiler, flags, and the pkg-config libraries every part links against.

CC ?= gcc
PKG_CONFIG ?= pkg-config
SANITIZE ?=
WERROR ?= 1
V ?= 0

ifeq ($(SANITIZE),)
BUILD ?= build
else ifeq ($(SANITIZE),thread)
BUILD ?= build/tsan
else
BUILD ?= build/san
endif

Q := $(if $(filter 1,$(V)),,@)
say = $(if $(filter 1,$(V)),,@printf '  %-8s %s\n' '$(1)' '$(2)';)

WARN := -Wall -Wextra -Wformat=2 -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wwrite-strings -Wvla -fno-common
ifeq ($(WERROR),1)
WARN += -Werror
endif

OPT := -O2 -g
ifneq ($(SANITIZE),)
# _FORTIFY_SOURCE and ASan both want to own the string functions; sanitized builds drop it.
OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=$(SANITIZE) -fno-sanitize-recover=all
FORTIFY :=
LDSAN := -fsanitize=$(SANITIZE)
else
FORTIFY := -D_FORTIFY_SOURCE=2
LDSAN :=
endif

# Libraries: rdma-core and libiscsi are hard dependencies; there is no build without them.
# libnl-route-3 (rdma-core's own netlink library) carries the gateway's rtnetlink model (net/);
# liburing the file and block backstores' I/O.
PKGS := libibverbs librdmacm libiscsi jansson libmicrohttpd libcurl libsystemd libcrypto zlib \
	libnl-3.0 libnl-route-3.0 liburing
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
CRITERION_LIBS := $(shell $(PKG_CONFIG) --libs criterion 2>/dev/null)

# Public headers only: include/ holds lib's, one per gateway module and the agent rooms' (agent/http,
# api, store, cluster, net, gwc); a module's private headers stay in its folder, reached by
# same-folder #include "x.h" (tests/check-layers.py checks it).
INCLUDES := -Iinclude

CFLAGS := -std=gnu11 $(OPT) $(WARN) $(FORTIFY) -fstack-protector-strong -D_GNU_SOURCE \
	-MMD -MP $(INCLUDES) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := $(LDSAN) $(EXTRA_LDFLAGS)
LDLIBS := $(PKG_LIBS) -lpthread -lm

PREFIX ?= /usr
DESTDIR ?=
