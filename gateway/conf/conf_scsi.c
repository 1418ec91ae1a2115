// SPDX-License-Identifier: MIT
/* A logical unit's settings (the LU keys of a targets[].luns[] object): INQUIRY identity, cache
 * and thin provisioning, cluster ownership. The SCSI core (gateway/scsi/) reads them. */
#include <stddef.h>

#include "conf.h"

static const char *scsi_check_ascii(const void *field)
{
	const char *s = *(char *const *)field;

	for (; s && *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return "must be printable ASCII";
	return NULL;
}

const struct gw_conf_key conf_lu_keys[] = {
	{ .name = "lun", .type = GW_CONF_U64, .offset = offsetof(struct scsi_lu_conf, lun),
	  .min = 0, .max = 16383, .flags = GW_CONF_REQUIRED,
	  .help = "logical unit number, 0..16383" },
	{ .name = "vendor", .type = GW_CONF_STR, .offset = offsetof(struct scsi_lu_conf, vendor),
	  .min = 0, .max = 8, .def = "ISERGW", .check = scsi_check_ascii,
	  .help = "INQUIRY vendor identification, up to 8 ASCII characters" },
	{ .name = "product", .type = GW_CONF_STR,
	  .offset = offsetof(struct scsi_lu_conf, product), .min = 0, .max = 16,
	  .def = "isergw LUN", .check = scsi_check_ascii,
	  .help = "INQUIRY product identification, up to 16 ASCII characters" },
	{ .name = "revision", .type = GW_CONF_STR,
	  .offset = offsetof(struct scsi_lu_conf, revision), .min = 0, .max = 4, .def = "0001",
	  .check = scsi_check_ascii,
	  .help = "INQUIRY product revision level, up to 4 ASCII characters" },
	{ .name = "serial", .type = GW_CONF_STR, .offset = offsetof(struct scsi_lu_conf, serial),
	  .min = 0, .max = 32, .check = scsi_check_ascii,
	  .help = "unit serial number (VPD page 0x80); derived from the NAA id when empty" },
	{ .name = "naa", .type = GW_CONF_U64, .offset = offsetof(struct scsi_lu_conf, naa),
	  .min = 0, .max = 0,
	  .help = "low 64 bits of the NAA-6 LU id (VPD page 0x83); derived from the target name "
		  "and LUN when 0, so gateways exporting the same LU agree" },
	{ .name = "write_cache", .type = GW_CONF_BOOL,
	  .offset = offsetof(struct scsi_lu_conf, write_cache), .def = "true",
	  .help = "report a volatile write cache (WCE): initiators send SYNCHRONIZE CACHE" },
	{ .name = "thin", .type = GW_CONF_BOOL, .offset = offsetof(struct scsi_lu_conf, thin),
	  .def = "true",
	  .help = "report thin provisioning and accept UNMAP (when the backstore can)" },
	{ .name = "owner", .type = GW_CONF_STR, .offset = offsetof(struct scsi_lu_conf, owner),
	  .min = 0, .max = 63, .def = "", .check = scsi_check_ascii,
	  .help = "cluster member (agent --gateway-id) preferred as the LU's owner; empty: "
		  "assigned among the live members (docs/CLUSTER.md). A gateway alone ignores it" },
	{ .name = "alua_group", .type = GW_CONF_U32,
	  .offset = offsetof(struct scsi_lu_conf, alua_group), .min = 0, .max = 65535,
	  .def = "0",
	  .help = "target port group that is active/optimized for this LU, the other active "
		  "groups being active/non-optimized; 0: each group's own state. Set by the "
		  "cluster agent" },
	{ .name = "alua_pending", .type = GW_CONF_BOOL,
	  .offset = offsetof(struct scsi_lu_conf, alua_pending), .def = "false",
	  .help = "the LU's ownership is moving to alua_group: that group reports "
		  "active/non-optimized (serving I/O) instead of active/optimized until this is "
		  "cleared. Set by the cluster agent while the previous owner may still be active "
		  "(docs/CLUSTER.md, fencing)" },
	GW_CONF_END,
};
