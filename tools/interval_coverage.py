#!/usr/bin/env python3
"""Held-out coverage of the 80% intervals, publisher by publisher (docs/VALIDATION.md).

  build/cli/ditune validate --suite ... --cross-validate --json > loso.json
  tools/interval_coverage.py loso.json

For each publisher, the intervals are learned from the other publishers' held-out residuals
only, as `ditune calibrate intervals` learns them (calibration/intervals.cc), and that
publisher's rows are counted inside or not:
  bands    ln(published / predicted), 10th to 90th type-7 percentile, per runtime class
           (xDiT and every other runtime; a class with fewer than 10 residuals takes the band
           of all);
  widening the least factor (steps of 0.01, up to 4) by which the bands, widened about their
           middle, hold 80% of those other publishers' values on average, each publisher's
           coverage counted once, when judged by the bands of the rest of them (nested: the
           publisher judged has no say in its own widening).
Width: exp(hi) - exp(lo). `--no-widening` judges the bands alone.
"""
import json
import math
import statistics
import sys


def q7(v, p):
    v = sorted(v)
    k = (len(v) - 1) * p
    f, c = math.floor(k), math.ceil(k)
    return v[f] + (v[c] - v[f]) * (k - f)


def cls(r):
    return 'xdit' if (r.get('runtime') or 'xdit') == 'xdit' else 'other'


def res(r):
    return math.log(r['published_s'] / r['predicted_s'])


def bands(rows):
    by = {}
    for r in rows:
        by.setdefault(cls(r), []).append(res(r))
    pooled = [x for v in by.values() for x in v]
    allb = (q7(pooled, 0.1), q7(pooled, 0.9))
    return lambda c: (q7(by[c], 0.1), q7(by[c], 0.9)) if len(by.get(c, [])) >= 10 else allb


def widened(lo, hi, w):
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    return mid - w * half, mid + w * half


def widening(rows):
    pubs = sorted(set(r['publisher'] for r in rows))
    if len(pubs) < 2:
        return 1.0
    judged = {}
    for p in pubs:
        b = bands([r for r in rows if r['publisher'] != p])
        judged[p] = [(res(r),) + b(cls(r)) for r in rows if r['publisher'] == p]

    def coverage(w):
        per = [sum(1 for x, lo, hi in v if widened(lo, hi, w)[0] <= x <= widened(lo, hi, w)[1]) / len(v)
               for v in judged.values()]
        return sum(per) / len(per)

    for step in range(100, 401):
        w = step / 100
        if coverage(w) >= 0.8:
            return w
    return 4.0


def main():
    args = [a for a in sys.argv[1:] if a != '--no-widening']
    d = json.load(open(args[0]))
    rows = [r for r in d['rows'] if r.get('role') == 'predict' and r.get('predicted_s') and r.get('published_s')]
    pubs = sorted(set(r['publisher'] for r in rows), key=lambda p: -sum(1 for r in rows if r['publisher'] == p))
    tot_in = tot = 0
    widths_all = []
    for p in pubs:
        train = [r for r in rows if r['publisher'] != p]
        b = bands(train)
        w = 1.0 if '--no-widening' in sys.argv else widening(train)
        mine = [r for r in rows if r['publisher'] == p]
        inside = 0
        widths = []
        for r in mine:
            lo, hi = widened(*b(cls(r)), w)
            inside += lo <= res(r) <= hi
            widths.append(math.exp(hi) - math.exp(lo))
        tot_in += inside
        tot += len(mine)
        widths_all += widths
        print(f"{p}: {inside} of {len(mine)} ({100 * inside / len(mine):.0f}%) median width "
              f"{100 * statistics.median(widths):.0f}% (widened x{w:.2f})")
    print(f"together: {tot_in} of {tot} ({100 * tot_in / tot:.0f}%) median width "
          f"{100 * statistics.median(widths_all):.0f}%")


if __name__ == '__main__':
    main()
