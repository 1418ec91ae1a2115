// SPDX-License-Identifier: MIT
/*
 * What a command handler answers with: fixed-format sense (and its field pointer and
 * information field), the sense for a backstore error, copies between the command's data
 * buffer and flat buffers. Called by the dispatcher (scsi_cmd.c) and the command-group files
 * alike; it calls nothing else in gateway/scsi (the bottom, beside scsi_lun.c).
 */
#include <errno.h>
#include <string.h>

#include "gw_iov.h"
#include "scsi_priv.h"

/* Sense */

void scsi_cmd_set_sense(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq)
{
	uint8_t *s = cmd->sense;

	memset(s, 0, 18);
	s[0] = 0x70;
	s[2] = key & 0x0f;
	s[7] = 10;	/* additional sense length: 18 bytes in all */
	s[12] = asc;
	s[13] = ascq;
	cmd->sense_len = 18;
	cmd->status = SCSI_CHECK_CONDITION;
}

/* Sense-key specific field pointer (SPC-4 4.5.2.4.2): which byte (and bit) was wrong. */
static void scsi_sense_field(struct scsi_cmd *cmd, bool in_cdb, uint16_t byte, int bit)
{
	cmd->sense[15] = 0x80 | (in_cdb ? 0x40 : 0);
	if (bit >= 0)
		cmd->sense[15] |= 0x08 | (bit & 7);
	scsi_put16(&cmd->sense[16], byte);
}

void scsi_cmd_invalid_cdb(struct scsi_cmd *cmd, uint16_t byte, int bit)
{
	scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	scsi_sense_field(cmd, true, byte, bit);
}

void scsi_cmd_invalid_param(struct scsi_cmd *cmd, uint16_t byte, int bit)
{
	scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x26, 0x00);
	scsi_sense_field(cmd, false, byte, bit);
}

void scsi_cmd_param_len_error(struct scsi_cmd *cmd)
{
	scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x1a, 0x00);
}

void scsi_cmd_set_info(struct scsi_cmd *cmd, uint64_t info)
{
	/* Fixed format has four bytes; larger values cannot be reported there (VALID stays 0). */
	if (info > 0xffffffffu)
		return;
	cmd->sense[0] |= 0x80;
	scsi_put32(&cmd->sense[3], (uint32_t)info);
}

void scsi_cmd_bs_error(struct scsi_cmd *cmd, int err)
{
	switch (err) {
	case -EROFS:
		scsi_cmd_set_sense(cmd, SCSI_SK_DATA_PROTECT, 0x27, 0x00);
		break;
	case -ENOSPC:
		/* SPACE ALLOCATION FAILED WRITE PROTECT: a thin back end ran out. */
		scsi_cmd_set_sense(cmd, SCSI_SK_DATA_PROTECT, 0x27, 0x07);
		break;
	case -ENOMEM:
	case -EAGAIN:
		cmd->status = SCSI_BUSY;
		cmd->sense_len = 0;
		break;
	default:
		/* UNRECOVERED READ ERROR / WRITE ERROR would blame the medium; the back end
		 * failed, so report an internal target failure. */
		scsi_cmd_set_sense(cmd, SCSI_SK_HARDWARE_ERROR, 0x44, 0x00);
		break;
	}
}

/* Data buffers */

void scsi_cmd_data_in(struct scsi_cmd *cmd, const void *buf, uint32_t len)
{
	uint32_t room = scsi_cmd_in_room(cmd);

	cmd->xfer_len = (uint32_t)gw_buf_to_iov(cmd->iov, cmd->iovcnt, 0, buf,
						len < room ? len : room);
	cmd->cdb_xfer_len = len;
}

uint32_t scsi_cmd_put(struct scsi_cmd *cmd, uint32_t off, const void *buf, uint32_t len)
{
	uint32_t room = scsi_cmd_in_room(cmd);

	if (off >= room)
		return 0;
	if (len > room - off)
		len = room - off;
	return (uint32_t)gw_buf_to_iov(cmd->iov, cmd->iovcnt, off, buf, len);
}

uint32_t scsi_cmd_data_out(struct scsi_cmd *cmd, uint32_t off, void *buf, uint32_t len)
{
	uint32_t have = scsi_cmd_out_len(cmd);

	if (off >= have)
		return 0;
	if (len > have - off)
		len = have - off;
	return (uint32_t)gw_iov_to_buf(cmd->iov, cmd->iovcnt, off, buf, len);
}
