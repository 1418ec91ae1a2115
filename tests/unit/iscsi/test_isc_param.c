// SPDX-License-Identifier: MIT
/* Login key negotiation as initiators drive it: answers, errors, target offers, iSER keys. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isc_param.h"

#define INAME "iqn.1994-05.com.example:host1"
#define TNAME "iqn.2026-11.org.isergw:demo"
#define LOGIN1 "InitiatorName=" INAME "\0TargetName=" TNAME "\0SessionType=Normal\0"

struct t {
	struct isc_param_conf conf;
	struct isc_neg *n;
	struct isc_kvlist ans;	/* the last response, parsed */
	uint16_t status;
};

static void conf_defaults(struct isc_param_conf *c)
{
	memset(c, 0, sizeof(*c));
	cr_assert_eq(gw_conf_defaults(conf_param_keys, c), 0);
}

static void t_open(struct t *t, bool leading, unsigned int caps, const struct isc_params *sess)
{
	struct isc_neg_init in = {
		.conf = &t->conf, .target_alias = "demo", .tpgt = 1, .leading = leading,
		.transport_caps = caps, .session = sess,
	};

	cr_assert_eq(isc_neg_create(&in, &t->n), 0);
	isc_kvlist_init(&t->ans);
}

static void t_close(struct t *t)
{
	isc_neg_destroy(t->n);
	isc_kvlist_fini(&t->ans);
	gw_conf_free(conf_param_keys, &t->conf);
}

/* One request; the answer lands in t->ans. */
static int req(struct t *t, enum isc_stage stage, const void *text, size_t len)
{
	struct isc_kvlist kl;
	struct gw_buf b;
	int r;

	isc_kvlist_init(&kl);
	gw_buf_init(&b);
	cr_assert_eq(isc_kvlist_parse(&kl, text, len), 0);
	r = isc_neg_process(t->n, stage, &kl, &b, &t->status);
	isc_kvlist_fini(&t->ans);
	cr_assert_eq(isc_kvlist_parse(&t->ans, b.data, b.len), 0);
	gw_buf_fini(&b);
	isc_kvlist_fini(&kl);
	return r;
}

static int transit(struct t *t, enum isc_stage from, enum isc_stage to)
{
	struct gw_buf b;
	int r;

	gw_buf_init(&b);
	r = isc_neg_transit(t->n, from, to, &b, &t->status);
	isc_kvlist_fini(&t->ans);
	cr_assert_eq(isc_kvlist_parse(&t->ans, b.data, b.len), 0);
	gw_buf_fini(&b);
	return r;
}

#define REQ(t, stage, lit) req((t), (stage), (lit), sizeof(lit) - 1)
#define ANS(t, key) isc_kvlist_get(&(t)->ans, (key))

static void assert_ans(struct t *t, const char *key, const char *want)
{
	const char *v = ANS(t, key);

	cr_assert_not_null(v, "no answer for %s", key);
	cr_assert_str_eq(v, want, "%s=%s, expected %s", key, v, want);
}

Test(param, kvlist_parse)
{
	static const char ok[] = "A=1\0B=\0\0\0C=x=y";
	struct isc_kvlist l;
	char big[300];

	isc_kvlist_init(&l);
	cr_assert_eq(isc_kvlist_parse(&l, ok, sizeof(ok) - 1), 0);
	cr_assert_eq(l.n, 3);
	cr_assert_str_eq(isc_kvlist_get(&l, "B"), "");
	cr_assert_str_eq(isc_kvlist_get(&l, "C"), "x=y");
	isc_kvlist_fini(&l);

	cr_assert_eq(isc_kvlist_parse(&l, "NoEquals\0", 9), -EINVAL);
	cr_assert_eq(isc_kvlist_parse(&l, "=v\0", 3), -EINVAL);
	cr_assert_eq(isc_kvlist_parse(&l, "Bad Key=v\0", 10), -EINVAL);
	cr_assert_eq(isc_kvlist_parse(&l, "A=1\0A=2\0", 8), -EINVAL, "same key twice");
	memset(big, 'k', sizeof(big));
	memcpy(big + 64, "=v", 3);	/* 64-byte key */
	cr_assert_eq(isc_kvlist_parse(&l, big, 67), -EINVAL);
	memcpy(big, "K=", 2);
	memset(big + 2, 'v', 256);	/* 256-byte value */
	cr_assert_eq(isc_kvlist_parse(&l, big, 258), -EINVAL);
	memcpy(big, "CHAP_C=", 7);	/* long binary values are allowed */
	cr_assert_eq(isc_kvlist_parse(&l, big, 258), 0);
	isc_kvlist_fini(&l);
}

Test(param, conf_defaults_and_check)
{
	struct isc_param_conf c;
	struct gw_errlist errs;

	conf_defaults(&c);
	cr_assert_str_eq(c.HeaderDigest, "CRC32C,None");
	cr_assert_eq(c.MaxRecvDataSegmentLength, 262144);
	cr_assert_eq(c.MaxBurstLength, 1048576);
	cr_assert_eq(c.FirstBurstLength, 65536);
	cr_assert_not(c.InitialR2T);
	cr_assert(c.ImmediateData);
	cr_assert_eq(c.queue_depth, 128);
	cr_assert_eq(c.nop_timeout, 30);

	gw_errlist_init(&errs);
	cr_assert_eq(gw_conf_set_text(conf_param_keys, &c, "HeaderDigest", "MD5", &errs),
		     -EINVAL, "only CRC32C and None are digests");
	c.FirstBurstLength = 2 * c.MaxBurstLength;
	cr_assert_eq(conf_param_check(&c, "targets[0].params", &errs), -EINVAL);
	cr_assert_str_eq(errs.v[errs.n - 1].field, "targets[0].params.FirstBurstLength");
	gw_errlist_fini(&errs);
	gw_conf_free(conf_param_keys, &c);
}

Test(param, normal_leading_login)
{
	static const char op[] =
		"HeaderDigest=CRC32C,None\0DataDigest=None\0InitialR2T=No\0ImmediateData=Yes\0"
		"MaxRecvDataSegmentLength=65536\0MaxBurstLength=16776192\0"
		"FirstBurstLength=262144\0DefaultTime2Wait=0\0DefaultTime2Retain=60\0"
		"MaxOutstandingR2T=8\0MaxConnections=4\0DataPDUInOrder=No\0"
		"DataSequenceInOrder=Yes\0ErrorRecoveryLevel=2\0IFMarker=No\0OFMarker=No\0"
		"IFMarkInt=2048~8192\0X-com.example.knob=1\0iSCSIProtocolLevel=2\0"
		"TaskReporting=FastAbort,RFC3720\0";
	struct t t;
	const struct isc_params *p;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_SECURITY, LOGIN1 "AuthMethod=None"), 0);
	assert_ans(&t, "TargetPortalGroupTag", "1");
	cr_assert_null(ANS(&t, "AuthMethod"), "security keys are isc_chap's");
	cr_assert_str_eq(isc_neg_initiator_name(t.n), INAME);
	cr_assert_str_eq(isc_neg_target_name(t.n), TNAME);
	cr_assert_eq(transit(&t, ISC_STAGE_SECURITY, ISC_STAGE_OPERATIONAL), 1);

	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, op), 0);
	assert_ans(&t, "HeaderDigest", "CRC32C");
	assert_ans(&t, "DataDigest", "None");
	assert_ans(&t, "InitialR2T", "No");
	assert_ans(&t, "ImmediateData", "Yes");
	assert_ans(&t, "MaxRecvDataSegmentLength", "262144");	/* the target's declaration */
	assert_ans(&t, "MaxBurstLength", "1048576");
	assert_ans(&t, "FirstBurstLength", "65536");
	assert_ans(&t, "DefaultTime2Wait", "2");
	assert_ans(&t, "DefaultTime2Retain", "20");
	assert_ans(&t, "MaxOutstandingR2T", "1");
	assert_ans(&t, "MaxConnections", "1");
	assert_ans(&t, "DataPDUInOrder", "Yes");
	assert_ans(&t, "DataSequenceInOrder", "Yes");
	assert_ans(&t, "ErrorRecoveryLevel", "0");
	assert_ans(&t, "IFMarker", "No");
	assert_ans(&t, "OFMarker", "No");
	assert_ans(&t, "IFMarkInt", "Reject");
	assert_ans(&t, "X-com.example.knob", "NotUnderstood");
	assert_ans(&t, "iSCSIProtocolLevel", "1");
	assert_ans(&t, "TaskReporting", "RFC3720");

	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	assert_ans(&t, "TargetAlias", "demo");
	cr_assert_null(ANS(&t, "MaxRecvDataSegmentLength"), "declared once only");

	p = isc_neg_params(t.n);
	cr_assert(p->header_digest);
	cr_assert_not(p->data_digest);
	cr_assert_eq(p->max_recv_dsl, 262144);
	cr_assert_eq(p->max_xmit_dsl, 65536);
	cr_assert_eq(p->max_burst_length, 1048576);
	cr_assert_eq(p->first_burst_length, 65536);
	cr_assert_not(p->initial_r2t);
	cr_assert(p->immediate_data);
	cr_assert_eq(p->default_time2wait, 2);
	cr_assert_eq(p->default_time2retain, 20);
	cr_assert_eq(p->error_recovery_level, 0);
	cr_assert_eq(p->session_type, ISC_SESSION_NORMAL);
	cr_assert_str_eq(p->target_name, TNAME);
	cr_assert_not(p->rdma_extensions);
	t_close(&t);
}

Test(param, boolean_functions_follow_target_config)
{
	struct t t;

	conf_defaults(&t.conf);
	t.conf.InitialR2T = true;
	t.conf.ImmediateData = false;
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "InitialR2T=No\0ImmediateData=Yes\0"
			 "FirstBurstLength=8192"), 0);
	assert_ans(&t, "InitialR2T", "Yes");		/* OR */
	assert_ans(&t, "ImmediateData", "No");		/* AND */
	/* InitialR2T=Yes and ImmediateData=No: no unsolicited data, length is moot */
	assert_ans(&t, "FirstBurstLength", "Irrelevant");
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	cr_assert(isc_neg_params(t.n)->initial_r2t);
	cr_assert_not(isc_neg_params(t.n)->immediate_data);
	t_close(&t);
}

Test(param, first_burst_bounded_by_max_burst)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL,
			 LOGIN1 "FirstBurstLength=65536\0MaxBurstLength=16384"), 0);
	assert_ans(&t, "MaxBurstLength", "16384");
	assert_ans(&t, "FirstBurstLength", "16384");
	t_close(&t);
}

Test(param, digest_list_selection)
{
	struct t t;

	conf_defaults(&t.conf);
	free(t.conf.DataDigest);
	t.conf.DataDigest = strdup("None");
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL,
			 LOGIN1 "HeaderDigest=None,CRC32C\0DataDigest=CRC32C,None"), 0);
	assert_ans(&t, "HeaderDigest", "None");	/* the initiator's order wins */
	assert_ans(&t, "DataDigest", "None");		/* CRC32C not allowed by the target */
	t_close(&t);

	conf_defaults(&t.conf);
	free(t.conf.HeaderDigest);
	t.conf.HeaderDigest = strdup("CRC32C");
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "HeaderDigest=None"), 0);
	assert_ans(&t, "HeaderDigest", "Reject");
	cr_assert_lt(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 0,
		     "no acceptable header digest: the login cannot complete");
	cr_assert_eq(t.status, ISC_PARAM_ST_INITIATOR_ERR);
	t_close(&t);
}

Test(param, out_of_range_rejected)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL,
			 LOGIN1 "MaxBurstLength=100\0MaxRecvDataSegmentLength=16777216\0"
			 "ErrorRecoveryLevel=3\0InitialR2T=Maybe\0DefaultTime2Wait=abc\0"
			 "MaxOutstandingR2T=0"), 0);
	assert_ans(&t, "MaxBurstLength", "Reject");
	assert_ans(&t, "MaxRecvDataSegmentLength", "Reject");
	assert_ans(&t, "ErrorRecoveryLevel", "Reject");
	assert_ans(&t, "InitialR2T", "Reject");
	assert_ans(&t, "DefaultTime2Wait", "Reject");
	assert_ans(&t, "MaxOutstandingR2T", "Reject");
	/* rejected values leave the defaults in place */
	cr_assert_eq(isc_neg_params(t.n)->max_xmit_dsl, 8192);
	cr_assert_eq(isc_neg_params(t.n)->error_recovery_level, 0);
	t_close(&t);
}

Test(param, hex_numbers_accepted)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "MaxBurstLength=0x4000"), 0);
	assert_ans(&t, "MaxBurstLength", "16384");
	t_close(&t);
}

Test(param, unknown_key_not_understood)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_SECURITY, LOGIN1 "FooBar=1\0X#org.example=2"), 0);
	assert_ans(&t, "FooBar", "NotUnderstood");
	assert_ans(&t, "X#org.example", "NotUnderstood");
	t_close(&t);
}

Test(param, repeated_key_is_an_error)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "MaxBurstLength=65536"), 0);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, "MaxBurstLength=32768"), -EPROTO);
	cr_assert_eq(t.status, ISC_PARAM_ST_INITIATOR_ERR);
	/* the negotiation is dead afterwards */
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, "DataDigest=None"), -EPROTO);
	t_close(&t);
}

Test(param, security_key_outside_security_stage)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "AuthMethod=None"), -EPROTO);
	cr_assert_eq(t.status, ISC_PARAM_ST_INITIATOR_ERR);
	t_close(&t);
}

Test(param, missing_initiator_name)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_SECURITY, "TargetName=" TNAME "\0AuthMethod=None"), -EINVAL);
	cr_assert_eq(t.status, ISC_PARAM_ST_MISSING_PARAM);
	t_close(&t);
}

Test(param, missing_target_name_normal_only)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_SECURITY, "InitiatorName=" INAME), -EINVAL);
	cr_assert_eq(t.status, ISC_PARAM_ST_MISSING_PARAM);
	t_close(&t);

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_SECURITY,
			 "InitiatorName=" INAME "\0SessionType=Discovery"), 0);
	cr_assert_null(ANS(&t, "TargetPortalGroupTag"));
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, "MaxBurstLength=65536\0HeaderDigest=None"), 0);
	assert_ans(&t, "MaxBurstLength", "Irrelevant");
	assert_ans(&t, "HeaderDigest", "None");
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	cr_assert_null(ANS(&t, "TargetAlias"));
	assert_ans(&t, "MaxRecvDataSegmentLength", "262144");
	cr_assert_eq(isc_neg_params(t.n)->session_type, ISC_SESSION_DISCOVERY);
	/* FFP text request */
	cr_assert_eq(REQ(&t, ISC_STAGE_FFP, "SendTargets=All"), 0);
	cr_assert_str_eq(isc_neg_send_targets(t.n), "All");
	t_close(&t);
}

Test(param, unknown_session_type)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_SECURITY, "InitiatorName=" INAME "\0SessionType=Bulk"),
		     -EINVAL);
	cr_assert_eq(t.status, ISC_PARAM_ST_SESSION_TYPE);
	t_close(&t);
}

Test(param, non_leading_refuses_lo_keys)
{
	struct isc_params sess;
	struct t t;

	isc_params_defaults(&sess);
	sess.max_burst_length = 65536;
	sess.immediate_data = false;

	conf_defaults(&t.conf);
	t_open(&t, false, 0, &sess);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL,
			 LOGIN1 "HeaderDigest=CRC32C\0MaxRecvDataSegmentLength=32768"), 0);
	assert_ans(&t, "HeaderDigest", "CRC32C");	/* connection-only keys are fine */
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	cr_assert_eq(isc_neg_params(t.n)->max_burst_length, 65536, "session value kept");
	cr_assert_not(isc_neg_params(t.n)->immediate_data);
	cr_assert_eq(isc_neg_params(t.n)->max_xmit_dsl, 32768);
	t_close(&t);

	conf_defaults(&t.conf);
	t_open(&t, false, 0, &sess);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "MaxBurstLength=65536"), -EPROTO);
	cr_assert_eq(t.status, ISC_PARAM_ST_INITIATOR_ERR);
	t_close(&t);

	conf_defaults(&t.conf);
	t_open(&t, false, 0, &sess);
	cr_assert_eq(REQ(&t, ISC_STAGE_SECURITY, "InitiatorName=" INAME "\0TargetName=" TNAME
			 "\0SessionType=Discovery"), -EPROTO, "session type cannot change");
	t_close(&t);
}

Test(param, non_leading_needs_session)
{
	struct isc_param_conf c;
	struct isc_neg_init in = { .conf = &c, .leading = false };
	struct isc_neg *n;

	conf_defaults(&c);
	cr_assert_eq(isc_neg_create(&in, &n), -EINVAL);
	gw_conf_free(conf_param_keys, &c);
}

Test(param, target_offers_when_default_breaks_config)
{
	struct t t;

	conf_defaults(&t.conf);
	t.conf.ImmediateData = false;
	t.conf.MaxBurstLength = 131072;		/* RFC default 262144 is above it */
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "MaxRecvDataSegmentLength=8192"), 0);
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 0,
		     "the target waits for answers to its offers");
	assert_ans(&t, "ImmediateData", "No");
	assert_ans(&t, "MaxBurstLength", "131072");
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, "ImmediateData=No\0MaxBurstLength=65536"), 0);
	cr_assert_eq(t.ans.n, 0, "answers are not answered");
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	cr_assert_not(isc_neg_params(t.n)->immediate_data);
	cr_assert_eq(isc_neg_params(t.n)->max_burst_length, 65536);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, "ImmediateData=Yes"), -EPROTO,
		     "an answered offer is negotiated: sending it again is a repeat");
	t_close(&t);

	/* an initiator that ignores the offer, or answers beyond it, fails the login */
	conf_defaults(&t.conf);
	t.conf.ImmediateData = false;
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1), 0);
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 0);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, "ImmediateData=Yes"), -EPROTO);
	t_close(&t);

	conf_defaults(&t.conf);
	t.conf.ImmediateData = false;
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1), 0);
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 0);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, "DataDigest=None"), -EPROTO);
	t_close(&t);
}

Test(param, iser_keys_with_rdma)
{
	struct t t;
	const struct isc_params *p;

	conf_defaults(&t.conf);
	t_open(&t, true, ISC_TRANSPORT_RDMA, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL,
			 LOGIN1 "RDMAExtensions=Yes\0HeaderDigest=CRC32C,None\0"
			 "MaxRecvDataSegmentLength=8192\0InitiatorRecvDataSegmentLength=131072\0"
			 "MaxOutstandingUnexpectedPDUs=16"), 0);
	assert_ans(&t, "RDMAExtensions", "Yes");
	assert_ans(&t, "HeaderDigest", "None");		/* no iSCSI digests over RDMA */
	assert_ans(&t, "InitiatorRecvDataSegmentLength", "131072");
	assert_ans(&t, "MaxOutstandingUnexpectedPDUs", "16");
	cr_assert_null(ANS(&t, "MaxRecvDataSegmentLength"));
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	assert_ans(&t, "TargetRecvDataSegmentLength", "262144");
	cr_assert_null(ANS(&t, "MaxRecvDataSegmentLength"));
	p = isc_neg_params(t.n);
	cr_assert(p->rdma_extensions);
	cr_assert_not(p->header_digest);
	cr_assert_eq(p->target_recv_dsl, 262144);
	cr_assert_eq(p->initiator_recv_dsl, 131072);
	cr_assert_eq(p->max_outstanding_unexpected_pdus, 16);
	t_close(&t);

	/* an iSER connection must agree to RDMAExtensions */
	conf_defaults(&t.conf);
	t_open(&t, true, ISC_TRANSPORT_RDMA, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "RDMAExtensions=No"), 0);
	assert_ans(&t, "RDMAExtensions", "No");
	cr_assert_lt(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 0);
	t_close(&t);
}

/* RFC 7145 §6.3: TargetRecvDataSegmentLength is what the target can take in one control-type
 * PDU, so it never exceeds the datamover's receive buffers, whether the initiator offers a
 * value (Minimum) or the target declares it unasked before Full Feature Phase. */
static void t_open_iser(struct t *t, uint32_t tp_max, uint32_t tp_unexpected)
{
	struct isc_neg_init in = {
		.conf = &t->conf, .target_alias = "demo", .tpgt = 1, .leading = true,
		.transport_caps = ISC_TRANSPORT_RDMA, .transport_max_recv_dsl = tp_max,
		.transport_max_unexpected = tp_unexpected,
	};

	cr_assert_eq(isc_neg_create(&in, &t->n), 0);
	isc_kvlist_init(&t->ans);
}

Test(param, iser_target_recv_dsl_within_transport_buffers)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open_iser(&t, 8192, 0);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "RDMAExtensions=Yes\0"
			 "TargetRecvDataSegmentLength=262144"), 0);
	assert_ans(&t, "TargetRecvDataSegmentLength", "8192");
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	cr_assert_null(ANS(&t, "TargetRecvDataSegmentLength"), "answered once, not declared again");
	cr_assert_eq(isc_neg_params(t.n)->target_recv_dsl, 8192);
	t_close(&t);

	/* Not offered: declared at the transition, within the buffers too. */
	conf_defaults(&t.conf);
	t_open_iser(&t, 8192, 0);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "RDMAExtensions=Yes"), 0);
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	assert_ans(&t, "TargetRecvDataSegmentLength", "8192");
	cr_assert_null(ANS(&t, "MaxRecvDataSegmentLength"), "replaced by the iSER keys");
	t_close(&t);

	/* A smaller initiator offer wins (Minimum); no transport limit leaves the target's. */
	conf_defaults(&t.conf);
	t_open_iser(&t, 0, 0);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "RDMAExtensions=Yes\0"
			 "TargetRecvDataSegmentLength=4096"), 0);
	assert_ans(&t, "TargetRecvDataSegmentLength", "4096");
	t_close(&t);
}

/* RFC 7145 §6.5: MaxOutstandingUnexpectedPDUs is 0 (no limit) or 2..2^32-1; over a transport
 * that sets no limit of its own, the initiator's value stands. */
Test(param, iser_max_outstanding_unexpected_pdus_range)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open_iser(&t, 8192, 0);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "RDMAExtensions=Yes\0"
			 "MaxOutstandingUnexpectedPDUs=1\0InitialR2T=No"), 0);
	assert_ans(&t, "MaxOutstandingUnexpectedPDUs", "Reject");
	/* Write data beyond the immediate data comes by RDMA Read, not unsolicited Sends. */
	assert_ans(&t, "InitialR2T", "Yes");
	t_close(&t);

	conf_defaults(&t.conf);
	t_open_iser(&t, 8192, 0);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "RDMAExtensions=Yes\0"
			 "MaxOutstandingUnexpectedPDUs=0\0InitiatorRecvDataSegmentLength=512"), 0);
	assert_ans(&t, "MaxOutstandingUnexpectedPDUs", "0");
	assert_ans(&t, "InitiatorRecvDataSegmentLength", "512");
	cr_assert_eq(isc_neg_params(t.n)->initiator_recv_dsl, 512);
	t_close(&t);

	conf_defaults(&t.conf);
	t_open_iser(&t, 8192, 0);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1 "RDMAExtensions=Yes\0"
			 "MaxOutstandingUnexpectedPDUs=4294967295"), 0);
	assert_ans(&t, "MaxOutstandingUnexpectedPDUs", "4294967295");
	t_close(&t);
}

/* The target's own MaxOutstandingUnexpectedPDUs is what its transport can receive at once:
 * "no limit" from the initiator becomes that, a smaller value stands (RFC 7145 §6.6: the
 * result is the minimum, 0 being the largest). */
Test(param, iser_max_outstanding_unexpected_pdus_is_the_receive_capacity)
{
	static const struct { const char *offer, *answer; } cases[] = {
		{ "MaxOutstandingUnexpectedPDUs=0", "144" },
		{ "MaxOutstandingUnexpectedPDUs=16", "16" },
		{ "MaxOutstandingUnexpectedPDUs=1000", "144" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct t t;
		static const char head[] = LOGIN1 "RDMAExtensions=Yes";
		char buf[256];
		size_t n = sizeof(head);	/* with its NUL: the separator */

		conf_defaults(&t.conf);
		t_open_iser(&t, 8192, 144);
		memcpy(buf, head, n);
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s", cases[i].offer);
		cr_assert_eq(req(&t, ISC_STAGE_OPERATIONAL, buf, n), 0, "%s", cases[i].offer);
		assert_ans(&t, "MaxOutstandingUnexpectedPDUs", cases[i].answer);
		cr_assert_eq(isc_neg_params(t.n)->max_outstanding_unexpected_pdus,
			     (uint32_t)atoi(cases[i].answer));
		t_close(&t);
	}
}

Test(param, iser_keys_without_rdma)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL,
			 LOGIN1 "RDMAExtensions=Yes\0TargetRecvDataSegmentLength=8192\0"
			 "HeaderDigest=CRC32C,None"), 0);
	assert_ans(&t, "RDMAExtensions", "No");		/* TCP transport: AND with No */
	assert_ans(&t, "TargetRecvDataSegmentLength", "Irrelevant");
	assert_ans(&t, "HeaderDigest", "CRC32C");
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	assert_ans(&t, "MaxRecvDataSegmentLength", "262144");
	cr_assert_not(isc_neg_params(t.n)->rdma_extensions);
	t_close(&t);
}

Test(param, ffp_text_negotiation)
{
	struct t t;

	conf_defaults(&t.conf);
	t_open(&t, true, 0, NULL);
	cr_assert_eq(REQ(&t, ISC_STAGE_OPERATIONAL, LOGIN1), 0);
	cr_assert_eq(transit(&t, ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP), 1);
	cr_assert_null(isc_neg_send_targets(t.n));
	cr_assert_eq(REQ(&t, ISC_STAGE_FFP, "SendTargets=\0MaxRecvDataSegmentLength=16384\0"
			 "MaxBurstLength=4096\0X-vendor=1"), 0);
	cr_assert_str_eq(isc_neg_send_targets(t.n), "");
	cr_assert_eq(isc_neg_params(t.n)->max_xmit_dsl, 16384);
	assert_ans(&t, "MaxBurstLength", "Reject");	/* LO keys are fixed after login */
	assert_ans(&t, "X-vendor", "NotUnderstood");
	cr_assert_eq(isc_neg_params(t.n)->max_burst_length, 262144);
	cr_assert_eq(REQ(&t, ISC_STAGE_FFP, "X-vendor=2"), 0);
	cr_assert_null(isc_neg_send_targets(t.n), "SendTargets belongs to one request only");
	t_close(&t);
}
