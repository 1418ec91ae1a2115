# Fuzzing with libFuzzer (clang):
#   make fuzz              build every tests/fuzz/fuzz_*.c and run each for FUZZ_SECONDS (60)
#   make fuzz-regress      replay each fuzzer's seed corpus once (part of test-unit's sanitized run)
# Fuzzers build the whole tree with clang into build/fuzz/ with ASan+UBSan.

FUZZ_SECONDS ?= 60
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRC))
# fuzz_login_keys drives the iSCSI key parser, a private header of gateway/iscsi/.
FUZZ_INC := -Igateway/iscsi

.PHONY: fuzz fuzz-build fuzz-regress

fuzz-build:
	@$(MAKE) --no-print-directory CC=clang BUILD=build/fuzz WERROR=$(WERROR) \
		SANITIZE=address,undefined EXTRA_CFLAGS=-fsanitize=fuzzer-no-link \
		$(patsubst %,build/fuzz/tests/fuzz/%,$(FUZZ_NAMES))

build/fuzz/tests/fuzz/%: tests/fuzz/%.c $(LIBGWD) $(LIBGWCONF) $(LIBGW)
	@mkdir -p $(dir $@)
	$(call say,FUZZ,$@)$(CC) $(filter-out -MMD -MP,$(CFLAGS)) $(FUZZ_INC) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(filter %.a,$^) $(LDLIBS)

fuzz: fuzz-build
	@for f in $(FUZZ_NAMES); do \
		mkdir -p build/fuzz/corpus/$$f; \
		echo "fuzz: $$f for $(FUZZ_SECONDS) s"; \
		build/fuzz/tests/fuzz/$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			build/fuzz/corpus/$$f tests/fuzz/corpus/$$f || exit 1; \
	done

fuzz-regress: fuzz-build
	@pass=0; fail=0; for f in $(FUZZ_NAMES); do \
		if build/fuzz/tests/fuzz/$$f -runs=0 tests/fuzz/corpus/$$f >build/fuzz/$$f.log 2>&1; \
		then pass=$$((pass + 1)); else fail=$$((fail + 1)); tail -20 build/fuzz/$$f.log; fi; \
	done; echo "fuzz-regress: $$pass passed, $$fail failed"; [ $$fail -eq 0 ]
