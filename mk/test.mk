# Test suites. `make test` is the sum of the named parts below, each of which runs alone:
#   make test-unit         Criterion unit tests (tests/unit/<module>/test_*.c), then check-layers
#                          and check-docs
#   make check-layers      the layering: #include lines, the nm call graph between modules, and no
#                          cycle between source files (tests/check-layers.py --files)
#   make check-docs        the docs against the programs: keys, REST paths, isergwctl commands,
#                          sizes, links (tests/check-docs.py)
#   make test-integration  real daemons against real peers on loopback (tests/integration/)
#   make test-browser      the dashboard in headless Chromium against real daemons (tests/browser/)
#   make test-sanitize     unit + integration again, built with ASan+UBSan
#   make test-tsan         the threaded parts and two integration suites under ThreadSanitizer
#   make fuzz-regress      every libFuzzer target over its seed corpus (make fuzz runs them longer)
#   make bench             isergwd against tgtd side by side (tests/bench/), the disk rows
#                          (tests/bench/disk.sh), then wrk against the agent (tests/bench/agent.sh)
#   make bench-guard       a short bench, the gateway beside tgtd and LIO in one run (host libiscsi
#                          rows, the VM's kernel initiator), each ratio against its floor in
#                          tests/bench/guard-floors.txt; about 10 minutes, not in make test: run it
#                          before a data-path change is merged, its result in the commit message
#   make soak              the gateway under mixed verified load for SOAK_SECS (1800) while back-end
#                          paths flap, the agent changes the config and restarts (tests/soak/run.sh);
#                          `make test` runs 3 minutes of it as the integration suite `soak`;
#                          SOAK_TRANSPORT=iser runs it over iSER in the VM rig (suite soak-iser)
#   make run               demo gateway on the embedded default configuration

UNIT_SRC := $(foreach f,$(call rwildcard,tests/unit,*.c),$(if $(filter test_%,$(notdir $(f))),$(f)))
UNIT_BIN := $(patsubst %.c,$(BUILD)/%,$(UNIT_SRC))
UNIT_HELPERS := $(filter-out $(UNIT_SRC),$(call rwildcard,tests/unit,*.c))

.PHONY: check-layers check-docs test test-build test-unit test-integration test-sanitize bench bench-guard \
	soak run test-browser

# Every unit test binary links the whole engine; a test that includes a .c file to reach its
# static functions overrides that object, as the linker only pulls archive members it needs.
# Only the agent's tests link the agent, so a broken agent never blocks the gateway's tests; they
# link what the agent links (the config library, not the engine) and only their own helpers.
# A test of tests/unit/MODULE/ may reach that module's private headers (and its static functions
# by including its .c): MODULE's folder is on its include path, and nothing else private. The
# agent's tests see their room's folder (tests/unit/agent/ROOM/ -> agent/ROOM/). The
# ctl tests drive the iSCSI engine through tests/unit/iscsi/harness.h, so they see iscsi's too.
UNIT_MOD = $(word 3,$(subst /, ,$<))
UNIT_DIR = $(if $(filter lib,$(1)),lib,$(if $(filter agent,$(1)),agent/$(word 4,$(subst /, ,$<)),gateway/$(1)))
UNIT_INC_ctl := -Igateway/iscsi
UNIT_INC = -I$(call UNIT_DIR,$(UNIT_MOD)) $(UNIT_INC_$(UNIT_MOD))
UNIT_LINK = $(CC) $(CFLAGS) -Itests/unit $(UNIT_INC) $(LDFLAGS) -o $@ $< \
	$(filter %.o %.a,$^) $(CRITERION_LIBS) $(LDLIBS)

$(BUILD)/tests/unit/agent/%: tests/unit/agent/%.c $(call obj,$(filter tests/unit/agent/%,$(UNIT_HELPERS))) $(LIBAPI) $(LIBGWCONF) $(LIBGW)
	@mkdir -p $(dir $@)
	$(call say,TEST,$@)$(UNIT_LINK)

$(BUILD)/tests/unit/%: tests/unit/%.c $(call obj,$(UNIT_HELPERS)) $(LIBGWD) $(LIBGWCONF) $(LIBGW)
	@mkdir -p $(dir $@)
	$(call say,TEST,$@)$(UNIT_LINK)

# Test tools: small real clients built on libiscsi (tests/tools/<name>.c -> $(BUILD)/tests/tools/<name>).
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BIN := $(patsubst %.c,$(BUILD)/%,$(TOOL_SRC))

$(BUILD)/tests/tools/%: tests/tools/%.c $(wildcard tests/tools/*.h)
	@mkdir -p $(dir $@)
	$(call say,TOOL,$@)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LDLIBS)

# Fakes shared by unit tests are kept, not deleted as intermediates after each link.
.SECONDARY: $(call obj,$(UNIT_HELPERS))

test-build: all $(UNIT_BIN) $(TOOL_BIN)

# Issue 13: every integration suite, the conformance suite and the VM suites must pass with one
# event loop and with two. Running everything twice does not fit CI's 90 minutes, so each pass
# takes one count (docs/TESTING.md, "Several event loops"): TEST_LOOPS=1 runs the release
# integration pass, the ThreadSanitizer suites and the VM rig with ISERGW_LOOPS=2 and the
# sanitized (ASan+UBSan) pass with ISERGW_LOOPS=1. On by default; TEST_LOOPS=0: no
# ISERGW_LOOPS, each gateway's configuration decides (its default: one loop per CPU). Each
# count can be set alone: TEST_LOOPS_RELEASE, TEST_LOOPS_SAN, TEST_LOOPS_TSAN, TEST_LOOPS_VM
# (empty: none).
TEST_LOOPS ?= 1
ifeq ($(TEST_LOOPS),1)
TEST_LOOPS_RELEASE ?= 2
TEST_LOOPS_SAN ?= 1
TEST_LOOPS_TSAN ?= 2
TEST_LOOPS_VM ?= 2
endif
# $(call test_loops_env,COUNT): "ISERGW_LOOPS=COUNT " for a recipe line, nothing when empty.
test_loops_env = $(if $(strip $(1)),ISERGW_LOOPS=$(strip $(1)) )
TEST_LOOPS_INTEGRATION = $(if $(SANITIZE),$(TEST_LOOPS_SAN),$(TEST_LOOPS_RELEASE))

# Inside `make test` a skipped suite or test fails unless its reason is on tests/allowed-skips.txt
# (the runners read ISERGW_MAKE_TEST; docs/TESTING.md, "What a green run proves").
test: export ISERGW_MAKE_TEST := 1
test: deps
	@$(MAKE) --no-print-directory test-build
	@$(MAKE) --no-print-directory test-unit
	@$(MAKE) --no-print-directory test-integration
	@$(MAKE) --no-print-directory test-browser
	@$(MAKE) --no-print-directory test-sanitize
	@$(MAKE) --no-print-directory test-tsan
	@$(MAKE) --no-print-directory fuzz-regress
	@$(MAKE) --no-print-directory test-vm

test-unit: test-build
	@rc=0; tests/run-unit.sh $(UNIT_BIN) || rc=1; \
	python3 tests/check-layers.py --self-test --files --build $(BUILD) || rc=1; \
	python3 tests/check-docs.py --self-test --build $(BUILD) || rc=1; exit $$rc

# Which module may include and call which: the table is in the script. Needs the objects built.
check-layers: all
	@python3 tests/check-layers.py --self-test --files --build $(BUILD)

# Every key, REST path and isergwctl command the docs name exists (asked of the programs built).
check-docs: all
	@python3 tests/check-docs.py --self-test --build $(BUILD)

test-integration: all $(TOOL_BIN)
	@$(call test_loops_env,$(TEST_LOOPS_INTEGRATION))BUILD=$(BUILD) tests/integration/run.sh

# playwright-core, pinned by tests/browser/package-lock.json, comes from the npm registry into
# build/browser (no browser download: the suite drives Debian's /usr/bin/chromium). Without npm
# or the registry the suite still runs and reports itself skipped, saying why; inside `make test`
# that skip fails the run (tests/allowed-skips.txt does not allow it).
BROWSER_NODE := build/browser/node_modules/playwright-core/package.json

$(BROWSER_NODE): tests/browser/package.json tests/browser/package-lock.json
	@mkdir -p build/browser
	cp tests/browser/package.json tests/browser/package-lock.json build/browser/
	cd build/browser && npm ci --ignore-scripts --no-audit --no-fund
	@touch $@

test-browser: all $(TOOL_BIN)
	@command -v npm >/dev/null 2>&1 && $(MAKE) --no-print-directory $(BROWSER_NODE) || \
		echo "test-browser: playwright-core could not be installed (npm ci)"
	@BUILD=$(BUILD) tests/browser/run.sh

test-sanitize:
	@$(MAKE) --no-print-directory SANITIZE=address,undefined test-build
	@$(MAKE) --no-print-directory SANITIZE=address,undefined test-unit
	@$(MAKE) --no-print-directory SANITIZE=address,undefined test-integration

bench: deps
	@$(MAKE) --no-print-directory all $(TOOL_BIN)
	@rc=0; BUILD=$(BUILD) tests/bench/run.sh || rc=1; \
	BUILD=$(BUILD) tests/bench/disk.sh || rc=1; \
	BUILD=$(BUILD) tests/bench/mpath.sh || rc=1; \
	BUILD=$(BUILD) tests/bench/agent.sh || rc=1; exit $$rc

# SOAK_TRANSPORT=iser: the same soak over iSER, inside the VM rig (tests/vm/guest/suite-soak-iser.sh;
# Soft-RoCE exists only in the guest), on the release build like every guest suite.
SOAK_TRANSPORT ?= tcp
bench-guard: deps
	@$(MAKE) --no-print-directory all $(TOOL_BIN)
	@BUILD=$(BUILD) tests/bench/guard.sh

soak: deps
	@$(MAKE) --no-print-directory all $(TOOL_BIN)
	@if [ "$(SOAK_TRANSPORT)" = iser ]; then \
		BUILD=$(BUILD) tests/vm/run.sh soak-iser; \
	else \
		BUILD=$(BUILD) SOAK_TRANSPORT=$(SOAK_TRANSPORT) tests/soak/run.sh; \
	fi

# A sub-make builds after the install: pkg-config flags are read when make starts, so on a fresh
# machine they exist only in a make started after it. Only what building and running need.
run:
	@deploy/install-deps.sh build run
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) deploy/run-demo.sh

# ThreadSanitizer (`make test-tsan`, run by `make test`): the tree built with SANITIZE=thread
# into build/tsan/. Criterion cannot run under TSan (its boxfort arena is mapped at random fixed
# addresses TSan's mmap refuses), so the threaded parts' checks are plain programs in
# tests/tsan/ (the file backstore's workers under load), then the gateway with file backstores
# under I/O in integration suites (TSan reports to TSAN_OPTIONS log_path, checked like ASan's:
# tests/lib/common.sh). Ends with "tsan: N passed, N failed".
TSAN_BUILD := build/tsan
TSAN_SUITES ?= tools durability loops resolve
TSAN_SRC := $(wildcard tests/tsan/*.c)
TSAN_BIN := $(patsubst %.c,$(BUILD)/%,$(TSAN_SRC))

$(BUILD)/tests/tsan/%: tests/tsan/%.c $(LIBGWD) $(LIBGWCONF) $(LIBGW)
	@mkdir -p $(dir $@)
	$(call say,TEST,$@)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(filter %.a,$^) $(LDLIBS)

.PHONY: test-tsan
test-tsan:
	@$(MAKE) --no-print-directory SANITIZE=thread BUILD=$(TSAN_BUILD) all $(patsubst $(BUILD)/%,$(TSAN_BUILD)/%,$(TOOL_BIN) $(TSAN_BIN))
	@$(call test_loops_env,$(TEST_LOOPS_TSAN))BUILD=$(TSAN_BUILD) TSAN_SUITES="$(TSAN_SUITES)" tests/tsan/run.sh
