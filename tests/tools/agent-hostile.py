#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile HTTP clients for the agent, on raw sockets where curl cannot go
(tests/integration/test_agent_hostile.sh).

  agent-hostile.py case NAME HOST PORT [TOKEN]
      sends one malformed request and prints one line:
      "NAME status=CODE|none closed=0|1 code=ERRORCODE|- secs=S"
      (code is the API's JSON error code when the body is the agent's JSON error)
  agent-hostile.py slowloris HOST PORT SRC COUNT SECS
      COUNT connections from source address SRC, each sending one header byte a second;
      prints "slowloris opened=N refused=N cut=N early=N alive=N max_cut_secs=S"
      (early: closed within 2 s, i.e. refused at once rather than timed out)
  agent-hostile.py watch HOST PORT TOKEN OUTFILE
      the well-behaved client: GET /api/v1/health with the token every 0.25 s on a new
      connection until SIGTERM, then writes "ok=N failed=N max_ms=N" to OUTFILE
  agent-hostile.py events-drop HOST PORT SRC TOKEN COUNT
      COUNT times from source address SRC, one after the other: opens GET /api/v1/events,
      waits for its hello event and closes the connection; prints
      "events-drop opened=N refused=N first_refused=I|- secs=S"
  agent-hostile.py wait-gone HOST PORT SRC TOKEN METHOD PATH BODY HOW SECS
      sends one request from SRC: HOW=reset: once it waits at the agent (no answer within
      0.5 s), closes the connection with a TCP reset; HOW=half: shuts its sending side at once
      (legal) and reads the answer for up to SECS; prints "wait-gone how=HOW status=CODE|None"
"""
import json
import signal
import socket
import struct
import sys
import time


def connect(host, port, src=None, timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    s.connect((host, port))
    return s


def read_reply(s, limit):
    """Reads until the server closes or limit seconds pass: (bytes, closed)."""
    data = b""
    end = time.time() + limit
    while time.time() < end:
        s.settimeout(max(0.05, end - time.time()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return data, False
        except (ConnectionResetError, BrokenPipeError):
            return data, True
        if not chunk:
            return data, True
        data += chunk
        # One whole reply (Content-Length known) is enough.
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length" and len(body) >= int(v.strip()):
                    return data, False
    return data, False


def parse(data):
    status, code = None, "-"
    if data.startswith(b"HTTP/1."):
        try:
            status = int(data.split(b" ", 2)[1])
        except ValueError:
            pass
        body = data.partition(b"\r\n\r\n")[2]
        try:
            code = json.loads(body)["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = "-"
    return status, code


def send_all(s, data):
    try:
        s.sendall(data)
        return True
    except (BrokenPipeError, ConnectionResetError):
        return False


def req(method, path, headers, body=b"", host=True):
    lines = ["%s %s HTTP/1.1" % (method, path)]
    if host:
        lines.append("Host: agent")
    lines += headers
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def case(name, host, port, token):
    auth = "Authorization: Bearer %s" % token
    t0 = time.time()
    s = connect(host, port)
    wait = 8
    if name == "no-host":
        out = req("GET", "/api/v1/targets", [auth], host=False)
    elif name == "bad-request-line":
        out = b"THIS IS NOT HTTP\r\n\r\n"
    elif name == "bad-version":
        out = b"GET /api/v1/health HTTP/7.3\r\nHost: agent\r\n\r\n"
    elif name == "bare-lf":
        out = ("GET /api/v1/targets HTTP/1.1\nHost: agent\n%s\n\n" % auth).encode()
    elif name == "header-no-colon":
        out = req("GET", "/api/v1/targets", [auth, "ThisHeaderHasNoColon"])
    elif name == "chunked-bad-size":
        out = req("POST", "/api/v1/targets", [auth, "Transfer-Encoding: chunked",
                                              "Content-Type: application/json"],
                  b"zz\r\n{}\r\n0\r\n\r\n")
    elif name == "chunked-huge-size":
        out = req("POST", "/api/v1/targets", [auth, "Transfer-Encoding: chunked",
                                              "Content-Type: application/json"],
                  b"ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n")
    elif name == "chunked-size-overrun":
        # The chunk says 4 bytes and 40 follow before the next size line.
        out = req("POST", "/api/v1/targets", [auth, "Transfer-Encoding: chunked",
                                              "Content-Type: application/json"],
                  b"4\r\n" + b"{" * 40 + b"\r\n0\r\n\r\n")
    elif name == "two-content-lengths":
        out = req("POST", "/api/v1/targets", [auth, "Content-Length: 2",
                                              "Content-Length: 20",
                                              "Content-Type: application/json"], b"{}")
    elif name == "cl-and-chunked":
        out = req("POST", "/api/v1/targets", [auth, "Content-Length: 2",
                                              "Transfer-Encoding: chunked",
                                              "Content-Type: application/json"],
                  b"2\r\n{}\r\n0\r\n\r\n")
    elif name == "cl-short-body":
        # 100 bytes promised, 2 sent, then the client's half closes.
        out = req("POST", "/api/v1/targets", [auth, "Content-Length: 100",
                                              "Content-Type: application/json"], b"{}")
        send_all(s, out)
        s.shutdown(socket.SHUT_WR)
        out = b""
    elif name == "cl-long-body":
        # 2 bytes promised, junk after them: the junk is no request.
        out = req("POST", "/api/v1/config/validate", [auth, "Content-Length: 2",
                                                      "Content-Type: application/json"],
                  b"{}GARBAGE\x00\xff\r\n\r\n")
    elif name == "cl-negative":
        out = req("POST", "/api/v1/targets", [auth, "Content-Length: -5"], b"{}")
    elif name == "cl-not-a-number":
        out = req("POST", "/api/v1/targets", [auth, "Content-Length: 12abc"], b"{}")
    elif name == "huge-header-line":
        out = req("GET", "/api/v1/targets", [auth, "X-Big: " + "a" * (1 << 20)])
    elif name == "many-headers":
        out = req("GET", "/api/v1/targets", [auth] + ["X-H%d: v" % i for i in range(10000)])
    elif name == "url-over-limit":
        # 4 KiB over the default --header-max (32768): the agent reads it and answers in JSON.
        out = req("GET", "/api/v1/targets/" + "a" * (36 << 10), [auth])
    elif name == "headers-over-limit":
        out = req("GET", "/api/v1/targets", [auth] + ["X-H%d: %s" % (i, "v" * 1000)
                                                      for i in range(36)])
    elif name == "huge-url":
        out = req("GET", "/api/v1/targets/" + "a" * (1 << 20), [auth])
    elif name == "body-1gib":
        # Content-Length 1 GiB, then a trickle: refused before the body is read.
        out = req("POST", "/api/v1/targets", [auth, "Content-Length: 1073741824",
                                              "Content-Type: application/json"], b"[")
    elif name == "body-trickle":
        # A small body that never ends: one byte a second (cut by request_timeout).
        send_all(s, req("POST", "/api/v1/targets", [auth, "Content-Length: 1000",
                                                    "Content-Type: application/json"]))
        closed = False
        data = b""
        for _ in range(120):
            if not send_all(s, b" "):
                closed = True
                break
            data, closed = read_reply(s, 1)
            if closed or data:
                break
        status, code = parse(data)
        print("%s status=%s closed=%d code=%s secs=%.1f" %
              (name, status if status else "none", closed, code, time.time() - t0))
        return
    elif name == "nul-in-method":
        out = b"GE\x00T /api/v1/health HTTP/1.1\r\nHost: agent\r\n\r\n"
    elif name == "binary-garbage":
        out = bytes(range(256)) * 64 + b"\r\n\r\n"
    else:
        print("unknown case %s" % name, file=sys.stderr)
        sys.exit(2)
    if out:
        send_all(s, out)
    data, closed = read_reply(s, wait)
    status, code = parse(data)
    print("%s status=%s closed=%d code=%s secs=%.1f" %
          (name, status if status else "none", closed, code, time.time() - t0))


def slowloris(host, port, src, count, secs):
    conns, refused = [], 0
    for _ in range(count):
        try:
            c = connect(host, port, src, timeout=5)
            c.setblocking(False)
            conns.append([c, time.time(), None])
        except OSError:
            refused += 1
    opened = len(conns)
    header = b"GET /api/v1/health HTTP/1.1\r\nHost: agent\r\nX-Slow: " + b"a" * 10000
    t0 = time.time()
    i = 0
    while time.time() - t0 < secs:
        for k in conns:
            if k[2] is not None:
                continue
            try:
                # A byte sent after the server closed comes back as a reset or EOF.
                k[0].send(header[i:i + 1] if i < len(header) else b"a")
                d = k[0].recv(4096)
                if d == b"" or d:
                    k[2] = time.time() - k[1]
            except BlockingIOError:
                pass
            except OSError:
                k[2] = time.time() - k[1]
        i += 1
        # A closed connection is seen on the next byte; the server may have answered it
        # (MHD sends its refusal page to connections over the per-address limit).
        time.sleep(1)
    cut = [k[2] for k in conns if k[2] is not None]
    for k in conns:
        k[0].close()
    # Closed within 2 s: refused at once (over the per-address limit), not timed out.
    early = len([c for c in cut if c <= 2.0])
    print("slowloris opened=%d refused=%d cut=%d early=%d alive=%d max_cut_secs=%.1f" %
          (opened, refused, len(cut), early, opened - len(cut), max(cut) if cut else 0))


def watch(host, port, token, outfile):
    ok = failed = 0
    worst = 0.0
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    while not stop:
        t0 = time.time()
        try:
            s = connect(host, port, "127.0.0.1", timeout=20)
            s.sendall(req("GET", "/api/v1/health", ["Authorization: Bearer %s" % token,
                                                    "Connection: close"]))
            data, _ = read_reply(s, 20)
            s.close()
            if parse(data)[0] == 200:
                ok += 1
            else:
                failed += 1
        except OSError:
            failed += 1
        worst = max(worst, time.time() - t0)
        time.sleep(0.25)
    with open(outfile, "w") as f:
        f.write("ok=%d failed=%d max_ms=%d\n" % (ok, failed, worst * 1000))


def events_drop(host, port, src, token, count):
    opened = refused = 0
    first = "-"
    t0 = time.time()
    for i in range(count):
        hello = False
        try:
            s = connect(host, port, src, timeout=10)
            s.sendall(req("GET", "/api/v1/events", ["Authorization: Bearer %s" % token,
                                                    "Accept: text/event-stream"]))
            data = b""
            end = time.time() + 10
            while b"event: hello" not in data and time.time() < end:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            hello = b"event: hello" in data
            s.close()
        except OSError:
            pass
        if hello:
            opened += 1
        else:
            refused += 1
            if first == "-":
                first = str(i)
    print("events-drop opened=%d refused=%d first_refused=%s secs=%.1f" %
          (opened, refused, first, time.time() - t0))


def wait_gone(host, port, src, token, method, path, body, how, secs):
    body = body.encode()
    s = connect(host, port, src, timeout=10)
    s.sendall(req(method, path, ["Authorization: Bearer %s" % token,
                                 "Content-Type: application/json",
                                 "Content-Length: %d" % len(body)], body))
    if how == "half":
        s.shutdown(socket.SHUT_WR)
        data, _ = read_reply(s, secs)
        s.close()
        print("wait-gone how=half status=%s" % parse(data)[0])
        return
    data, closed = read_reply(s, 0.5)
    if data or closed:
        print("wait-gone how=%s status=%s (answered before it could wait)" %
              (how, parse(data)[0]))
        return
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    print("wait-gone how=reset status=None")


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "case":
        case(a[1], a[2], int(a[3]), a[4] if len(a) > 4 else "none")
    elif len(a) == 6 and a[0] == "slowloris":
        slowloris(a[1], int(a[2]), a[3], int(a[4]), int(a[5]))
    elif len(a) == 5 and a[0] == "watch":
        watch(a[1], int(a[2]), a[3], a[4])
    elif len(a) == 6 and a[0] == "events-drop":
        events_drop(a[1], int(a[2]), a[3], a[4], int(a[5]))
    elif len(a) == 10 and a[0] == "wait-gone":
        wait_gone(a[1], int(a[2]), a[3], a[4], a[5], a[6], a[7], a[8], float(a[9]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
