// SPDX-License-Identifier: MIT
/*
 * The iSCSI part of the configuration: keyword tables for portals, targets, initiators,
 * discovery and cluster groups, CHAP credentials and login parameters, and the cross-object
 * checks. The iSCSI engine (gateway/iscsi/) reads the structs these fill.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

/* ---------------------------------------------------------------------------------------- */
/* CHAP (the `chap` object of discovery, a target, an initiator) */

const char *conf_chap_check_secret(const void *field)
{
	const char *const *s = field;
	size_t len = *s ? strlen(*s) : 0;

	if (len && (len < ISC_CHAP_SECRET_MIN || len > ISC_CHAP_SECRET_MAX))
		return "a CHAP secret must be 12 to 256 bytes long";
	return NULL;
}

#define CC_STR(n, maxlen, fl, chk, h) \
	{ .name = #n, .type = GW_CONF_STR, .offset = offsetof(struct isc_chap_conf, n), \
	  .min = 0, .max = (maxlen), .flags = (fl), .check = (chk), .help = (h) }

const struct gw_conf_key conf_chap_keys[] = {
	CC_STR(user, ISC_VAL_MAX, 0, NULL, "CHAP user the initiator must present; empty: no CHAP"),
	CC_STR(secret, ISC_CHAP_SECRET_MAX, GW_CONF_SECRET, conf_chap_check_secret,
	       "CHAP secret for user, 12 to 256 bytes"),
	CC_STR(mutual_user, ISC_VAL_MAX, 0, NULL,
	       "user the target presents for mutual CHAP; empty: one-way CHAP"),
	CC_STR(mutual_secret, ISC_CHAP_SECRET_MAX, GW_CONF_SECRET, conf_chap_check_secret,
	       "secret for mutual CHAP, 12 to 256 bytes, different from secret"),
	GW_CONF_END
};

static bool str_set(const char *s)
{
	return s && *s;
}

static void conf_err(struct gw_errlist *errs, const char *path, const char *key, const char *msg)
{
	char field[256];

	snprintf(field, sizeof(field), "%s%s%s", path ? path : "", path && *path ? "." : "", key);
	gw_errlist_add(errs, field, "%s", msg);
}

int conf_chap_check(const struct isc_chap_conf *c, const char *path, struct gw_errlist *errs)
{
	int r = 0;

	if (str_set(c->user) && !str_set(c->secret)) {
		conf_err(errs, path, "secret", "required when user is set (12 to 256 bytes)");
		r = -EINVAL;
	}
	if (!str_set(c->user) && str_set(c->secret)) {
		conf_err(errs, path, "user", "required when secret is set");
		r = -EINVAL;
	}
	if (str_set(c->mutual_user) && !str_set(c->user)) {
		conf_err(errs, path, "mutual_user", "mutual CHAP needs one-way CHAP (user) too");
		r = -EINVAL;
	}
	if (str_set(c->mutual_user) && !str_set(c->mutual_secret)) {
		conf_err(errs, path, "mutual_secret",
			 "required when mutual_user is set (12 to 256 bytes)");
		r = -EINVAL;
	}
	if (!str_set(c->mutual_user) && str_set(c->mutual_secret)) {
		conf_err(errs, path, "mutual_user", "required when mutual_secret is set");
		r = -EINVAL;
	}
	if (str_set(c->secret) && str_set(c->mutual_secret) &&
	    !strcmp(c->secret, c->mutual_secret)) {
		/* Otherwise an attacker could reflect our challenge and have us answer it. */
		conf_err(errs, path, "mutual_secret", "must differ from secret");
		r = -EINVAL;
	}
	return r;
}

/* ---------------------------------------------------------------------------------------- */
/* Login parameters (the `params` object of a target) */

/* Parses "CRC32C,None" into a mask, in order; returns 0 on a bad or repeated item. */
unsigned int conf_digest_mask(const char *s)
{
	unsigned int mask = 0, bit;
	const char *p = s, *c;
	size_t n;

	if (!s || !*s)
		return 0;
	for (;;) {
		c = strchr(p, ',');
		n = c ? (size_t)(c - p) : strlen(p);
		if (n == 6 && !strncmp(p, "CRC32C", 6))
			bit = ISC_DIGEST_CRC32C;
		else if (n == 4 && !strncmp(p, "None", 4))
			bit = ISC_DIGEST_NONE;
		else
			return 0;
		if (mask & bit)
			return 0;
		mask |= bit;
		if (!c)
			break;
		p = c + 1;
	}
	return mask;
}

static const char *check_digest(const void *field)
{
	const char *const *s = field;

	if (!conf_digest_mask(*s))
		return "must be a list of CRC32C and None, e.g. \"CRC32C,None\"";
	return NULL;
}

#define PC_U32(n, lo, hi, d, h) \
	{ .name = #n, .type = GW_CONF_U32, .offset = offsetof(struct isc_param_conf, n), \
	  .min = (lo), .max = (hi), .def = (d), .help = (h) }
#define PC_BOOL(n, d, h) \
	{ .name = #n, .type = GW_CONF_BOOL, .offset = offsetof(struct isc_param_conf, n), \
	  .def = (d), .help = (h) }

const struct gw_conf_key conf_param_keys[] = {
	{ .name = "HeaderDigest", .type = GW_CONF_STR,
	  .offset = offsetof(struct isc_param_conf, HeaderDigest), .min = 4, .max = 16,
	  .def = "CRC32C,None", .check = check_digest,
	  .help = "header digests the target accepts (CRC32C, None), preferred first" },
	{ .name = "DataDigest", .type = GW_CONF_STR,
	  .offset = offsetof(struct isc_param_conf, DataDigest), .min = 4, .max = 16,
	  .def = "CRC32C,None", .check = check_digest,
	  .help = "data digests the target accepts (CRC32C, None), preferred first" },
	PC_U32(MaxRecvDataSegmentLength, 512, 16777215, "262144",
	       "largest data segment the target receives, declared to initiators"),
	PC_U32(MaxBurstLength, 512, 16777215, "1048576",
	       "upper limit for MaxBurstLength (bytes per solicited sequence)"),
	PC_U32(FirstBurstLength, 512, 16777215, "65536",
	       "upper limit for FirstBurstLength (unsolicited bytes per command)"),
	PC_BOOL(InitialR2T, "false", "require an R2T before the first burst of write data"),
	PC_BOOL(ImmediateData, "true", "allow write data in the command PDU"),
	PC_U32(MaxOutstandingR2T, 1, 65535, "1", "upper limit for R2Ts in flight per task"),
	PC_U32(MaxConnections, 1, 65535, "1", "upper limit for connections per session"),
	PC_U32(DefaultTime2Wait, 0, 3600, "2", "lower limit for DefaultTime2Wait, seconds"),
	PC_U32(DefaultTime2Retain, 0, 3600, "20", "upper limit for DefaultTime2Retain, seconds"),
	PC_U32(ErrorRecoveryLevel, 0, 2, "0", "upper limit for ErrorRecoveryLevel"),
	PC_U32(queue_depth, 1, 65535, "128",
	       "commands a session may have in flight (CmdSN window)"),
	PC_U32(nop_interval, 0, 3600, "10",
	       "seconds between NOP-In pings on an idle connection, 0: off"),
	PC_U32(nop_timeout, 0, 3600, "30", "seconds without an answer before dropping, 0: off"),
	GW_CONF_END
};

int conf_param_check(const struct isc_param_conf *c, const char *path,
			 struct gw_errlist *errs)
{
	char field[256];

	if (c->FirstBurstLength > c->MaxBurstLength) {
		snprintf(field, sizeof(field), "%s%sFirstBurstLength", path ? path : "",
			 path && *path ? "." : "");
		gw_errlist_add(errs, field, "%u is larger than MaxBurstLength (%u)",
			       c->FirstBurstLength, c->MaxBurstLength);
		return -EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Portals, targets, initiators, discovery, cluster groups */

const char *conf_check_iscsi_name(const void *field)
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

const struct gw_conf_enum conf_transport_enums[] = {
	{ "tcp", ISC_PORTAL_TCP },
	{ "iser", ISC_PORTAL_ISER },
	{ NULL, 0 },
};

const char *conf_transport_name(int id)
{
	for (const struct gw_conf_enum *e = conf_transport_enums; e->name; e++)
		if (e->value == id)
			return e->name;
	return NULL;
}

const struct gw_conf_key conf_portal_keys[] = {
	{ .name = "name", .type = GW_CONF_STR, .offset = offsetof(struct isc_portal_conf, name),
	  .min = 1, .max = 63, .flags = GW_CONF_REQUIRED,
	  .help = "Portal name, referenced by targets[].portals." },
	{ .name = "transport", .type = GW_CONF_ENUM,
	  .offset = offsetof(struct isc_portal_conf, transport), .def = "tcp",
	  .enums = conf_transport_enums,
	  .help = "Datamover: tcp (iSCSI over TCP) or iser (iSCSI Extensions for RDMA)." },
	{ .name = "address", .type = GW_CONF_STR,
	  .offset = offsetof(struct isc_portal_conf, address), .min = 0, .max = 63,
	  .def = "0.0.0.0",
	  .help = "Numeric IPv4 or IPv6 address to listen on; 0.0.0.0 or :: for all." },
	{ .name = "port", .type = GW_CONF_U32, .offset = offsetof(struct isc_portal_conf, port),
	  .min = 1, .max = 65535, .def = "3260", .help = "TCP port (iSER: the rdma_cm port)." },
	{ .name = "max_connections", .type = GW_CONF_U32,
	  .offset = offsetof(struct isc_portal_conf, max_connections), .min = 0, .max = 65536,
	  .def = "1024",
	  .help = "Open connections on this portal, logged in or not; one more is closed at "
		  "once. 0: no limit." },
	{ .name = "login_timeout", .type = GW_CONF_U32,
	  .offset = offsetof(struct isc_portal_conf, login_timeout), .min = 1, .max = 3600,
	  .def = "15",
	  .help = "Seconds a connection may take from accept to the end of its login; then it "
		  "is closed." },
	{ .name = "login_fail_limit", .type = GW_CONF_U32,
	  .offset = offsetof(struct isc_portal_conf, login_fail_limit), .min = 0, .max = 100000,
	  .def = "10",
	  .help = "Failed logins from one address within login_fail_window that start a "
		  "back-off. 0: never." },
	{ .name = "login_fail_window", .type = GW_CONF_U32,
	  .offset = offsetof(struct isc_portal_conf, login_fail_window), .min = 1, .max = 86400,
	  .def = "60", .help = "Seconds over which failed logins from one address are counted." },
	{ .name = "login_backoff", .type = GW_CONF_U32,
	  .offset = offsetof(struct isc_portal_conf, login_backoff), .min = 1, .max = 86400,
	  .def = "60",
	  .help = "Seconds an address in back-off has its logins refused (status 0x0301, "
		  "service unavailable)." },
	GW_CONF_END,
};

const struct gw_conf_key conf_initiator_keys[] = {
	{ .name = "name", .type = GW_CONF_STR,
	  .offset = offsetof(struct isc_initiator_conf, name), .min = 1, .max = ISC_NAME_MAX,
	  .flags = GW_CONF_REQUIRED, .check = conf_check_iscsi_name,
	  .help = "Initiator iSCSI name allowed to log in." },
	GW_CONF_END,
};

const struct gw_conf_key conf_target_keys[] = {
	{ .name = "name", .type = GW_CONF_STR, .offset = offsetof(struct isc_target_conf, name),
	  .min = 1, .max = ISC_NAME_MAX, .flags = GW_CONF_REQUIRED, .check = conf_check_iscsi_name,
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
	{ .name = "max_sessions", .type = GW_CONF_U32,
	  .offset = offsetof(struct isc_target_conf, max_sessions), .min = 0, .max = 65535,
	  .def = "256",
	  .help = "Sessions on this target, all initiators; a login beyond is refused (status "
		  "0x0302, out of resources). 0: no limit." },
	{ .name = "max_sessions_per_initiator", .type = GW_CONF_U32,
	  .offset = offsetof(struct isc_target_conf, max_sessions_per_initiator), .min = 0,
	  .max = 65535, .def = "16",
	  .help = "Sessions of one initiator name on this target (one per ISID); a login "
		  "beyond is refused (status 0x0302). 0: no limit." },
	GW_CONF_END,
};

const char *const conf_target_nested_keys[] = {
	"initiators", "chap", "params", "luns", NULL,
};

static const struct gw_conf_enum isc_alua_enums[] = {
	{ "active/optimized", SCSI_ALUA_AO },
	{ "active/non-optimized", SCSI_ALUA_ANO },
	{ "standby", SCSI_ALUA_STANDBY },
	{ "unavailable", SCSI_ALUA_UNAVAILABLE },
	{ NULL, 0 },
};

const struct gw_conf_key conf_group_keys[] = {
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

const struct gw_conf_key conf_discovery_keys[] = {
	{ .name = "auth", .type = GW_CONF_ENUM,
	  .offset = offsetof(struct isc_discovery_conf, auth), .def = "none",
	  .enums = isc_disc_auth_enums,
	  .help = "Authentication of discovery sessions: none, or chap with discovery.chap." },
	GW_CONF_END,
};

static void isc_chap_conf_free(struct isc_chap_conf *c)
{
	gw_conf_free(conf_chap_keys, c);
}

void conf_gw_free(struct isc_gw_conf *c)
{
	size_t i, j;

	if (!c)
		return;
	for (i = 0; i < c->nportals; i++)
		gw_conf_free(conf_portal_keys, &c->portals[i]);
	free(c->portals);
	gw_conf_free(conf_discovery_keys, &c->discovery);
	isc_chap_conf_free(&c->discovery.chap);
	for (i = 0; i < c->ntargets; i++) {
		struct isc_target_conf *t = &c->targets[i];

		gw_conf_free(conf_target_keys, t);
		for (j = 0; j < t->ninitiators; j++) {
			gw_conf_free(conf_initiator_keys, &t->initiators[j]);
			isc_chap_conf_free(&t->initiators[j].chap);
		}
		free(t->initiators);
		isc_chap_conf_free(&t->chap);
		gw_conf_free(conf_param_keys, &t->params);
		for (j = 0; j < t->nluns; j++) {
			gw_conf_free(conf_lu_keys, &t->luns[j].lu);
			conf_bs_free(&t->luns[j].bs);
		}
		free(t->luns);
	}
	free(c->targets);
	for (i = 0; i < c->ngroups; i++)
		gw_conf_free(conf_group_keys, &c->groups[i]);
	free(c->groups);
	memset(c, 0, sizeof(*c));
}

int conf_gw_check(const struct isc_gw_conf *c, struct gw_errlist *errs)
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
	conf_chap_check(&c->discovery.chap, "discovery.chap", errs);
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
		conf_chap_check(&t->chap, path, errs);
		snprintf(path, sizeof(path), "targets[%zu].params", i);
		conf_param_check(&t->params, path, errs);
		for (j = 0; j < t->ninitiators; j++) {
			const char *in = t->initiators[j].name;

			snprintf(path, sizeof(path), "targets[%zu].initiators[%zu].chap", i, j);
			conf_chap_check(&t->initiators[j].chap, path, errs);
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

