// SPDX-License-Identifier: MIT
/*
 * Sessions: identity (initiator name + ISID, TSIH), connections (MC/S up to MaxConnections),
 * the I_T nexus, the session registry (TSIH) and the command window. Commands reach the SCSI
 * core in CmdSN order whatever connection they came on: one ahead of ExpCmdSN waits in
 * `pending` until the gap fills (the queue is isc_task.c's, which calls this file, never the
 * other way round).
 *
 * Window: MaxCmdSN = ExpCmdSN - 1 + (queue_depth - active), where active counts delivered,
 * unanswered commands. Delivering a command moves ExpCmdSN and active together and answering
 * one frees a slot, so MaxCmdSN never goes backwards (initiators ignore it if it did).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

uint32_t isc_session_window(uint32_t queue_depth, uint32_t tp_max, uint32_t moupdu)
{
	uint32_t w = queue_depth ? queue_depth : 1;

	if (tp_max && w > tp_max)
		w = tp_max;
	if (moupdu && w > moupdu)
		w = moupdu;
	return w;
}

int isc_session_check_cmdsn(struct isc_session *s, uint32_t cmdsn)
{
	/* A full window (MaxCmdSN = ExpCmdSN - 1) admits nothing, not even ExpCmdSN. */
	if (pdu_sn_lt(cmdsn, s->exp_cmdsn) || pdu_sn_lt(isc_session_max_cmdsn(s), cmdsn))
		return -1;
	return cmdsn == s->exp_cmdsn ? 1 : 0;
}

/* On loop 0: a removed target whose last session ended on another loop. */
static void isc_target_gone_msg(void *arg)
{
	struct isc_target *t = arg;
	struct isc_gw *gw = t->gw;

	isc_target_destroy(t);
	__atomic_fetch_sub(&gw->msgs, 1, __ATOMIC_RELEASE);
}

static void isc_session_free_deferred(struct gw_defer *d)
{
	struct isc_session *s = gw_container_of(d, struct isc_session, free_defer);
	struct isc_gw *gw = s->gw;
	struct isc_target *t = s->target;
	struct isc_loop *lp = s->lp;
	bool last;

	if (s->nconns || s->ntasks)
		return;
	gw_list_del(&s->lnode);
	if (s->itn)
		scsi_itn_destroy(s->itn);
	if (t)
		gw_info("iscsi", "session 0x%x of %s to %s ended", s->tsih, s->initiator,
			t->conf->name);
	pthread_mutex_lock(&gw->reg_lock);
	gw_list_del(&s->node);
	gw_list_del(&s->tnode);
	isc_session_shares_detach(s);
	last = t && t->removing && gw_list_empty(&t->sessions);
	if (last)
		__atomic_fetch_add(&gw->msgs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&gw->reg_lock);
	free(s);
	if (!last)
		return;
	/* The last session of a target taken out of the configuration takes it along: on loop
	 * 0, which owns the targets. */
	if (lp->loop == gw->loop || gw_loop_send(gw->loop, isc_target_gone_msg, t))
		isc_target_gone_msg(t);
}

void isc_session_maybe_free(struct isc_session *s)
{
	/* Deferred: the caller may still be inside a task or connection of this session. */
	if (!s->nconns && !s->ntasks)
		gw_defer_queue(s->lp->loop, &s->free_defer);
}

static struct isc_mem_share *isc_mem_share_get(struct isc_gw *gw, const char *kind,
					       const char *name)
{
	struct isc_mem_share *m;
	char key[sizeof(m->key)];

	snprintf(key, sizeof(key), "%s %s", kind, name);
	gw_list_for_each_entry(m, &gw->mem_shares, node)
		if (!strcmp(m->key, key)) {
			m->refs++;
			return m;
		}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	memcpy(m->key, key, sizeof(key));
	m->refs = 1;
	gw_list_add_tail(&gw->mem_shares, &m->node);
	return m;
}

int isc_session_shares_attach(struct isc_session *s, const char *peer)
{
	struct isc_gw *gw = s->gw;
	char addr[ISC_NAME_MAX + 1];
	const char *colon = strrchr(peer, ':');
	size_t n = colon ? (size_t)(colon - peer) : strlen(peer);

	/* The address without its port: every connection from it is one source. */
	if (n >= sizeof(addr))
		n = sizeof(addr) - 1;
	memcpy(addr, peer, n);
	addr[n] = '\0';
	pthread_mutex_lock(&gw->reg_lock);
	s->shares[0] = isc_mem_share_get(gw, "initiator", s->initiator);
	s->shares[1] = isc_mem_share_get(gw, "address", addr);
	pthread_mutex_unlock(&gw->reg_lock);
	return s->shares[0] && s->shares[1] ? 0 : -ENOMEM;
}

void isc_session_shares_detach(struct isc_session *s)
{
	for (int i = 0; i < 2; i++) {
		struct isc_mem_share *m = s->shares[i];

		s->shares[i] = NULL;
		if (!m || --m->refs)
			continue;
		gw_list_del(&m->node);
		free(m);
	}
}

uint64_t isc_session_share_bytes(const struct isc_session *s, int i)
{
	return s->shares[i] ? __atomic_load_n(&s->shares[i]->bytes, __ATOMIC_RELAXED) : 0;
}

/* Adds delta (negative: gives back) to the session's initiator and address shares; a delta
 * that takes either past share is taken back whole: -EBUSY. */
int isc_session_shares_charge(struct isc_session *s, int64_t delta, uint64_t share)
{
	for (int i = 0; i < 2; i++) {
		struct isc_mem_share *m = s->shares[i];

		if (!m)
			continue;
		if (__atomic_add_fetch(&m->bytes, (uint64_t)delta, __ATOMIC_RELAXED) <= share ||
		    delta <= 0 || !share)
			continue;
		while (i >= 0) {
			if (s->shares[i])
				__atomic_sub_fetch(&s->shares[i]->bytes, (uint64_t)delta,
						   __ATOMIC_RELAXED);
			i--;
		}
		return -EBUSY;
	}
	return 0;
}

/* Under reg_lock. */
static bool isc_tsih_used(struct isc_gw *gw, uint16_t tsih)
{
	struct isc_session *s;

	gw_list_for_each_entry(s, &gw->sessions, node)
		if (s->tsih == tsih)
			return true;
	return false;
}

int isc_session_create(struct isc_gw *gw, struct isc_loop *lp, struct isc_target *t,
		       const uint8_t isid[6], const char *initiator,
		       const struct isc_params *params, uint32_t cmdsn, struct isc_session **out)
{
	struct isc_session *s = calloc(1, sizeof(*s));
	char iport[ISC_NAME_MAX + 32];
	int tries;

	if (!s)
		return -ENOMEM;
	s->gw = gw;
	s->lp = lp;
	s->target = t;
	s->params = *params;
	memcpy(s->isid, isid, 6);
	snprintf(s->initiator, sizeof(s->initiator), "%s", initiator);
	gw_list_init(&s->conns);
	gw_list_init(&s->pending);
	gw_list_init(&s->tnode);
	gw_list_init(&s->node);
	gw_defer_init(&s->free_defer, isc_session_free_deferred);
	s->exp_cmdsn = cmdsn;
	s->login_ms = lp->loop->now_ms;
	s->queue_depth = t ? t->conf->params.queue_depth : 16;
	if (!s->queue_depth)
		s->queue_depth = 1;
	if (t) {
		s->tpgt = (uint16_t)t->conf->tpgt;
		snprintf(iport, sizeof(iport), "%s,i,0x%02x%02x%02x%02x%02x%02x", initiator,
			 isid[0], isid[1], isid[2], isid[3], isid[4], isid[5]);
		s->itn = scsi_itn_create(t->dev, t->port, iport, initiator);
		if (!s->itn) {
			free(s);
			return -ENOMEM;
		}
	}
	/* The registry: TSIH 0 is reserved; skip values still in use after a wrap. */
	pthread_mutex_lock(&gw->reg_lock);
	for (tries = 0; tries < 65536; tries++) {
		if (gw->next_tsih == 0)
			gw->next_tsih = 1;
		if (!isc_tsih_used(gw, gw->next_tsih))
			break;
		gw->next_tsih++;
	}
	s->tsih = gw->next_tsih++;
	if (t)
		gw_list_add_tail(&t->sessions, &s->tnode);
	gw_list_add_tail(&gw->sessions, &s->node);
	pthread_mutex_unlock(&gw->reg_lock);
	gw_list_add_tail(&lp->sessions, &s->lnode);
	*out = s;
	return 0;
}

struct isc_session *isc_session_find(struct isc_gw *gw, struct isc_loop *lp,
				     const char *initiator, const uint8_t isid[6], uint16_t tsih,
				     struct isc_session_ref *ref)
{
	struct isc_session *s, *found = NULL;

	memset(ref, 0, sizeof(*ref));
	pthread_mutex_lock(&gw->reg_lock);
	gw_list_for_each_entry(s, &gw->sessions, node) {
		if (s->closing || memcmp(s->isid, isid, 6) || strcmp(s->initiator, initiator))
			continue;
		if (tsih && s->tsih != tsih)
			continue;
		ref->lp = s->lp;
		ref->tsih = s->tsih;
		ref->target = s->target;
		if (s->lp == lp)
			found = s;
		break;
	}
	pthread_mutex_unlock(&gw->reg_lock);
	return found;
}

/* On the session's loop: its TSIH's session there (or every session of target), if alive. */
struct isc_close_msg {
	const struct isc_target *target;	/* compared, never read (NULL: by tsih) */
	uint16_t tsih;
	const char *why;
};

static void isc_close_walk(struct isc_loop *lp, const void *arg)
{
	const struct isc_close_msg *m = arg;
	struct isc_session *s, *tmp;

	gw_list_for_each_entry_safe(s, tmp, &lp->sessions, lnode) {
		if (s->closing)
			continue;
		if (m->target ? s->target == m->target : s->tsih == m->tsih)
			isc_session_close(s, m->why);
	}
}

static void isc_close_on(struct isc_gw *gw, struct isc_loop *lp, const struct isc_target *target,
			 uint16_t tsih, const char *why)
{
	struct isc_close_msg m = { target, tsih, why };

	if (isc_gw_on_loop(gw, lp, isc_close_walk, &m, sizeof(m)) == -ENOMEM)
		gw_err("iscsi", "out of memory closing session 0x%x on loop %u", tsih, lp->idx);
}

void isc_loop_close_session(struct isc_loop *lp, uint16_t tsih, const char *why)
{
	struct isc_close_msg here = { NULL, tsih, why };

	isc_close_walk(lp, &here);
}

void isc_session_close_on(struct isc_gw *gw, struct isc_loop *lp, uint16_t tsih,
			  const char *why)
{
	isc_close_on(gw, lp, NULL, tsih, why);
}

void isc_target_close_sessions(struct isc_target *t, const char *why)
{
	struct isc_gw *gw = t->gw;

	for (unsigned i = 0; i < isc_gw_nloops(gw); i++)
		isc_close_on(gw, &gw->lps[i], t, 0, why);
}

void isc_session_add_conn(struct isc_session *s, struct isc_conn *c)
{
	gw_list_del(&c->node);
	gw_list_add_tail(&s->conns, &c->node);
	s->nconns++;
	c->sess = s;
}

void isc_session_del_conn(struct isc_session *s, struct isc_conn *c)
{
	(void)c;
	s->nconns--;
	/* ErrorRecoveryLevel 0: a session whose last connection is gone has failed; what it
	 * still holds is released as its commands come back from the SCSI core. */
	if (!s->nconns) {
		pthread_mutex_lock(&s->gw->reg_lock);
		s->closing = true;
		pthread_mutex_unlock(&s->gw->reg_lock);
		if (s->itn)
			scsi_itn_nexus_loss(s->itn);
	}
	isc_session_maybe_free(s);
}

void isc_session_close(struct isc_session *s, const char *why)
{
	pthread_mutex_lock(&s->gw->reg_lock);
	s->closing = true;
	pthread_mutex_unlock(&s->gw->reg_lock);
	while (!gw_list_empty(&s->conns)) {
		struct isc_conn *c = gw_list_first_entry(&s->conns, struct isc_conn, node);

		isc_conn_close(c, why);
	}
	isc_session_maybe_free(s);
}
