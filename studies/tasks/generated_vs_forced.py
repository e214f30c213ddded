"""Generated against teacher-forced answers on one run, and the evaluation's cost against an earlier run.

    python studies/tasks/generated_vs_forced.py RUN [--before OLD_RUN]

RUN is a results directory of schema 3 (token_accuracy of generated answers, tf_token_accuracy
teacher-forced); OLD_RUN, optional, the same suite computed before generation. Per sequence task and
entry (model as trained and every baseline): exact match at 1x, and token accuracy generated and
teacher-forced as the mean over seeds past training. Then, per task, the evaluation seconds per cell
(a cell's seconds minus its training seconds), before and after, from the cells' own timings.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import pandas as pd


def cells(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run / "cells").glob("*.json"))]


def rows(run: Path) -> pd.DataFrame:
    out = [r for c in cells(run) for r in c["rows"] if not r.get("bucket")]
    return pd.DataFrame(out)


def eval_seconds(run: Path) -> dict[str, list[float]]:
    """task → evaluation seconds of each of its cells."""
    per: dict[str, list[float]] = {}
    for c in cells(run):
        if c.get("status") == "ok" and c.get("seconds") is not None and c.get("train_seconds") is not None:
            per.setdefault(c["config"]["task"], []).append(c["seconds"] - c["train_seconds"])
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--before", type=Path)
    args = ap.parse_args()
    df = rows(args.run)
    df = df[(df.variant == "none") & df.metric.isin(["exact_match", "token_accuracy", "tf_token_accuracy"])]
    for task, t in df.groupby("task", sort=False):
        print(f"\n{task}\n")
        print("| entry | exact match 1x | token accuracy past training: generated | teacher-forced |")
        print("|---|---|---|---|")
        for enc, e in t.groupby("encoding", sort=False):
            def mean(metric: str, past: bool, e: pd.DataFrame = e) -> float:
                sel = e[(e.metric == metric) & ((e.ratio > 1) if past else (e.ratio == 1))]
                return sel.groupby("seed").value.mean().mean()
            print(f"| {enc} | {mean('exact_match', False):.3f} | {mean('token_accuracy', True):.3f} | "
                  f"{mean('tf_token_accuracy', True):.3f} |")
    after = eval_seconds(args.run)
    before = eval_seconds(args.before) if args.before else {}
    print("\n| task | evaluation s / cell before | after | after / before |")
    print("|---|---|---|---|")
    for task, secs in after.items():
        b = statistics.mean(before[task]) if task in before else float("nan")
        a = statistics.mean(secs)
        print(f"| {task} | {b:.1f} | {a:.1f} | {a / b:.2f} |")


if __name__ == "__main__":
    main()
