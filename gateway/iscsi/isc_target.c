// SPDX-License-Identifier: MIT
/*
 * Targets, portals and the isc_gw object that owns the iSCSI side of the gateway: the keyword
 * tables for their configuration, the cross-object checks, and building the runtime objects
 * (a SCSI device per target, a target port per portal group, LUs from their backstores).
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
	memset(c, 0, sizeof(*c));
}

int isc_gw_conf_check(const struct isc_gw_conf *c, struct gw_errlist *errs)
{
	size_t before = errs->n, i, j, k;
	char path[128];

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
	isc_target_pending_free(t);
	if (t->dev)
		scsi_dev_destroy(t->dev);
	free(t->stats);
	free(t);
}

/* Moves the errors of a lower layer, which names fields relative to its own object, into errs
 * under path ("targets[0].luns[1].backstore" + ".path"). */
static void isc_errs_prefix(struct gw_errlist *errs, const struct gw_errlist *sub, const char *path)
{
	char field[256];
	size_t i;

	for (i = 0; i < sub->n; i++) {
		if (sub->v[i].field && *sub->v[i].field)
			snprintf(field, sizeof(field), "%s.%s", path, sub->v[i].field);
		else
			snprintf(field, sizeof(field), "%s", path);
		gw_errlist_add(errs, field, "%s", sub->v[i].msg);
	}
}

int isc_bs_open(struct gw_loop *loop, const struct bs_conf *conf, const char *path,
		struct gw_errlist *errs, struct bs **out)
{
	struct gw_errlist sub;
	int r;

	gw_errlist_init(&sub);
	r = bs_create(loop, conf, out, &sub);
	if (r) {
		if (sub.n)
			isc_errs_prefix(errs, &sub, path);
		else
			gw_errlist_add(errs, path, "cannot open: %s", strerror(-r));
	}
	gw_errlist_fini(&sub);
	return r;
}

int isc_lu_add(struct scsi_dev *dev, const struct scsi_lu_conf *conf, struct bs *bs,
	       const char *path, struct gw_errlist *errs)
{
	struct gw_errlist sub;
	int r;

	gw_errlist_init(&sub);
	r = scsi_dev_add_lu(dev, conf, bs, &sub);
	if (r) {
		if (sub.n)
			isc_errs_prefix(errs, &sub, path);
		else
			gw_errlist_add(errs, path, "cannot add LUN %llu: %s",
				       (unsigned long long)conf->lun, strerror(-r));
	}
	gw_errlist_fini(&sub);
	return r;
}

/* Builds a target and its LUs; not linked anywhere yet. */
int isc_target_new(struct isc_gw *gw, struct isc_target_conf *tc, size_t idx,
		   struct gw_errlist *errs, struct isc_target **out)
{
	struct isc_target *t = calloc(1, sizeof(*t));
	char pname[ISC_NAME_MAX + 16], path[96];
	size_t i;
	int r;

	if (!t)
		return -ENOMEM;
	t->gw = gw;
	t->conf = tc;
	gw_list_init(&t->node);
	gw_list_init(&t->sessions);
	gw_list_init(&t->pending_luns);
	*out = t;
	t->dev = scsi_dev_create(gw->loop, tc->name);
	if (!t->dev) {
		snprintf(path, sizeof(path), "targets[%zu]", idx);
		gw_errlist_add(errs, path, "cannot create the SCSI device");
		return -ENOMEM;
	}
	snprintf(pname, sizeof(pname), "%s,t,0x%04x", tc->name, tc->tpgt);
	t->port = scsi_dev_add_port(t->dev, pname, (uint16_t)tc->tpgt);
	if (!t->port) {
		snprintf(path, sizeof(path), "targets[%zu]", idx);
		gw_errlist_add(errs, path, "cannot create the SCSI target port");
		return -ENOMEM;
	}
	scsi_dev_set_event_cb(t->dev, isc_target_scsi_event, t);
	for (i = 0; i < tc->nluns; i++) {
		struct bs *bs;

		snprintf(path, sizeof(path), "targets[%zu].luns[%zu].backstore", idx, i);
		r = isc_bs_open(gw->loop, &tc->luns[i].bs, path, errs, &bs);
		if (r)
			return r;
		snprintf(path, sizeof(path), "targets[%zu].luns[%zu]", idx, i);
		r = isc_lu_add(t->dev, &tc->luns[i].lu, bs, path, errs);
		if (r) {
			bs_destroy(bs);	/* only a successful add takes it over */
			return r;
		}
		isc_target_lun_stats(t, tc->luns[i].lu.lun);
	}
	return 0;
}

int isc_gw_create(struct gw_loop *loop, struct isc_gw_conf *conf, struct isc_gw **out,
		  struct gw_errlist *errs)
{
	struct isc_gw *gw = calloc(1, sizeof(*gw));
	size_t i;
	int r;

	if (!gw) {
		isc_gw_conf_free(conf);
		free(conf);
		return -ENOMEM;
	}
	gw->loop = loop;
	gw->conf = conf;
	isc_pdu_pool_init(&gw->pdus, 0);
	gw_list_init(&gw->task_free);
	gw_list_init(&gw->portals);
	gw_list_init(&gw->targets);
	gw_list_init(&gw->sessions);
	gw_list_init(&gw->login_conns);
	gw_list_init(&gw->dying_targets);
	gw->lun_timer.w.fd = -1;
	gw->next_tsih = 1;
	for (i = 0; i < conf->nportals; i++) {
		struct isc_portal *p = calloc(1, sizeof(*p));

		if (!p) {
			r = -ENOMEM;
			goto fail;
		}
		p->gw = gw;
		p->conf = &conf->portals[i];
		gw_list_add_tail(&gw->portals, &p->node);
	}
	for (i = 0; i < conf->ntargets; i++) {
		struct isc_target *t = NULL;

		r = isc_target_new(gw, &conf->targets[i], i, errs, &t);
		if (t)
			gw_list_add_tail(&gw->targets, &t->node);
		if (r)
			goto fail;
	}
	*out = gw;
	return 0;
fail:
	isc_gw_destroy(gw);
	return r;
}

int isc_gw_listen(struct isc_gw *gw)
{
	static const char *const tnames[] = { "tcp", "iser" };
	struct isc_portal *p;
	int r;

	gw_list_for_each_entry(p, &gw->portals, node) {
		struct dmv_portal_conf pc = {
			.name = p->conf->name,
			.address = p->conf->address,
			.port = (uint16_t)p->conf->port,
		};
		const char *tn = tnames[p->conf->transport == ISC_PORTAL_ISER];

		if (p->dp)
			continue;
		r = dmv_listen(tn, gw->loop, &pc, &gw->pdus, &p->dp);
		if (r == -EPROTONOSUPPORT) {
			/* A configuration written for a transport this build lacks (iSER) still
			 * brings up the portals it can serve. */
			gw_warn("iscsi", "portal %s skipped: no %s datamover in this build",
				p->conf->name, tn);
			continue;
		}
		if (r)
			return r;
		p->dp->accept = isc_conn_accept;
		p->dp->priv = p;
		/* One not bound yet said why, and says so again once it listens. */
		if (p->dp->listening)
			gw_info("iscsi", "listening on %s (%s)", p->dp->addr, tn);
	}
	return 0;
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

bool isc_gw_settled(const struct isc_gw *gw)
{
	const struct isc_target *t;

	gw_list_for_each_entry(t, &gw->targets, node)
		if (!scsi_dev_bs_settled(t->dev))
			return false;
	return true;
}

void isc_gw_bs_shutdown(struct isc_gw *gw)
{
	struct isc_target *t;

	gw_list_for_each_entry(t, &gw->targets, node)
		scsi_dev_bs_shutdown(t->dev);
	gw_list_for_each_entry(t, &gw->dying_targets, node)
		scsi_dev_bs_shutdown(t->dev);
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
