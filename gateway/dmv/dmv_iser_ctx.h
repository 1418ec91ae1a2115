/* SPDX-License-Identifier: MIT */
/*
 * Letting go of a removed RDMA device.
 *
 * librdmacm opens a verbs context of each device an rdma_cm id lands on and keeps it open in
 * its own device list, after every id on it is gone, until a later refresh of that list finds
 * the device missing (and a refresh with no device left at all fails). A driver that cannot
 * revoke an open context (Soft-RoCE among them) makes the kernel's device removal wait until
 * that file is closed: with the gateway running, `rdma link delete` would hang and the device
 * could never come back. So the iSER datamover tells this module which contexts it uses and
 * which ones rdma_cm reported DEVICE_REMOVAL for; once nothing of the gateway holds a removed
 * context, its two kernel files (command and async event) are swapped for /dev/null in place.
 * librdmacm keeps a context whose descriptors stay valid, closes it on its next refresh, and
 * the kernel finishes the removal. Any of the gateway's loops may call these (they take a lock;
 * none of them runs per I/O).
 */
#ifndef DMV_ISER_CTX_H
#define DMV_ISER_CTX_H

struct ibv_context;

/* Something of the gateway (a device pool, a bound listener) uses verbs. */
void dmv_iser_ctx_hold(struct ibv_context *verbs);
/* It stopped using it: a removed context with no holder left is let go here. */
void dmv_iser_ctx_drop(struct ibv_context *verbs);
/* rdma_cm reported DEVICE_REMOVAL for verbs: let it go once its last holder drops it. */
void dmv_iser_ctx_removed(struct ibv_context *verbs);
/* Removed contexts still held (waiting for their last holder). */
unsigned dmv_iser_ctx_waiting(void);

#endif
