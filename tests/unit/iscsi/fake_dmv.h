/* SPDX-License-Identifier: MIT */
/*
 * A fake in-memory datamover for unit tests of the iSCSI layer: tests inject initiator PDUs
 * (fake_dmv_rx) and read back what the target sent (fake_dmv_pop), with no sockets. Put_Data
 * builds Data-In PDUs (status collapsed when there is no sense) and Get_Data sends R2Ts the way
 * a transport does; both complete through deferred work, so tests run the loop
 * (fake_dmv_settle) between steps.
 *
 * Linked into every unit binary: it references no iSCSI-engine symbol, only PDUs, the shared
 * Data-Out code (dmv_core.c) and the loop, so it never drags engine objects into other tests.
 */
#ifndef FAKE_DMV_H
#define FAKE_DMV_H

#include <stdbool.h>
#include <stdint.h>

#include "dmv.h"

struct fake_conn {
	struct dmv_conn base;
	struct gw_list sent;		/* PDUs the target sent, oldest first */
	unsigned int nsent;
	bool closed;
	unsigned int puts, gets, aborts;
};

extern const struct dmv_transport fake_dmv_transport;
/* The same, lending task buffers (buf_get/buf_put) as iSER does: set a connection's base.tp to
 * it. fake_lend counts what was lent; buffers over max_len, or past max_out, are refused. */
extern const struct dmv_transport fake_dmv_lend_transport;
struct fake_lend {
	uint32_t max_len, max_out;
	unsigned int gets, puts, out;
	void *last;			/* the last buffer lent */
};
extern struct fake_lend fake_lend;

struct dmv_portal *fake_dmv_portal_new(struct gw_loop *loop, struct pdu_pool *pool);
/* A new connection: the portal's accept callback runs. */
struct fake_conn *fake_dmv_connect(struct dmv_portal *dp);
/* The same, as if the portal had handed the connection to loop (its PDUs from pool). */
struct fake_conn *fake_dmv_connect_on(struct dmv_portal *dp, struct gw_loop *loop,
				      struct pdu_pool *pool);
/* Delivers one initiator PDU as a transport would (Data-Out through the shared code). */
void fake_dmv_rx(struct fake_conn *c, const uint8_t *bhs, const void *data, uint32_t len);
/* The oldest PDU the target sent (caller puts it), or NULL. */
struct pdu *fake_dmv_pop(struct fake_conn *c);
/* Drops everything sent so far. */
void fake_dmv_drain(struct fake_conn *c);
/* Runs the loop until nothing is pending (bounded). */
void fake_dmv_settle(struct gw_loop *loop);
/* The connection dies under the iSCSI layer (lost up-call). */
void fake_dmv_lose(struct fake_conn *c);
/* Frees the fake connection (after the iSCSI layer closed it). */
void fake_dmv_conn_free(struct fake_conn *c);

/* Helpers to build initiator BHSs. */
void fake_bhs(uint8_t *bhs, uint8_t opcode, uint8_t flags, uint32_t itt);

#endif
