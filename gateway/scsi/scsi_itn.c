// SPDX-License-Identifier: MIT
/*
 * I_T nexuses and what the core keeps of them: their life (created by the transport at login,
 * forgotten by every loop's LUs and freed at session end), their relative port id, their view
 * of each LU (struct scsi_itl) and its pending unit attentions: set by whoever changes what a
 * nexus must hear of, taken by the dispatcher and REQUEST SENSE, in SAM's reporting order.
 *
 * Calls only below it: the LUN map (scsi_lun.c; an attention for every nexus of an LU is set
 * on the LU's owner) and the sense helper (scsi_reply.c).
 */
#include <stdlib.h>
#include <string.h>

#include "scsi_priv.h"

void scsi_itn_dev_init(struct scsi_dev *dev)
{
	pthread_mutex_init(&dev->itn_lock, NULL);
	gw_list_init(&dev->itns);
	dev->next_itn_id = 1;
}

struct scsi_itn *scsi_itn_create(struct scsi_dev *dev, struct scsi_port *port,
				 const char *initiator_port, const char *initiator_name)
{
	struct scsi_itn *itn = calloc(1, sizeof(*itn));
	struct scsi_itn_state *st = calloc(1, sizeof(*st));

	if (!itn || !st)
		goto fail;
	itn->initiator = strdup(initiator_port ? initiator_port : "");
	itn->initiator_name = strdup(initiator_name ? initiator_name : "");
	if (!itn->initiator || !itn->initiator_name)
		goto fail;
	itn->ua = st;
	itn->dev = dev;
	itn->port = port;
	pthread_mutex_lock(&dev->itn_lock);
	itn->id = dev->next_itn_id++;
	gw_list_add_tail(&dev->itns, &itn->node);
	pthread_mutex_unlock(&dev->itn_lock);
	return itn;
fail:
	if (itn) {
		free(itn->initiator);
		free(itn->initiator_name);
	}
	free(itn);
	free(st);
	return NULL;
}

static void scsi_itn_forget_lu(struct scsi_itn *itn, struct scsi_lu *lu)
{
	struct scsi_itl *itl, *t;

	if (lu->res2_holder == itn)
		lu->res2_holder = NULL;
	gw_list_for_each_entry_safe(itl, t, &lu->itls, lu_node) {
		if (itl->itn != itn)
			continue;
		gw_list_del(&itl->lu_node);
		free(itl);
	}
}

/* Drops what the LUs keep of the nexus: of every LU in lus (all), or of the current loop's
 * LUs in the published map (lus NULL). */
static void scsi_itn_forget(struct scsi_itn *itn, struct gw_list *lus, bool all)
{
	const struct scsi_lun_map *map;
	struct gw_loop *here = gw_loop_current();
	struct scsi_lu *lu;

	if (lus) {
		gw_list_for_each_entry(lu, lus, node)
			if (all || lu->loop == here)
				scsi_itn_forget_lu(itn, lu);
		return;
	}
	map = scsi_dev_map(itn->dev);
	for (size_t i = 0; map && i < map->n; i++)
		if (map->e[i].lu->loop == here)
			scsi_itn_forget_lu(itn, map->e[i].lu);
}

static void scsi_itn_free(struct scsi_itn *itn)
{
	free(itn->initiator);
	free(itn->initiator_name);
	free(itn->ua);
	free(itn);
}

static void scsi_itn_forget_fn(void *arg)
{
	struct scsi_itn *itn = arg;
	struct scsi_itn_state *st = itn->ua;

	scsi_itn_forget(itn, NULL, false);
	if (__atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) == 0)
		scsi_itn_free(itn);
}

/*
 * From the nexus's loop (the session's). Without loops, at once. With loops, every loop
 * forgets it for the LUs it owns, by a message each (behind the nexus loss the same loop
 * posted before), and the last one frees it: no owner keeps a pointer to a freed nexus.
 */
void scsi_itn_destroy(struct scsi_itn *itn)
{
	struct scsi_dev *dev;
	struct scsi_itn_state *st;

	if (!itn)
		return;
	dev = itn->dev;
	st = itn->ua;
	pthread_mutex_lock(&dev->itn_lock);
	gw_list_del(&itn->node);
	pthread_mutex_unlock(&dev->itn_lock);
	if (!dev->loops) {
		scsi_itn_forget(itn, &dev->lus, true);
		scsi_itn_free(itn);
		return;
	}
	__atomic_store_n(&st->refs, dev->loops->n, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < dev->loops->n; i++)
		if (gw_loop_send(dev->loops->loop[i], scsi_itn_forget_fn, itn) < 0 &&
		    __atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) == 0)
			scsi_itn_free(itn);	/* a finished loop has no LU left to forget */
}

/* The device's loop, the loops stopped: every nexus still open is forgotten at once. */
void scsi_itn_dev_fini(struct scsi_dev *dev)
{
	struct scsi_itn *itn, *it;

	gw_list_for_each_entry_safe(itn, it, &dev->itns, node) {
		gw_list_del(&itn->node);
		scsi_itn_forget(itn, &dev->lus, true);
		scsi_itn_free(itn);
	}
	pthread_mutex_destroy(&dev->itn_lock);
}

void scsi_itn_luns_changed(struct scsi_dev *dev)
{
	struct scsi_itn *itn;

	pthread_mutex_lock(&dev->itn_lock);
	gw_list_for_each_entry(itn, &dev->itns, node) {
		struct scsi_itn_state *st = itn->ua;

		__atomic_store_n(&st->luns_changed, true, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&dev->itn_lock);
}

uint16_t scsi_itn_rel_id(const struct scsi_itn *itn)
{
	/* Changed by the device's loop when a cluster's groups renumber its ports. */
	return itn && itn->port ? __atomic_load_n(&itn->port->rel_id, __ATOMIC_RELAXED) : 0;
}

struct scsi_itl *scsi_itl_get(struct scsi_itn *itn, struct scsi_lu *lu)
{
	struct scsi_itl *itl;

	/* The LU's list, not the nexus's: LUs of other loops add to theirs at the same time. */
	gw_list_for_each_entry(itl, &lu->itls, lu_node)
		if (itl->itn == itn)
			return itl;
	itl = calloc(1, sizeof(*itl));
	if (!itl)
		return NULL;
	itl->itn = itn;
	itl->lu = lu;
	/* First contact between this nexus and this LU: as after power on (SAM-5 6.3.1). */
	itl->ua = 1u << SCSI_UA_POWER_ON;
	gw_list_add_tail(&lu->itls, &itl->lu_node);
	return itl;
}

/* The LU's owner, the LU going: what every nexus kept of it. */
void scsi_itl_free_all(struct scsi_lu *lu)
{
	struct scsi_itl *itl, *t;

	gw_list_for_each_entry_safe(itl, t, &lu->itls, lu_node) {
		gw_list_del(&itl->lu_node);
		free(itl);
	}
}

void scsi_ua_set(struct scsi_lu *lu, struct scsi_itn *except, int ua)
{
	struct scsi_itl *itl;

	gw_list_for_each_entry(itl, &lu->itls, lu_node)
		if (itl->itn != except)
			itl->ua |= 1u << ua;
}

void scsi_ua_set_itn(struct scsi_itn *itn, struct scsi_lu *lu, int ua)
{
	struct scsi_itl *itl = scsi_itl_get(itn, lu);

	if (itl)
		itl->ua |= 1u << ua;
}

static void scsi_ua_set_all_fn(struct scsi_lu *lu, int ua, void *p)
{
	(void)p;
	scsi_ua_set(lu, NULL, ua);
}

void scsi_ua_set_all(struct scsi_lu *lu, int ua)
{
	scsi_lu_on_owner(lu, scsi_ua_set_all_fn, ua, NULL);
}

static const uint8_t scsi_ua_sense[SCSI_UA_NR][2] = {
	[SCSI_UA_POWER_ON] = { 0x29, 0x00 },
	[SCSI_UA_POWER_ON_OCCURRED] = { 0x29, 0x01 },
	[SCSI_UA_BDR] = { 0x29, 0x03 },
	[SCSI_UA_NEXUS_LOSS] = { 0x29, 0x07 },
	[SCSI_UA_MODE_CHANGED] = { 0x2a, 0x01 },
	[SCSI_UA_RES_PREEMPTED] = { 0x2a, 0x03 },
	[SCSI_UA_RES_RELEASED] = { 0x2a, 0x04 },
	[SCSI_UA_REG_PREEMPTED] = { 0x2a, 0x05 },
	[SCSI_UA_ALUA_CHANGED] = { 0x2a, 0x06 },
	[SCSI_UA_CAPACITY] = { 0x2a, 0x09 },
	[SCSI_UA_LUNS_CHANGED] = { 0x3f, 0x0e },
};

#define SCSI_UA_RESET_MASK ((1u << SCSI_UA_POWER_ON) | (1u << SCSI_UA_POWER_ON_OCCURRED) | \
			    (1u << SCSI_UA_BDR) | (1u << SCSI_UA_NEXUS_LOSS))

bool scsi_ua_take(struct scsi_cmd *cmd, struct scsi_itl *itl)
{
	struct scsi_itn_state *st = itl->itn->ua;
	int ua;

	if (itl->ua)
		ua = __builtin_ctz(itl->ua);
	else if (__atomic_exchange_n(&st->luns_changed, false, __ATOMIC_RELAXED))
		ua = SCSI_UA_LUNS_CHANGED;	/* reported once, through whichever LU asks first */
	else
		return false;
	scsi_cmd_set_sense(cmd, SCSI_SK_UNIT_ATTENTION, scsi_ua_sense[ua][0], scsi_ua_sense[ua][1]);
	if ((1u << ua) & SCSI_UA_RESET_MASK)
		itl->ua &= ~SCSI_UA_RESET_MASK;	/* one reset report covers them all */
	else
		itl->ua &= ~(1u << ua);	/* (LUNS CHANGED was never in itl->ua) */
	return true;
}
