#!/bin/bash
# The bond failover stall of `make bench` (tests/bench/run.sh runs it after the iSER rows; it
# also runs alone): boots the VM rig once with tests/vm/guest/suite-bond-failover.sh at 20
# failovers per fail_over_mac setting (make test runs 6 with active, 2 with none), and prints its
# stall table (each failover's stall from the link event to the first write completed again,
# in parts, then the median and max), for fail_over_mac=active and for none. See
# docs/PERFORMANCE.md, "Bond failover".
#
# Environment: BUILD, BENCH_FAILOVERS (failovers per run [20]), BENCH_OUT (Markdown output;
# the section is appended [$BUILD/bench-failover.md when run alone]), VM_* as for
# tests/vm/run.sh.
set -u
. "$(dirname "$0")/../lib/common.sh"

BENCH_FAILOVERS=${BENCH_FAILOVERS:-20}
OUT_MD=${BENCH_OUT:-$T_BUILD/bench-failover.md}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM_DIR=${VM_DIR:-$ROOT/build/vm}
SHARE=$VM_DIR/run/share

# shellcheck disable=SC2034 # read by tests/lib/common.sh
TARGET=vm
t_begin bench-failover
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
	skip "failover stall" "qemu-system-x86_64 is missing (deploy/install-deps.sh test)"
	t_end
fi
rm -f "$SHARE/bond-failover.txt"
# The guest reads its settings from the build tree (it sees the host's files, not its
# environment); make test's runs must not inherit them.
printf 'FAILOVERS=%d\nFAILOVERS_NONE=%d\n' "$BENCH_FAILOVERS" "$BENCH_FAILOVERS" \
	>"$T_BUILD/bond-failover.env"
VM_SUITE_TIMEOUT=${VM_SUITE_TIMEOUT:-900} "$ROOT/tests/vm/run.sh" bond-failover >"$T_DIR/vm.log" 2>&1
vm_rc=$?
rm -f "$T_BUILD/bond-failover.env"
grep -E '^  (PASS|FAIL|SKIP)|^vm:' "$T_DIR/vm.log"
if [ ! -s "$SHARE/bond-failover.txt" ]; then
	fail "failover stall" "the guest wrote no table (exit $vm_rc; see $T_DIR/vm.log and" \
		"$VM_DIR/run/console.log)"
	t_end
fi
{
	echo
	echo "## Bond failover stall (VM rig, $BENCH_FAILOVERS failovers per run)"
	echo
	echo '```'
	cat "$SHARE/bond-failover.txt"
	echo '```'
} | tee -a "$OUT_MD"
if [ "$vm_rc" = 0 ]; then
	pass "failover stall" "$(grep -c '^median' "$SHARE/bond-failover.txt") runs measured"
else
	fail "failover stall" "the VM suite failed (see $T_DIR/vm.log)"
fi
t_end
