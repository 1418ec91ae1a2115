# The VM rig (tests/vm/): what the host kernel cannot do, in a qemu guest on Debian's stock kernel.
#   make test-vm           Soft-RoCE, bonding, kernel iSCSI/iSER initiators vs the gateway and tgtd
#   VM_SUITES="rxe bond"   run only these suites (tests/vm/run.sh lists them)
#   TEST_LOOPS=1           the guest's gateways with two event loops (mk/test.mk, ISERGW_LOOPS)
# The guest runs the release build (build/): sanitizers under full emulation are too slow to be
# worth it, so SANITIZE is ignored here. Cache and logs: build/vm/ (see docs/TESTING.md).

VM_SUITES ?=

.PHONY: test-vm

test-vm: deps
	@$(MAKE) --no-print-directory SANITIZE= all \
		$(patsubst %.c,build/%,$(wildcard tests/tools/*.c))
	@$(call test_loops_env,$(TEST_LOOPS_VM))BUILD=build tests/vm/run.sh $(VM_SUITES)
