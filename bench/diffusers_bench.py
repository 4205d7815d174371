"""What bench/diffusers_host_ops.py and bench/diffusers_step_ops.py share: their common
arguments, the catalog they read (`ditune models --json`) and the models they are asked for,
and the import of torch from a given diffusers source folder. Bad input exits with status 2
and a message that names what is wrong."""
import argparse
import csv
import json
import sys


def parser(description, budget_s):
    """The arguments both benches take; each adds its own."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--models-json", required=True, help="`ditune models --json` output")
    ap.add_argument("--out", required=True)
    ap.add_argument("--diffusers", help="folder holding the diffusers package (its src/ folder)")
    ap.add_argument("--source", default="diffusers", help="the diffusers commit, for every row")
    ap.add_argument("--models", help="comma-separated catalog ids (default: every one the script knows)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=budget_s)
    ap.add_argument("--dry-run", action="store_true")
    return ap


def catalog_and_models(a, known, tool, what):
    """({catalog id: model}, the ids asked for), or exit 2 naming the unreadable catalog or the
    ids neither the script (`known`) nor the catalog has."""
    try:
        with open(a.models_json) as f:
            doc = json.load(f)
        catalog = {m["id"]: m for m in (doc if isinstance(doc, list) else doc.get("models", []))}
    except OSError as e:
        print(f"{tool}: --models-json {a.models_json}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
        print(f"{tool}: --models-json {a.models_json}: not `ditune models --json` output "
              f"(a list of models, each with an id): {type(e).__name__} {e}", file=sys.stderr)
        sys.exit(2)
    wanted = a.models.split(",") if a.models else list(known)
    unknown = [w for w in wanted if w not in known]
    if unknown:
        print(f"{tool}: no {what} known for {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        sys.exit(2)
    missing = [w for w in wanted if w not in catalog]
    if missing:
        print(f"{tool}: --models-json {a.models_json} has no model {', '.join(missing)} "
              f"(it holds {len(catalog)} models)", file=sys.stderr)
        sys.exit(2)
    return catalog, wanted


def import_torch(a):
    """torch, imported after putting --diffusers first on the path; None for a dry run."""
    if a.dry_run:
        return None
    if a.diffusers:
        sys.path.insert(0, a.diffusers)
    import torch
    return torch


def write_rows(a, columns, rows, label, unit):
    """Writes the rows to --out and prints how many of them were measured (or listed)."""
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    ok = sum(1 for r in rows if r["status"] in ("ok", "dry-run"))
    verb = "listed (dry run)" if a.dry_run else "measured"
    print(f"{label}: {ok} of {len(rows)} {unit} {verb}")
