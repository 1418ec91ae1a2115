/* SPDX-License-Identifier: MIT */
/*
 * The gateway's configuration as data: the structs every object's settings are parsed into, the
 * keyword tables that parse, check, print and document them (include/gw_conf.h drives them), and the
 * walk over a whole configuration file with its embedded demo. It is the library the gateway,
 * the agent (validation, the OpenAPI schema) and isergwctl share: it needs lib/ only, so the
 * agent and the CLI link it instead of the gateway's engine.
 *
 * Each table keeps the prefix of the module it configures (isc_, scsi_, bs_, mp_, ctl_): the
 * modules, the agent and docs name them so. Files: conf_isc.c (portals, targets, discovery,
 * cluster groups, CHAP, login parameters), conf_scsi.c (LUs), conf_bs.c (backstores),
 * conf_mp.c (a remote backstore's paths and policies), conf_file.c (the file, the demo).
 */
#ifndef CONF_H
#define CONF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_conf.h"

/* ---------------------------------------------------------------------------------------- */
/* Limits from RFC 7143 that configuration values share with the protocol */

#define ISC_VAL_MAX		255	/* value bytes, except the long binary keys */
#define ISC_NAME_MAX		223	/* iSCSI names (RFC 7143 §4.2.7.1) */
#define ISC_CHAP_SECRET_MIN	12
#define ISC_CHAP_SECRET_MAX	256

/* ---------------------------------------------------------------------------------------- */
/* iSCSI CHAP (conf_isc.c) */

/* The `chap` object of the config (discovery, target, initiator). Empty user: no CHAP. */
struct isc_chap_conf {
	char *user;
	char *secret;		/* 12..256 bytes when user is set */
	char *mutual_user;	/* empty: one-way */
	char *mutual_secret;	/* 12..256 bytes when mutual_user is set, != secret */
};

/* gw_conf table over struct isc_chap_conf: user, secret, mutual_user, mutual_secret (secrets
 * flagged GW_CONF_SECRET, lengths 0..256 with conf_chap_check_secret). */
extern const struct gw_conf_key conf_chap_keys[];
/* gw_conf `check` for a secret field (field points at the char * member): NULL if empty or
 * 12..256 bytes, else a message. */
const char *conf_chap_check_secret(const void *field);
/*
 * Cross-key rules: secret required when user is set, mutual_secret required when mutual_user
 * is set, mutual_secret != secret (a reflected challenge would otherwise let an attacker
 * make the target compute its own answer), mutual_user without user refused. Errors go to errs
 * under "<path>.<key>"; returns 0 or -EINVAL.
 */
int conf_chap_check(const struct isc_chap_conf *c, const char *path, struct gw_errlist *errs);

/* ---------------------------------------------------------------------------------------- */
/* iSCSI login parameters (conf_isc.c) */

/* Target configuration (the `params` object of a target; see conf_param_keys) */

struct isc_param_conf {
	char *HeaderDigest;		/* "CRC32C,None": digests the target accepts, in order */
	char *DataDigest;
	uint32_t MaxRecvDataSegmentLength;	/* declared by the target, 512..2^24-1 */
	uint32_t MaxBurstLength;		/* upper limit, 512..2^24-1 */
	uint32_t FirstBurstLength;		/* upper limit, 512..2^24-1, <= MaxBurstLength */
	bool InitialR2T;			/* target wants R2T for the first burst (OR) */
	bool ImmediateData;			/* target allows immediate data (AND) */
	uint32_t MaxOutstandingR2T;		/* upper limit 1..65535 */
	uint32_t MaxConnections;		/* upper limit 1..65535 */
	uint32_t DefaultTime2Wait;		/* lower limit 0..3600 (result is the max) */
	uint32_t DefaultTime2Retain;		/* upper limit 0..3600 */
	uint32_t ErrorRecoveryLevel;		/* upper limit 0..2 (only 0 is implemented) */
	uint32_t queue_depth;			/* CmdSN window, 1..65535 (not negotiated) */
	uint32_t nop_interval;			/* seconds between NOP-In pings, 0: off */
	uint32_t nop_timeout;			/* seconds without answer, then drop; 0: off */
};

/*
 * gw_conf table over struct isc_param_conf, keys spelled as above (as on the wire).
 * Defaults: "CRC32C,None", "CRC32C,None", 262144, 1048576, 65536, false, true, 1, 1, 2, 20, 0,
 * 128, 10, 30. Call conf_param_check() after parsing for the cross-key rules.
 */
extern const struct gw_conf_key conf_param_keys[];
/* Cross-key rules (FirstBurstLength <= MaxBurstLength). Adds to errs under "<path>.key";
 * returns 0 or -EINVAL. */
int conf_param_check(const struct isc_param_conf *c, const char *path,
			 struct gw_errlist *errs);
/* HeaderDigest / DataDigest lists ("CRC32C,None") as a mask of these, in any order; 0 for a
 * bad or repeated item. */
#define ISC_DIGEST_NONE		(1u << 0)
#define ISC_DIGEST_CRC32C	(1u << 1)
unsigned int conf_digest_mask(const char *s);

/* ---------------------------------------------------------------------------------------- */
/* SCSI logical units (conf_scsi.c) */

enum scsi_alua_state {
	SCSI_ALUA_AO = 0x0,		/* active/optimized */
	SCSI_ALUA_ANO = 0x1,		/* active/non-optimized */
	SCSI_ALUA_STANDBY = 0x2,
	SCSI_ALUA_UNAVAILABLE = 0x3,
	SCSI_ALUA_TRANSITIONING = 0xf,
};

/* Per-LU settings, one table drives parsing and printing. */
struct scsi_lu_conf {
	uint64_t lun;
	char *vendor;			/* INQUIRY T10 vendor id, up to 8 chars */
	char *product;			/* up to 16 chars */
	char *revision;			/* up to 4 chars */
	char *serial;			/* unit serial (VPD 0x80); generated when empty */
	uint64_t naa;			/* NAA-6 id low 64 bits (VPD 0x83); generated when 0 */
	bool write_cache;		/* WCE in the caching mode page */
	bool thin;			/* report thin provisioning and accept UNMAP */
	char *owner;			/* cluster member that owns it (the agent's; informative) */
	uint32_t alua_group;		/* target port group that is active/optimized for this LU
					 * (the others: non-optimized); 0: the groups' own states */
	bool alua_pending;		/* ownership moving to alua_group: it reports
					 * non-optimized until the agent clears this */
};
extern const struct gw_conf_key conf_lu_keys[];

/* ---------------------------------------------------------------------------------------- */
/* Backstores (conf_bs.c) */

enum bs_type {
	BS_TYPE_FILE,		/* regular file (created sparse if missing and size given) */
	BS_TYPE_BLOCK,		/* block device, including dm-multipath maps */
	BS_TYPE_RAM,
	BS_TYPE_NULL,		/* reads zeroes, drops writes: for benchmarks of the target itself */
	BS_TYPE_REMOTE,		/* a back-end LUN over N iSCSI paths (gateway/mpath/) */
};

/* How file and block backstores reach the device. */
enum bs_io_engine {
	BS_IO_AUTO,		/* io_uring when the kernel and file system allow, else threads */
	BS_IO_URING,		/* io_uring or refuse to open */
	BS_IO_THREADS,		/* blocking preadv/pwritev on worker threads */
};

struct mp_conf;

struct bs_conf {
	int type;		/* enum bs_type */
	char *path;		/* file, block */
	uint64_t size;		/* bytes; file: created/extended to this, ram/null: required */
	uint32_t block_size;	/* 512 or 4096 */
	bool direct;		/* O_DIRECT for file/block */
	bool readonly;
	uint32_t threads;	/* worker threads for file/block (the fallback I/O engine) */
	int io_engine;		/* enum bs_io_engine (file/block) */
	uint32_t queue_depth;	/* file/block: I/Os in flight to the device (io_uring); 0: 128 */
	struct mp_conf *remote;	/* remote: paths and policies (heap; see conf_bs_parse) */
};

extern const struct gw_conf_key conf_bs_keys[];

/*
 * The backstore object of the configuration: conf_bs_keys, plus for "type": "remote" the
 * policy keys and "paths" array of gateway/mpath (conf_mp_keys). Sets defaults first. Errors
 * name "<path>.<key>". conf_bs_free releases what it allocated.
 */
int conf_bs_parse(struct bs_conf *conf, const json_t *in, const char *path,
		  struct gw_errlist *errs);
void conf_bs_free(struct bs_conf *conf);
json_t *conf_bs_to_json(const struct bs_conf *conf, bool mask_secrets);

/* ---------------------------------------------------------------------------------------- */
/* A remote backstore's paths and policies (conf_mp.c) */

enum mp_pg_policy {
	MP_PG_FAILOVER,		/* one path per group, in configuration order */
	MP_PG_MULTIBUS,		/* every path in one group */
	MP_PG_GROUP_BY_PRIO,	/* groups by ALUA priority: AO 50, ANO 10, others 1 */
};

/* What drives a remote LUN's TCP paths (issue 13): libiscsi, or the native initiator. */
enum mp_engine {
	MP_ENGINE_LIBISCSI,
	MP_ENGINE_NATIVE,
};

enum mp_selector {
	MP_SEL_ROUND_ROBIN,
	MP_SEL_QUEUE_LENGTH,	/* fewest commands in flight */
	MP_SEL_SERVICE_TIME,	/* fewest bytes in flight (dm's service-time, throughput 1) */
};

/* failback and no_path_retry, decoded */
#define MP_FAILBACK_MANUAL (-1)
#define MP_FAILBACK_IMMEDIATE 0
#define MP_NO_PATH_RETRY_QUEUE (-1)
#define MP_NO_PATH_RETRY_FAIL 0

struct mp_chap_conf {
	char *user;
	char *secret;
	char *mutual_user;
	char *mutual_secret;
};

struct mp_path_conf {
	char *url;		/* iscsi://HOST[:PORT]/TARGET-IQN/LUN or iser://... */
	char *initiator;	/* "" : the LUN's initiator */
	struct mp_chap_conf chap;
};

/* The remote keys of a backstore object ("type": "remote"). */
struct mp_conf {
	int pg_policy;			/* enum mp_pg_policy */
	int selector;			/* enum mp_selector */
	int engine;			/* enum mp_engine */
	uint32_t rr_min_io_rq;		/* round-robin: I/Os per path before the next */
	uint32_t polling_interval;	/* s: path checker (TUR) period */
	uint32_t checker_timeout;	/* s: a TUR not answered in this is a failed path */
	char *failback;			/* "immediate" | "manual" | seconds */
	char *no_path_retry;		/* "fail" | "queue" | polling intervals to queue */
	char *initiator;		/* initiator name of every path unless the path sets one */
	char *wwid;			/* expected identity ("naa.6..."), "" = the first path's */
	uint32_t login_timeout;		/* s: TCP connect + iSCSI login + identity probe */
	uint32_t initial_login_retry_max; /* logins per path before start-up stops waiting */
	uint32_t io_timeout;		/* s: an I/O outstanding this long fails its path */
	uint32_t io_stall_ms;		/* path with I/O and no reply this long gets a NOP-Out */
	uint32_t nop_timeout_ms;	/* that NOP-Out unanswered this long: the path is dead */
	uint32_t reconnect_delay_ms;	/* first reconnect backoff */
	uint32_t reconnect_max_ms;	/* backoff cap */
	uint32_t drain_timeout_ms;	/* shutdown: in-flight I/O gets this long to finish */
	struct mp_path_conf *paths;
	size_t npaths;
};

extern const struct gw_conf_key conf_mp_keys[];
extern const struct gw_conf_key conf_mp_path_keys[];
extern const struct gw_conf_key conf_mp_chap_keys[];

/* Defaults, then the remote keys and the "paths" array of `in` (a backstore object); keys in
 * `ignore` belong to the caller. Errors name "<path>.<key>" / "<path>.paths[i].url". */
int conf_mp_parse(struct mp_conf *c, const json_t *in, const char *path,
		  const char *const *ignore, struct gw_errlist *errs);
int conf_mp_defaults(struct mp_conf *c);
void conf_mp_free(struct mp_conf *c);
int conf_mp_copy(struct mp_conf *dst, const struct mp_conf *src);
json_t *conf_mp_to_json(const struct mp_conf *c, bool mask_secrets);
/* "immediate" 0, "manual" -1, "N" N seconds. 0 or -EINVAL. */
int conf_mp_parse_failback(const char *s, int32_t *out);
/* "fail" 0, "queue" -1, "N" N polling intervals. 0 or -EINVAL. */
int conf_mp_parse_no_path_retry(const char *s, int32_t *out);

/* ---------------------------------------------------------------------------------------- */
/* iSCSI: portals, targets, discovery, cluster groups (conf_isc.c) */

/* The transports a portal can name, and the one table of their names (conf_isc.c): the portal
 * key parses with it, and the gateway's state and the agent's metrics print with it. The
 * datamovers are found by the same names (dmv_transport_find). */
enum isc_portal_transport {
	ISC_PORTAL_TCP = 0,
	ISC_PORTAL_ISER = 1,
	ISC_PORTAL_NR,
};
extern const struct gw_conf_enum conf_transport_enums[];	/* terminated by { NULL, 0 } */
/* "tcp", "iser"; NULL for an id out of range. */
const char *conf_transport_name(int id);

struct isc_portal_conf {
	char *name;
	int transport;			/* enum isc_portal_transport */
	char *address;
	uint32_t port;
	/* Limits on what arrives at this portal (docs/CONFIGURATION.md, "Limits") */
	uint32_t max_connections;	/* open connections, logged in or not; 0: no limit */
	uint32_t login_timeout;		/* s: a connection not logged in by then is closed */
	uint32_t login_fail_limit;	/* failed logins from one address ... 0: no back-off */
	uint32_t login_fail_window;	/* s: ... within this window ... */
	uint32_t login_backoff;		/* s: ... refuse its logins this long */
};

struct isc_initiator_conf {
	char *name;
	struct isc_chap_conf chap;
};

struct isc_lun_conf {
	struct scsi_lu_conf lu;
	struct bs_conf bs;
};

struct isc_target_conf {
	char *name;
	char *alias;
	uint32_t tpgt;
	struct gw_strlist portals;
	bool allow_any_initiator;
	uint32_t max_sessions;		/* sessions on this target; 0: no limit */
	uint32_t max_sessions_per_initiator; /* of one initiator name on it; 0: no limit */
	struct isc_initiator_conf *initiators;
	size_t ninitiators;
	struct isc_chap_conf chap;
	struct isc_param_conf params;
	struct isc_lun_conf *luns;
	size_t nluns;
};

enum isc_disc_auth {
	ISC_DISC_AUTH_NONE = 0,
	ISC_DISC_AUTH_CHAP = 1,
};

struct isc_discovery_conf {
	int auth;			/* enum isc_disc_auth */
	struct isc_chap_conf chap;
};

/* One ALUA target port group of a cluster ("cluster": {"groups": [...]}): a gateway. */
struct isc_group_conf {
	uint32_t id;			/* the TPGT of that gateway's targets */
	char *name;			/* the member's gateway id, informative */
	int state;			/* enum scsi_alua_state */
};

/* The whole iSCSI part of the gateway's configuration. */
struct isc_gw_conf {
	struct isc_portal_conf *portals;
	size_t nportals;
	struct isc_discovery_conf discovery;
	struct isc_target_conf *targets;
	size_t ntargets;
	struct isc_group_conf *groups;	/* empty: a gateway alone */
	size_t ngroups;
};

extern const struct gw_conf_key conf_portal_keys[];
extern const struct gw_conf_key conf_initiator_keys[];	/* "name"; "chap" nested */
extern const struct gw_conf_key conf_target_keys[];	/* nested keys: the caller's */
extern const struct gw_conf_key conf_discovery_keys[];	/* "auth"; "chap" nested */
extern const struct gw_conf_key conf_group_keys[];		/* cluster.groups[] */

/* The nested keys of a target object (the caller walks them). */
extern const char *const conf_target_nested_keys[];

/* Checks an iSCSI name (iqn., eui., naa. forms, RFC 7143 §4.2.7); gw_conf `check` signature. */
const char *conf_check_iscsi_name(const void *field);
/* Cross-object rules (portal names unique and referenced, target names unique, LUNs unique,
 * CHAP rules). Errors under their key path. 0 or -EINVAL. */
int conf_gw_check(const struct isc_gw_conf *c, struct gw_errlist *errs);
void conf_gw_free(struct isc_gw_conf *c);

/* ---------------------------------------------------------------------------------------- */
/* The configuration file (conf_file.c) */

struct ctl_gateway_conf {
	char *log_debug;		/* debug components, "iscsi,scsi" / "all" / "" */
	char *control_socket;		/* unix socket path, "" = none */
	uint64_t data_memory;		/* bytes of task data buffers, all sessions together */
	uint32_t boot_wait;		/* s: longest start-up wait for remote LUNs' logins */
	uint32_t fence_margin_ms;	/* cluster: fence this long before the lease's deadline */
	uint32_t loops;			/* event loops (threads), read at start-up */
	uint32_t poll_us;		/* busy polling before a loop sleeps, µs; 0: never */
};

extern const struct gw_conf_key conf_gateway_keys[];

struct ctl_config {
	struct ctl_gateway_conf gateway;
	struct isc_gw_conf *isc;	/* heap; hand it to ctl_gw_create */
};

/* Parses and checks root. On error errs holds every problem and *cfg is freed. 0 or -EINVAL
 * (or -ENOMEM). */
int conf_parse(const json_t *root, struct ctl_config *cfg, struct gw_errlist *errs);
/* Reads a file and parses it; JSON syntax errors are reported with line and column. */
int conf_load_file(const char *path, struct ctl_config *cfg, struct gw_errlist *errs);
void conf_free(struct ctl_config *cfg);

/* The embedded demo configuration for a state directory (new reference). */
json_t *conf_demo(const char *state_dir);
/* Writes DIR/isergwd.json from the demo unless it exists; *path gets its malloc'ed name. */
int conf_ensure_state(const char *state_dir, char **path);

#endif
