// SPDX-License-Identifier: MIT
/*
 * Targets, portals and the isc_gw object that owns the iSCSI side of the gateway: the keyword
 * tables for their configuration, the cross-object checks, and the runtime objects' life cycle.
 * Building them from a configuration (SCSI devices, LUs, backstores) is gateway/ctl/'s job.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc.h"

/* ---------------------------------------------------------------------------------------- */
/* Keyword tables */

const char *isc_check_name(const void *field)
{
	const char *s = *(const char *const *)field;
	size_t i, n;

	if (!s || !*s)
		return NULL;	/* emptiness is the REQUIRED flag's business */
	n = strlen(s);
	if (n > ISC_NAME_MAX)
		return "an iSCSI name is at most 223 bytes";
	if (!strncmp(s, "iqn.", 4)) {
		/* iqn.YYYY-MM.reversed.domain[:anything] */
		if (n < 12 || !isdigit((unsigned char)s[4]) || !isdigit((unsigned char)s[7]) ||
		    s[8] != '-' || !isdigit((unsigned char)s[9]) ||
		    !isdigit((unsigned char)s[10]) || s[11] != '.')
			return "not an iqn. name (iqn.YYYY-MM.naming-authority[:unique])";
	} else if (!strncmp(s, "eui.", 4)) {
		if (n != 20)
			return "an eui. name has 16 hex digits";
		for (i = 4; i < n; i++)
			if (!isxdigit((unsigned char)s[i]))
				return "an eui. name has 16 hex digits";
		return NULL;
	} else if (!strncmp(s, "naa.", 4)) {
		if (n != 20 && n != 36)
			return "a naa. name has 16 or 32 hex digits";
		for (i = 4; i < n; i++)
			if (!isxdigit((unsigned char)s[i]))
				return "a naa. name has 16 or 32 hex digits";
		return NULL;
	} else {
		return "an iSCSI name starts with iqn., eui. or naa.";
	}
	/* RFC 3722 stringprep leaves lower case letters, digits, '-', '.', ':'. */
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!(islower(ch) || isdigit(ch) || ch == '-' || ch == '.' || ch == ':'))
			return "iSCSI names use lower-case letters, digits, '-', '.' and ':' only";
	}
	return NULL;
}

static const struct gw_conf_enum isc_transport_enums[] = {
	{ "tcp", ISC_PORTAL_TCP },
	{ "iser", ISC_PORTAL_ISER },
	{ NULL, 0 },
};

const struct gw_conf_key isc_portal_conf_keys[] = {
	{ .name = "name", .type = GW_CONF_STR, .offset = offsetof(struct isc_portal_conf, name),
	  .min = 1, .max = 63, .flags = GW_CONF_REQUIRED,
	  .help = "Portal name, referenced by targets[].portals." },
	{ .name = "transport", .type = GW_CONF_ENUM,
	  .offset = offsetof(struct isc_portal_conf, transport), .def = "tcp",
	  .enums = isc_transport_enums,
	  .help = "Datamover: tcp (iSCSI over TCP) or iser (iSCSI Extensions for RDMA)." },
	{ .name = "address", .type = GW_CONF_STR,
	  .offset = offsetof(struct isc_portal_conf, address), .min = 0, .max = 63,
	  .def = "0.0.0.0",
	  .help = "Numeric IPv4 or IPv6 address to listen on; 0.0.0.0 or :: for all." },
	{ .name = "port", .type = GW_CONF_U32, .offset = offsetof(struct isc_portal_conf, port),
	  .min = 1, .max = 65535, .def = "3260", .help = "TCP port (iSER: the rdma_cm port)." },
	GW_CONF_END,
};

const struct gw_conf_key isc_initiator_conf_keys[] = {
	{ .name = "name", .type = GW_CONF_STR,
	  .offset = offsetof(struct isc_initiator_conf, name), .min = 1, .max = ISC_NAME_MAX,
	  .flags = GW_CONF_REQUIRED, .check = isc_check_name,
	  .help = "Initiator iSCSI name allowed to log in." },
	GW_CONF_END,
};

const struct gw_conf_key isc_target_conf_keys[] = {
	{ .name = "name", .type = GW_CONF_STR, .offset = offsetof(struct isc_target_conf, name),
	  .min = 1, .max = ISC_NAME_MAX, .flags = GW_CONF_REQUIRED, .check = isc_check_name,
	  .help = "Target iSCSI name (iqn./eui./naa.)." },
	{ .name = "alias", .type = GW_CONF_STR, .offset = offsetof(struct isc_target_conf, alias),
	  .min = 0, .max = 255, .def = "", .help = "TargetAlias declared at login; empty: none." },
	{ .name = "tpgt", .type = GW_CONF_U32, .offset = offsetof(struct isc_target_conf, tpgt),
	  .min = 1, .max = 65535, .def = "1", .help = "Target portal group tag." },
	{ .name = "portals", .type = GW_CONF_STRLIST,
	  .offset = offsetof(struct isc_target_conf, portals), .min = 1, .max = 64,
	  .flags = GW_CONF_REQUIRED, .help = "Names of the portals the target is reachable on." },
	{ .name = "allow_any_initiator", .type = GW_CONF_BOOL,
	  .offset = offsetof(struct isc_target_conf, allow_any_initiator), .def = "false",
	  .help = "Admit every initiator; otherwise only those in initiators[]." },
	GW_CONF_END,
};

const char *const isc_target_nested_keys[] = {
	"initiators", "chap", "params", "luns", NULL,
};

static const struct gw_conf_enum isc_alua_enums[] = {
	{ "active/optimized", SCSI_ALUA_AO },
	{ "active/non-optimized", SCSI_ALUA_ANO },
	{ "standby", SCSI_ALUA_STANDBY },
	{ "unavailable", SCSI_ALUA_UNAVAILABLE },
	{ NULL, 0 },
};

const struct gw_conf_key isc_group_conf_keys[] = {
	{ .name = "id", .type = GW_CONF_U32, .offset = offsetof(struct isc_group_conf, id),
	  .min = 1, .max = 65535, .flags = GW_CONF_REQUIRED,
	  .help = "Target port group id: the tpgt of that gateway's targets, and the relative "
		  "port id hosts see for it." },
	{ .name = "name", .type = GW_CONF_STR, .offset = offsetof(struct isc_group_conf, name),
	  .min = 0, .max = 63, .def = "", .help = "The gateway it stands for (informative)." },
	{ .name = "state", .type = GW_CONF_ENUM, .offset = offsetof(struct isc_group_conf, state),
	  .def = "active/optimized", .enums = isc_alua_enums,
	  .help = "ALUA state of the group; an LU's alua_group turns active groups into "
		  "active/optimized (that group) and active/non-optimized (the others)." },
	GW_CONF_END,
};

static const struct gw_conf_enum isc_disc_auth_enums[] = {
	{ "none", ISC_DISC_AUTH_NONE },
	{ "chap", ISC_DISC_AUTH_CHAP },
	{ NULL, 0 },
};

const struct gw_conf_key isc_discovery_conf_keys[] = {
	{ .name = "auth", .type = GW_CONF_ENUM,
	  .offset = offsetof(struct isc_discovery_conf, auth), .def = "none",
	  .enums = isc_disc_auth_enums,
	  .help = "Authentication of discovery sessions: none, or chap with discovery.chap." },
	GW_CONF_END,
};

static void isc_chap_conf_free(struct isc_chap_conf *c)
{
	gw_conf_free(isc_chap_conf_keys, c);
}

void isc_gw_conf_free(struct isc_gw_conf *c)
{
	size_t i, j;

	if (!c)
		return;
	for (i = 0; i < c->nportals; i++)
		gw_conf_free(isc_portal_conf_keys, &c->portals[i]);
	free(c->portals);
	gw_conf_free(isc_discovery_conf_keys, &c->discovery);
	isc_chap_conf_free(&c->discovery.chap);
	for (i = 0; i < c->ntargets; i++) {
		struct isc_target_conf *t = &c->targets[i];

		gw_conf_free(isc_target_conf_keys, t);
		for (j = 0; j < t->ninitiators; j++) {
			gw_conf_free(isc_initiator_conf_keys, &t->initiators[j]);
			isc_chap_conf_free(&t->initiators[j].chap);
		}
		free(t->initiators);
		isc_chap_conf_free(&t->chap);
		gw_conf_free(isc_param_conf_keys, &t->params);
		for (j = 0; j < t->nluns; j++) {
			gw_conf_free(scsi_lu_conf_keys, &t->luns[j].lu);
			bs_conf_free(&t->luns[j].bs);
		}
		free(t->luns);
	}
	free(c->targets);
	for (i = 0; i < c->ngroups; i++)
		gw_conf_free(isc_group_conf_keys, &c->groups[i]);
	free(c->groups);
	memset(c, 0, sizeof(*c));
}

int isc_gw_conf_check(const struct isc_gw_conf *c, struct gw_errlist *errs)
{
	size_t before = errs->n, i, j, k;
	char path[128];

	for (i = 0; i < c->ngroups; i++)
		for (j = 0; j < i; j++)
			if (c->groups[i].id == c->groups[j].id) {
				snprintf(path, sizeof(path), "cluster.groups[%zu].id", i);
				gw_errlist_add(errs, path, "%u is already the id of "
					       "cluster.groups[%zu]", c->groups[i].id, j);
			}
	for (i = 0; c->ngroups && i < c->ntargets; i++) {
		for (j = 0; j < c->ngroups; j++)
			if (c->groups[j].id == c->targets[i].tpgt)
				break;
		if (j == c->ngroups) {
			snprintf(path, sizeof(path), "targets[%zu].tpgt", i);
			gw_errlist_add(errs, path, "%u is not one of cluster.groups[].id",
				       c->targets[i].tpgt);
		}
		for (k = 0; k < c->targets[i].nluns; k++) {
			uint32_t g = c->targets[i].luns[k].lu.alua_group;

			for (j = 0; g && j < c->ngroups && c->groups[j].id != g; j++)
				;
			if (g && j == c->ngroups) {
				snprintf(path, sizeof(path), "targets[%zu].luns[%zu].alua_group", i,
					 k);
				gw_errlist_add(errs, path, "%u is not one of cluster.groups[].id", g);
			}
		}
	}

	for (i = 0; i < c->nportals; i++) {
		for (j = 0; j < i; j++)
			if (c->portals[i].name && c->portals[j].name &&
			    !strcmp(c->portals[i].name, c->portals[j].name)) {
				snprintf(path, sizeof(path), "portals[%zu].name", i);
				gw_errlist_add(errs, path,
					       "\"%s\" is already the name of portals[%zu]",
					       c->portals[i].name, j);
			}
	}
	if (c->discovery.auth == ISC_DISC_AUTH_CHAP &&
	    (!c->discovery.chap.user || !*c->discovery.chap.user))
		gw_errlist_add(errs, "discovery.chap.user",
			       "required when discovery.auth is \"chap\"");
	isc_chap_conf_check(&c->discovery.chap, "discovery.chap", errs);
	for (i = 0; i < c->ntargets; i++) {
		const struct isc_target_conf *t = &c->targets[i];

		for (j = 0; j < i; j++)
			if (t->name && c->targets[j].name && !strcmp(t->name, c->targets[j].name)) {
				snprintf(path, sizeof(path), "targets[%zu].name", i);
				gw_errlist_add(errs, path,
					       "\"%s\" is already the name of targets[%zu]",
					       t->name, j);
			}
		for (j = 0; j < t->portals.n; j++) {
			bool found = false;

			const char *pn = t->portals.v[j];

			for (k = 0; k < c->nportals; k++)
				if (c->portals[k].name && !strcmp(c->portals[k].name, pn))
					found = true;
			if (!found) {
				snprintf(path, sizeof(path), "targets[%zu].portals[%zu]", i, j);
				gw_errlist_add(errs, path, "no portal is named \"%s\"", pn);
			}
		}
		snprintf(path, sizeof(path), "targets[%zu].chap", i);
		isc_chap_conf_check(&t->chap, path, errs);
		snprintf(path, sizeof(path), "targets[%zu].params", i);
		isc_param_conf_check(&t->params, path, errs);
		for (j = 0; j < t->ninitiators; j++) {
			const char *in = t->initiators[j].name;

			snprintf(path, sizeof(path), "targets[%zu].initiators[%zu].chap", i, j);
			isc_chap_conf_check(&t->initiators[j].chap, path, errs);
			for (k = 0; k < j; k++) {
				const char *other = t->initiators[k].name;

				if (!in || !other || strcmp(in, other))
					continue;
				snprintf(path, sizeof(path), "targets[%zu].initiators[%zu].name",
					 i, j);
				gw_errlist_add(errs, path, "listed twice");
			}
		}
		for (j = 0; j < t->nluns; j++) {
			for (k = 0; k < j; k++) {
				if (t->luns[j].lu.lun != t->luns[k].lu.lun)
					continue;
				snprintf(path, sizeof(path), "targets[%zu].luns[%zu].lun", i, j);
				gw_errlist_add(errs, path, "LUN %llu is already luns[%zu]",
					       (unsigned long long)t->luns[j].lu.lun, k);
			}
		}
	}
	return errs->n > before ? -EINVAL : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Runtime */

struct isc_target *isc_gw_find_target(struct isc_gw *gw, const char *name)
{
	struct isc_target *t;

	/* iSCSI names compare case-insensitively once normalised (RFC 3722): the config holds
	 * the normalised lower-case form, so a case-insensitive compare accepts what stringprep
	 * would have produced from the initiator's spelling. */
	gw_list_for_each_entry(t, &gw->targets, node)
		if (!strcasecmp(t->conf->name, name))
			return t;
	return NULL;
}

bool isc_target_on_portal(const struct isc_target *t, const struct isc_portal *p)
{
	return gw_strlist_has(&t->conf->portals, p->conf->name);
}

static bool isc_chap_set(const struct isc_chap_conf *c)
{
	return c->user && *c->user;
}

int isc_target_admit(const struct isc_target *t, const char *initiator,
		     const struct isc_chap_conf **chap)
{
	const struct isc_target_conf *tc = t->conf;
	size_t i;

	*chap = isc_chap_set(&tc->chap) ? &tc->chap : NULL;
	for (i = 0; i < tc->ninitiators; i++) {
		if (strcasecmp(tc->initiators[i].name, initiator))
			continue;
		/* Per-initiator credentials win over the target's. */
		if (isc_chap_set(&tc->initiators[i].chap))
			*chap = &tc->initiators[i].chap;
		return 0;
	}
	return tc->allow_any_initiator ? 0 : -EACCES;
}

struct isc_lun_stats *isc_target_lun_stats(struct isc_target *t, uint64_t lun)
{
	struct isc_lun_stats *n;
	size_t i;

	for (i = 0; i < t->nstats; i++)
		if (t->stats[i].lun == lun)
			return &t->stats[i];
	n = realloc(t->stats, (t->nstats + 1) * sizeof(*n));
	if (!n)
		return NULL;
	t->stats = n;
	memset(&n[t->nstats], 0, sizeof(*n));
	n[t->nstats].lun = lun;
	return &n[t->nstats++];
}

void isc_target_destroy(struct isc_target *t)
{
	gw_list_del(&t->node);
	if (t->release)
		t->release(t);
	if (t->dev)
		scsi_dev_destroy(t->dev);
	free(t->stats);
	free(t);
}

struct isc_target *isc_target_alloc(struct isc_gw *gw, struct isc_target_conf *tc)
{
	struct isc_target *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->gw = gw;
	t->conf = tc;
	gw_list_init(&t->node);
	gw_list_init(&t->sessions);
	gw_list_init(&t->pending_luns);
	return t;
}

bool isc_target_lun_blocked(const struct isc_target *t, uint64_t lun)
{
	const struct isc_lun_block *lb;

	gw_list_for_each_entry(lb, &t->pending_luns, node)
		if (lb->lun == lun)
			return true;
	return false;
}

void isc_target_retire(struct isc_target *t)
{
	struct isc_gw *gw = t->gw;
	struct isc_session *s, *stmp;
	struct isc_conn *c, *ctmp;

	gw_info("iscsi", "target %s removed", t->conf->name);
	gw_list_for_each_entry_safe(c, ctmp, &gw->login_conns, node)
		if (isc_login_uses_target(c, t))
			isc_conn_close(c, "target removed");
	gw_list_del(&t->node);
	t->removing = true;
	if (gw_list_empty(&t->sessions)) {
		isc_target_destroy(t);
		return;
	}
	gw_list_add_tail(&gw->dying_targets, &t->node);
	gw_list_for_each_entry_safe(s, stmp, &t->sessions, tnode)
		isc_session_close(s, "target removed");
}

void isc_target_enforce_acl(struct isc_target *t)
{
	const struct isc_chap_conf *chap;
	struct isc_session *s, *stmp;

	gw_list_for_each_entry_safe(s, stmp, &t->sessions, tnode)
		if (!s->closing && isc_target_admit(t, s->initiator, &chap))
			isc_session_close(s, "initiator no longer allowed");
}

int isc_gw_drop_session(struct isc_gw *gw, uint16_t tsih)
{
	struct isc_session *s;

	gw_list_for_each_entry(s, &gw->sessions, node) {
		if (s->tsih != tsih || s->closing)
			continue;
		isc_session_close(s, "dropped by the administrator");
		return 0;
	}
	return -ENOENT;
}

struct isc_portal *isc_portal_new(struct isc_gw *gw, struct isc_portal_conf *conf)
{
	struct isc_portal *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->gw = gw;
	p->conf = conf;
	gw_list_init(&p->node);
	return p;
}

void isc_portal_remove(struct isc_portal *p)
{
	struct isc_gw *gw = p->gw;
	struct isc_conn *c, *ctmp;
	struct isc_session *s;

	gw_info("iscsi", "portal %s removed", p->conf->name);
	gw_list_for_each_entry_safe(c, ctmp, &gw->login_conns, node)
		if (c->portal == p)
			isc_conn_close(c, "portal removed");
	gw_list_for_each_entry(s, &gw->sessions, node)
		gw_list_for_each_entry_safe(c, ctmp, &s->conns, node)
			if (c->portal == p)
				isc_conn_close(c, "portal removed");
	if (p->dp)
		dmv_portal_destroy(p->dp);
	gw_list_del(&p->node);
	free(p);
}

struct isc_gw *isc_gw_alloc(struct gw_loop *loop, struct isc_gw_conf *conf)
{
	struct isc_gw *gw = calloc(1, sizeof(*gw));

	if (!gw)
		return NULL;
	gw->loop = loop;
	gw->conf = conf;
	gw->data_mem_max = ISC_DATA_MEM_DEFAULT;
	isc_pdu_pool_init(&gw->pdus, 0);
	gw_list_init(&gw->task_free);
	gw_list_init(&gw->portals);
	gw_list_init(&gw->targets);
	gw_list_init(&gw->sessions);
	gw_list_init(&gw->login_conns);
	gw_list_init(&gw->dying_targets);
	gw->lun_timer.w.fd = -1;
	gw->next_tsih = 1;
	return gw;
}

void isc_gw_stop(struct isc_gw *gw)
{
	struct isc_portal *p;
	struct isc_session *s, *stmp;

	gw->stopping = true;
	gw_list_for_each_entry(p, &gw->portals, node) {
		if (p->dp) {
			dmv_portal_destroy(p->dp);
			p->dp = NULL;
		}
	}
	while (!gw_list_empty(&gw->login_conns))
		isc_conn_close(gw_list_first_entry(&gw->login_conns, struct isc_conn, node),
			       "gateway stopping");
	gw_list_for_each_entry_safe(s, stmp, &gw->sessions, node)
		isc_session_close(s, "gateway stopping");
}

bool isc_gw_idle(const struct isc_gw *gw)
{
	return gw_list_empty(&gw->sessions) && gw_list_empty(&gw->login_conns) && !gw->nconns;
}

void isc_gw_destroy(struct isc_gw *gw)
{
	struct isc_portal *p, *ptmp;
	struct isc_target *t, *ttmp;

	if (!gw)
		return;
	if (!gw->stopping)
		isc_gw_stop(gw);
	if (!isc_gw_idle(gw))
		gw_warn("iscsi", "destroying with sessions still alive");
	gw_list_for_each_entry_safe(t, ttmp, &gw->targets, node)
		isc_target_destroy(t);
	gw_list_for_each_entry_safe(t, ttmp, &gw->dying_targets, node)
		isc_target_destroy(t);
	gw_timer_fini(&gw->lun_timer);
	gw_list_for_each_entry_safe(p, ptmp, &gw->portals, node) {
		gw_list_del(&p->node);
		free(p);
	}
	while (!gw_list_empty(&gw->task_free)) {
		struct isc_task *tk = gw_list_first_entry(&gw->task_free, struct isc_task, cnode);

		gw_list_del(&tk->cnode);
		free(tk->buf);
		free(tk);
	}
	isc_pdu_pool_fini(&gw->pdus);
	isc_gw_conf_free(gw->conf);
	free(gw->conf);
	free(gw);
}
