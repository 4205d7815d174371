#!/usr/bin/env python3
"""Prints docs/VALIDATION.md's per-group and every-row tables of the training suite.

  build/cli/ditune validate --suite S --db /tmp/v.db --json > in.json
  build/cli/ditune validate --suite S --cross-validate --db /tmp/cv.db --json > cv.json
  tools/validation_tables.py S in.json cv.json

The rows of both outputs are joined to the suite by their CSV line; the held-out figures
per group are the cross-validation's own summaries.
"""
import csv
import json
import statistics
import sys


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    suite_path, in_path, cv_path = argv[1:]
    with open(suite_path, newline="") as f:
        suite = {i + 2: row for i, row in enumerate(csv.DictReader(f))}  # line 1 is the header
    with open(in_path) as f:
        ins = {r["line"]: r for r in json.load(f)["rows"]}
    with open(cv_path) as f:
        cv = json.load(f)
    held = {r["line"]: r for r in cv["rows"]}
    held_groups = {g.get("held_out", g.get("group")): g["summary"] for g in cv["groups"]}

    order = []
    for line, row in sorted(suite.items()):
        if row["group"] not in order:
            order.append(row["group"])

    print("| group | predict rows | in sample median | in sample max | held out median | held out p90 | held out choice |")
    print("|---|---|---|---|---|---|---|")
    for g in order:
        apes = [ins[l]["ape"] for l, r in suite.items()
                if r["group"] == g and l in ins and ins[l]["ape"] is not None]
        n = sum(1 for r in suite.values() if r["group"] == g and r["role"] == "predict")
        s = held_groups.get(g, {})
        choice = f"{s['choice_pass']}/{s['choice_sets']}" if s.get("choice_sets") else "-"
        print(f"| {g} | {n} | {pct(statistics.median(apes) if apes else None)} | "
              f"{pct(max(apes) if apes else None)} | {pct(s.get('median_ape'))} | {pct(s.get('p90_ape'))} | {choice} |")

    print()
    print("| group | GPUs | config | published s | in sample s | APE | held out s | APE |")
    print("|---|---|---|---|---|---|---|---|")

    def cell(r):
        if r is None:
            return "-", "-"
        p = r.get("predicted_s")
        s = "no fit" if p is None else f"{p:.3f}"
        if r["role"] == "calibrate":
            return s, "calibrate"
        if r.get("published_s") == "OOM":  # a published OOM: agreed when predicted not to fit
            return s, "OOM agreed" if p is None else "fits: wrong"
        return s, pct(r.get("ape"))

    for line, row in sorted(suite.items()):
        a, ae = cell(ins.get(line))
        b, be = cell(held.get(line))
        config = row["config"] or "1 device"
        print(f"| {row['group']} | {row['gpus']} | {config} | {row['latency_s']} | {a} | {ae} | {b} | {be} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
