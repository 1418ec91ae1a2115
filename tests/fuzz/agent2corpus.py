#!/usr/bin/env python3
"""Seeds for fuzz_agent's request mode (tests/fuzz/fuzz_agent.c) from curl-shaped requests.

Each sequence below is what the agent's suites (tests/integration/test_agent*.sh) send with
curl, one request a line:

    [TOKEN] METHOD PATH [@if-match] [@stale] [@text] [@gzip] [@dry] [@enc] [BODY]

TOKEN is admin (default), reader, none or wrong. PATH uses the harness's names: {T} target,
{L} LUN, {I} initiator, {P} portal/bond/session, each written NAME=INDEX (T=0 is
iqn.2026-11.org.isergw:t1; see names_* in fuzz_agent.c). Each sequence becomes one input,
req-NAME, in the harness's record format.

    tests/fuzz/agent2corpus.py tests/fuzz/corpus/fuzz_agent
"""
import os
import re
import sys

METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
# The order of routes[] in fuzz_agent.c.
ROUTES = [
    "/api/v1/health", "/api/v1/version", "/api/v1/openapi.json", "/api/v1/targets",
    "/api/v1/targets/{T}", "/api/v1/targets/{T}/luns", "/api/v1/targets/{T}/luns/{L}",
    "/api/v1/targets/{T}/acls", "/api/v1/targets/{T}/acls/{I}", "/api/v1/portals",
    "/api/v1/portals/{P}", "/api/v1/discovery", "/api/v1/sessions", "/api/v1/sessions/{S}",
    "/api/v1/config", "/api/v1/config/validate", "/api/v1/bonds", "/api/v1/bonds/{B}",
    "/api/v1/rdma", "/metrics", "/api/v1/cluster", "/api/v1/events", "/", "/index.html",
    "/api/v1/targets/{T}/luns/{L}/{I}", "/api/v1/{T}",
]
TOKENS = {"admin": 0, "reader": 1, "none": 2, "wrong": 3}
FLAGS = {"@if-match": 4, "@stale": 8, "@text": 16, "@gzip": 32, "@dry": 64, "@enc": 128}
SHIFT = {"T": 0, "L": 2, "I": 4, "P": 6, "S": 6, "B": 6}

T1 = "iqn.2026-11.org.isergw:t1"
H1 = "iqn.1994-05.com.example:h1"
CONFIG = ('{"portals":[{"name":"tcp0","address":"127.0.0.1","port":3260}],'
          '"targets":[{"name":"%s","portals":["tcp0"],"allow_any_initiator":false,'
          '"initiators":[{"name":"%s","chap":{"user":"u1","secret":"secret-0123456"}}],'
          '"luns":[{"lun":0,"backstore":{"type":"ram","size":"8M"}},'
          '{"lun":1,"backstore":{"type":"remote","block_size":512,'
          '"paths":[{"url":"iscsi://10.0.0.1:3260/iqn.x:y/1"}]}}]}]}' % (T1, H1))

PORTAL = 'POST /api/v1/portals {"name":"tcp0","address":"127.0.0.1","port":3260}\n'

SEQUENCES = {
    "target-lifecycle": PORTAL + f"""
POST /api/v1/targets {{"name":"{T1}","alias":"a","allow_any_initiator":true}}
GET /api/v1/targets/{{T=0}}
PUT /api/v1/targets/{{T=0}} @if-match {{"alias":"b","allow_any_initiator":false,"portals":["tcp0"]}}
POST /api/v1/targets/{{T=0}}/luns {{"lun":0,"backstore":{{"type":"ram","size":"8M"}},"product":"fz"}}
PUT /api/v1/targets/{{T=0}}/luns/{{L=0}} @if-match {{"backstore":{{"type":"ram","size":"16M"}}}}
GET /api/v1/targets/{{T=0}}/luns
POST /api/v1/targets/{{T=0}}/acls {{"name":"{H1}","chap":{{"user":"u1","secret":"secret-0123456","mutual_user":"g1","mutual_secret":"mutual-0123456"}}}}
PUT /api/v1/targets/{{T=0}}/acls/{{I=0}} {{"chap":{{"user":"u1","secret":"****","mutual_user":"","mutual_secret":""}}}}
GET /api/v1/targets/{{T=0}}/acls
DELETE /api/v1/targets/{{T=0}}/acls/{{I=0}}
DELETE /api/v1/targets/{{T=0}}/luns/{{L=0}}
DELETE /api/v1/targets/{{T=0}} @if-match
GET /api/v1/targets
""",
    "config": f"""
GET /api/v1/config
PUT /api/v1/config @if-match {CONFIG}
PUT /api/v1/config @dry {CONFIG}
PUT /api/v1/config @stale {CONFIG}
POST /api/v1/config/validate {{"targets":[{{"name":"bad name","luns":[{{"lun":99999}}]}}]}}
reader POST /api/v1/config/validate {CONFIG}
GET /api/v1/targets/{{T=0}}/luns/{{L=1}}
GET /api/v1/config @gzip
""",
    "portals-discovery": """
POST /api/v1/portals {"name":"tcp1","address":"127.0.0.1","port":3261,"transport":"tcp"}
PUT /api/v1/portals/{P=1} {"address":"127.0.0.1","port":3262}
GET /api/v1/portals
PUT /api/v1/discovery {"auth":"chap","chap":{"user":"disc","secret":"discovery-secret1"}}
GET /api/v1/discovery
PUT /api/v1/discovery {"auth":"none"}
DELETE /api/v1/portals/{P=1}
""",
    "bonds": """
GET /api/v1/bonds
PUT /api/v1/bonds/{B=2} {"mode":"active-backup","fail_over_mac":"active","slaves":["bd0b","bd0a"],"primary":"bd0a"}
GET /api/v1/bonds/{B=2}
PUT /api/v1/bonds/{B=2} {"mode":"fast","fail_over_mac":"sometimes","slaves":["bd0a","a/b"],"primary":"bd0c","speed":1}
DELETE /api/v1/bonds/{B=2}
GET /api/v1/rdma
""",
    "auth": f"""
none GET /api/v1/targets
wrong GET /api/v1/config
reader POST /api/v1/targets {{"name":"{T1}"}}
reader DELETE /api/v1/targets/{{T=0}}
reader GET /api/v1/targets
none GET /api/v1/health
none GET /api/v1/openapi.json
none GET /
""",
    "backstore-paths": PORTAL + f"""
POST /api/v1/targets {{"name":"{T1}","allow_any_initiator":true}}
POST /api/v1/targets/{{T=0}}/luns {{"lun":1,"backstore":{{"type":"file","path":"/etc/shadow"}}}}
POST /api/v1/targets/{{T=0}}/luns {{"lun":2,"backstore":{{"type":"block","path":"/dev/disk/by-id/../../sda"}}}}
POST /api/v1/targets/{{T=0}}/luns {{"lun":3,"backstore":{{"type":"remote","paths":[{{"url":"iscsi://u%p@10.0.0.1/iqn.x:y/0"}}],"no_path_retry":"queue"}}}}
GET /api/v1/targets/{{T=0}}/luns/{{L=1}}
""",
    "hostile-paths": """
GET /api/v1/targets/{T=2}
DELETE /api/v1/targets/{T=3}
GET /api/v1/targets/{T=0}/acls/{I=3} @enc
GET /api/v1/targets/{T=0}/luns/{L=3}/{I=2}
GET /api/v1/{T=0}
PATCH /api/v1/targets/{T=0} {"alias":"x"}
OPTIONS /api/v1/targets
HEAD /api/v1/targets
""",
    "system": """
GET /api/v1/version
GET /metrics @gzip
GET /api/v1/cluster
GET /api/v1/sessions
DELETE /api/v1/sessions/{S=3}
GET /index.html
GET /api/v1/events
""",
    "bodies": PORTAL + f"""
POST /api/v1/targets [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]
POST /api/v1/targets {{"name":"{T1}","alias":"\\u0000\\ud800"}}
POST /api/v1/targets @text {{"name":"{T1}"}}
PUT /api/v1/targets/{{T=0}} {{"name":"iqn.2026-11.org.isergw:t2","portals":"tcp0"}}
POST /api/v1/targets/{{T=0}}/luns {{"lun":-1,"backstore":{{"type":"ram","size":"1E"}}}}
POST /api/v1/targets/{{T=0}}/acls {{"name":"{H1}","chap":{{"user":"","secret":"short"}}}}
""",
}


def record(line):
    words = line.split(" ", 1)
    tok = 0
    if words[0] in TOKENS:
        tok = TOKENS[words[0]]
        line = words[1]
    method, rest = (line.split(" ", 1) + [""])[:2]
    path, _, rest = rest.partition(" ")
    flags = tok
    while rest.startswith("@"):
        f, _, rest = rest.partition(" ")
        flags |= FLAGS[f]
    sel = 0
    for key, idx in re.findall(r"\{([TLIPSB])=(\d)\}", path):
        sel |= int(idx) << SHIFT[key]
    tmpl = re.sub(r"\{([TLIPSB])=\d\}", r"{\1}", path)
    body = rest.encode()
    return bytes([METHODS.index(method), ROUTES.index(tmpl), flags, sel,
                  len(body) & 0xff, len(body) >> 8]) + body


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/fuzz_agent"
    for name, text in SEQUENCES.items():
        recs = [record(l) for l in text.strip().splitlines() if l.strip()]
        with open(os.path.join(out, "req-" + name), "wb") as f:
            f.write(b"\xff" + b"".join(recs))
        print("req-%s: %d requests" % (name, len(recs)))


if __name__ == "__main__":
    main()
