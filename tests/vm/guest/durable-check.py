#!/usr/bin/env python3
"""durable-check.py: judges what a LUN holds after a crash against what was acknowledged.

    durable-check.py [--all-acked-durable] [--expect-loss] JOURNAL SCAN

JOURNAL is what `isergw-durable stress` recorded before the crash (w/a/s lines, see
tests/tools/isergw-durable.c), SCAN what `isergw-durable scan` read back after it (one
"LBA GEN|z|x" line per block). For each block:

- its floor is the newest write covering it that was durable before the crash: acknowledged
  with FUA, acknowledged before an acknowledged SYNCHRONIZE CACHE was sent, or (with
  --all-acked-durable: a LUN with the write cache off) acknowledged at all;
- it may hold the floor's generation or that of any write covering it sent after the floor
  (acknowledged or not: still in flight, or in a cache the crash may or may not have emptied);
  with no floor, zeroes (never written to disk) or any generation ever written there;
- anything else fails: an older generation or zeroes where a floor exists is a LOST durable
  write; a block that is neither zeroes nor whole as some write left it is GARBAGE.

--expect-loss (the control: a LUN with its write cache on, plain writes never synced) also
fails unless some acknowledged block came back older than its last acknowledged write: proof
that the crash really dropped what was only in the page cache, so the checks above can fail.

Prints the figures and one "durable-check:" verdict line; exit status 0 when it holds.
"""
import sys


def main(argv):
    all_acked = "--all-acked-durable" in argv
    expect_loss = "--expect-loss" in argv
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    journal, scan = args

    writes = {}       # gen -> (lba, blocks, fua)
    acked = set()
    floor = {}        # lba -> durable gen
    cand = {}         # lba -> set of gens that may be there
    last_acked = {}   # lba -> newest acknowledged gen
    pending = []      # acknowledged, not yet durable, in order
    n_w = n_a = n_s = n_fua = 0

    def durable(g):
        lba, n, _ = writes[g]
        for x in range(lba, lba + n):
            if g > floor.get(x, 0):
                floor[x] = g
                cand[x] = {h for h in cand[x] if h >= g}

    with open(journal) as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "w" and len(p) == 5:
                g, lba, n = int(p[1]), int(p[2]), int(p[3])
                writes[g] = (lba, n, p[4] == "F")
                n_w += 1
                for x in range(lba, lba + n):
                    cand.setdefault(x, set()).add(g)
            elif p[0] == "a" and len(p) == 2 and int(p[1]) in writes:
                g = int(p[1])
                acked.add(g)
                n_a += 1
                lba, n, fua = writes[g]
                for x in range(lba, lba + n):
                    last_acked[x] = max(last_acked.get(x, 0), g)
                if fua or all_acked:
                    n_fua += fua
                    durable(g)
                else:
                    pending.append(g)
            elif p[0] == "s" and len(p) == 2:
                g = int(p[1])
                n_s += 1
                for h in [h for h in pending if h <= g]:
                    durable(h)
                pending = [h for h in pending if h > g]
            else:
                # A torn last line: the crash came while it was being written. Anything else
                # is a broken journal.
                if line.endswith("\n"):
                    print("durable-check: unreadable journal line: %r" % line)
                    return 1

    got = {}
    with open(scan) as f:
        for line in f:
            p = line.split()
            if len(p) == 2:
                got[int(p[0])] = p[1]

    lost, garbage, other, missing = [], [], [], []
    held_floor = held_later = 0
    at_risk = came_back = dropped = 0
    for x in sorted(cand):
        if x not in got:
            missing.append(x)
            continue
        v = got[x]
        fl = floor.get(x, 0)
        if v == "x":
            garbage.append(x)
            continue
        g = 0 if v == "z" else int(v)
        ok = g in cand[x] or (g == 0 and fl == 0)
        if not ok:
            (lost if g < fl else other).append((x, g, fl))
        elif fl:
            if g == fl:
                held_floor += 1
            else:
                held_later += 1
        la = last_acked.get(x, 0)
        if la > fl:
            at_risk += 1
            if g >= la:
                came_back += 1
            elif g < la:
                dropped += 1
    # Blocks no write touched: zeroes, as the sparse file started.
    for x in sorted(got):
        if x not in cand and got[x] != "z":
            if got[x] == "x":
                garbage.append(x)
            else:
                other.append((x, int(got[x]), 0))

    durable_blocks = sum(1 for x in floor if floor[x])
    print("journal: %d writes sent, %d acknowledged (%d with FUA), %d SYNCHRONIZE CACHE; "
          "%d blocks written" % (n_w, n_a, n_fua, n_s, len(cand)))
    print("durable blocks: %d (%d hold the durable write, %d a later one)"
          % (durable_blocks, held_floor, held_later))
    print("acknowledged but not durable: %d blocks (%d came back, %d hold older data)"
          % (at_risk, came_back, dropped))
    for x, g, fl in lost[:10]:
        print("LOST lba %d: holds %s, the durable write was gen %d"
              % (x, "zeroes" if g == 0 else "gen %d" % g, fl))
    for x, g, fl in other[:10]:
        print("UNEXPECTED lba %d: holds gen %d, never written there after gen %d" % (x, g, fl))
    for x in garbage[:10]:
        print("GARBAGE lba %d" % x)
    if missing:
        print("NOT READ: %d blocks, first %d" % (len(missing), missing[0]))
    bad = len(lost) + len(garbage) + len(other) + len(missing)
    why = []
    if lost:
        why.append("%d durable blocks lost" % len(lost))
    if garbage:
        why.append("%d blocks of garbage" % len(garbage))
    if other:
        why.append("%d blocks hold a generation never written there" % len(other))
    if missing:
        why.append("%d blocks not read" % len(missing))
    if not n_a:
        why.append("nothing was acknowledged")
    if not all_acked and not expect_loss and not durable_blocks:
        why.append("no write became durable")
    if expect_loss and not dropped:
        why.append("no acknowledged, unsynced write was lost: the crash proved nothing")
    if why:
        print("durable-check: FAIL: " + "; ".join(why))
        return 1
    print("durable-check: ok: %d durable blocks hold their data, %d blocks checked, "
          "0 lost, 0 garbage%s" % (durable_blocks, len(cand) - bad,
                                   ", %d unsynced blocks lost as allowed" % dropped
                                   if dropped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
