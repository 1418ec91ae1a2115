#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gw_ctl.py SOCKET JSON: one request on the gateway's control socket (docs/CONTROL.md); prints
the reply line. Exit 1 when the socket does not answer within 5 s. Used by the integration
suites (tests/lib/common.sh, gw_ctl) and the VM rig's guest (tests/vm/guest/lib.sh)."""
import socket
import sys


def main():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    buf = b""
    try:
        s.connect(sys.argv[1])
        s.sendall(sys.argv[2].encode() + b"\n")
        while not buf.endswith(b"\n"):
            d = s.recv(65536)
            if not d:
                break
            buf += d
    except OSError as e:
        sys.stderr.write("gw_ctl: %s: %s\n" % (sys.argv[1], e))
        return 1
    sys.stdout.write(buf.decode())
    return 0 if buf else 1


if __name__ == "__main__":
    sys.exit(main())
