#!/bin/bash
# rxe: the RDMA plumbing the iSER datamover stands on. Loads Soft-RoCE (rdma_rxe), puts an rxe
# device on a veth inside the guest, and checks that the RDMA tools see it the way the gateway
# will: `rdma link` reports it ACTIVE on its netdev, libibverbs lists it, its GID table carries
# the netdev's address (RoCE v2), and rdma_cm connects and moves data over it (rping).
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin rxe

ADDR=10.200.1.1

if ! vm_need rdma ibv_devices ibv_devinfo rping; then
	skip all "$VM_MISSING is not installed (rdma-core, ibverbs-utils, rdmacm-utils)"
	vm_end
fi
if ! vm_modprobe rdma_rxe ib_uverbs rdma_ucm; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi
pass modules "rdma_rxe ib_uverbs rdma_ucm"

if ! vm_veth vr0 "$ADDR" || ! check link-add vm_rxe_add rxe0 vr0; then
	fail setup "no rxe device on vr0; nothing else can run"
	vm_end
fi

link=$(rdma link show rxe0/1 2>&1)
echo "$link"
case "$link" in
*"state ACTIVE"*"netdev vr0"*) pass link-show "$link" ;;
*) fail link-show "rdma link show rxe0/1: $link" ;;
esac

devs=$(ibv_devices 2>&1)
echo "$devs"
if printf '%s\n' "$devs" | grep -qw rxe0; then
	pass ibv-devices "libibverbs lists rxe0"
else
	fail ibv-devices "ibv_devices does not list rxe0: $devs"
fi

ibv_devinfo -d rxe0 -v 2>&1 | grep -E 'transport|state|active_mtu|GID\['
if vm_rxe_has_gid rxe0 "$ADDR"; then
	pass gid "GID ::ffff:$ADDR present"
else
	fail gid "no GID for $ADDR in ibv_devinfo -d rxe0 -v"
fi

# One rxe device carries both ends: rxe in 6.1 receives only in the root network namespace,
# so a second device or namespace in the same guest could not talk to this one anyway.
if vm_rping "$ADDR" 20; then
	pass rping "$VM_RPING_COUNT ping-pongs over rdma_cm on $ADDR"
else
	fail rping "rping over rxe0 failed: $(tail -n 2 "$VM_WORK/rping-c.7174.log")"
fi
vm_end
