# tests/vm/guest/lib-tgt.sh: sourced after lib.sh by suites that need tgtd serving a LUN over
# iSER on an rxe device (tgt-iser, remote-iser, bench-iser). tgt 1.0.85's quirks live here
# once: its own control port, the per-initiator bind an iSER login needs, a wait for its
# rdma_cm listener, and a stop by deleting its target (it ignores SIGTERM while it has one).
# shellcheck shell=bash

VM_TGT_PID=
VM_TGT_CTL=${VM_TGT_CTL:-58}

vm_tgtadm() {
	timeout 20 tgtadm -C "$VM_TGT_CTL" --lld iser "$@"
}

vm_tgt_stop() {
	[ -n "$VM_TGT_PID" ] || return 0
	vm_tgtadm --op delete --force --mode target --tid 1 >/dev/null 2>&1
	timeout 20 tgtadm -C "$VM_TGT_CTL" --lld iscsi --op delete --force --mode target --tid 2 \
		>/dev/null 2>&1
	kill -TERM "$VM_TGT_PID" 2>/dev/null
	timeout 10 tail --pid="$VM_TGT_PID" -f /dev/null
	kill -KILL "$VM_TGT_PID" 2>/dev/null
	wait "$VM_TGT_PID" 2>/dev/null
	VM_TGT_PID=
	return 0
}

# vm_tgt_add_tcp IQN BACKING: a second target (tid 2) on tgtd's iSCSI/TCP portal serving the
# same file: tgt keeps each transport's targets apart, and this one reads the back end
# without iSER in between.
vm_tgt_add_tcp() {
	local iqn=$1 img=$2 a
	a=(timeout 20 tgtadm -C "$VM_TGT_CTL" --lld iscsi)
	"${a[@]}" --op new --mode target --tid 2 -T "$iqn" &&
		"${a[@]}" --op new --mode logicalunit --tid 2 --lun 1 -b "$img" &&
		"${a[@]}" --op bind --mode target --tid 2 -I ALL
}

# vm_tgt_start IQN BACKING TCP_PORTAL INITIATOR...: tgtd (iSER on every RDMA address, port
# 3260; iSCSI/TCP on TCP_PORTAL) with LUN 1 on BACKING, bound to ALL and to each INITIATOR
# by name (tgt 1.0.85 refuses iSER logins of names not bound). Waits for the rdma_cm listener.
vm_tgt_start() {
	local iqn=$1 img=$2 portal=$3 q
	shift 3
	tgtd -f -C "$VM_TGT_CTL" --iscsi "portal=$portal" >"$VM_WORK/tgtd.log" 2>&1 &
	VM_TGT_PID=$!
	vm_on_exit vm_tgt_stop
	for _ in $(seq 1 50); do
		timeout 5 tgtadm -C "$VM_TGT_CTL" --op show --mode sys >/dev/null 2>&1 && break
		kill -0 "$VM_TGT_PID" 2>/dev/null || {
			cat "$VM_WORK/tgtd.log"
			return 1
		}
		sleep 0.2
	done
	vm_tgtadm --op new --mode target --tid 1 -T "$iqn" || return 1
	vm_tgtadm --op new --mode logicalunit --tid 1 --lun 1 -b "$img" || return 1
	vm_tgtadm --op bind --mode target --tid 1 -I ALL || return 1
	for q in "$@"; do
		vm_tgtadm --op bind --mode target --tid 1 -Q "$q" || return 1
	done
	for _ in $(seq 1 50); do
		rdma resource show cm_id 2>/dev/null | grep -q 'LISTEN.*tgtd.*:3260' && return 0
		sleep 0.2
	done
	echo "tgtd has no listening rdma_cm id on port 3260:"
	rdma resource show cm_id
	tail -n 5 "$VM_WORK/tgtd.log"
	return 1
}
