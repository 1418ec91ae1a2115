/* SPDX-License-Identifier: MIT */
/*
 * SCSI status codes (SAM-5 §5.3), sense keys (SPC-4 §4.5.6) and the additional sense codes the
 * gateway decides on, as on the wire: defined once for every module. The target core
 * (include/scsi.h) names its status and sense keys after these; the multipath module, which
 * may not import the target core, classifies back-end answers with them (mp_policy.c).
 * Values only: building and parsing sense data stays with each module.
 */
#ifndef GW_SAM_H
#define GW_SAM_H

/* SAM status codes */
enum {
	GW_SAM_GOOD = 0x00,
	GW_SAM_CHECK_CONDITION = 0x02,
	GW_SAM_CONDITION_MET = 0x04,
	GW_SAM_BUSY = 0x08,
	GW_SAM_RESERVATION_CONFLICT = 0x18,
	GW_SAM_TASK_SET_FULL = 0x28,
	GW_SAM_ACA_ACTIVE = 0x30,
	GW_SAM_TASK_ABORTED = 0x40,
};

/* Sense keys */
enum {
	GW_SAM_SK_NO_SENSE = 0x0,
	GW_SAM_SK_RECOVERED_ERROR = 0x1,
	GW_SAM_SK_NOT_READY = 0x2,
	GW_SAM_SK_MEDIUM_ERROR = 0x3,
	GW_SAM_SK_HARDWARE_ERROR = 0x4,
	GW_SAM_SK_ILLEGAL_REQUEST = 0x5,
	GW_SAM_SK_UNIT_ATTENTION = 0x6,
	GW_SAM_SK_DATA_PROTECT = 0x7,
	GW_SAM_SK_ABORTED_COMMAND = 0xb,
	GW_SAM_SK_MISCOMPARE = 0xe,
};

/* Additional sense codes (ASC) and their qualifiers (ASCQ) */
enum {
	GW_SAM_ASC_NOT_READY = 0x04,		/* LOGICAL UNIT NOT READY / NOT ACCESSIBLE */
	GW_SAM_ASCQ_MANUAL_INTERVENTION = 0x03,	/* 04/03 */
	GW_SAM_ASCQ_STANDBY = 0x0b,		/* 04/0B: target port in standby state */
	GW_SAM_ASCQ_UNAVAILABLE = 0x0c,		/* 04/0C: target port in unavailable state */
	GW_SAM_ASC_PROTECTION = 0x10,		/* 10/xx: protection information check failed */
	GW_SAM_ASC_INVALID_OPCODE = 0x20,	/* 20/00: invalid command operation code */
	GW_SAM_ASC_LUN_NOT_SUPPORTED = 0x25,	/* 25/00: logical unit not supported */
	GW_SAM_ASC_PARAMS_CHANGED = 0x2a,	/* 2A/xx: parameters changed */
	GW_SAM_ASCQ_ALUA_CHANGED = 0x06,	/* 2A/06: asymmetric access state changed */
	GW_SAM_ASCQ_CAPACITY_CHANGED = 0x09,	/* 2A/09: capacity data has changed */
	GW_SAM_ASC_NO_MEDIUM = 0x3a,		/* 3A/xx: medium not present */
};

#endif
