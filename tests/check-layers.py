#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering check (make check-layers, part of make test-unit).

Reads every #include "..." line of lib/, gateway/, agent/ and include/ and fails on:
  dotdot    an include path with ".."
  private   a file including another module's private header (one outside include/)
  missing   a quoted include found neither beside the file nor in include/
  import    an import of a module the table below does not allow
  cycle     two modules including each other (any module-level cycle)
With --build DIR it also reads the objects there with nm and fails on:
  call      a module calling (or reading) a symbol of a module it may not import
  callcycle a module-level cycle in the graph of defined/undefined symbols
so "no loops" holds for calls as well as includes. With --files (and --build) it also fails on:
  filecycle a cycle between source files of the tree: file A refers to a symbol file B defines
            (a call, or a function's address taken as a callback) and B, maybe through others,
            refers back to A. A module's files form a stack: a registry or dispatch file on
            top, the parts it names below it, their shared core at the bottom.
And it keeps the architecture document
true to the tree:
  doc       docs/architecture.dot is not what --dot prints from the table below, or a module
            of the table has no row in docs/ARCHITECTURE.md's module table
--dot prints the module graph (graphviz) that docs/architecture.dot holds (make docs).

--self-test runs the checks over tests/layers-fixture/, a small tree that breaks every rule,
and fails unless each breach is reported.

Prints one line per failure (file, include, rule) and ends with
"check-layers: N passed, N failed"; exits 1 on any failure.
"""
import argparse
import os
import re
import subprocess
import sys

# Who may import whom. A module is a folder: lib/, gateway/NAME/, agent/ROOM/. gateway/main.c is
# the daemon's main(), allowed everything in gateway. The agent's resources (agent/api/) and its
# composition (agent/api_agent.c, agent/main.c) are one module, "agent": they share struct
# api_agent, and every other room is below them and knows nothing of them.
GATEWAY = ['ctl', 'iscsi', 'dmv', 'pdu', 'scsi', 'bs', 'mpath', 'net', 'conf', 'lib']
ALLOWED = {
    'lib': [],
    'conf': ['lib'],
    'pdu': ['lib'],
    'dmv': ['pdu', 'lib'],
    'mpath': ['conf', 'lib'],          # the remote backstore's paths, and dm-multipath maps
    'bs': ['mpath', 'conf', 'lib'],
    'scsi': ['bs', 'conf', 'lib'],
    'iscsi': ['dmv', 'pdu', 'scsi', 'conf', 'lib'],
    'net': ['conf', 'lib'],            # bonds, RDMA ports, portal chains, verdicts
    'ctl': ['iscsi', 'dmv', 'pdu', 'scsi', 'bs', 'mpath', 'net', 'conf', 'lib'],
    'main': GATEWAY,
    'agent/store': ['lib'],            # the desired configuration: file or etcd
    'agent/gwc': ['lib'],              # the gateway's control-socket client
    'agent/http': ['agent/store', 'lib'],     # tokens are stored with the store's atomic write
    'agent/net': ['agent/store', 'lib'],      # desired bond settings likewise
    'agent/cluster': ['agent/store', 'lib'],
    'agent': ['agent/http', 'agent/store', 'agent/gwc', 'agent/net', 'agent/cluster', 'conf',
              'lib'],
    'agent/cli': ['lib'],
}

# The public header of each module, in include/ (lib has several, all gw_*.h).
PUBLIC = {
    'pdu.h': 'pdu', 'dmv.h': 'dmv', 'isc.h': 'iscsi', 'scsi.h': 'scsi', 'bs.h': 'bs',
    'mp.h': 'mpath', 'ctl.h': 'ctl', 'conf.h': 'conf', 'net.h': 'net',
    'api_http.h': 'agent/http', 'api_err.h': 'agent/http', 'api_auth.h': 'agent/http',
    'api_rcache.h': 'agent/http', 'api_store.h': 'agent/store', 'api_etcd.h': 'agent/store',
    'api_gwc.h': 'agent/gwc', 'api_net.h': 'agent/net',
    'api_bond.h': 'agent/net',
    'api_cluster.h': 'agent/cluster', 'api_agent.h': 'agent', 'api_res.h': 'agent',
}

SCANNED = ('lib', 'gateway', 'agent', 'include')
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(rel):
    """Module of a source path relative to the root, or None if not scanned."""
    parts = rel.split('/')
    if parts[0] == 'lib':
        return 'lib'
    if parts[0] == 'agent':
        if len(parts) == 2 or parts[1] == 'api':
            return 'agent'
        return 'agent/' + parts[1]
    if parts[0] == 'include':
        name = parts[-1]
        if name.startswith('gw_'):
            return 'lib'
        return PUBLIC.get(name, 'include?')
    if parts[0] == 'gateway':
        if len(parts) == 2:
            return 'main'
        return parts[1]
    return None


def sources(root):
    for top in SCANNED:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(('.c', '.h')):
                    yield os.path.relpath(os.path.join(d, f), root)


def resolve(root, rel, inc):
    """Where the compiler (-Iinclude) would find inc, or where a private header of
    that name lives in some module folder (for the message). Returns (path or None, public)."""
    here = os.path.dirname(rel)
    cands = [os.path.join(here, inc), os.path.join('include', inc)]
    for c in cands:
        if os.path.isfile(os.path.join(root, c)):
            return os.path.normpath(c), c.startswith('include/')
    # Not reachable: is it some other folder's header?
    base = os.path.basename(inc)
    for s in sources(root):
        if s.endswith('.h') and os.path.basename(s) == base and not s.startswith('include/'):
            return s, False
    return None, False


def cycles(edges):
    """Strongly connected components with more than one node (Tarjan), as sorted lists."""
    index, low, on, stack, out = {}, {}, set(), [], []
    nodes = sorted(set(edges) | {b for v in edges.values() for b in v})

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


class Report:
    def __init__(self, quiet=False):
        self.passed = 0
        self.failures = []     # (file, what, rule)
        self.quiet = quiet

    def ok(self):
        self.passed += 1

    def fail(self, where, what, rule, why):
        self.failures.append((where, what, rule))
        if not self.quiet:
            print(f'  FAIL  {where}: {what}: {rule}: {why}')


def check_includes(root, rep):
    edges = {}
    witness = {}
    for rel in sources(root):
        mod = module_of(rel)
        with open(os.path.join(root, rel), encoding='utf-8', errors='replace') as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                where = f'{rel}:{n}'
                what = f'#include "{inc}"'
                if '..' in inc.split('/'):
                    rep.fail(where, what, 'dotdot', 'include paths never climb with ".."; '
                             'use the module\'s public header in include/')
                    continue
                path, public = resolve(root, rel, inc)
                if path is None:
                    rep.fail(where, what, 'missing',
                             'not beside the file and not in include/')
                    continue
                target = module_of(path)
                if not public and target != mod:
                    rep.fail(where, what, 'private',
                             f'{path} is private to module {target}; use its public header '
                             'in include/')
                    continue
                if rel.startswith('include/') and not public:
                    rep.fail(where, what, 'private',
                             f'a public header includes {path}, which is not public')
                    continue
                if target != mod:
                    edges.setdefault(mod, set()).add(target)
                    witness.setdefault((mod, target), where)
                    if target not in ALLOWED.get(mod, []):
                        allowed = ', '.join(ALLOWED.get(mod, [])) or 'nothing'
                        rep.fail(where, what, 'import',
                                 f'module {mod} may import {allowed}, not {target}')
                        continue
                rep.ok()
    for comp in cycles(edges):
        where = '; '.join(f'{a}->{b} at {witness[(a, b)]}' for a in comp for b in comp
                          if (a, b) in witness)
        rep.fail(' <-> '.join(comp), where, 'cycle', 'modules include each other')
    if not cycles(edges):
        rep.ok()


def check_objects(root, build, rep):
    """Module-level call graph from nm: who defines what, who needs what."""
    objs = tree_objects(root, build)
    if not objs:
        rep.fail(build, 'objects', 'call', 'no objects of lib/, gateway/, agent/ here; '
                 'build first (make test-build)')
        return
    _, file_witness, defined = nm_graph(objs)
    edges, witness = {}, {}
    for (a, b), syms in sorted(file_witness.items()):
        mod, target = module_of(a), module_of(b)
        if mod == target:
            continue
        for s in syms:
            # A symbol the caller's own module defines too (a test's override) is its own.
            if mod in {module_of(f) for f in defined[s]}:
                continue
            edges.setdefault(mod, set()).add(target)
            witness.setdefault((mod, target), (os.path.relpath(objs[a], build), s))
    for (mod, target), (o, s) in sorted(witness.items()):
        if target in ALLOWED.get(mod, []):
            rep.ok()
        else:
            rep.fail(o, f'calls {s}', 'call',
                     f'module {mod} may use {", ".join(ALLOWED.get(mod, [])) or "nothing"}, '
                     f'not {target}')
    comps = cycles(edges)
    for comp in comps:
        where = '; '.join(f'{a}->{b} ({witness[(a, b)][0]}: {witness[(a, b)][1]})'
                          for a in comp for b in comp if (a, b) in witness)
        rep.fail(' <-> '.join(comp), where, 'callcycle', 'modules call each other')
    if not comps:
        rep.ok()


def nm_graph(objs):
    """Edges between the sources of objs ({source: object}): a -> b when a's object needs a
    global symbol that b's object defines. Returns (edges, witness {(a, b): [symbols]},
    defined {symbol: sources})."""
    defined, needs = {}, {}
    for src, o in sorted(objs.items()):
        out = subprocess.run(['nm', '--defined-only', '-g', o], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            p = line.split()
            if len(p) >= 3:
                defined.setdefault(p[2], set()).add(src)
        out = subprocess.run(['nm', '-u', o], capture_output=True, text=True, check=True).stdout
        needs[src] = {line.split()[-1] for line in out.splitlines() if line.strip()}
    edges, witness = {}, {}
    for src, syms in sorted(needs.items()):
        for s in sorted(syms):
            for target in sorted(defined.get(s, ())):
                if target != src:
                    edges.setdefault(src, set()).add(target)
                    witness.setdefault((src, target), []).append(s)
    return edges, witness, defined


def tree_objects(root, build):
    """{source: object} for the objects of lib/, gateway/ and agent/ in build (the release
    objects only: build/san, build/tsan and the tests' objects are other builds of the same
    files)."""
    objs = {}
    for d, dirs, files in os.walk(build):
        rel = os.path.relpath(d, build)
        if rel == '.':
            dirs[:] = [x for x in dirs if x in ('lib', 'gateway', 'agent')]
        for f in files:
            if not f.endswith('.o'):
                continue
            o = os.path.join(d, f)
            src = os.path.relpath(o, build)[:-2] + '.c'
            if os.path.isfile(os.path.join(root, src)):
                objs[src] = o
    return objs


def check_files(root, build, rep):
    """No cycle between source files, by the nm graph of the objects in build."""
    objs = tree_objects(root, build)
    if not objs:
        rep.fail(build, 'objects', 'filecycle', 'no objects of lib/, gateway/, agent/ here; '
                 'build first (make test-build)')
        return
    edges, witness, _ = nm_graph(objs)
    comps = cycles(edges)
    for comp in comps:
        where = '; '.join(f'{a}->{b} ({", ".join(witness[(a, b)][:4])}'
                          f'{", ..." if len(witness[(a, b)]) > 4 else ""})'
                          for a in comp for b in comp if (a, b) in witness)
        rep.fail(' <-> '.join(comp), where, 'filecycle', 'source files refer to each other')
    if not comps:
        rep.ok()


# The file-level fixture: three files in a circle (one edge a callback's address, not a call)
# and a fourth that only calls into it. --self-test compiles them and expects exactly the circle.
FILE_FIXTURE = {
    'gateway/x/x_reg.c': 'void x_a_run(void);\nvoid (*x_reg_first(void))(void)'
                         ' { return x_a_run; }\n',
    'gateway/x/x_a.c': 'int x_core_n(void);\nvoid x_a_run(void) { (void)x_core_n(); }\n',
    'gateway/x/x_core.c': 'void (*x_reg_first(void))(void);\n'
                          'int x_core_n(void) { return x_reg_first() != 0; }\n',
    'gateway/x/x_user.c': 'int x_core_n(void);\nint x_user(void) { return x_core_n(); }\n',
}
FILE_FIXTURE_CYCLE = 'gateway/x/x_a.c <-> gateway/x/x_core.c <-> gateway/x/x_reg.c'


def self_test_files():
    import tempfile
    cc = os.environ.get('CC', 'cc')
    with tempfile.TemporaryDirectory() as tmp:
        src_root, build = os.path.join(tmp, 'src'), os.path.join(tmp, 'build')
        for rel, text in FILE_FIXTURE.items():
            for top, name in ((src_root, rel), (build, rel[:-2] + '.o')):
                os.makedirs(os.path.dirname(os.path.join(top, name)), exist_ok=True)
            with open(os.path.join(src_root, rel), 'w', encoding='utf-8') as f:
                f.write(text)
            r = subprocess.run([cc, '-c', '-o', os.path.join(build, rel[:-2] + '.o'),
                                os.path.join(src_root, rel)], capture_output=True, text=True)
            if r.returncode:
                print(f'  FAIL  self-test: {cc} cannot build the file fixture: {r.stderr.strip()}')
                return 1
        rep = Report(quiet=True)
        check_files(src_root, build, rep)
        got = sorted(w for w, _, r in rep.failures if r == 'filecycle')
    if got != [FILE_FIXTURE_CYCLE]:
        print(f'  FAIL  self-test: the file fixture reported {got or "no cycle"}, '
              f'not {FILE_FIXTURE_CYCLE}')
        return 1
    return 0


# What the fixture must be reported for: (file, rule). Each is one deliberate breach.
FIXTURE_EXPECT = {
    ('gateway/scsi/scsi_up.c:3', 'dotdot'),
    ('gateway/dmv/dmv_peek.c:3', 'private'),
    ('gateway/dmv/dmv_peek.c:4', 'missing'),
    ('gateway/bs/bs_back.c:3', 'import'),
    ('include/scsi.h:3', 'private'),
    ('gateway/mpath/mp_back.c:3', 'import'),
    ('bs <-> mpath', 'cycle'),
}


def self_test(root):
    fixture = os.path.join(root, 'tests', 'layers-fixture')
    rep = Report(quiet=True)
    check_includes(fixture, rep)
    got = {(w, r) for w, _, r in rep.failures}
    missing = FIXTURE_EXPECT - got
    extra = got - FIXTURE_EXPECT
    for w, r in sorted(missing):
        print(f'  FAIL  self-test: {w}: rule {r} was not reported')
    for w, r in sorted(extra):
        print(f'  FAIL  self-test: {w}: rule {r} reported, not expected')
    return len(missing) + len(extra)


FOLDER = {'lib': 'lib/', 'main': 'gateway/main.c', 'agent': 'agent/api/'}


def folder_of(mod):
    if mod in FOLDER:
        return FOLDER[mod]
    if mod.startswith('agent/'):
        return mod + '/'
    return f'gateway/{mod}/'


def dot():
    """The module graph: one node per module, one edge per allowed import, grouped by program
    (conf and lib are shared by all three)."""
    out = ['// Generated by tests/check-layers.py --dot from its ALLOWED table (make docs).',
           '// Every module may import lib; those edges are left out.',
           'digraph isergw {', '  rankdir=TB;', '  node [shape=box, fontname="Helvetica"];',
           '  edge [color="#555555"];']
    groups = [('isergwd', [m for m in ALLOWED if not m.startswith('agent')
                           and m not in ('conf', 'lib')]),
              ('isergw-agent', [m for m in ALLOWED if m.startswith('agent') and m != 'agent/cli']),
              ('isergwctl', ['agent/cli']),
              ('shared libraries', ['conf', 'lib'])]
    for i, (name, mods) in enumerate(groups):
        out.append(f'  subgraph cluster_{i} {{')
        out.append(f'    label="{name}"; style=rounded; color="#999999";')
        for m in mods:
            out.append(f'    "{m}" [label="{m}\\n{folder_of(m)}"];')
        out.append('  }')
    for m, deps in ALLOWED.items():
        for d in deps:
            # main imports every gateway module; draw only its edge to ctl, the composition.
            # Every module may use lib: its edges would hide the others.
            if (m == 'main' and d != 'ctl') or d == 'lib':
                continue
            out.append(f'  "{m}" -> "{d}";')
    out.append('}')
    return '\n'.join(out) + '\n'


def check_doc(root, rep):
    path = os.path.join(root, 'docs', 'architecture.dot')
    try:
        with open(path, encoding='utf-8') as f:
            have = f.read()
    except OSError as e:
        rep.fail('docs/architecture.dot', 'missing', 'doc', str(e))
        have = None
    if have is not None:
        if have == dot():
            rep.ok()
        else:
            rep.fail('docs/architecture.dot', 'differs from the table', 'doc',
                     'run make docs (tests/check-layers.py --dot > docs/architecture.dot)')
    try:
        with open(os.path.join(root, 'docs', 'ARCHITECTURE.md'), encoding='utf-8') as f:
            text = f.read()
    except OSError as e:
        rep.fail('docs/ARCHITECTURE.md', 'missing', 'doc', str(e))
        return
    rows = {ln.split('|')[1].strip().strip('`') for ln in text.splitlines()
            if ln.startswith('| ') and ln.count('|') >= 4}
    for m in ALLOWED:
        if m in rows:
            rep.ok()
        else:
            rep.fail('docs/ARCHITECTURE.md', f'module {m}', 'doc',
                     'the module table has no row for it')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument('--build', help='build folder: also check the nm call graph of its objects')
    ap.add_argument('--dot', action='store_true', help='print the module graph and exit')
    ap.add_argument('--self-test', action='store_true',
                    help='also check that tests/layers-fixture/ fails as it must')
    ap.add_argument('--files', action='store_true',
                    help='with --build: also no cycle between source files (nm graph)')
    a = ap.parse_args()
    if a.dot:
        sys.stdout.write(dot())
        return 0
    rep = Report()
    check_includes(a.root, rep)
    check_doc(a.root, rep)
    if a.build:
        check_objects(a.root, a.build, rep)
    if a.files:
        if a.build:
            check_files(a.root, a.build, rep)
        else:
            rep.fail('--files', 'no --build', 'filecycle', 'the file graph needs the objects')
    failed = len(rep.failures)
    if a.self_test:
        bad = self_test(a.root) + (self_test_files() if a.files else 0)
        if bad:
            failed += bad
        else:
            rep.ok()
    print(f'check-layers: {rep.passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
