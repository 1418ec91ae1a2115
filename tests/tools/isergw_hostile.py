#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""isergw_hostile: a raw iSCSI/TCP client that sends what attackers and broken initiators send.

Each case opens its own sockets to a portal (from a chosen loopback source address, so the
failed-login back-off of one case never reaches another or the well-behaved client), builds PDUs
from the byte layouts of RFC 7143 (section 11) and checks what the target answers: a Reject with
the reason the RFC names, a Login Response with the right status, or a closed connection -- and
that the gateway still serves a fresh login afterwards.

    isergw_hostile.py CASE --portal HOST:PORT --target IQN [--src ADDR] [--initiator NAME] ...

Prints "ok: ..." lines and exits 0, or "FAIL: ..." and exits 1; 2 for usage.
"""
import argparse
import os
import socket
import struct
import sys
import time

BHS = 48
OP_NOP_OUT, OP_SCSI_CMD, OP_TMF, OP_LOGIN, OP_TEXT, OP_DATA_OUT, OP_LOGOUT = \
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
OP_NOP_IN, OP_SCSI_RSP, OP_LOGIN_RSP, OP_DATA_IN, OP_R2T, OP_REJECT = \
    0x20, 0x21, 0x23, 0x25, 0x31, 0x3f
REJ_DATA_DIGEST, REJ_PROTOCOL, REJ_CMD_NOT_SUPPORTED, REJ_INVALID_FIELD = 0x02, 0x04, 0x05, 0x09
RSVD = 0xffffffff


class Fail(Exception):
    pass


def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_T = crc32c_table()


def crc32c(b):
    c = 0xffffffff
    for x in b:
        c = CRC_T[(c ^ x) & 0xff] ^ (c >> 8)
    return c ^ 0xffffffff


def pad4(n):
    return (n + 3) & ~3


class Pdu:
    def __init__(self, bhs, ahs=b"", data=b""):
        self.bhs, self.ahs, self.data = bhs, ahs, data

    @property
    def op(self):
        return self.bhs[0] & 0x3f

    def u32(self, off):
        return struct.unpack_from(">I", self.bhs, off)[0]

    def keys(self):
        out = {}
        for kv in self.data.split(b"\0"):
            if b"=" in kv:
                k, v = kv.split(b"=", 1)
                out[k.decode()] = v.decode()
        return out

    def __repr__(self):
        return "opcode 0x%02x" % self.op


class Conn:
    """One TCP connection; login() takes it to full feature phase."""

    def __init__(self, args, src=None, rcvbuf=None):
        self.args = args
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.bind((src or args.src, 0))
        self.s.settimeout(10)
        host, port = args.portal.rsplit(":", 1)
        self.s.connect((host, int(port)))
        self.hd = self.dd = False
        self.itt = 0x100
        self.cmdsn = 1
        self.exp_statsn = 0
        self.max_cmdsn = 1
        self.tsih = 0
        self.params = {}
        self.isid = b"\x80\x00\x00\x00\x00" + bytes([args.isid & 0xff])

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    # ---- wire ------------------------------------------------------------------------------
    def send(self, bhs, data=b"", ahs=b"", bad_hd=False, bad_dd=False):
        bhs = bytearray(bhs)
        bhs[4] = len(ahs) // 4
        bhs[5:8] = len(data).to_bytes(3, "big")
        out = bytes(bhs) + ahs
        if self.hd:
            out += struct.pack("<I", crc32c(out) ^ (0x5a5a5a5a if bad_hd else 0))
        if data:
            seg = data + b"\0" * (pad4(len(data)) - len(data))
            out += seg
            if self.dd:
                out += struct.pack("<I", crc32c(seg) ^ (0x5a5a5a5a if bad_dd else 0))
        self.s.sendall(out)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            b = self.s.recv(n - len(buf))
            if not b:
                raise EOFError("connection closed by the target")
            buf += b
        return buf

    def recv(self, timeout=10.0):
        self.s.settimeout(timeout)
        bhs = self.recv_exact(BHS)
        ahslen = bhs[4] * 4
        dlen = int.from_bytes(bhs[5:8], "big")
        ahs = self.recv_exact(ahslen) if ahslen else b""
        if self.hd:
            dig = struct.unpack("<I", self.recv_exact(4))[0]
            if dig != crc32c(bhs + ahs):
                raise Fail("target header digest wrong")
        data = b""
        if dlen:
            seg = self.recv_exact(pad4(dlen))
            if self.dd:
                dig = struct.unpack("<I", self.recv_exact(4))[0]
                if dig != crc32c(seg):
                    raise Fail("target data digest wrong")
            data = seg[:dlen]
        p = Pdu(bhs, ahs, data)
        if p.op in (OP_NOP_IN, OP_SCSI_RSP, OP_DATA_IN, OP_R2T, OP_REJECT, OP_LOGIN_RSP):
            if p.op != OP_DATA_IN or (bhs[1] & 0x01):
                self.exp_statsn = (p.u32(24) + 1) & 0xffffffff
            if p.op != OP_LOGIN_RSP:
                self.max_cmdsn = p.u32(32)
        return p

    def recv_op(self, ops, timeout=10.0):
        """Next PDU with an opcode in ops, skipping NOP-In pings (answered) and R2Ts."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise socket.timeout("no %s within %.0f s" % (ops, timeout))
            p = self.recv(left)
            if p.op in ops:
                return p
            if p.op == OP_NOP_IN and p.u32(20) != RSVD:
                self.nop_out(itt=RSVD, ttt=p.u32(20), immediate=True)

    def closed_within(self, secs):
        """True when the target closes the connection within secs (data it sends is read)."""
        end = time.monotonic() + secs
        try:
            while time.monotonic() < end:
                self.s.settimeout(max(0.05, end - time.monotonic()))
                if not self.s.recv(65536):
                    return True
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        return False

    # ---- PDUs ------------------------------------------------------------------------------
    def next_itt(self):
        self.itt += 1
        return self.itt

    def bhs(self, op, flags, immediate=False):
        b = bytearray(BHS)
        b[0] = op | (0x40 if immediate else 0)
        b[1] = flags
        return b

    def login_step(self, csg, nsg, keys, transit=True, initiator=None):
        b = self.bhs(OP_LOGIN, (0x80 if transit else 0) | (csg << 2) | nsg, immediate=True)
        b[8:14] = self.isid
        struct.pack_into(">H", b, 14, self.tsih)
        struct.pack_into(">I", b, 16, self.itt)
        struct.pack_into(">H", b, 20, 1)
        struct.pack_into(">I", b, 24, self.cmdsn)
        struct.pack_into(">I", b, 28, self.exp_statsn)
        data = b"".join(("%s=%s" % kv).encode() + b"\0" for kv in keys)
        self.send(b, data)
        p = self.recv_op((OP_LOGIN_RSP,))
        return p

    def login(self, target=None, initiator=None, extra=(), expect=0, hd=False, dd=False):
        """Security (AuthMethod=None), then operational to FFP. Returns the login status."""
        ini = initiator or self.args.initiator
        keys = [("InitiatorName", ini), ("SessionType", "Normal"),
                ("TargetName", target or self.args.target), ("AuthMethod", "None")]
        p = self.login_step(0, 1, keys)
        st = p.bhs[36] << 8 | p.bhs[37]
        if st:
            return st
        op = [("HeaderDigest", "CRC32C" if hd else "None"),
              ("DataDigest", "CRC32C" if dd else "None"),
              ("MaxRecvDataSegmentLength", "65536"), ("ErrorRecoveryLevel", "0"),
              ("DefaultTime2Wait", "0"), ("DefaultTime2Retain", "0")]
        merged = dict(op)
        merged.update(dict(extra))
        op = list(merged.items())
        p = self.login_step(1, 3, op)
        st = p.bhs[36] << 8 | p.bhs[37]
        if st:
            return st
        if not (p.bhs[1] & 0x80) or (p.bhs[1] & 3) != 3:
            raise Fail("target did not move to full feature phase")
        self.params = p.keys()
        self.tsih = struct.unpack_from(">H", p.bhs, 14)[0]
        self.max_cmdsn = p.u32(32)
        self.hd = self.params.get("HeaderDigest") == "CRC32C"
        self.dd = self.params.get("DataDigest") == "CRC32C"
        if hd != self.hd or dd != self.dd:
            raise Fail("digests not negotiated as asked: %s" % self.params)
        return 0

    def nop_out(self, itt=None, ttt=RSVD, data=b"", immediate=True, bad_dd=False):
        b = self.bhs(OP_NOP_OUT, 0x80, immediate=immediate)
        itt = self.next_itt() if itt is None else itt
        struct.pack_into(">Q", b, 8, 0)
        struct.pack_into(">I", b, 16, itt)
        struct.pack_into(">I", b, 20, ttt)
        struct.pack_into(">I", b, 24, self.cmdsn)
        struct.pack_into(">I", b, 28, self.exp_statsn)
        self.send(b, data, bad_dd=bad_dd)
        return itt

    def ping(self, timeout=5.0):
        """A NOP-Out answered by its NOP-In: the connection is alive and in step."""
        itt = self.nop_out(data=b"ping")
        while True:
            p = self.recv_op((OP_NOP_IN, OP_REJECT), timeout)
            if p.op == OP_NOP_IN and p.u32(16) == itt:
                return True

    def scsi_cmd(self, cdb, edtl=0, read=False, write=False, data=b"", cmdsn=None,
                 immediate=False, final=True, itt=None, bad_dd=False):
        b = self.bhs(OP_SCSI_CMD, (0x80 if final else 0) | (0x40 if read else 0) |
                     (0x20 if write else 0) | 0x01, immediate=immediate)
        itt = self.next_itt() if itt is None else itt
        struct.pack_into(">I", b, 16, itt)
        struct.pack_into(">I", b, 20, edtl)
        struct.pack_into(">I", b, 24, self.cmdsn if cmdsn is None else cmdsn)
        struct.pack_into(">I", b, 28, self.exp_statsn)
        b[32:32 + len(cdb)] = cdb
        if cmdsn is None and not immediate:
            self.cmdsn = (self.cmdsn + 1) & 0xffffffff
        self.send(b, data, bad_dd=bad_dd)
        return itt

    def data_out(self, itt, ttt, offset, data, datasn=0, final=True, bad_dd=False):
        b = self.bhs(OP_DATA_OUT, 0x80 if final else 0)
        struct.pack_into(">I", b, 16, itt)
        struct.pack_into(">I", b, 20, ttt)
        struct.pack_into(">I", b, 28, self.exp_statsn)
        struct.pack_into(">I", b, 36, datasn)
        struct.pack_into(">I", b, 40, offset)
        self.send(b, data, bad_dd=bad_dd)

    def read_blocks(self, lba, blocks, timeout=10.0):
        """READ (10) of blocks 512-byte blocks: (status, data)."""
        itt = self.scsi_cmd(read10(lba, blocks), edtl=512 * blocks, read=True)
        data = b""
        while True:
            p = self.recv_op((OP_SCSI_RSP, OP_DATA_IN, OP_REJECT), timeout)
            if p.op == OP_REJECT:
                raise Fail("READ answered with Reject reason 0x%02x" % p.bhs[2])
            if p.u32(16) != itt:
                continue
            if p.op == OP_DATA_IN:
                data += p.data
                if p.bhs[1] & 0x01:
                    return p.bhs[3], data
            else:
                return p.bhs[3], data

    def wait_status(self, itt, timeout=10.0):
        while True:
            p = self.recv_op((OP_SCSI_RSP, OP_REJECT, OP_DATA_IN), timeout)
            if p.op == OP_SCSI_RSP and p.u32(16) == itt:
                return p.bhs[3]
            if p.op == OP_DATA_IN and p.u32(16) == itt and (p.bhs[1] & 0x01):
                return p.bhs[3]
            if p.op == OP_REJECT:
                raise Fail("unexpected Reject reason 0x%02x" % p.bhs[2])


def tur():
    return bytes(16)


def read10(lba, blocks):
    return struct.pack(">BBIBHB", 0x28, 0, lba, 0, blocks, 0) + bytes(6)


def write10(lba, blocks):
    return struct.pack(">BBIBHB", 0x2a, 0, lba, 0, blocks, 0) + bytes(6)


def read16(lba, blocks):
    return struct.pack(">BBQIBB", 0x88, 0, lba, blocks, 0, 0)


def write16(lba, blocks):
    return struct.pack(">BBQIBB", 0x8a, 0, lba, blocks, 0, 0)


# ---- checks shared by the cases -----------------------------------------------------------

def tur_good(c):
    """TEST UNIT READY until GOOD: the first command of a session meets the power-on unit
    attention (CHECK CONDITION), which is right."""
    for _ in range(3):
        if c.wait_status(c.scsi_cmd(tur())) == 0:
            return True
    return False


def ok(msg):
    print("ok: " + msg, flush=True)


def still_serves(args, what):
    """A fresh login from the case's address and a TEST UNIT READY: the gateway is alive."""
    c = Conn(args)
    try:
        st = c.login()
        if st:
            raise Fail("%s: a fresh login was refused (status 0x%04x)" % (what, st))
        if not tur_good(c):
            raise Fail("%s: TEST UNIT READY failed after it" % what)
    finally:
        c.close()
    ok("%s: the gateway still logs in and answers" % what)


def expect_reject_or_close(c, reasons, what, timeout=5.0):
    """The RFC's answer to a bad PDU in FFP: a Reject with one of reasons, or the connection
    dropped (ERL 0). Returns 'reject' or 'closed'."""
    try:
        p = c.recv_op((OP_REJECT, OP_SCSI_RSP, OP_R2T, OP_DATA_IN), timeout)
    except (EOFError, ConnectionResetError):
        ok("%s: connection dropped" % what)
        return "closed"
    except socket.timeout:
        raise Fail("%s: neither a Reject nor a close within %.0f s" % (what, timeout))
    if p.op != OP_REJECT:
        raise Fail("%s: answered %r instead of a Reject" % (what, p))
    if p.bhs[2] not in reasons:
        raise Fail("%s: Reject reason 0x%02x, expected one of %s" %
                   (what, p.bhs[2], ["0x%02x" % r for r in reasons]))
    ok("%s: Reject reason 0x%02x" % (what, p.bhs[2]))
    return "reject"


def logged_in(args, **kw):
    c = Conn(args)
    st = c.login(**kw)
    if st:
        c.close()
        raise Fail("login refused: status 0x%04x" % st)
    return c


# ---- the cases ----------------------------------------------------------------------------

def case_truncated(args):
    """A PDU cut short: half a BHS, or a BHS promising data that never comes, then the
    initiator goes away. The gateway drops that connection and serves the next."""
    c = logged_in(args)
    c.s.sendall(bytes([OP_NOP_OUT | 0x40, 0x80]) + bytes(22))
    c.close()
    c = logged_in(args)
    b = c.bhs(OP_NOP_OUT, 0x80, immediate=True)
    struct.pack_into(">I", b, 16, 7)
    struct.pack_into(">I", b, 20, RSVD)
    b[5:8] = (4096).to_bytes(3, "big")
    c.s.sendall(bytes(b) + b"x" * 100)
    # The rest never comes: the gateway waits for it (bounded by TCP and the NOP timeout);
    # the initiator leaves.
    c.close()
    ok("truncated PDUs sent (half a BHS; a 4 KiB segment cut at 100 bytes)")
    still_serves(args, "after truncated PDUs")


def case_oversize(args):
    """DataSegmentLength beyond the MaxRecvDataSegmentLength the target declared (262144 in the
    suite): a protocol error (RFC 7143 11.2.1.x); the gateway must not buffer 16 MiB."""
    c = logged_in(args)
    mrdsl = int(c.params.get("MaxRecvDataSegmentLength", "8192"))
    b = c.bhs(OP_NOP_OUT, 0x80, immediate=True)
    struct.pack_into(">I", b, 16, 9)
    struct.pack_into(">I", b, 20, RSVD)
    struct.pack_into(">I", b, 24, c.cmdsn)
    b[5:8] = (0xffffff).to_bytes(3, "big")
    c.s.sendall(bytes(b) + bytes(4096))
    expect_reject_or_close(c, (REJ_PROTOCOL, REJ_INVALID_FIELD),
                           "NOP-Out with a 16 MiB data segment (MaxRecvDataSegmentLength %d)"
                           % mrdsl)
    c.close()
    # A SCSI WRITE whose immediate data is over the limit too.
    c = logged_in(args)
    b = c.bhs(OP_SCSI_CMD, 0xa1)
    struct.pack_into(">I", b, 16, 0x77)
    struct.pack_into(">I", b, 20, 4 << 20)
    struct.pack_into(">I", b, 24, c.cmdsn)
    b[32:48] = write10(0, 8192)
    b[5:8] = (mrdsl + 4096).to_bytes(3, "big")
    c.s.sendall(bytes(b) + bytes(8192))
    expect_reject_or_close(c, (REJ_PROTOCOL, REJ_INVALID_FIELD),
                           "WRITE with immediate data beyond MaxRecvDataSegmentLength")
    c.close()
    still_serves(args, "after oversized PDUs")


def case_ahs(args):
    """Bad AHS: a TotalAHSLength of 255 words with garbage, and an AHS whose own length runs
    past TotalAHSLength. Reject (or drop), never a crash."""
    for what, ahs in (("AHS of 1020 bytes of garbage", b"\xff" * 1020),
                      ("AHS claiming 4000 bytes inside 8", struct.pack(">HBB", 4000, 1, 0) +
                       bytes(4))):
        c = logged_in(args)
        b = c.bhs(OP_SCSI_CMD, 0xc1)
        struct.pack_into(">I", b, 16, 0x55)
        struct.pack_into(">I", b, 20, 512)
        struct.pack_into(">I", b, 24, c.cmdsn)
        b[32:48] = read10(0, 1)
        c.send(b, ahs=ahs)
        try:
            p = c.recv_op((OP_REJECT, OP_SCSI_RSP, OP_DATA_IN), 5)
            if p.op == OP_REJECT:
                ok("%s: Reject reason 0x%02x" % (what, p.bhs[2]))
            else:
                # An AHS the target does not use may be ignored (RFC 7143 11.2.1.5): then the
                # command itself is answered; the connection must stay in step.
                ok("%s: ignored, command answered (%r)" % (what, p))
                c.ping()
        except (EOFError, ConnectionResetError):
            ok("%s: connection dropped" % what)
        except socket.timeout:
            raise Fail("%s: no answer and no close within 5 s" % what)
        c.close()
    still_serves(args, "after bad AHS")


def sense_of(p):
    """(key, asc, ascq) from a SCSI Response's data segment (fixed format), or None."""
    if len(p.data) < 2 + 14:
        return None
    sense = p.data[2:]
    return sense[2] & 0x0f, sense[12], sense[13]


def expect_reject(c, reason, what, timeout=5.0):
    """A Reject with exactly this reason; the connection stays."""
    try:
        p = c.recv_op((OP_REJECT, OP_SCSI_RSP, OP_R2T, OP_DATA_IN, OP_NOP_IN), timeout)
    except (EOFError, ConnectionResetError):
        raise Fail("%s: connection dropped instead of a Reject" % what)
    except socket.timeout:
        raise Fail("%s: no Reject within %.0f s" % (what, timeout))
    if p.op != OP_REJECT or p.bhs[2] != reason:
        raise Fail("%s: answered %r%s, expected Reject reason 0x%02x" %
                   (what, p, " reason 0x%02x" % p.bhs[2] if p.op == OP_REJECT else "", reason))
    ok("%s: Reject reason 0x%02x, connection kept" % (what, reason))
    return p


def case_digest(args):
    """Digests negotiated, then wrong (RFC 7143 7.8). A bad data digest: Reject reason 0x02
    and the PDU discarded, the connection goes on; for a SCSI command with immediate data the
    command is discarded whole and, at ErrorRecoveryLevel 0, the connection closes after the
    Reject (session recovery), and the write re-issued on a new session is served; for a Data-Out
    the task ends, once all its data is in, with CHECK CONDITION ABORTED COMMAND / PROTOCOL
    SERVICE CRC ERROR (47/05) and the LUN keeps what it had. A bad header digest: the header
    cannot be trusted, the connection is dropped."""
    lba = 300000       # far from the well-behaved client's first 64 MiB
    c = logged_in(args, hd=True, dd=True)
    ok("HeaderDigest and DataDigest CRC32C negotiated")
    tur_good(c)
    c.nop_out(data=b"x" * 64, bad_dd=True)
    expect_reject(c, REJ_DATA_DIGEST, "NOP-Out with a bad data digest")
    c.ping()
    ok("connection still usable after it")

    b = c.bhs(OP_TEXT, 0x80, immediate=True)
    struct.pack_into(">I", b, 16, c.next_itt())
    struct.pack_into(">I", b, 20, RSVD)
    struct.pack_into(">I", b, 24, c.cmdsn)
    struct.pack_into(">I", b, 28, c.exp_statsn)
    c.send(b, b"SendTargets=All\0", bad_dd=True)
    expect_reject(c, REJ_DATA_DIGEST, "Text request with a bad data digest")
    c.ping()

    # A write with immediate data whose digest fails: discarded whole. Its retry would be
    # error recovery above level 0, which no initiator does at ErrorRecoveryLevel 0 (Linux
    # waits for its command timeout), so the target escalates to session recovery: the
    # Reject, then the connection closes, and the initiator logs in again at once.
    old = bytes([0xa5]) * 512
    new = bytes([0x3c]) * 512
    cs = c.cmdsn
    itt = c.scsi_cmd(write10(lba, 1), edtl=512, write=True, data=old, cmdsn=cs)
    c.cmdsn = (cs + 1) & 0xffffffff
    if c.wait_status(itt) != 0:
        raise Fail("a plain write with immediate data failed")
    what = "SCSI write with immediate data and a bad data digest (ErrorRecoveryLevel 0)"
    c.scsi_cmd(write10(lba, 1), edtl=512, write=True, data=new, cmdsn=c.cmdsn, bad_dd=True)
    try:
        p = c.recv_op((OP_REJECT, OP_SCSI_RSP, OP_R2T, OP_DATA_IN, OP_NOP_IN), 5)
    except (EOFError, ConnectionResetError):
        raise Fail("%s: connection dropped without the Reject" % what)
    except socket.timeout:
        raise Fail("%s: no Reject within 5 s" % what)
    if p.op != OP_REJECT or p.bhs[2] != REJ_DATA_DIGEST:
        raise Fail("%s: answered %r, expected Reject reason 0x%02x" % (what, p,
                                                                      REJ_DATA_DIGEST))
    if not c.closed_within(5):
        raise Fail("%s: Reject 0x02 but the connection still open after 5 s: the command's "
                   "CmdSN stays a hole and the session stalls" % what)
    ok("%s: Reject reason 0x02, then the connection closed (session recovery)" % what)
    c.close()
    c = logged_in(args, hd=True, dd=True)
    if not tur_good(c):
        raise Fail("the new session's TEST UNIT READY never came back GOOD")
    st, got = c.read_blocks(lba, 1)
    if st != 0 or got != old:
        raise Fail("the discarded write reached the LUN (status 0x%02x)" % st)
    itt = c.scsi_cmd(write10(lba, 1), edtl=512, write=True, data=new, cmdsn=c.cmdsn)
    c.cmdsn = (c.cmdsn + 1) & 0xffffffff
    st = c.wait_status(itt)
    if st != 0:
        raise Fail("the write re-issued on a new session ended with status 0x%02x" % st)
    st, got = c.read_blocks(lba, 1)
    if st != 0 or got != new:
        raise Fail("after the re-issued write the block reads back wrong (status 0x%02x)" % st)
    ok("the discarded write wrote nothing; re-issued on a new session it was served")
    c.close()

    # A solicited Data-Out whose digest fails.
    c = r2t_session(args, extra=(), hd=True, dd=True)
    tur_good(c)
    itt = c.scsi_cmd(write10(lba, 16), edtl=8192, write=True)
    r2t = c.recv_op((OP_R2T,), 5)
    ttt = r2t.u32(20)
    other = bytes([0x77]) * 4096
    c.data_out(itt, ttt, 0, other, datasn=0, final=False, bad_dd=True)
    expect_reject(c, REJ_DATA_DIGEST, "Data-Out with a bad data digest")
    c.data_out(itt, ttt, 4096, other, datasn=1, final=True)
    try:
        p = c.recv_op((OP_SCSI_RSP, OP_REJECT), 10)
    except (EOFError, ConnectionResetError):
        raise Fail("Data-Out with a bad data digest: connection dropped")
    except socket.timeout:
        raise Fail("Data-Out with a bad data digest: the task never ended")
    if p.op != OP_SCSI_RSP or p.u32(16) != itt or p.bhs[3] != 0x02 or \
            sense_of(p) != (0x0b, 0x47, 0x05):
        raise Fail("Data-Out with a bad data digest: the write ended with %r status 0x%02x "
                   "sense %s, expected CHECK CONDITION 0b/47/05" % (p, p.bhs[3], sense_of(p)))
    ok("its write ended, after the last Data-Out, with CHECK CONDITION 0b/47/05")
    st, got = c.read_blocks(lba, 16)
    if st != 0 or got[:512] != new or any(got[i:i + 512] == other[:512]
                                          for i in range(0, len(got), 512)):
        raise Fail("the failed write reached the LUN (status 0x%02x)" % st)
    ok("the LUN kept what it had: the failed write wrote nothing")
    c.ping()
    c.close()

    c = logged_in(args, hd=True, dd=True)
    b = c.bhs(OP_NOP_OUT, 0x80, immediate=True)
    struct.pack_into(">I", b, 16, c.next_itt())
    struct.pack_into(">I", b, 20, RSVD)
    c.send(b, bad_hd=True)
    if not c.closed_within(5):
        raise Fail("NOP-Out with a bad header digest: connection still open after 5 s")
    ok("NOP-Out with a bad header digest: connection dropped")
    c.close()
    still_serves(args, "after digest errors")


def case_phase(args):
    """Opcodes out of phase: a SCSI command or a Text request as the first PDU (before login:
    no Reject exists, the connection is dropped), and a Login request in full feature phase
    (Reject, protocol error)."""
    for what, op in (("SCSI command before login", OP_SCSI_CMD),
                     ("Text request before login", OP_TEXT),
                     ("Logout before login", OP_LOGOUT)):
        c = Conn(args)
        b = c.bhs(op, 0x80)
        struct.pack_into(">I", b, 16, 1)
        if op == OP_SCSI_CMD:
            b[32:48] = tur()
        c.send(b)
        if not c.closed_within(5):
            raise Fail("%s: connection still open after 5 s" % what)
        ok("%s: connection dropped" % what)
        c.close()
    c = logged_in(args)
    b = c.bhs(OP_LOGIN, 0x87, immediate=True)
    b[8:14] = c.isid
    struct.pack_into(">I", b, 16, c.next_itt())
    struct.pack_into(">I", b, 24, c.cmdsn)
    c.send(b, b"InitiatorName=%s\0" % args.initiator.encode())
    expect_reject_or_close(c, (REJ_PROTOCOL,), "Login request in full feature phase")
    c.close()
    c = logged_in(args)
    b = c.bhs(0x1c, 0x80)
    struct.pack_into(">I", b, 16, c.next_itt())
    c.send(b)
    expect_reject_or_close(c, (REJ_CMD_NOT_SUPPORTED, REJ_PROTOCOL), "unknown opcode 0x1c")
    c.close()
    still_serves(args, "after out-of-phase PDUs")


def case_cmdsn(args):
    """CmdSN outside the window [ExpCmdSN, MaxCmdSN]: a non-immediate command there is
    silently ignored (RFC 7143 4.2.2.1); the session stays usable and in step."""
    c = logged_in(args)
    for what, sn in (("ahead of MaxCmdSN", (c.max_cmdsn + 1000) & 0xffffffff),
                     ("behind ExpCmdSN", (c.cmdsn - 50) & 0xffffffff)):
        itt = c.scsi_cmd(tur(), cmdsn=sn)
        try:
            p = c.recv_op((OP_SCSI_RSP, OP_REJECT), 1.5)
            if p.op == OP_SCSI_RSP and p.u32(16) == itt:
                raise Fail("command with CmdSN %s was executed" % what)
            ok("command with CmdSN %s: %r" % (what, p))
        except socket.timeout:
            ok("command with CmdSN %s: ignored" % what)
    if not tur_good(c):
        raise Fail("in-window TEST UNIT READY after them failed")
    ok("in-window command after them: GOOD")
    c.close()


def r2t_session(args, extra=(), **kw):
    return logged_in(args, extra=(("InitialR2T", "Yes"), ("ImmediateData", "No"),
                                  ("MaxBurstLength", "65536"), ("FirstBurstLength", "65536"))
                     + tuple(extra), **kw)


def case_dataout(args):
    """Data-Out that matches no solicitation: for an unknown ITT, with a wrong TTT, beyond the
    R2T's burst, overlapping what was sent. Reject (or drop), never data in the wrong place."""
    c = r2t_session(args)
    c.data_out(0xdead, 0x1234, 0, bytes(512))
    # Data for a task the target no longer has may be in flight after an abort (RFC 7143
    # 4.2.3.4): discarding it quietly is right, as long as the connection stays in step.
    try:
        p = c.recv_op((OP_REJECT,), 1)
        ok("Data-Out for an unknown task: Reject reason 0x%02x" % p.bhs[2])
    except socket.timeout:
        ok("Data-Out for an unknown task: discarded")
    c.ping()
    ok("connection in step after it")
    c.close()

    for what in ("wrong TTT", "beyond the burst", "overlapping offsets"):
        c = r2t_session(args)
        itt = c.scsi_cmd(write10(2048, 64), edtl=32768, write=True)
        r2t = c.recv_op((OP_R2T,), 5)
        ttt, off, ln = r2t.u32(20), r2t.u32(40), r2t.u32(44)
        if what == "wrong TTT":
            c.data_out(itt, ttt ^ 0x5555, off, bytes(512))
        elif what == "beyond the burst":
            c.data_out(itt, ttt, off, bytes(min(ln + 4096, 65536)))
        else:
            c.data_out(itt, ttt, off, bytes(4096), final=False)
            c.data_out(itt, ttt, off + 2048, bytes(4096), datasn=1, final=False)
        # A Reject, the connection dropped, or the task ended with CHECK CONDITION: any is
        # an answer; the data never reaches the LUN as GOOD.
        try:
            p = c.recv_op((OP_REJECT, OP_SCSI_RSP), 5)
            if p.op == OP_SCSI_RSP:
                if p.u32(16) != itt or p.bhs[3] == 0:
                    raise Fail("Data-Out %s: the write ended GOOD" % what)
                ok("Data-Out %s: the task ended with status 0x%02x" % (what, p.bhs[3]))
                c.ping()
            else:
                ok("Data-Out %s: Reject reason 0x%02x" % (what, p.bhs[2]))
        except (EOFError, ConnectionResetError):
            ok("Data-Out %s: connection dropped" % what)
        except socket.timeout:
            raise Fail("Data-Out %s: no answer within 5 s" % what)
        c.close()
    still_serves(args, "after stray Data-Out")


def case_r2t_storm(args):
    """R2T storm: large writes with MaxOutstandingR2T and queue depth at their maximum, and no
    Data-Out ever. The gateway sends a bounded number of R2Ts and holds bounded memory; closing
    the connection frees every task."""
    c = r2t_session(args, extra=(("MaxOutstandingR2T", "65535"), ("MaxBurstLength", "512"),
                                 ("FirstBurstLength", "512")))
    mor = int(c.params.get("MaxOutstandingR2T", "1"))
    n = 0
    for i in range(16):
        if c.cmdsn == (c.max_cmdsn + 1) & 0xffffffff:
            break
        c.scsi_cmd(write16(i * 32768, 32768), edtl=16 << 20, write=True)
        n += 1
    r2ts = 0
    end = time.monotonic() + 3
    try:
        while time.monotonic() < end:
            p = c.recv(max(0.05, end - time.monotonic()))
            if p.op == OP_R2T:
                r2ts += 1
    except socket.timeout:
        pass
    ok("%d writes of 16 MiB, MaxOutstandingR2T %d granted: %d R2Ts in 3 s" % (n, mor, r2ts))
    if r2ts > n * max(mor, 1):
        raise Fail("more R2Ts (%d) than MaxOutstandingR2T allows for %d tasks" % (r2ts, n))
    if args.ctl:
        print("state: " + ctl_state_line(args, "data_memory"), flush=True)
    c.close()
    ok("initiator left with the writes outstanding")


def case_slow_reader(args):
    """A slow reader: reads of many MiB with a tiny receive buffer, never drained. The gateway
    must keep serving others and free the tasks when the connection goes."""
    c = Conn(args, rcvbuf=4096)
    st = c.login(extra=(("MaxRecvDataSegmentLength", "262144"),))
    if st:
        raise Fail("login refused: status 0x%04x" % st)
    n = 0
    for i in range(8):
        if c.cmdsn == (c.max_cmdsn + 1) & 0xffffffff:
            break
        c.scsi_cmd(read16(i * 16384, 16384), edtl=8 << 20, read=True)
        n += 1
    ok("%d reads of 8 MiB queued; not reading" % n)
    time.sleep(args.hold)
    if args.ctl:
        print("state: " + ctl_state_line(args, "data_memory"), flush=True)
    c.close()
    ok("slow reader left")


def case_shares(args):
    """One host's many sessions: sessions of one initiator name, or from one address under
    other names, hold at most a session's share of gateway.data_memory together (a quarter:
    the test's 256 MiB gives 64 MiB). Each session sends 16 MiB writes whose data never comes;
    a write is taken (an R2T) or answered TASK SET FULL. Expected, in order: --initiator from
    --src takes 3 (48 MiB); the same name from 127.0.0.6 takes 1 of 3 (the name's 64 MiB);
    an alias from --src takes 1 of 2 (the address's 64 MiB); a bystander from 127.0.0.7
    takes 2 of 2."""
    extra = (("InitialR2T", "Yes"), ("ImmediateData", "No"), ("MaxBurstLength", "65536"),
             ("FirstBurstLength", "65536"))
    plan = [("name", args.initiator, args.src, 3, 3),
            ("same name, other address", args.initiator, "127.0.0.6", 3, 1),
            ("same address, other name", args.initiator + "-alias", args.src, 2, 1),
            ("bystander", args.initiator + "-bystander", "127.0.0.7", 2, 2)]
    conns = []
    got = []
    lba = 0
    try:
        for i, (what, ini, src, n, want) in enumerate(plan):
            c = Conn(args, src=src)
            c.isid = b"\x80\x00\x00\x00\x01" + bytes([0x60 + i])
            conns.append(c)
            st = c.login(initiator=ini, extra=extra)
            if st:
                raise Fail("%s: login refused: status 0x%04x" % (what, st))
            if not tur_good(c):
                raise Fail("%s: TEST UNIT READY never GOOD" % what)
            taken = full = 0
            for _ in range(n):
                itt = c.scsi_cmd(write16(lba, 32768), edtl=16 << 20, write=True)
                lba += 32768
                while True:
                    p = c.recv_op((OP_R2T, OP_SCSI_RSP, OP_REJECT), 5)
                    if p.op == OP_REJECT:
                        raise Fail("%s: Reject reason 0x%02x" % (what, p.bhs[2]))
                    if p.u32(16) == itt:
                        break
                if p.op == OP_R2T:
                    taken += 1
                elif p.bhs[3] == 0x28:
                    full += 1
                else:
                    raise Fail("%s: a write answered status 0x%02x" % (what, p.bhs[3]))
            got.append("%s: %d of %d taken, %d TASK SET FULL" % (what, taken, n, full))
            if taken != want:
                raise Fail("%s (want %d taken)" % ("; ".join(got), want))
        ok("; ".join(got))
        if args.ctl:
            print("state: " + ctl_state_line(args, "data_memory"), flush=True)
    finally:
        for c in conns:
            c.close()
    ok("the four sessions left with their writes outstanding")


def case_never_finish(args):
    """Logins that never finish: a connection that sends nothing, one that sends half a BHS,
    one that stops after the security stage. Each is closed by login_timeout."""
    conns = []
    c = Conn(args)
    conns.append(("connect, send nothing", c))
    c = Conn(args)
    c.s.sendall(bytes([OP_LOGIN | 0x40, 0x81]) + bytes(20))
    conns.append(("half a Login BHS", c))
    c = Conn(args)
    p = c.login_step(0, 1, [("InitiatorName", args.initiator), ("SessionType", "Normal"),
                            ("TargetName", args.target), ("AuthMethod", "None")])
    if p.bhs[36] or p.bhs[37]:
        raise Fail("security stage refused")
    conns.append(("login stopped after the security stage", c))
    t0 = time.monotonic()
    limit = args.login_timeout + 5
    for what, c in conns:
        if not c.closed_within(max(0.1, t0 + limit - time.monotonic())):
            raise Fail("%s: still open after %d s (login_timeout %d)" %
                       (what, limit, args.login_timeout))
        took = time.monotonic() - t0
        if took < args.login_timeout - 1:
            raise Fail("%s: closed after %.1f s, before login_timeout" % (what, took))
        ok("%s: closed after %.1f s" % (what, took))
        c.close()


def case_flood(args):
    """Thousands of half-open connections (connected, nothing sent). Past max_connections the
    gateway closes new ones at once; the test closes the rest."""
    socks, refused = [], 0
    for _ in range(args.count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((args.src, 0))
        host, port = args.portal.rsplit(":", 1)
        try:
            s.connect((host, int(port)))
        except OSError:
            refused += 1
            s.close()
            continue
        socks.append(s)
    time.sleep(1.0)
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except ConnectionResetError:
            closed += 1
    held = len(socks) - closed
    print("flood: %d connects, %d closed by the gateway, %d held open, %d refused by TCP" %
          (args.count, closed, held, refused), flush=True)
    if args.max_conns and held > args.max_conns:
        raise Fail("%d connections held open, max_connections is %d" % (held, args.max_conns))
    if args.max_conns and closed + refused < args.count - args.max_conns:
        raise Fail("only %d closed: max_connections %d not enforced" % (closed, args.max_conns))
    ok("connections past max_connections (%d) closed at once" % args.max_conns)
    for s in socks:
        s.close()


def case_login_status(args):
    """One login; prints its status (0 = full feature phase reached). --expect checks it."""
    c = Conn(args)
    try:
        st = c.login()
    except (EOFError, ConnectionResetError):
        st = -1
    print("login status 0x%04x" % st if st >= 0 else "login: connection dropped", flush=True)
    if args.hold and st == 0:
        time.sleep(args.hold)
    c.close()
    if args.expect is not None and st != args.expect:
        raise Fail("login status 0x%04x, expected 0x%04x" % (st, args.expect))


def case_sessions(args):
    """Opens sessions with ISIDs 1..N for --initiator and keeps them; prints each status."""
    conns, out = [], []
    for i in range(args.count):
        c = Conn(args)
        c.isid = b"\x80\x00\x00\x00\x01" + bytes([i + 1])
        st = c.login()
        out.append(st)
        print("session %d: status 0x%04x" % (i + 1, st), flush=True)
        conns.append(c)
    if args.expect_list:
        want = [int(x, 0) for x in args.expect_list.split(",")]
        if out != want:
            raise Fail("statuses %s, expected %s" % (["0x%04x" % s for s in out],
                                                   ["0x%04x" % s for s in want]))
        ok("statuses as expected")
    if args.hold:
        time.sleep(args.hold)
    for c in conns:
        c.close()


def ctl_state_line(args, key):
    import json
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(args.ctl)
    s.sendall(b'{"op": "state"}\n')
    buf = b""
    while not buf.endswith(b"\n"):
        b = s.recv(65536)
        if not b:
            break
        buf += b
    s.close()
    try:
        st = json.loads(buf)
        return json.dumps(st.get(key))
    except ValueError:
        return buf.decode(errors="replace").strip()


CASES = {
    "truncated": case_truncated, "oversize": case_oversize, "ahs": case_ahs,
    "digest": case_digest, "phase": case_phase, "cmdsn": case_cmdsn, "dataout": case_dataout,
    "r2t-storm": case_r2t_storm, "slow-reader": case_slow_reader, "shares": case_shares,
    "never-finish": case_never_finish, "flood": case_flood, "login": case_login_status,
    "sessions": case_sessions,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--portal", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--initiator", default="iqn.2026-11.org.example:hostile")
    ap.add_argument("--src", default="127.0.0.1")
    ap.add_argument("--isid", type=int, default=0x42)
    ap.add_argument("--ctl", default="")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--max-conns", type=int, default=0)
    ap.add_argument("--login-timeout", type=int, default=15)
    ap.add_argument("--hold", type=float, default=0)
    ap.add_argument("--expect", type=lambda x: int(x, 0))
    ap.add_argument("--expect-list", default="")
    args = ap.parse_args()
    try:
        CASES[args.case](args)
    except Fail as e:
        print("FAIL: %s" % e, flush=True)
        return 1
    except (OSError, EOFError) as e:
        print("FAIL: %s: %s" % (type(e).__name__, e), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
