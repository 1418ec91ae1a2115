/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/mpath/: the native initiator (issue 13, "A cheaper proxy"). One back-end
 * iSCSI/TCP connection of a remote path, as an alternative to a libiscsi context: non-blocking
 * connect, login (AuthMethod None or CHAP-MD5 with optional mutual CHAP; operational
 * negotiation per RFC 7143 §13), then SCSI commands from the caller's iovec and NOP-Out pings.
 *
 * Its point is the system calls: what arrived is read with one read() into a receive buffer
 * and every complete PDU in it is handled; the data segment of a Data-In goes straight into
 * the command's iovec (readv with the buffer behind it for the headers that follow; after a
 * big segment only the next header, so that the next big one is read in place whole), and
 * everything queued in a loop round (commands, Data-Out, NOP answers) leaves with one writev
 * from a gw_defer, as the host side's dmv_tcp does. Error recovery level 0, one connection
 * per session; ABORT TASK, LUN RESET and Logout as primitives for the caller.
 *
 * The async rule: a call that returns < 0 never calls back; one that returns 0 calls back
 * exactly once, unless mp_ini_destroy comes first (it calls nothing back: the caller still
 * holds every command it submitted and hands them back itself).
 */
#ifndef MP_INI_H
#define MP_INI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct gw_loop;
struct mp_ini;

struct mp_ini_conf {
	const char *portal;		/* host[:port], [v6addr][:port]; port 3260 by default. A
					 * login redirected (RFC 7143 §11.13.5, temporary or
					 * permanent) is followed, at most 8 times, for this
					 * connection only */
	const char *target;
	const char *initiator;
	const char *chap_user;		/* NULL or "": AuthMethod=None */
	const char *chap_secret;
	const char *mutual_user;	/* NULL or "": one-way CHAP */
	const char *mutual_secret;
	bool header_digest;		/* offer CRC32C first (None is always acceptable) */
	bool data_digest;		/* likewise for the data digest */
	const uint8_t *isid;		/* 6 bytes, the same on each login to reinstate the last
					 * session (RFC 7143 §6.3.5); NULL: a random one */
};

enum mp_ini_dir { MP_INI_NONE, MP_INI_READ, MP_INI_WRITE };

/* A command's end. status >= 0: the SCSI status (sense/sense_len for CHECK CONDITION, data_len
 * bytes of Data-In landed in the iovec); -ECANCELED: an ABORT TASK or LUN RESET of ours took it
 * (the target will say nothing more of it; it may or may not have run). A failed connection
 * never ends commands: it calls the event callback, and the caller tears it down. For a NOP,
 * TMF or Logout, status is the target's answer (TMF: the RFC 7143 §11.6.1 response, 0 =
 * function complete; Logout: §11.15.1, 0 = closed). */
struct mp_ini_result {
	int status;
	const uint8_t *sense;
	uint32_t sense_len;
	uint32_t data_len;
};

typedef void (*mp_ini_cmd_fn)(void *arg, const struct mp_ini_result *r);
/* err 0: logged in (once); < 0: the connection failed (once, the last call back but for none). */
typedef void (*mp_ini_event_fn)(struct mp_ini *ini, int err, void *arg);

/* Starts connecting and logging in; 0 or -errno (then nothing is allocated). */
int mp_ini_create(struct gw_loop *loop, const struct mp_ini_conf *conf, mp_ini_event_fn fn,
		  void *arg, struct mp_ini **out);
/* Resets the connection (RST: nothing queued reaches the target later) and frees everything;
 * no callback runs. Not from inside one of its own callbacks (use a defer). */
void mp_ini_destroy(struct mp_ini *ini);
/* A command for LUN lun. iov must stay valid until the callback. 0, or -ENOTCONN (not logged
 * in, or failed), -ENOMEM, -EINVAL. */
int mp_ini_command(struct mp_ini *ini, int lun, const uint8_t *cdb, int cdb_len,
		   enum mp_ini_dir dir, const struct iovec *iov, int iovcnt, uint32_t xfer,
		   mp_ini_cmd_fn fn, void *arg);
/* A NOP-Out ping; fn gets status 0 when the target's NOP-In comes back. */
int mp_ini_nop(struct mp_ini *ini, mp_ini_cmd_fn fn, void *arg);
/* Task management (RFC 7143 §11.5), immediate. ABORT TASK names the command by the arg it was
 * submitted with on LUN lun; LUN RESET takes every command of lun (cmd_arg unused). When the
 * target answers "function complete", the commands it took end with -ECANCELED, then fn runs
 * with the response. 0, or -ENOTCONN, -EBUSY, -ENOMEM, -EINVAL, -ENOENT (ABORT TASK: no such
 * command in flight), -EALREADY (ABORT TASK of a command not sent yet: it has just ended with
 * -ECANCELED; fn is not called). */
enum mp_ini_tmf { MP_INI_ABORT_TASK = 1, MP_INI_LUN_RESET = 5 };
int mp_ini_tmf(struct mp_ini *ini, enum mp_ini_tmf fn_code, int lun, const void *cmd_arg,
	       mp_ini_cmd_fn fn, void *arg);
/* Logout (close the session), immediate; best with nothing in flight. fn gets the target's
 * response; on 0 the connection is over (no event callback follows) and mp_ini_destroy closes
 * it with a FIN instead of a reset. */
int mp_ini_logout(struct mp_ini *ini, mp_ini_cmd_fn fn, void *arg);
/* Why it failed (for logs), "" if it has not. */
const char *mp_ini_error(const struct mp_ini *ini);
/* The portal's name while it is being looked up (off the loop, lib/gw_resolve.c), else NULL. */
const char *mp_ini_resolving(const struct mp_ini *ini);
/* The numeric address ("192.0.2.1:3260", "[2001:db8::1]:3260") of the connection, the
 * redirected one if the login was redirected; "" before any. */
const char *mp_ini_address(const struct mp_ini *ini);
/* Where the login was redirected (the TargetAddress followed last), NULL if it was not. */
const char *mp_ini_redirected_to(const struct mp_ini *ini);
/* host[:port][,tpgt] or [v6addr][:port][,tpgt] into host and port ("3260" by default); the
 * portal group tag is dropped. 0 or -EINVAL. */
int mp_ini_parse_portal(const char *portal, char *host, size_t hl, char *port, size_t pl);

/* Counters, for tests and the bench. */
struct mp_ini_stats {
	uint64_t reads;		/* read/readv calls */
	uint64_t writes;	/* writev calls */
	uint64_t pdus_in;
	uint64_t pdus_out;
	uint64_t direct_bytes;	/* Data-In bytes read straight into a command's iovec */
	uint32_t redirects;	/* logins sent elsewhere (status class 1) and followed */
	uint32_t max_send_dsl;	/* negotiated: the target's MaxRecvDataSegmentLength */
	uint32_t first_burst;
	uint32_t max_burst;
	bool initial_r2t;
	bool immediate_data;
	bool header_digest;
	bool data_digest;
};
void mp_ini_stats(const struct mp_ini *ini, struct mp_ini_stats *st);

#endif
