#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turns iSCSI sessions recorded by tests/fuzz/capture.py into seed files for the fuzzers.

  stream2corpus.py STREAMDIR CORPUSDIR
  stream2corpus.py --http STREAMDIR CORPUSDIR     (HTTP to the agent, recorded the same way)

For every NNN.c2t (initiator to target) with its NNN.t2c (the answers, read for the digests the
login settled on), the initiator's PDUs are split and written as:
  fuzz_pdu/cap-NNN-raw        mode 0: the session's own bytes from the first Login Request, cut at
                              a PDU boundary (digests as the initiator computed them)
  fuzz_pdu/cap-NNN-wK         mode 5 (canned login, framed): a window of full feature phase
                              PDUs without their digests, after the CmdSN of its first PDU
  fuzz_cdb/cap-NNN-K          SCSI Commands with their write data (immediate + Data-Out), in
                              fuzz_cdb's record format
  fuzz_login/cap-NNN          the Login Requests (and Text Requests) as fuzz_login's segments,
                              CHAP_N/CHAP_R (and a mutual CHAP_C) turned into "@" for the harness
                              to fill, the target renamed to fuzz_login's CHAP targets
With --http, each NNN.c2t is an HTTP request stream to the agent (curl): written as
fuzz_agent/cap-NNN with the bearer token replaced by "@TOKEN@" (fuzz_agent puts its own back),
and fuzz_agent/cap-all with every request of the folder in order, pipelined on one connection.
The layouts are described at the top of each tests/fuzz/fuzz_*.c. Files are kept small
(windows of at most 8 KiB, writes of at most 16 KiB); identical outputs are written once.
"""
import hashlib
import os
import re
import struct
import sys

OP_LOGIN, OP_TEXT, OP_CMD, OP_DATA_OUT = 0x03, 0x04, 0x01, 0x05
WIN_MAX = 8192
CDB_FILE_MAX = 16384


def pad4(n):
    return (n + 3) & ~3


def dsl(bhs):
    return (bhs[5] << 16) | (bhs[6] << 8) | bhs[7]


def keys(text):
    out = {}
    for kv in text.split(b"\0"):
        if b"=" in kv:
            k, v = kv.split(b"=", 1)
            out[k] = v
    return out


def negotiated_digests(t2c):
    """HeaderDigest/DataDigest of the final Login Response (login PDUs carry no digests)."""
    pos, hd, dd = 0, False, False
    while pos + 48 <= len(t2c):
        b = t2c[pos:pos + 48]
        n = dsl(b)
        if b[0] & 0x3f != 0x23:
            break
        k = keys(t2c[pos + 48 + b[4] * 4:pos + 48 + b[4] * 4 + n])
        if b"HeaderDigest" in k:
            hd = k[b"HeaderDigest"] == b"CRC32C"
        if b"DataDigest" in k:
            dd = k[b"DataDigest"] == b"CRC32C"
        pos += 48 + b[4] * 4 + pad4(n)
    return hd, dd


def split(c2t, hd, dd):
    """[(bhs, ahs, data, raw_bytes)] of the initiator's stream; digests from the first
    non-login PDU on."""
    pdus, pos, ffp = [], 0, False
    while pos + 48 <= len(c2t):
        b = c2t[pos:pos + 48]
        if b[0] & 0x3f != OP_LOGIN:
            ffp = True
        ahs = b[4] * 4
        n = dsl(b)
        h = 4 if ffp and hd else 0
        d = 4 if ffp and dd and n else 0
        end = pos + 48 + ahs + h + pad4(n) + d
        if end > len(c2t):
            break
        data = c2t[pos + 48 + ahs + h:pos + 48 + ahs + h + n]
        pdus.append((b, c2t[pos + 48:pos + 48 + ahs], data, c2t[pos:end]))
        pos = end
    return pdus


def plain(p):
    """A PDU without digests, padded."""
    b, ahs, data, _ = p
    return b + ahs + data + b"\0" * (pad4(len(data)) - len(data))


class Out:
    def __init__(self, root):
        self.root, self.seen, self.n = root, set(), {}

    def write(self, harness, name, blob):
        h = hashlib.sha1(blob).hexdigest()
        if (harness, h) in self.seen:
            return
        self.seen.add((harness, h))
        d = os.path.join(self.root, harness)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "wb") as f:
            f.write(blob)
        self.n[harness] = self.n.get(harness, 0) + 1


def pdu_seeds(out, tag, pdus):
    raw = b""
    for p in pdus:
        if len(raw) + len(p[3]) > WIN_MAX * 2:
            break
        raw += p[3]
    if raw:
        out.write("fuzz_pdu", tag + "-raw", b"\0" + raw)
    ffp = [p for p in pdus if p[0][0] & 0x3f != OP_LOGIN]
    k = 0
    i = 0
    while i < len(ffp) and k < 3:
        win, first = b"", ffp[i][0]
        while i < len(ffp) and len(win) + len(plain(ffp[i])) <= WIN_MAX:
            win += plain(ffp[i])
            i += 1
        if not win:		# one PDU over the window: skip it
            i += 1
            continue
        out.write("fuzz_pdu", "%s-w%d" % (tag, k), b"\x05" + first[24:28] + win)
        k += 1


def cdb_seeds(out, tag, pdus):
    ini = None
    for b, _, data, _ in pdus:
        if b[0] & 0x3f == OP_LOGIN and b"InitiatorName" in keys(data):
            ini = keys(data)[b"InitiatorName"]
    # iscsi-test-cu's second initiator (-I) is fuzz_cdb's initiator b.
    itn = 1 if ini and ini.endswith(b":i2") else 0
    dout = {}
    for b, _, data, _ in pdus:
        if b[0] & 0x3f == OP_DATA_OUT:
            itt = b[16:20]
            off = struct.unpack(">I", b[40:44])[0]
            dout.setdefault(itt, []).append((off, data))
    recs, k, nrec = b"", 0, 0
    for b, ahs, data, _ in pdus:
        if b[0] & 0x3f != OP_CMD:
            continue
        edtl = struct.unpack(">I", b[20:24])[0]
        if edtl > CDB_FILE_MAX:
            continue
        cdb = b[32:48]
        if len(ahs) >= 4 and ahs[2] == 1:	# extended CDB
            cdb += ahs[4:4 + struct.unpack(">H", ahs[0:2])[0] - 1]
        dirn = 2 if b[1] & 0x20 else 1 if b[1] & 0x40 else 0
        lun = 0 if b[9] == 0 else min(b[9], 3)
        fl = itn | (lun << 2) | (dirn << 4)
        rec = bytes([fl, len(cdb)]) + cdb + struct.pack(">H", edtl)
        if dirn == 2:
            buf = bytearray(edtl)
            buf[:len(data)] = data[:edtl]
            for off, d in dout.get(b[16:20], []):
                buf[off:off + len(d)] = d[:max(0, edtl - off)]
            rec += bytes(buf)
        if len(recs) + len(rec) > CDB_FILE_MAX or nrec == 64:
            out.write("fuzz_cdb", "%s-%d" % (tag, k), recs)
            recs, k, nrec = b"", k + 1, 0
            if k >= 3:
                return
        recs += rec
        nrec += 1
    if recs:
        out.write("fuzz_cdb", "%s-%d" % (tag, k), recs)


def login_seed(out, tag, pdus):
    segs = []
    for b, _, data, _ in pdus:
        op = b[0] & 0x3f
        if op not in (OP_LOGIN, OP_TEXT):
            continue
        kvs = []
        for kv in data.split(b"\0"):
            if not kv:
                continue
            k = kv.split(b"=", 1)[0]
            if k in (b"CHAP_N", b"CHAP_R", b"CHAP_C"):
                kv = k + b"=@"
            elif k == b"TargetName":
                kv = b"TargetName=iqn.2026-11.org.isergw:" + (
                    b"mutual" if kv.endswith(b":mutual") else b"chap")
            elif k == b"InitiatorName":
                kv = b"InitiatorName=iqn.2026-11.org.fuzz:host"
            kvs.append(kv + b"\0")
        segs.append(bytes([b[1]]) + b"".join(kvs))
        if len(segs) >= 12:
            break
    if segs:
        out.write("fuzz_login", tag, b"\xff".join(segs))


def http_seeds(sdir, cdir):
    out = Out(cdir)
    every = b""
    for s in sorted(f[:-4] for f in os.listdir(sdir) if f.endswith(".c2t")):
        req = open(os.path.join(sdir, s + ".c2t"), "rb").read(1 << 16)
        req = re.sub(rb"Bearer [A-Za-z0-9_]+", b"Bearer @TOKEN@", req)
        out.write("fuzz_agent", "cap-" + s, req)
        every += req
    if every:
        out.write("fuzz_agent", "cap-all", every)
    for h, n in sorted(out.n.items()):
        print("stream2corpus: %s: %d files" % (h, n))


def main():
    if sys.argv[1] == "--http":
        http_seeds(sys.argv[2], sys.argv[3])
        return
    sdir, cdir = sys.argv[1], sys.argv[2]
    out = Out(cdir)
    streams = sorted(f[:-4] for f in os.listdir(sdir) if f.endswith(".c2t"))
    sessions = []
    for s in streams:
        c2t = open(os.path.join(sdir, s + ".c2t"), "rb").read(1 << 20)
        try:
            t2c = open(os.path.join(sdir, s + ".t2c"), "rb").read(1 << 16)
        except OSError:
            t2c = b""
        pdus = split(c2t, *negotiated_digests(t2c))
        sessions.append((s, pdus))
    for s, pdus in sessions:
        tag = "cap-" + s
        pdu_seeds(out, tag, pdus)
        cdb_seeds(out, tag, pdus)
        login_seed(out, tag, pdus)
    for h, n in sorted(out.n.items()):
        print("stream2corpus: %s: %d files" % (h, n))


if __name__ == "__main__":
    main()
