"""Issue 42's one initialisation, picked by the rule written in studies/protocol/README.md before its cells.

    python studies/protocol/decide_init.py \
        --arm "N(0, 0.02)" studies/protocol/calibration-patience:copy,reverse,sort,addition,mqar,count,passkey \
                           studies/protocol/calibration-plateau:lm \
        --arm "N(0, 1)" studies/protocol/calibration-init1-patience studies/protocol/calibration-patience:mqar_init1=mqar \
                        studies/protocol/calibration-init1:lm

An arm is a name and its sources: a run or staging directory (its `cells/`) or a results.csv, optionally
followed by ``:`` and the task labels to take from it (``LABEL=TASK`` reads a labelled entry as that
task). Per task and arm: how many of the core 8 the board learns at 1x (its own verdict,
`lenbench.report.tables.leaderboard`, on that arm's rows alone). The rule: the arm with the fewest tasks
under the quorum (fewer than half of the core 8 learned) wins; on a tie, the one with more learned (task,
encoding) pairs; on a further tie, the first arm named (N(0, 0.02), GPT-2's and Zoology's). A task one arm
lacks, or holds for fewer than the core 8, leaves the rule undecided, and the output says which.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from pilot_table import CORE  # noqa: E402

from lenbench.calibration import QUORUM  # noqa: E402
from lenbench.report.rows import load_results  # noqa: E402
from lenbench.report.tables import leaderboard  # noqa: E402


def arm_rows(sources: list[str]) -> pd.DataFrame:
    """The rows of one arm: each source's tasks (all, or those named, renamed by ``LABEL=TASK``)."""
    parts = []
    for source in sources:
        path, _, wanted = source.partition(":")
        src = Path(path)
        rows = load_results(src / "results.csv" if (src / "results.csv").is_file() else src)
        if wanted:
            names = dict(item.split("=", 1) if "=" in item else (item, item) for item in wanted.split(","))
            rows = rows[rows["task"].isin(names)].assign(task=lambda r, n=names: r["task"].map(n))
        parts.append(rows)
    return pd.concat(parts, ignore_index=True)


def learned_per_task(rows: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Task → (core entries learned at 1x, core entries on the board)."""
    per_task = leaderboard(rows).per_task
    core = per_task[per_task["encoding"].isin(CORE) & (per_task["variant"] == "none") & (per_task["kind"] == "model")]
    return {task: (int((g["learnability"] == "learned").sum()), len(g)) for task, g in core.groupby("task", sort=False)}


#: The core 8 on a board: FIRE counts once, under either label.
N_CORE = len(CORE) - 1


def tally(got: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(tasks under the quorum, learned (task, encoding) pairs) of one arm; the quorum is the calibration's
    (`lenbench.calibration.QUORUM` of the entries learned)."""
    return (sum(k < math.ceil(QUORUM * n) for k, n in got.values()), sum(k for k, _ in got.values()))


def decide(arms: dict[str, dict[str, tuple[int, int]]]) -> tuple[str | None, str]:
    """The winning arm by the rule, or None with the reason it cannot decide (a task an arm lacks, or
    holds for fewer than the core 8)."""
    tasks = sorted(set().union(*arms.values()))
    missing = [f"{task} ({name}{'' if task not in got else f': {got[task][1]} of {N_CORE}'})"
               for name, got in arms.items() for task in tasks if got.get(task, (0, 0))[1] < N_CORE]
    if missing:
        return None, "not measured: " + ", ".join(missing)
    tallies = {name: tally(got) for name, got in arms.items()}
    winner = min(arms, key=lambda name: (tallies[name][0], -tallies[name][1]))  # min keeps the first of a tie
    return winner, "fewest tasks under the quorum, then most learned pairs, then the first arm named"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arm", nargs="+", action="append", required=True, metavar=("NAME", "SOURCE"),
                    help="an arm's name, then its sources (DIR or results.csv, optionally :TASK[=AS],…)")
    args = ap.parse_args()
    if any(len(a) < 2 for a in args.arm):
        ap.error("each --arm needs a name and at least one source")
    arms = {a[0]: learned_per_task(arm_rows(a[1:])) for a in args.arm}
    tasks = sorted(set().union(*arms.values()))
    print("| task | " + " | ".join(arms) + " |")
    print("|---|" + "---|" * len(arms))
    for task in tasks:
        cells = [f"{got[task][0]} of {got[task][1]}" if task in got else "–" for got in arms.values()]
        print(f"| {task} | " + " | ".join(cells) + " |")
    tallies = [tally(got) for got in arms.values()]
    print("| tasks under the quorum | " + " | ".join(str(under) for under, _ in tallies) + " |")
    print("| learned (task, encoding) pairs | " + " | ".join(str(pairs) for _, pairs in tallies) + " |")
    winner, why = decide(arms)
    print()
    print(f"chosen: {winner} ({why})" if winner else f"undecided: {why}")


if __name__ == "__main__":
    main()
