"""Why an entry stalls below "learned" on copy or reverse: are its failures the ambiguous samples?

    python studies/protocol/copy_ambiguity.py staging/catalog --task copy

A model that copies by content (an induction head: find the symbol just written in the input, write the
one after it) needs no position, but it is ambiguous wherever that symbol recurs with different
successors; with 8 symbols and 8 items nearly every sample has such a point. A model that copies by
position (write the item at the same offset from the separator) is not. So if an entry's failed samples at
1x hold more ambiguous points than its passed ones, its stall is the content-matching mechanism, not an
optimiser that stopped early.

Per entry (variant none) at 1x, over its seeds: failed samples (exact match 0) and the mean number of
ambiguous points in failed and in passed samples; then, pooled over the entries that fail any sample, the
share failed at each number of ambiguous points. The samples are regenerated from the evaluation
generator (`lenbench.tasks.eval_data`), the scores unpacked from each cell's `sample_scores`
(`lenbench.results.samples`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections import defaultdict
from pathlib import Path

import torch

from lenbench.metrics import decode_arrays
from lenbench.results.samples import sample_scores
from lenbench.tasks import build_task
from lenbench.tasks.eval_data import eval_batches


def ambiguous_points(answer: list[int]) -> int:
    """Positions j >= 1 of `answer` whose predecessor symbol recurs in `answer` with different successors.

    >>> ambiguous_points([3, 1, 4, 1, 5])  # after 1 comes 4 and 5: the 4 and the 5 are ambiguous
    2
    >>> ambiguous_points([3, 1, 4, 1, 4])  # 1 recurs, always followed by 4
    0
    """
    successors = defaultdict(set)
    for a, b in itertools.pairwise(answer):
        successors[a].add(b)
    return sum(len(successors[a]) > 1 for a in answer[:-1])


def samples(cells_dir: Path, task_name: str) -> dict[str, list[tuple[int, bool]]]:
    """Entry → (ambiguous points, failed) of each of its 1x evaluation samples over its seeds."""
    out = defaultdict(list)
    for path in sorted(cells_dir.glob("*.json")):
        cell = json.loads(path.read_text())
        config = cell["config"]
        if config["task"] != task_name or cell["status"] != "ok":
            continue
        (row,) = [r for r in cell["rows"] if r["ratio"] == 1 and r["variant"] == "none" and r["metric"] == "exact_match"
                  and not r["encoding"].startswith("baseline:")]  # the model's row, not a trivial baseline's
        task = build_task(task_name, **config["task_params"])
        n = row["eval_len"]
        batches = eval_batches(task, n, samples=row["n_samples"], tokens_per_batch=config["eval"]["tokens_per_batch"],
                               seed=config["seed"])
        items = [seq[:n] for batch in batches for seq in batch.inputs.tolist()]
        scores = sample_scores(row["metric"], *decode_arrays(row["sample_scores"]))  # (n,): the packed "num/den"
        for seq, score in zip(items, scores, strict=True):
            answer = task.transform(torch.tensor([seq]))[0].tolist()  # the answer in the order it is written
            out[config["label"]].append((ambiguous_points(answer), score < 1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a run or staging directory (its cells/)")
    parser.add_argument("--task", default="copy", choices=["copy", "reverse"])
    args = parser.parse_args()
    per_entry = samples(args.results / "cells", args.task)
    mean = lambda xs: f"{statistics.mean(xs):.2f}" if xs else "–"  # noqa: E731
    print("| entry | samples | failed | ambiguous points per failed sample | per passed sample |")
    print("|---|---:|---:|---:|---:|")
    for entry, got in sorted(per_entry.items()):
        failed = [a for a, f in got if f]
        print(f"| {entry} | {len(got)} | {len(failed)} | {mean(failed)} | {mean([a for a, f in got if not f])} |")
    pooled = defaultdict(list)  # the entries that fail at all: the rate of failure by ambiguous points
    for got in per_entry.values():
        if any(f for _, f in got):
            for a, f in got:
                pooled[a].append(f)
    print("\n| ambiguous points | samples (entries that fail any) | failed |")
    print("|---:|---:|---:|")
    for a, fails in sorted(pooled.items()):
        print(f"| {a} | {len(fails)} | {sum(fails) / len(fails):.3f} |")

if __name__ == "__main__":
    main()
