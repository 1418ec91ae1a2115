#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Records real iSCSI traffic for the fuzzers' seed corpora: a TCP relay between a client
(libiscsi's tools) and a running target. Every connection through it is written to
OUTDIR/NNN.c2t (what the initiator sent) and OUTDIR/NNN.t2c (what the target answered),
byte for byte. tests/fuzz/stream2corpus.py turns the streams into seed files.

  capture.py LISTEN_PORT TARGET_PORT OUTDIR     (runs until SIGTERM)

A relay rather than tcpdump: it needs no capture privileges or package, records only its own
connections on a shared loopback, and gives each direction as one ordered stream.
"""
import os
import selectors
import signal
import socket
import sys


def main():
    lport, tport, outdir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.makedirs(outdir, exist_ok=True)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", lport))
    ls.listen(16)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)
    n = 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        for key, _ in sel.select():
            if key.data is None:
                c, _ = ls.accept()
                t = socket.create_connection(("127.0.0.1", tport))
                n += 1
                base = os.path.join(outdir, "%03d" % n)
                fc, ft = open(base + ".c2t", "wb"), open(base + ".t2c", "wb")
                sel.register(c, selectors.EVENT_READ, (t, fc, c))
                sel.register(t, selectors.EVENT_READ, (c, ft, t))
                continue
            peer, f, me = key.data
            try:
                b = me.recv(65536)
            except OSError:
                b = b""
            if b:
                f.write(b)
                f.flush()
                try:
                    peer.sendall(b)
                except OSError:
                    b = b""
            if not b:
                for s in (me, peer):
                    try:
                        sel.unregister(s)
                    except (KeyError, ValueError):
                        pass
                    s.close()
                f.close()


if __name__ == "__main__":
    main()
