"""What a catalog trained under the protocol would cost, from the calibration's own cell timings.

    python studies/protocol/catalog_cost.py CALIBRATION_CELLS_DIR [...] [--workers 2] [--seeds 3]
        [--suite lenbench/config/suites/catalog.yaml] [--extra pope=1.3 ...]

Per task of the calibration (its task labels), the mean wall seconds of a core cell (train and evaluate,
`seconds` of each cell file), its steps trained, and how many of its runs stopped at the maximum. Every
entry of the catalog costs that task's mean core cell times its cost relative to the core 8: its
seconds in the published catalog (`--suite`'s published cells, every task summed) over the core 8's
mean there. Entries the published catalog lacks take a factor from `--extra` (LABEL=FACTOR, e.g. the
training-step ratios to nope of docs/frontier-encodings.md), else the dearest published factor (a
conservative default, named in the output). The estimate assumes the catalog's tasks, budgets and
evaluation are the calibration's; wall time is the cell time over `--workers` (two workers on two
cores, as measured here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import yaml

CORE = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5", "kerple", "fire-relthresh")
ROOT = Path(__file__).resolve().parents[2]


def _cells(directory: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((directory / "cells").glob("*.json"))]


def task_costs(dirs: list[Path]) -> dict[str, dict]:
    """Per task label: mean / max seconds of a core cell, its runs, steps, and runs at the maximum."""
    per: dict[str, list[dict]] = defaultdict(list)
    for d in dirs:
        for cell in _cells(d):
            if cell["config"].get("label") in CORE and cell.get("status") == "ok":
                per[_task_label(cell)].append(cell)
    out = {}
    for task, cells in sorted(per.items()):
        rows = [c["rows"][0] for c in cells if c["rows"]]
        out[task] = {"n": len(cells), "mean_s": statistics.fmean(c["seconds"] for c in cells),
                     "max_s": max(c["seconds"] for c in cells),
                     "median_steps": statistics.median(r["train_steps"] for r in rows),
                     "at_max": sum(r["stop_reason"] == "budget" for r in rows)}
    return out


def _task_label(cell: dict) -> str:
    """The task entry's label as rows record it (`task` of a row: the entry's key)."""
    return str(cell["rows"][0]["task"]) if cell["rows"] else str(cell["config"]["task"])


def entry_factors(suite: Path, extra: dict[str, float]) -> tuple[dict[str, float], str]:
    """Each catalog entry's cost relative to the core 8's mean, from the published catalog's cells."""
    published = ROOT / "results" / "catalog"
    seconds: dict[str, float] = defaultdict(float)
    for cell in _cells(published):
        seconds[cell["config"].get("label") or cell["config"]["encoding"]] += cell["seconds"]
    core = statistics.fmean(seconds[e] for e in CORE if e in seconds)
    factors = {label: s / core for label, s in seconds.items()}
    dearest = max(factors, key=factors.get)
    labels = []
    for entry in yaml.safe_load(suite.read_text())["encodings"]:
        labels.append(entry if isinstance(entry, str) else entry.get("label") or entry["name"])
    out, defaulted = {}, []
    for label in labels + [e for e in extra if e not in labels]:
        if label in extra:
            out[label] = extra[label] * factors["nope"]  # extra factors are relative to nope
        elif label in factors:
            out[label] = factors[label]
        else:
            out[label] = factors[dearest]
            defaulted.append(label)
    note = f"{', '.join(defaulted)} at the dearest published factor ({dearest})" if defaulted else ""
    return out, note


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="calibration staging directories (holding cells/)")
    ap.add_argument("--suite", type=Path, default=ROOT / "lenbench" / "config" / "suites" / "catalog.yaml")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--extra", nargs="*", default=[], metavar="LABEL=FACTOR",
                    help="entries the published catalog lacks: their cost relative to nope")
    args = ap.parse_args(argv)
    extra = {k: float(v) for k, v in (e.split("=", 1) for e in args.extra)}
    costs = task_costs(args.dirs)
    factors, note = entry_factors(args.suite, extra)
    print("| task | core cells | mean s / cell | max s / cell | median steps | runs at the maximum |")
    print("|---|---|---|---|---|---|")
    for task, c in costs.items():
        print(f"| {task} | {c['n']} | {c['mean_s']:.0f} | {c['max_s']:.0f} | {c['median_steps']:.0f} | "
              f"{c['at_max']} of {c['n']} |")
    total = sum(c["mean_s"] * f * args.seeds for c in costs.values() for f in factors.values())
    print(f"\n{len(factors)} entries × {len(costs)} tasks × {args.seeds} seeds = "
          f"{len(factors) * len(costs) * args.seeds} cells: {total:,.0f} cell-seconds, "
          f"{total / args.workers / 3600:.1f} h wall on {args.workers} workers")
    print("per task (h wall): " + ", ".join(
        f"{t} {c['mean_s'] * sum(factors.values()) * args.seeds / args.workers / 3600:.1f}" for t, c in costs.items()))
    if note:
        print(f"factors: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
