// SPDX-License-Identifier: MIT
/*
 * Multipath policy, as pure functions of path and LUN state: what a back end's answer means
 * (done, pass through to the host, retry, or a failed path), ALUA priorities, path groups and
 * the group in use (failover at once, failback by policy), the path selectors, and the backoff
 * arithmetic. No I/O here, so the unit tests drive all of it with fake paths.
 */
#include <limits.h>
#include <stddef.h>

#include "gw_sam.h"
#include "mp_priv.h"

/*
 * The table behind failover. What the LU says about the data or the command (media errors,
 * illegal requests, miscompares, write protection, reservations) is the host's to see; what
 * says "not through this port" fails the path; what says "not now" is retried.
 */
enum mp_verdict mp_classify(uint8_t status, uint8_t key, uint8_t asc, uint8_t ascq)
{
	switch (status) {
	case GW_SAM_GOOD:
	case GW_SAM_CONDITION_MET:
		return MP_V_OK;
	case GW_SAM_BUSY:
	case GW_SAM_TASK_SET_FULL:
	case GW_SAM_TASK_ABORTED:	/* aborted by another nexus's task management: again */
		return MP_V_RETRY;
	case GW_SAM_RESERVATION_CONFLICT:
	case GW_SAM_ACA_ACTIVE:
		return MP_V_PASS;
	case GW_SAM_CHECK_CONDITION:
		break;
	default:
		return MP_V_PATH;	/* not a SAM status: the session is confused */
	}
	switch (key) {
	case GW_SAM_SK_RECOVERED_ERROR:
		return MP_V_OK;
	case GW_SAM_SK_NO_SENSE:
	case GW_SAM_SK_UNIT_ATTENTION:
		return MP_V_RETRY;
	case GW_SAM_SK_NOT_READY:
		if (asc == GW_SAM_ASC_NOT_READY &&
		    (ascq == GW_SAM_ASCQ_STANDBY || ascq == GW_SAM_ASCQ_UNAVAILABLE))
			return MP_V_PATH;	/* target port in standby / unavailable state */
		if (asc == GW_SAM_ASC_NOT_READY && ascq == GW_SAM_ASCQ_MANUAL_INTERVENTION)
			return MP_V_PASS;	/* manual intervention required */
		if (asc == GW_SAM_ASC_NO_MEDIUM)
			return MP_V_PASS;	/* medium not present */
		return MP_V_RETRY;		/* becoming ready, ALUA transitioning, ... */
	case GW_SAM_SK_ILLEGAL_REQUEST:
		if (asc == GW_SAM_ASC_LUN_NOT_SUPPORTED && ascq == 0x00)
			return MP_V_PATH;	/* LUN not supported: this port lost it */
		return MP_V_PASS;
	case GW_SAM_SK_ABORTED_COMMAND:
		if (asc == GW_SAM_ASC_PROTECTION)
			return MP_V_PASS;	/* protection information check failed */
		return MP_V_RETRY;		/* prefers another path */
	case GW_SAM_SK_MEDIUM_ERROR:
	case GW_SAM_SK_HARDWARE_ERROR:
	case GW_SAM_SK_DATA_PROTECT:
	case GW_SAM_SK_MISCOMPARE:
	default:
		return MP_V_PASS;
	}
}

const char *mp_verdict_name(enum mp_verdict v)
{
	switch (v) {
	case MP_V_OK:
		return "ok";
	case MP_V_PASS:
		return "pass";
	case MP_V_RETRY:
		return "retry";
	case MP_V_PATH:
		return "path";
	}
	return "?";
}

uint64_t mp_retry_delay_ms(uint32_t n, uint8_t status, uint8_t key)
{
	uint64_t d;

	/* A unit attention is reported once: the next try will not see it. */
	if (status == GW_SAM_CHECK_CONDITION && key == GW_SAM_SK_UNIT_ATTENTION && n < 3)
		return 0;
	d = 20ull << (n < 6 ? n : 6);
	return d > 1000 ? 1000 : d;
}

uint8_t mp_alua_prio(int alua_state)
{
	switch (alua_state) {
	case 0x0:
		return MP_PRIO_AO;
	case 0x1:
		return MP_PRIO_ANO;
	default:
		return MP_PRIO_OTHER;
	}
}

const char *mp_alua_state_name(int s)
{
	switch (s) {
	case 0x0:
		return "active/optimized";
	case 0x1:
		return "active/non-optimized";
	case 0x2:
		return "standby";
	case 0x3:
		return "unavailable";
	case 0xe:
		return "offline";
	case 0xf:
		return "transitioning";
	case -1:
		return "none";
	}
	return "?";
}

int mp_path_rank(const struct mp_lun *lun, const struct mp_path *p)
{
	switch (lun->conf.pg_policy) {
	case MP_PG_FAILOVER:
		return (int)p->idx;
	case MP_PG_MULTIBUS:
		return 0;
	case MP_PG_GROUP_BY_PRIO:
	default:
		return 256 - p->prio;
	}
}

bool mp_path_usable(const struct mp_path *p)
{
	/* A path aborting commands gets nothing new until it knows what became of them. */
	return p->state == MP_PATH_ACTIVE && p->tmf == MP_TMF_NONE;
}

bool mp_path_has_room(const struct mp_path *p)
{
	return !p->max_inflight || p->nr_inflight < p->max_inflight;
}

int mp_best_rank(const struct mp_lun *lun)
{
	int best = INT_MAX;

	for (size_t i = 0; i < lun->npaths; i++) {
		const struct mp_path *p = &lun->paths[i];
		int r;

		if (!mp_path_usable(p))
			continue;
		r = mp_path_rank(lun, p);
		if (r < best)
			best = r;
	}
	return best;
}

static bool mp_group_usable(const struct mp_lun *lun, int rank)
{
	for (size_t i = 0; i < lun->npaths; i++)
		if (mp_path_usable(&lun->paths[i]) && mp_path_rank(lun, &lun->paths[i]) == rank)
			return true;
	return false;
}

bool mp_update_group(struct mp_lun *lun, uint64_t now_ms)
{
	int best = mp_best_rank(lun);
	bool switch_now = false;

	if (best == INT_MAX) {
		lun->failback_since_ms = 0;
		if (lun->cur_rank == INT_MAX)
			return false;
		lun->cur_rank = INT_MAX;
		return true;
	}
	if (lun->cur_rank == INT_MAX || !mp_group_usable(lun, lun->cur_rank)) {
		/* Failover: the group in use has nothing left. */
		switch_now = true;
	} else if (best < lun->cur_rank) {
		if (lun->failback == MP_FAILBACK_IMMEDIATE) {
			switch_now = true;
		} else if (lun->failback > 0) {
			if (!lun->failback_since_ms)
				lun->failback_since_ms = now_ms;
			else if (now_ms - lun->failback_since_ms >= (uint64_t)lun->failback * 1000)
				switch_now = true;
		}
	} else {
		lun->failback_since_ms = 0;
	}
	if (!switch_now || lun->cur_rank == best)
		return false;
	lun->cur_rank = best;
	lun->failback_since_ms = 0;
	lun->group_switches++;
	return true;
}

struct mp_path *mp_select(struct mp_lun *lun, int rank, uint64_t len, const struct mp_path *avoid)
{
	struct mp_path *best = NULL, *fallback = NULL;
	size_t n = lun->npaths;

	if (rank == INT_MAX || !n)
		return NULL;
	if (lun->conf.selector == MP_SEL_ROUND_ROBIN) {
		/* The path that took the last I/O keeps taking them for rr_min_io_rq, then the
		 * next one of the group in configuration order. */
		struct mp_path *last = lun->rr_path;
		size_t start = last ? last->idx + 1 : 0;

		if (last && last != avoid && mp_path_usable(last) && mp_path_has_room(last) &&
		    mp_path_rank(lun, last) == rank && lun->rr_used < lun->conf.rr_min_io_rq) {
			lun->rr_used++;
			return last;
		}
		for (size_t k = 0; k < n; k++) {
			struct mp_path *p = &lun->paths[(start + k) % n];

			if (!mp_path_usable(p) || !mp_path_has_room(p) ||
			    mp_path_rank(lun, p) != rank)
				continue;
			if (p == avoid) {
				fallback = p;
				continue;
			}
			best = p;
			break;
		}
		if (!best)
			best = fallback;
		if (best) {
			lun->rr_path = best;
			lun->rr_used = 1;
		}
		return best;
	}
	for (size_t i = 0; i < n; i++) {
		struct mp_path *p = &lun->paths[i];

		if (!mp_path_usable(p) || !mp_path_has_room(p) || mp_path_rank(lun, p) != rank)
			continue;
		if (p == avoid) {
			fallback = p;
			continue;
		}
		if (!best) {
			best = p;
			continue;
		}
		if (lun->conf.selector == MP_SEL_QUEUE_LENGTH) {
			if (p->nr_inflight < best->nr_inflight)
				best = p;
		} else {
			/* service-time: least outstanding work, this I/O included; equal work
			 * goes to the path that has been answering faster. */
			uint64_t a = p->inflight_bytes + len, b = best->inflight_bytes + len;

			if (a < b || (a == b && p->lat_ewma_us < best->lat_ewma_us))
				best = p;
		}
	}
	return best ? best : fallback;
}

uint64_t mp_backoff_ms(uint32_t n, uint32_t base_ms, uint32_t cap_ms, uint64_t rnd)
{
	uint64_t d = base_ms;

	for (uint32_t i = 0; i < n && d < cap_ms; i++)
		d <<= 1;
	if (d > cap_ms)
		d = cap_ms;
	/* Equal jitter: never less than half the step, so a flapping back end is not hammered,
	 * and many LUNs losing one array do not reconnect in lockstep. */
	return d / 2 + rnd % (d - d / 2 + 1);
}

uint64_t mp_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

const char *mp_path_state_name(enum mp_path_state s)
{
	switch (s) {
	case MP_PATH_DOWN:
		return "down";
	case MP_PATH_CONNECTING:
		return "connecting";
	case MP_PATH_PROBING:
		return "probing";
	case MP_PATH_ACTIVE:
		return "active";
	case MP_PATH_STANDBY:
		return "standby";
	case MP_PATH_REFUSED:
		return "refused";
	}
	return "?";
}

const char *mp_lun_state_name(enum mp_lun_state s)
{
	switch (s) {
	case MP_LUN_BECOMING_READY:
		return "becoming-ready";
	case MP_LUN_READY:
		return "ready";
	case MP_LUN_QUEUEING:
		return "queueing";
	case MP_LUN_FAILING:
		return "failing";
	}
	return "?";
}

/* The abort policy's decisions (mp_priv.h): pure, for the unit tests. */

bool mp_op_changes_medium(enum mp_op op)
{
	switch (op) {
	case MP_READ:
	case MP_FLUSH:
		return false;
	case MP_WRITE:
	case MP_UNMAP:
	case MP_WRITE_ZEROES:
	case MP_COMPARE_AND_WRITE:
		return true;
	}
	return true;	/* an op added later is a write until it says otherwise */
}

enum mp_tmf_step mp_tmf_escalate(enum mp_tmf_step from, bool session_up)
{
	/* ABORT TASK -> LUN RESET -> drop: each step takes more with it, and only a session
	 * that is still up can carry a reset. */
	if (from == MP_TMF_NONE && session_up)
		return MP_TMF_ABORT;
	if (from == MP_TMF_ABORT && session_up)
		return MP_TMF_RESET;
	return MP_TMF_DROP;
}

uint64_t mp_tmf_bound_ms(const struct mp_conf *conf)
{
	/* As long as a NOP may go unanswered: a TMF is immediate, the target answers it ahead of
	 * queued commands, so a session that cannot answer it within that time cannot be trusted
	 * to answer it at all. */
	return conf->nop_timeout_ms ? conf->nop_timeout_ms : 1000;
}

uint64_t mp_fence_bound_ms(const struct mp_conf *conf)
{
	int32_t n = 0;
	uint64_t ms, lo = (uint64_t)conf->login_timeout * 1000, hi = (uint64_t)conf->io_timeout * 1000;

	if (conf_mp_parse_no_path_retry(conf->no_path_retry, &n) < 0)
		n = 0;
	ms = n < 0 ? hi : (uint64_t)n * conf->polling_interval * 1000;
	if (ms < lo)
		ms = lo;
	if (hi && ms > hi)
		ms = hi;
	return ms;
}
