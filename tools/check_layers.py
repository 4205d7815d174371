#!/usr/bin/env python3
"""The rooms' dependencies point one way (docs/ARCHITECTURE.md): every #include "room/..." of a
library file names its own room or one below it, and no two files include each other.
Exit 1 naming each offending include; 0 when the tree keeps the layering.

  python3 tools/check_layers.py [REPO]
"""
import os
import re
import sys

# Each room and the rooms it may include (besides itself).
BELOW = {
    "core": set(),
    "costmodels": {"core"},
    "store": {"core", "costmodels"},
    "ingest": {"core", "costmodels"},
    "simulator": {"core", "costmodels"},
    "calibration": {"core", "costmodels", "store", "simulator"},
    "planner": {"core", "costmodels", "store", "ingest", "simulator", "calibration"},
    "serving": {"core", "costmodels", "store", "ingest", "simulator", "calibration", "planner"},
    "executor": {"core", "costmodels"},
    "runs": {"core", "costmodels", "store", "ingest", "simulator", "calibration", "planner", "executor"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    bad = []
    edges = {}
    for room in BELOW:
        for dirpath, _, names in os.walk(os.path.join(repo, room)):
            for name in names:
                if not name.endswith((".h", ".cc", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, repo)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for target_room, rest in INCLUDE.findall(text):
                    target = f"{target_room}/{rest}"
                    edges.setdefault(rel, set()).add(target)
                    if target_room == room or target_room not in BELOW:
                        continue
                    if target_room not in BELOW[room]:
                        bad.append(f"{rel} includes {target}: {room}/ may include only "
                                   f"{', '.join(sorted(BELOW[room] | {room}))}")
    # Mutual includes, header or source: a .cc counts as its header's room-mate.
    def stem(p):
        return os.path.splitext(p)[0]
    by_stem = {}
    for src, targets in edges.items():
        by_stem.setdefault(stem(src), set()).update(stem(t) for t in targets)
    for a, targets in by_stem.items():
        for b in targets:
            if b != a and a in by_stem.get(b, set()) and a < b:
                bad.append(f"{a} and {b} include each other")
    for line in bad:
        print(line)
    print(f"check_layers: {len(bad)} problem(s) in {len(edges)} files")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
