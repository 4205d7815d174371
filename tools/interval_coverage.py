#!/usr/bin/env python3
"""Held-out coverage of the 80% intervals, publisher by publisher (docs/VALIDATION.md).

  build/cli/ditune validate --suite ... --cross-validate --json > loso.json
  tools/interval_coverage.py loso.json

For each publisher, the bands are learned from the other publishers' held-out residuals
only (ln(published / predicted), 10th to 90th type-7 percentile, per runtime class: xDiT and
every other runtime; a class with fewer than 10 residuals takes the band of all), and that
publisher's rows are counted inside or not. Width: exp(hi) - exp(lo).
"""
import json, math, statistics, sys
d=json.load(open(sys.argv[1]))
rows=[r for r in d['rows'] if r.get('role')=='predict' and r.get('predicted_s') and r.get('published_s')]
def q7(v,p):
    v=sorted(v); k=(len(v)-1)*p; f=math.floor(k); c=math.ceil(k)
    return v[f]+(v[c]-v[f])*(k-f)
def cls(r): return 'xdit' if (r.get('runtime') or 'xdit')=='xdit' else 'other'
pubs=sorted(set(r['publisher'] for r in rows), key=lambda p:-sum(1 for r in rows if r['publisher']==p))
tot_in=tot=0; widths_all=[]
for p in pubs:
    train=[r for r in rows if r['publisher']!=p]
    res={}
    for r in train: res.setdefault(cls(r),[]).append(math.log(r['published_s']/r['predicted_s']))
    allres=[x for v in res.values() for x in v]
    def band(c):
        v=res.get(c,[])
        if len(v)<10: v=allres
        return q7(v,0.1),q7(v,0.9)
    mine=[r for r in rows if r['publisher']==p]
    inside=0; widths=[]
    for r in mine:
        lo,hi=band(cls(r)); x=math.log(r['published_s']/r['predicted_s'])
        inside+= lo<=x<=hi; widths.append(math.exp(hi)-math.exp(lo))
    tot_in+=inside; tot+=len(mine); widths_all+=widths
    print(f"{p}: {inside} of {len(mine)} ({100*inside/len(mine):.0f}%) median width {100*statistics.median(widths):.0f}%")
print(f"together: {tot_in} of {tot} ({100*tot_in/tot:.0f}%) median width {100*statistics.median(widths_all):.0f}%")
