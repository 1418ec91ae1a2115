#!/bin/bash
# The cluster failover stall as the kernel initiator sees it, for `make bench` (tests/bench/run.sh
# runs it after the bond failover; it also runs alone): boots the VM rig once with
# tests/vm/guest/suite-cluster-mpath.sh (etcd, two gateways and their agents, dm-multipath with
# docs/CLUSTER.md's host settings, kill -9 of the owner, then the owner's agent cut from etcd)
# and prints its table: per event, the longest pause between two completed writes and when the
# writes had resumed, with the lease TTL and the host's load average around the run. See
# docs/PERFORMANCE.md, "Cluster failover seen by the kernel initiator".
#
# Environment: BUILD, BENCH_OUT (Markdown output; the section is appended
# [$BUILD/bench-cluster.md when run alone]), VM_* as for tests/vm/run.sh.
set -u
. "$(dirname "$0")/../lib/common.sh"

OUT_MD=${BENCH_OUT:-$T_BUILD/bench-cluster.md}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM_DIR=${VM_DIR:-$ROOT/build/vm}
SHARE=$VM_DIR/run/share

# shellcheck disable=SC2034 # read by tests/lib/common.sh
TARGET=vm
t_begin bench-cluster
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
	skip "cluster stall" "qemu-system-x86_64 is missing (deploy/install-deps.sh test)"
	t_end
fi
rm -f "$SHARE/cluster-mpath.txt"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
"$ROOT/tests/vm/run.sh" cluster-mpath >"$T_DIR/vm.log" 2>&1
vm_rc=$?
load1=$(cut -d' ' -f1-3 /proc/loadavg)
grep -E '^  (ok|FAIL|skip)|^vm:' "$T_DIR/vm.log"
if [ ! -s "$SHARE/cluster-mpath.txt" ]; then
	fail "cluster stall" "the guest wrote no table (exit $vm_rc; see $T_DIR/vm.log and" \
		"$VM_DIR/run/console.log)"
	t_end
fi
{
	echo
	echo "## Cluster failover stall seen by the kernel initiator (VM rig)"
	echo
	echo "Host load average (1, 5, 15 min) before the run: $load0; after: $load1 ($(nproc) CPUs)."
	echo
	echo '```'
	cat "$SHARE/cluster-mpath.txt"
	echo '```'
} | tee -a "$OUT_MD"
if [ "$vm_rc" = 0 ]; then
	pass "cluster stall" "$(grep -cE '^(kill|cut)-' "$SHARE/cluster-mpath.txt") faults measured"
else
	fail "cluster stall" "the VM suite failed (see $T_DIR/vm.log)"
fi
t_end
