"""Which findings and paper verdicts survive a change of scale: the protocol's scale check.

    python studies/protocol/scale.py SMALL LARGE [--task TASK ...] [--names A B]

SMALL and LARGE are two runs (results directories or results.csv files) of the same tasks, seeds and
settings at two model sizes (the catalog, results/catalog, at its size; scale-large.yaml at 9.6-9.9x
its FLOPs per token); only the entries and seeds both hold are compared. Per task (by default every task both hold) and core
encoding: the board's learnability verdict, its ranked statistic with the 95 % half-width and the rank
(ties share a rank) at each size, the steps each seed trained (* converged), and whether the finding
holds at both: the same verdict and, for entries ranked at both, the same rank. Then each paper claim
the core 8 can judge (`lenbench.report.claims`), with its verdict at each size. Every statistic is the
board's own (`lenbench.report.tables.leaderboard`), computed on each size's rows alone. A FIRE entry
labelled ``fire-relthresh`` is read as ``fire`` (the claims name the encoding). ``--names`` labels the two
sides (default "small" and "large") when the two runs differ in something else, e.g. lm's schedule:
``scale.py studies/protocol/lm-plateau staging/catalog --task lm --names plateau cosine``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from sensitivity import _steps, holds_table  # noqa: E402

from lenbench.report.claims import judge  # noqa: E402
from lenbench.report.rows import load_results  # noqa: E402
from lenbench.report.tables import leaderboard  # noqa: E402

VERDICT = re.compile(r"\*\*(agrees|disagrees|not separated|mixed|cannot tell)\*\*")


def _rows(source: str) -> pd.DataFrame:
    rows = load_results(source)
    return rows.assign(encoding=rows["encoding"].replace({"fire-relthresh": "fire"}))


def common(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both runs' rows of the (task, encoding, variant, seed) both hold. One side may be the whole catalog and
    the other its core 8: a rank counts every entry of its board, so ranks compare only among the same entries."""
    key = ["task", "encoding", "variant", "seed"]
    both = a[key].drop_duplicates().merge(b[key].drop_duplicates())
    return a.merge(both, on=key), b.merge(both, on=key)


def findings(small: pd.DataFrame, large: pd.DataFrame, task: str, names: tuple[str, str] = ("small", "large"),
             across: str = "sizes") -> list[str]:
    """One task's sensitivity table of two runs (`holds_table`), named `names`, compared across `across`."""
    ps, pl = (leaderboard(r[r["task"] == task]).per_task for r in (small, large))
    ps, pl = (p[p["variant"] == "none"].set_index("encoding") for p in (ps, pl))
    out, held, shown = holds_table(ps, pl, *names, lambda enc: _steps(small, task, enc),
                                   lambda enc: _steps(large, task, enc))
    head = [f"**{task}** ({ps['ranked_on'].iloc[0]} of {ps['ranked_by'].iloc[0]})", ""]
    return [*head, *out, "", f"findings that hold at both {across}: {held} of {shown} (the same learnability verdict "
                              "and the same rank); * = stopped on convergence", ""]


def claims(small: pd.DataFrame, large: pd.DataFrame, tasks: list[str],
           names: tuple[str, str] = ("small", "large"), across: str = "size") -> list[str]:
    """Each paper claim the two runs can judge, with its verdict on each (named `names`)."""
    verdicts = {}
    for size, rows in zip(names, (small, large), strict=True):
        for claim, sentences in judge(leaderboard(rows[rows["task"].isin(tasks)])):
            for sentence in sentences:
                task = sentence.split(",", 1)[0].removeprefix("On ").split("'s RoPE")[0]
                found = VERDICT.findall(sentence)
                verdicts.setdefault((claim.label, task), {})[size] = " / ".join(found)
    out = [f"| claim | task | {names[0]} | {names[1]} | survives |", "|---|---|---|---|---|"]
    for (label, task), by in verdicts.items():
        s, lg = by.get(names[0], "–"), by.get(names[1], "–")
        survives = "–" if "–" in (s, lg) else "yes" if s == lg else "no"  # "–": judged on one side only
        out.append(f"| {label} | {task} | {s} | {lg} | {survives} |")
    return [*out, "", "verdicts: on the area past train, then (lm) on the degradation, by the board's paired test, "
                      f"Holm-corrected over each {across}'s claims"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("small")
    parser.add_argument("large")
    parser.add_argument("--task", action="append", help="a task of both runs (default: every one they share)")
    parser.add_argument("--names", nargs=2, default=("small", "large"), metavar=("A", "B"),
                        help="the two sides' labels (default: small large)")
    args = parser.parse_args()
    small, large = common(_rows(args.small), _rows(args.large))
    tasks = args.task or [t for t in dict.fromkeys(large["task"]) if t in set(small["task"])]
    names = tuple(args.names)
    by_size = names == ("small", "large")
    across = "sizes" if by_size else " and ".join(names)
    lines = [line for task in tasks for line in findings(small, large, task, names, across)]
    print("\n".join([*lines, *claims(small, large, tasks, names, "size" if by_size else "side")]))


if __name__ == "__main__":
    main()
