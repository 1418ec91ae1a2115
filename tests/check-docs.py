#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The documentation check (part of make test-unit, beside check-layers).

Reads README.md and docs/*.md and fails on:
  key       a configuration key path the docs name (a `code` span such as `gateway.loops`,
            `targets[0].luns[].backstore.size`, `backstore.path`, or a key row of a table whose
            heading names the object, as CONFIGURATION.md's are) that the gateway does not have
  rest      a REST path /api/v1/... the agent does not route
  ctl       an isergwctl command (in `code` or a code block) isergwctl does not have
  size      a document longer than its limit (LIMITS below)
  history   the notebook's words: "session N" or "issue N" (an iSCSI session has no number)
  link      a relative link to a file that is not in the repository
  table     a configuration key table in gateway/conf/ that this script cannot place
The truth comes from the programs: the keys and routes from the agent's OpenAPI document
(BUILD/isergw-agent --openapi: the same key tables feed its schema), the commands from
`BUILD/isergwctl --help`. The remote backstore's keys and the cluster object's are not in the
schema; their tables are read from gateway/conf/*.c (TABLES below).

--self-test runs the checks over tests/docs-fixture/, a small tree that breaks every rule once,
and fails unless each breach, and nothing else, is reported.

Prints one line per failure (file:line, what, rule) and ends with
"check-docs: N passed, N failed"; exits 1 on any failure.
"""
import argparse
import json
import os
import re
import subprocess
import sys

LIMITS = {'docs/PERFORMANCE.md': 400, 'docs/ARCHITECTURE.md': 500, 'docs/TESTING.md': 300}
HISTORY = re.compile(r'\b(sessions?|issues?)\s+#?\d+\b', re.I)

# Key tables of gateway/conf/ and where their keys live. None: the OpenAPI schema has them.
BS = 'targets[].luns[].backstore'
TABLES = {
    'conf_gateway_keys': None, 'conf_portal_keys': None, 'conf_discovery_keys': None,
    'conf_target_keys': None, 'conf_initiator_keys': None, 'conf_chap_keys': None,
    'conf_param_keys': None, 'conf_lu_keys': None, 'conf_bs_keys': None,
    'conf_mp_keys': [BS],
    'conf_mp_path_keys': [BS + '.paths[]'],
    'conf_mp_chap_keys': [BS + '.paths[].chap'],
    'conf_group_keys': ['cluster.groups[]'],
}
# Objects the tables above sit in, which no table declares.
STRUCTURE = ['cluster', 'cluster.groups', BS + '.paths', BS + '.paths[].chap']

# Key paths are written from the top, or from one of these objects (isergwctl's k=v, FAILOVER.md).
TOP = ('gateway', 'portals', 'discovery', 'targets', 'cluster')
RELATIVE = {'backstore': 'targets[].luns[]', 'luns': 'targets[]', 'paths': BS}
# Tables whose heading names no key path but whose rows are keys: (file, heading) -> prefix.
TABLE_PREFIX = {
    ('docs/CONFIGURATION.md', 'Top level'): '',
    ('docs/CONFIGURATION.md', 'chap objects'): 'discovery.chap',
    ('docs/FAILOVER.md', 'A remote LUN'): BS,
}
KEYPATH = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*(\[[^\]\s]*\])?(\.[A-Za-z_][A-Za-z0-9_]*'
                     r'(\[[^\]\s]*\])?)*$')


class Report:
    def __init__(self, quiet=False):
        self.passed = 0
        self.failures = []
        self.quiet = quiet

    def ok(self):
        self.passed += 1

    def fail(self, where, what, rule, why):
        self.failures.append((where, what, rule))
        if not self.quiet:
            print(f'  FAIL  {where}: {what}: {rule}: {why}')


# ---- the truth -------------------------------------------------------------------------------

def schema_keys(api):
    schemas = api['components']['schemas']
    out = set()

    def walk(s, prefix, seen):
        if '$ref' in s:
            name = s['$ref'].split('/')[-1]
            if name not in seen:
                walk(schemas[name], prefix, seen | {name})
            return
        for k in ('oneOf', 'anyOf', 'allOf'):
            for x in s.get(k, []):
                walk(x, prefix, seen)
        if s.get('type') == 'array' and 'items' in s:
            walk(s['items'], prefix + '[]', seen)
        for k, v in s.get('properties', {}).items():
            p = f'{prefix}.{k}' if prefix else k
            out.add(p)
            walk(v, p, seen)

    walk(schemas['Config'], '', frozenset())
    return out


def table_keys(root, rep):
    """The key tables of gateway/conf/*.c: {table: [key names]}."""
    tables = {}
    d = os.path.join(root, 'gateway', 'conf')
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not name.endswith('.c'):
            continue
        text = open(os.path.join(d, name), encoding='utf-8').read()
        for m in re.finditer(r'struct gw_conf_key\s+(\w+)\[\]\s*=\s*\{(.*?)\n\};', text, re.S):
            tables[m.group(1)] = re.findall(r'\.name\s*=\s*"([^"]+)"', m.group(2))
    keys = set(STRUCTURE)
    for t, names in sorted(tables.items()):
        if t not in TABLES:
            rep.fail(f'gateway/conf ({t})', t, 'table',
                     'a key table check-docs cannot place: add it to TABLES')
            continue
        rep.ok()
        for prefix in TABLES[t] or []:
            keys.update(f'{prefix}.{k}' for k in names)
    return keys


def all_keys(keys):
    """Every key path and each of its parents, with and without a trailing []."""
    out = set()
    for k in keys:
        parts = k.split('.')
        for i in range(1, len(parts) + 1):
            p = '.'.join(parts[:i])
            out.add(p)
            out.add(p[:-2] if p.endswith('[]') else p)
    return out


def routes(api):
    return [p.strip('/').split('/') for p in api['paths']]


def ctl_commands(help_text):
    """isergwctl's commands from its help: {command: {subcommands}} (empty: takes none)."""
    cmds = {}
    lines = help_text.split('\ncommands:\n', 1)[-1].splitlines()
    cur = None
    for ln in lines:
        if not ln.startswith('  ') or re.match(r'^\S', ln):
            break
        for entry in re.split(r'\s{3,}', ln.strip()):
            entry = re.sub(r'\([^)]*\)', '', re.sub(r'\[[^\]]*\]', '', entry))
            alts = [a.split() for a in entry.split('|')]
            cont = entry.startswith('|')
            if cont:
                alts = alts[1:]
            elif alts and alts[0]:
                words = alts[0]
                if len(words) > 1 and re.match(r'^[a-z]+$', words[1]):
                    cur = words[0]
                    cmds[cur] = {words[1]}
                    alts = alts[1:]
                else:
                    cur = None
            for a in alts:
                if not a:
                    continue
                if cont or cur:
                    cmds.setdefault(cur, set()).add(a[0])
                else:
                    cmds[a[0]] = set()
    return cmds


# ---- the docs --------------------------------------------------------------------------------

def doc_files(root):
    files = ['README.md'] if os.path.exists(os.path.join(root, 'README.md')) else []
    d = os.path.join(root, 'docs')
    if os.path.isdir(d):
        files += [f'docs/{n}' for n in sorted(os.listdir(d)) if n.endswith('.md')]
    return files


def code_spans(lines):
    """(line number, text) of every `span` outside code blocks and every code block line."""
    fence = False
    for i, ln in enumerate(lines, 1):
        if ln.lstrip().startswith('```'):
            fence = not fence
            continue
        if fence:
            yield i, ln, True
        else:
            for m in re.finditer(r'`([^`]+)`', ln):
                yield i, m.group(1), False


def norm_key(span):
    """The key path a span names, normalized (indices to []), or None if it names none."""
    s = span.strip()
    s = re.split(r'[=:]', s, 1)[0] if not s.startswith(':') else s
    if not KEYPATH.match(s):
        return None
    s = re.sub(r'\[[^\]]*\]', '[]', s)
    head = re.match(r'^[A-Za-z_]+', s).group(0)
    if head in TOP:
        if '.' not in s and '[' not in s:
            return None     # a bare word: "gateway" is also prose
        return s
    if head in RELATIVE and ('.' in s):
        return f'{RELATIVE[head]}.{s}'
    return None


def check_keys(path, lines, keys, rep):
    for i, span, block in code_spans(lines):
        if block:
            continue
        k = norm_key(span)
        if k is None:
            continue
        k = k[:-2] if k.endswith('[]') else k
        if k in keys:
            rep.ok()
        else:
            rep.fail(f'{path}:{i}', span, 'key', 'no such configuration key')
    # Tables under a heading that names the object.
    heading = None
    prefix = None
    for i, ln in enumerate(lines, 1):
        m = re.match(r'^#+\s+(.*)$', ln)
        if m:
            heading = m.group(1).strip()
            hm = re.match(r'^`([^`]+)`$', heading)
            if (path, heading) in TABLE_PREFIX:
                prefix = TABLE_PREFIX[(path, heading)]
            elif hm and norm_key(hm.group(1) + '.x'):
                prefix = norm_key(hm.group(1) + '.x')[:-2]
            else:
                prefix = None
            continue
        if prefix is None or not ln.startswith('| `'):
            continue
        cell = ln.split('|')[1]
        for name in re.findall(r'`([^`]+)`', cell):
            name = re.sub(r'\[[^\]]*\]', '[]', name.strip())
            k = f'{prefix}.{name}' if prefix else name
            if k in keys:
                rep.ok()
            else:
                rep.fail(f'{path}:{i}', k, 'key', f'a row of "{heading}" names no such key')


def check_rest(path, lines, rts, rep):
    for i, ln in enumerate(lines, 1):
        for m in re.finditer(r'/api/v1(/[A-Za-z0-9_{}.:/-]*)?', ln):
            p = re.sub(r'[.:]+$', '', m.group(0)).rstrip('/')
            segs = p.strip('/').split('/')
            if segs == ['api', 'v1'] or any(
                    len(r) == len(segs) and all(a == b or (a.startswith('{') and b)
                                                for a, b in zip(r, segs)) for r in rts):
                rep.ok()
            else:
                rep.fail(f'{path}:{i}', p, 'rest', 'the agent routes no such path')


def check_ctl(path, lines, cmds, rep):
    for i, span, _ in code_spans(lines):
        for m in re.finditer(r'\bisergwctl((?:\s+--?[a-z-]+(?:[ =](?!-)[^\s`]+)?)*)'
                             r'(?:\s+([a-z][a-z-]*))?(?:\s+([a-z][a-z-]*))?', span):
            opts, cmd, sub = m.group(1), m.group(2), m.group(3)
            if not cmd:
                continue
            # An option that takes no argument ate the command ("--json target list").
            om = re.search(r'--(json|insecure|dry-run|apply|force)\s+([a-z][a-z-]*)$', opts or '')
            if om and cmd not in cmds:
                cmd, sub = om.group(2), cmd
            if cmd not in cmds:
                rep.fail(f'{path}:{i}', f'isergwctl {cmd}', 'ctl', 'no such command')
            elif sub and cmds[cmd] and sub not in cmds[cmd]:
                rep.fail(f'{path}:{i}', f'isergwctl {cmd} {sub}', 'ctl', 'no such subcommand')
            else:
                rep.ok()


def check_size(path, lines, rep):
    if path in LIMITS:
        if len(lines) <= LIMITS[path]:
            rep.ok()
        else:
            rep.fail(path, f'{len(lines)} lines', 'size', f'at most {LIMITS[path]}')


def check_history(path, lines, rep):
    bad = 0
    for i, ln in enumerate(lines, 1):
        for m in HISTORY.finditer(ln):
            bad += 1
            rep.fail(f'{path}:{i}', m.group(0), 'history', 'say what is true now; git keeps when')
    if not bad:
        rep.ok()


def check_links(root, path, lines, tracked, rep):
    base = os.path.dirname(path)
    for i, ln in enumerate(lines, 1):
        for m in re.finditer(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)', ln):
            t = m.group(1)
            if re.match(r'^[a-z]+:', t) or t.startswith('#'):
                continue
            t = t.split('#', 1)[0]
            p = os.path.normpath(os.path.join(base, t))
            if p.startswith('..') or os.path.isabs(t):
                rep.fail(f'{path}:{i}', t, 'link', 'outside the repository')
            elif p in tracked or any(f.startswith(p + '/') for f in tracked):
                rep.ok()
            else:
                rep.fail(f'{path}:{i}', t, 'link', 'no such file in the repository')


def tracked_files(root):
    r = subprocess.run(['git', '-C', root, 'ls-files'], capture_output=True, text=True)
    if r.returncode == 0 and r.stdout:
        return set(r.stdout.split('\n')) - {''}
    out = set()
    for d, _, fs in os.walk(root):
        for f in fs:
            out.add(os.path.relpath(os.path.join(d, f), root))
    return out


def check_tree(root, api, help_text, rep, tracked=None):
    keys = all_keys(schema_keys(api) | table_keys(root, rep))
    rts = routes(api)
    cmds = ctl_commands(help_text)
    if not cmds:
        rep.fail('isergwctl help', 'no commands', 'ctl', 'could not read its command list')
    tracked = tracked_files(root) if tracked is None else tracked
    for path in doc_files(root):
        with open(os.path.join(root, path), encoding='utf-8') as f:
            lines = f.read().split('\n')
        if lines and lines[-1] == '':
            lines.pop()
        check_size(path, lines, rep)
        check_history(path, lines, rep)
        check_links(root, path, lines, tracked, rep)
        check_keys(path, lines, keys, rep)
        check_rest(path, lines, rts, rep)
        check_ctl(path, lines, cmds, rep)


# What tests/docs-fixture/ must report: every rule once, nothing else.
FIXTURE_EXPECT = {
    ('gateway/conf (conf_new_keys)', 'table'),
    ('docs/PERFORMANCE.md', 'size'),
    ('docs/GUIDE.md:5', 'history'),
    ('docs/GUIDE.md:7', 'key'),
    ('docs/GUIDE.md:18', 'key'),
    ('docs/GUIDE.md:9', 'rest'),
    ('docs/GUIDE.md:11', 'ctl'),
    ('README.md:4', 'link'),
    ('README.md:5', 'link'),
}


def self_test(root):
    fx = os.path.join(root, 'tests', 'docs-fixture')
    with open(os.path.join(fx, 'openapi.json'), encoding='utf-8') as f:
        api = json.load(f)
    with open(os.path.join(fx, 'isergwctl-help.txt'), encoding='utf-8') as f:
        help_text = f.read()
    rep = Report(quiet=True)
    tracked = set()
    for d, _, fs in os.walk(fx):
        for n in fs:
            tracked.add(os.path.relpath(os.path.join(d, n), fx))
    check_tree(fx, api, help_text, rep, tracked)
    got = {(w, r) for w, _, r in rep.failures}
    bad = 0
    for w, r in sorted(FIXTURE_EXPECT - got):
        print(f'  FAIL  self-test: {w}: rule {r} was not reported')
        bad += 1
    for w, r in sorted(got - FIXTURE_EXPECT):
        print(f'  FAIL  self-test: {w}: rule {r} reported, not expected')
        bad += 1
    if rep.passed == 0:
        print('  FAIL  self-test: nothing in the fixture passed')
        bad += 1
    return bad


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)}: exit {r.returncode}: {r.stderr.strip()}')
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument('--build', default='build', help='where isergw-agent and isergwctl are')
    ap.add_argument('--self-test', action='store_true',
                    help='also check that tests/docs-fixture/ fails as it must')
    a = ap.parse_args()
    rep = Report()
    build = a.build if os.path.isabs(a.build) else os.path.join(a.root, a.build)
    try:
        api = json.loads(run([os.path.join(build, 'isergw-agent'), '--openapi']))
        help_text = run([os.path.join(build, 'isergwctl'), '--help'])
    except (OSError, RuntimeError, ValueError) as e:
        print(f'  FAIL  check-docs: {e}')
        print('check-docs: 0 passed, 1 failed')
        return 1
    check_tree(a.root, api, help_text, rep)
    failed = len(rep.failures)
    if a.self_test:
        bad = self_test(a.root)
        if bad:
            failed += bad
        else:
            rep.ok()
    print(f'check-docs: {rep.passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
