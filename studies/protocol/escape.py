"""When each run left its task's loss plateau: the validation curves of one task's cells, per entry and seed.

    python studies/protocol/escape.py DIR TASK [--below NATS]

DIR is a run or staging directory (its ``cells/*.json``); TASK a task key of its cells. Associative
recall is learned in a jump (the induction-head transition, Olsson et al. 2022): the validation loss sits
on a plateau (on mqar about ln 8 nats: naming one of the sample's values) until, at a step that varies
by seed, it falls to near zero. A run still on the plateau at its budget is a lottery lost, not an encoding
that cannot learn the task; this table says which is which. Per trained entry (variants share their
model's training): each seed's step where the validation loss first fell below ``--below`` nats (default
1.0; "–": never, within the budget), its last validation loss, its best step and budget, and its 1x score of
the board's primary metric. Read off each cell's ``training.val_history`` (docs/protocol.md, training until
convergence) and its rows.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lenbench.report.rows import load_results, primary_metric


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", metavar="DIR")
    parser.add_argument("task")
    parser.add_argument("--below", type=float, default=1.0, help="the validation loss (nats) that counts as escaped")
    args = parser.parse_args()
    cells = sorted(Path(args.directory, "cells").glob("*.json"))
    rows = load_results(args.directory)
    rows = rows[(rows["task"] == args.task) & (rows["ratio"] == 1) & (rows["variant"] == "none")]
    if rows.empty:
        sys.exit(f"escape.py: {args.directory} has no {args.task!r} rows at 1x; name a task of its cells")
    metric = primary_metric(args.task, rows["metric"].unique())
    score = rows[rows["metric"] == metric].set_index(["encoding", "seed"])["value"]
    runs: dict[str, list[tuple]] = {}
    for file in cells:
        cell = json.loads(file.read_text())
        config = cell.get("config", {})
        task = config.get("task_label") or config.get("task")
        history = (cell.get("training") or {}).get("val_history") or []
        if task != args.task or not history:
            continue
        encoding, seed = config.get("label") or config["encoding"], int(config["seed"])
        escaped = next((int(step) for step, loss, _ in history if loss < args.below), None)
        runs.setdefault(encoding, []).append((seed, escaped, history[-1][1], cell["training"]["best_step"],
                                              int(history[-1][0]), score.get((encoding, seed), float("nan"))))
    if not runs:
        sys.exit(f"escape.py: no {args.task!r} cell of {args.directory}/cells has a validation curve "
                 "(cells trained with train.patience > 0 keep one)")
    print(f"| entry | runs escaped (loss < {args.below:g} nats) | escape step per seed | last val loss per seed "
          f"| {metric} 1x per seed |")
    print("|---|---|---|---|---|")
    for encoding in sorted(runs, key=lambda e: (-sum(r[1] is not None for r in runs[e]), e)):
        seeds = sorted(runs[encoding])
        n = sum(r[1] is not None for r in seeds)
        steps = " / ".join("–" if r[1] is None else str(r[1]) for r in seeds)
        print(f"| {encoding} | {n} of {len(seeds)} | {steps} | {' / '.join(f'{r[2]:.2f}' for r in seeds)} "
              f"| {' / '.join(f'{r[5]:.3f}' for r in seeds)} |")


if __name__ == "__main__":
    main()
