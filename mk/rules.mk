# Sources are found by folder: a new .c file needs no Makefile change.
#   lib/*.c                    -> $(BUILD)/libgw.a            (shared core)
#   gateway/conf/*.c           -> $(BUILD)/libgwconf.a        (config structs, tables, parser)
#   gateway/**/*.c but main.c, conf/ -> $(BUILD)/libgwd.a     (gateway engine)
#   gateway/main.c             -> $(BUILD)/isergwd
#   agent/**/*.c but cli/, main.c -> $(BUILD)/libapi.a; agent/main.c -> $(BUILD)/isergw-agent
#   agent/cli/*.c              -> $(BUILD)/isergwctl

rwildcard = $(foreach d,$(wildcard $(1:=/*)),$(call rwildcard,$(d),$(2)) $(filter $(subst *,%,$(2)),$(d)))

LIB_SRC := $(wildcard lib/*.c)
CONF_SRC := $(wildcard gateway/conf/*.c)
GWD_SRC := $(filter-out gateway/main.c $(CONF_SRC),$(call rwildcard,gateway,*.c))
API_SRC := $(filter-out agent/main.c $(call rwildcard,agent/cli,*.c),$(call rwildcard,agent,*.c))
CLI_SRC := $(call rwildcard,agent/cli,*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))

LIBGW := $(BUILD)/libgw.a
LIBGWCONF := $(BUILD)/libgwconf.a
LIBGWD := $(BUILD)/libgwd.a
LIBAPI := $(BUILD)/libapi.a

PROGS :=
ifneq ($(wildcard gateway/main.c),)
PROGS += $(BUILD)/isergwd
endif
ifneq ($(wildcard agent/main.c),)
PROGS += $(BUILD)/isergw-agent
endif
ifneq ($(CLI_SRC),)
PROGS += $(BUILD)/isergwctl
endif

.DEFAULT_GOAL := all
.PHONY: all clean deps help check-pkgs
all: check-pkgs $(PROGS)

# Every library is a hard dependency (rdma-core included: iSER is always built): say which is
# missing and how to get it, rather than failing later on a missing header.
check-pkgs:
	@missing=$$(for p in $(PKGS); do $(PKG_CONFIG) --exists $$p || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "isergw: pkg-config cannot find: $$missing"; \
		echo "isergw: run 'make deps' (deploy/install-deps.sh) to install them"; exit 1; fi

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS) -c -o $@ $<

$(LIBGW): $(call obj,$(LIB_SRC))
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(LIBGWCONF): $(call obj,$(CONF_SRC))
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(LIBGWD): $(call obj,$(GWD_SRC))
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(LIBAPI): $(call obj,$(API_SRC))
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(BUILD)/isergwd: $(call obj,gateway/main.c) $(LIBGWD) $(LIBGWCONF) $(LIBGW)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The agent validates configurations with the gateway's own parser and tables (libgwconf), never
# the engine. The CLI is a REST client: it needs only the shared core (and libcurl, jansson).
$(BUILD)/isergw-agent: $(call obj,agent/main.c) $(LIBAPI) $(LIBGWCONF) $(LIBGW)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/isergwctl: $(call obj,$(CLI_SRC)) $(LIBGW)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	@deploy/install-deps.sh all

clean:
	rm -rf build

help:
	@sed -n 's/^#   //p' Makefile mk/*.mk

#   make docs       docs/openapi.json from the agent's route table, docs/API.md from it, and
#                   docs/architecture.{dot,svg} from tests/check-layers.py's module table
.PHONY: docs
docs: $(BUILD)/isergw-agent
	$(BUILD)/isergw-agent --openapi >docs/openapi.json
	python3 docs/render-api.py docs/openapi.json >docs/API.md
	python3 tests/check-layers.py --dot >docs/architecture.dot
	dot -Tsvg docs/architecture.dot -o docs/architecture.svg

-include $(call rwildcard,$(BUILD),*.d)
