#!/usr/bin/env python3
"""Checks a Prometheus text exposition (version 0.0.4) for the invariants a scraper relies on,
and prints the values asked for.

  prom_check.py FILE                      format and histogram invariants; exit 1 on a problem
  prom_check.py FILE 'NAME{l="v",...}'... also prints each sample's value (one a line, "-" if
                                          absent), labels given in any order

Invariants: every sample's family has # TYPE before it; names and labels are well formed;
values parse; per histogram series (same labels but le): buckets in increasing le order,
cumulative (never decreasing), a +Inf bucket equal to _count, and _sum present (>= 0).
"""
import math
import re
import sys

NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
SAMPLE = re.compile(r'^(' + NAME + r')(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def labels_of(s):
    out, pos = {}, 0
    while pos < len(s):
        m = LABEL.match(s, pos)
        if not m:
            raise ValueError('bad labels: ' + s)
        out[m.group(1)] = m.group(2)
        pos = m.end()
    return out


def parse(text):
    types, samples, errs = {}, [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if line.startswith('# TYPE '):
            p = line.split()
            if len(p) != 4 or p[3] not in ('counter', 'gauge', 'histogram', 'summary',
                                            'untyped'):
                errs.append('line %d: bad TYPE: %s' % (n, line))
            elif p[2] in types:
                errs.append('line %d: second TYPE for %s' % (n, p[2]))
            else:
                types[p[2]] = p[3]
            continue
        if line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            errs.append('line %d: not a sample: %s' % (n, line))
            continue
        name, lab, val = m.group(1), m.group(3) or '', m.group(4)
        try:
            lab = labels_of(lab)
            v = float(val)
        except ValueError as e:
            errs.append('line %d: %s' % (n, e))
            continue
        fam = name
        for suf in ('_bucket', '_sum', '_count'):
            if name.endswith(suf) and types.get(name[:-len(suf)]) == 'histogram':
                fam = name[:-len(suf)]
        if fam not in types:
            errs.append('line %d: %s has no # TYPE before it' % (n, name))
        samples.append((name, fam, lab, v))
    return types, samples, errs


def check_histograms(types, samples, errs):
    series = {}
    for name, fam, lab, v in samples:
        if types.get(fam) != 'histogram':
            continue
        key = (fam, tuple(sorted((k, x) for k, x in lab.items() if k != 'le')))
        s = series.setdefault(key, {'buckets': [], 'sum': None, 'count': None})
        if name == fam + '_bucket':
            if 'le' not in lab:
                errs.append('%s%s: bucket without le' % (fam, dict(key[1])))
                continue
            s['buckets'].append((float(lab['le']), v))
        elif name == fam + '_sum':
            s['sum'] = v
        elif name == fam + '_count':
            s['count'] = v
    for (fam, lab), s in series.items():
        where = '%s%s' % (fam, dict(lab))
        b = s['buckets']
        if not b or b[-1][0] != math.inf:
            errs.append(where + ': no +Inf bucket last')
            continue
        for (le0, c0), (le1, c1) in zip(b, b[1:]):
            if le1 <= le0:
                errs.append('%s: le %g after %g' % (where, le1, le0))
            if c1 < c0:
                errs.append('%s: bucket le=%g (%g) below le=%g (%g)' % (where, le1, c1, le0, c0))
        if s['count'] is None or s['count'] != b[-1][1]:
            errs.append('%s: +Inf bucket %g != _count %s' % (where, b[-1][1], s['count']))
        if s['sum'] is None or s['sum'] < 0:
            errs.append('%s: _sum missing or negative' % where)
    return len(series)


def main():
    text = open(sys.argv[1]).read()
    types, samples, errs = parse(text)
    check_histograms(types, samples, errs)
    for q in sys.argv[2:]:
        m = re.match(r'^(' + NAME + r')(\{(.*)\})?$', q)
        want_name, want = m.group(1), labels_of(m.group(3) or '')
        vals = [v for name, _, lab, v in samples if name == want_name and lab == want]
        print(('%.9g' % vals[0]) if vals else '-')
    for e in errs:
        print('prom_check: ' + e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == '__main__':
    sys.exit(main())
