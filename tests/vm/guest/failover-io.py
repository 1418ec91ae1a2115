#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The host's side of the bond-failover suite (tests/vm/guest/suite-bond-failover.sh).

  failover-io.py write DEV OFFSET_MIB SIZE_MIB LOG STOPFILE
      Writes 64 KiB blocks with O_DIRECT round the region, each read back at once and compared,
      until STOPFILE exists; then reads every block of the region once more against the last
      data written to it. LOG gets one line per completed write ("t SECONDS"), "err ..." per
      failed write, read or mismatch, and at the end "done WRITES ERRORS". Exit 0 when no
      error was seen.

  failover-io.py stalls EVENTS IOLOG GWLOG
      EVENTS: "k SLAVE T_LINK" lines (wall clock of each link-down). Prints, per failover, the
      stall (link event to the first write completed again) and its parts from the gateway's
      log (GWLOG, each line prefixed by its wall clock): detection (link event -> the
      gateway's netlink event), gateway reaction (-> listener re-homed), initiator reconnect
      (-> the next iSER connection accepted) and login + first I/O (-> the first write
      completed after it); then a summary line "median X max Y".
"""
import hashlib
import mmap
import os
import random
import re
import statistics
import sys
import time

BS = 64 * 1024


def block(seq, idx):
    head = b"ISERGW-FO %016d %08d\n" % (seq, idx)
    return head + random.Random(seq * 7919 + idx).randbytes(BS - len(head))


def write(dev, off_mib, size_mib, log, stop):
    n = size_mib * 1024 * 1024 // BS
    base = off_mib * 1024 * 1024
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
    wbuf = mmap.mmap(-1, BS)
    rbuf = mmap.mmap(-1, BS)
    last = {}
    seq = writes = errors = 0
    out = open(log, "w", buffering=1)

    def err(what):
        nonlocal errors
        errors += 1
        out.write("err %.3f %s\n" % (time.time(), what))

    while not os.path.exists(stop):
        idx = seq % n
        data = block(seq, idx)
        wbuf[:] = data
        try:
            os.pwrite(fd, wbuf, base + idx * BS)
        except OSError as e:
            err("write block %d: %s" % (idx, e))
            time.sleep(0.1)
            continue
        out.write("t %.3f\n" % time.time())
        writes += 1
        last[idx] = (seq, hashlib.sha1(data).digest())
        try:
            os.preadv(fd, [rbuf], base + idx * BS)
            if rbuf[:] != data:
                err("block %d reads back other data" % idx)
        except OSError as e:
            err("read block %d: %s" % (idx, e))
        seq += 1
    for idx, (s, digest) in sorted(last.items()):
        try:
            os.preadv(fd, [rbuf], base + idx * BS)
            if hashlib.sha1(rbuf).digest() != digest:
                err("final check: block %d is not write %d" % (idx, s))
        except OSError as e:
            err("final read of block %d: %s" % (idx, e))
    out.write("done %d %d\n" % (writes, errors))
    return 1 if errors else 0


def stalls(events_path, iolog, gwlog):
    events = []
    for line in open(events_path):
        k, slave, t = line.split()
        events.append((int(k), slave, float(t)))
    done = [float(x.split()[1]) for x in open(iolog) if x.startswith("t ")]
    rehome, conns = [], []
    for line in open(gwlog, errors="replace"):
        m = re.match(r"(\d+\.\d+) .*re-homed on bond \S+ \([^)]*\) (\d+) ms after the "
                     r"netlink event \(at (\d+\.\d+)\), [^;]*; (connections kept|\d+ conn)",
                     line)
        if m:
            rehome.append((float(m.group(3)), int(m.group(2)) / 1000.0,
                           m.group(4) != "connections kept"))
            continue
        m = re.match(r"(\d+\.\d+) .*iSER connection from", line)
        if m:
            conns.append(float(m.group(1)))
    rows, totals = [], []
    print("failover slave  stall_s detect_s react_s reconnect_s login_io_s")
    for i, (k, slave, t0) in enumerate(events):
        end = events[i + 1][2] if i + 1 < len(events) else t0 + 60
        # The largest pause between two completed writes around the link event.
        prev = max([d for d in done if d <= t0], default=t0)
        after = [d for d in done if t0 < d <= end]
        if not after:
            print("%8d %-6s no write completed after the link event" % (k, slave))
            totals.append(float("inf"))
            continue
        gap_end, gap = after[0], after[0] - prev
        a = prev
        for d in after:
            if d - a > gap:
                gap_end, gap = d, d - a
            a = d
        stall = gap_end - t0 if gap >= 0.2 else gap
        ev = [r for r in rehome if t0 - 0.5 <= r[0] <= end]
        parts = ["-"] * 4
        if ev:
            at, react, dropped = ev[0]
            parts[0] = "%.3f" % max(at - t0, 0)
            parts[1] = "%.3f" % react
            if dropped:
                c = [x for x in conns if at <= x <= gap_end]
                if c:
                    parts[2] = "%.3f" % (c[0] - (at + react))
                    parts[3] = "%.3f" % (gap_end - c[0])
            else:
                parts[2] = "0 (kept)"
        print("%8d %-6s %7.3f %8s %7s %11s %10s" % (k, slave, stall, *parts))
        totals.append(stall)
    finite = [x for x in totals if x != float("inf")]
    if not finite:
        print("median - max - (no failover measured)")
        return 1
    print("median %.3f max %.3f (s, %d failovers, %d without a completed write)" %
          (statistics.median(finite), max(totals), len(totals), len(totals) - len(finite)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "write":
        sys.exit(write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5],
                       sys.argv[6]))
    if len(sys.argv) == 5 and sys.argv[1] == "stalls":
        sys.exit(stalls(sys.argv[2], sys.argv[3], sys.argv[4]))
    sys.stderr.write(__doc__)
    sys.exit(2)
