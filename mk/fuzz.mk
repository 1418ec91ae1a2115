# Fuzzing with libFuzzer (clang):
#   make fuzz              build every tests/fuzz/fuzz_*.c and run each for FUZZ_SECS (60; FUZZ_SECONDS
#                          is the old name), one after the other, new inputs in build/fuzz/corpus/
#   make fuzz-regress      (in make test) replay each seed corpus, then run each fuzzer FUZZ_TEST_SECS
#                          (20) with -seed=1; any crash, leak, timeout or sanitizer report fails it
# Fuzzers build the whole tree with clang into build/fuzz/ with ASan+UBSan. docs/RELIABILITY.md
# says what each one drives, with the figures.

FUZZ_SECONDS ?= 60
FUZZ_SECS ?= $(FUZZ_SECONDS)
FUZZ_TEST_SECS ?= 20
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRC))
# Private headers a harness reaches, per harness (never in the global INCLUDES): the iSCSI key
# parser of gateway/iscsi/, multipathd's reply parser of gateway/mpath/ and the iSER wire
# formats of gateway/dmv/. FUZZ_EXTRA_name lists more sources to link into one harness.
# FUZZ_TEST_SECS_name: fuzz-regress's seconds for one harness, where FUZZ_TEST_SECS is more than
# its input space needs (fuzz_iser: a message and a table, over 10^6 runs in 5 s).
FUZZ_INC_fuzz_login_keys := -Igateway/iscsi
FUZZ_INC_fuzz_mpathd_json := -Igateway/mpath
FUZZ_INC_fuzz_iser := -Igateway/dmv
FUZZ_TEST_SECS_fuzz_iser := 5
# The agent's harness links the agent's library (its headers are on the global path, -Iagent).
FUZZ_EXTRA_fuzz_agent = $(LIBAPI)
FUZZ_OPTS := -timeout=10 -rss_limit_mb=2048 -print_final_stats=1

.PHONY: fuzz fuzz-build fuzz-regress fuzz-cov

# clang sees one more thing than gcc: agent/api_http.c's libmicrohttpd log callback passes its
# format on (-Wformat-nonliteral); a warning, not an error, in these builds only.
FUZZ_CFLAGS := -fsanitize=fuzzer-no-link -Wno-error=format-nonliteral

fuzz-build:
	@$(MAKE) -s --no-print-directory CC=clang BUILD=build/fuzz WERROR=$(WERROR) \
		SANITIZE=address,undefined EXTRA_CFLAGS="$(FUZZ_CFLAGS)" \
		$(patsubst %,build/fuzz/tests/fuzz/%,$(FUZZ_NAMES))

FUZZ_LINK = $(CC) $(filter-out -MMD -MP,$(CFLAGS)) -Itests/fuzz $(FUZZ_INC_$*) \
	-fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(FUZZ_EXTRA_$*) $(filter %.a,$^) $(LDLIBS)

.SECONDEXPANSION:
build/fuzz/tests/fuzz/%: tests/fuzz/%.c $$(FUZZ_EXTRA_$$*) $(wildcard tests/fuzz/*.h) \
		$(LIBGWD) $(LIBGWCONF) $(LIBGW)
	@mkdir -p $(dir $@)
	$(call say,FUZZ,$@)$(FUZZ_LINK)

build/fuzz-cov/tests/fuzz/%: tests/fuzz/%.c $$(FUZZ_EXTRA_$$*) $(wildcard tests/fuzz/*.h) \
		$(LIBGWD) $(LIBGWCONF) $(LIBGW)
	@mkdir -p $(dir $@)
	$(call say,FUZZ,$@)$(FUZZ_LINK)

# One at a time (the machine is shared); new inputs go to build/fuzz/corpus/NAME, the tree's
# seeds are read only. Crash files land in build/fuzz/.
fuzz: fuzz-build
	@for f in $(FUZZ_NAMES); do \
		mkdir -p build/fuzz/corpus/$$f; \
		echo "fuzz: $$f for $(FUZZ_SECS) s"; \
		build/fuzz/tests/fuzz/$$f -max_total_time=$(FUZZ_SECS) $(FUZZ_OPTS) \
			-artifact_prefix=build/fuzz/$$f- \
			build/fuzz/corpus/$$f tests/fuzz/corpus/$$f || exit 1; \
	done

# Per harness: the seed corpus replayed (-runs=0), then FUZZ_TEST_SECS of fuzzing from it with a
# fixed seed into a scratch folder. A failure prints the end of the log and the reproducer.
fuzz-regress: fuzz-build
	@pass=0; fail=0; for fs in $(foreach f,$(FUZZ_NAMES),$(f):$(or $(FUZZ_TEST_SECS_$(f)),$(FUZZ_TEST_SECS))); do \
		f=$${fs%%:*}; secs=$${fs#*:}; \
		log=build/fuzz/$$f.log; scratch=build/fuzz/regress/$$f; \
		rm -rf $$scratch; mkdir -p $$scratch; \
		if build/fuzz/tests/fuzz/$$f -runs=0 $(FUZZ_OPTS) tests/fuzz/corpus/$$f >$$log 2>&1 && \
		   build/fuzz/tests/fuzz/$$f -seed=1 -max_total_time=$$secs $(FUZZ_OPTS) \
			-artifact_prefix=build/fuzz/$$f- $$scratch tests/fuzz/corpus/$$f >>$$log 2>&1; \
		then pass=$$((pass + 1)); \
			echo "pass fuzz/$$f $$(grep -o 'stat::number_of_executed_units: [0-9]*' $$log | tail -1 | sed 's/.*: //') execs"; \
		else fail=$$((fail + 1)); echo "FAIL fuzz/$$f (log $$log)"; tail -40 $$log; \
			for a in $$(sed -n 's/.*Test unit written to \(.*\)/\1/p' $$log); do \
				echo "reproducer: $$a (run: build/fuzz/tests/fuzz/$$f $$a)"; \
				od -A d -t x1 $$a | head -20; done; \
		fi; \
	done; echo "fuzz-regress: $$pass passed, $$fail failed"; [ $$fail -eq 0 ]

# Line coverage of what the corpora reach (the tree's seeds and build/fuzz/corpus/, i.e. what
# `make fuzz` found): the harnesses again without sanitizers, built with clang's source-based
# coverage into build/fuzz-cov/, each replayed once, then llvm-cov's per-file table of the
# gateway and lib sources (agent and lib for fuzz_agent), per harness, into
# build/fuzz-cov/NAME.txt. FUZZ_NAMES=fuzz_agent limits it to one harness.
LLVM_PROFDATA ?= llvm-profdata
LLVM_COV ?= llvm-cov
FUZZ_COV_FLAGS := -fprofile-instr-generate -fcoverage-mapping

fuzz-cov:
	@$(MAKE) --no-print-directory CC=clang BUILD=build/fuzz-cov WERROR=$(WERROR) \
		EXTRA_CFLAGS="$(FUZZ_CFLAGS) $(FUZZ_COV_FLAGS)" \
		EXTRA_LDFLAGS="$(FUZZ_COV_FLAGS)" \
		$(patsubst %,build/fuzz-cov/tests/fuzz/%,$(FUZZ_NAMES))
	@for f in $(FUZZ_NAMES); do \
		rm -f build/fuzz-cov/$$f.profraw; mkdir -p build/fuzz/corpus/$$f; \
		LLVM_PROFILE_FILE=build/fuzz-cov/$$f.profraw build/fuzz-cov/tests/fuzz/$$f -runs=0 \
			build/fuzz/corpus/$$f tests/fuzz/corpus/$$f >build/fuzz-cov/$$f.log 2>&1 || \
			{ echo "fuzz-cov: $$f failed, see build/fuzz-cov/$$f.log"; exit 1; }; \
		$(LLVM_PROFDATA) merge -sparse -o build/fuzz-cov/$$f.profdata build/fuzz-cov/$$f.profraw; \
		dirs="gateway lib"; [ $$f = fuzz_agent ] && dirs="agent lib"; \
		$(LLVM_COV) report build/fuzz-cov/tests/fuzz/$$f -instr-profile=build/fuzz-cov/$$f.profdata \
			$$dirs >build/fuzz-cov/$$f.txt; \
		echo "fuzz-cov: $$f: $$(tail -1 build/fuzz-cov/$$f.txt | awk '{print "lines " $$10 " of " $$8 ", functions " $$7 ", branches " $$13}') (per file: build/fuzz-cov/$$f.txt)"; \
	done
