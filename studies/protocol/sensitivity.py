"""Which findings of a board hold at two training budgets: the protocol's sensitivity study.

    python studies/protocol/sensitivity.py RUN_OR_REPORT LABEL_A LABEL_B

LABEL_A and LABEL_B are two task labels of one suite that differ only in their budget (e.g.
``sort_max2k`` and ``sort_max6k`` of studies/protocol/pilot-convergence.yaml). Every statistic is the
board's own (`lenbench.report.tables.leaderboard`): per core encoding, the learnability verdict, the
ranked statistic with its 95 % half-width and the rank (ties share a rank: the board ranks only what
its intervals separate) at each budget, the steps each seed trained, and whether the finding holds at
both: the same learnability verdict and, for entries ranked at both, the same rank.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from pilot_table import CORE, _ci  # noqa: E402

from lenbench.report.rows import load_results  # noqa: E402
from lenbench.report.tables import leaderboard  # noqa: E402


def _rank(v: float) -> str:
    return "–" if math.isnan(v) else f"{v:g}"


def _steps(rows: pd.DataFrame, task: str, enc: str) -> str:
    trained = rows[(rows["task"] == task) & (rows["encoding"] == enc) & (rows["variant"] == "none")]
    per_seed = trained.groupby("seed")[["train_steps", "stop_reason"]].first()
    return " / ".join(f"{n}{'*' if why == 'converged' else ''}" for n, why in per_seed.itertuples(index=False))


def holds_table(pa: pd.DataFrame, pb: pd.DataFrame, a: str, b: str, steps_a: Callable[[str], str],
                steps_b: Callable[[str], str]) -> tuple[list[str], int, int]:
    """The markdown rows comparing two boards' core entries (`per_task` rows of one task each, indexed
    by encoding), named `a` and `b`: verdicts, ranked statistic, ranks, steps, whether the finding holds
    (the same learnability verdict and the same rank); with how many hold of how many shown."""
    stat = pa["ranked_on"].iloc[0]
    out = [f"| encoding | learned {a} | learned {b} | {stat} {a} | {stat} {b} | rank {a} | rank {b} | "
           f"steps {a} | steps {b} | holds |", "|---|---|---|---|---|---|---|---|---|---|"]
    held = shown = 0
    for enc in CORE:
        if enc not in pa.index or enc not in pb.index:
            continue
        ea, eb = pa.loc[enc], pb.loc[enc]
        same_rank = (math.isnan(ea["rank"]) and math.isnan(eb["rank"])) or ea["rank"] == eb["rank"]
        holds = ea["learnability"] == eb["learnability"] and same_rank
        held, shown = held + holds, shown + 1
        out.append(f"| {enc} | {ea['learnability']} | {eb['learnability']} | "
                   f"{_ci(ea[stat], ea[f'{stat}_ci_low'], ea[f'{stat}_ci_high'])} | "
                   f"{_ci(eb[stat], eb[f'{stat}_ci_low'], eb[f'{stat}_ci_high'])} | {_rank(ea['rank'])} | "
                   f"{_rank(eb['rank'])} | {steps_a(enc)} | {steps_b(enc)} | {'yes' if holds else 'no'} |")
    return out, held, shown


def compare(rows: pd.DataFrame, a: str, b: str) -> str:
    board = leaderboard(rows).per_task
    pa, pb = (board[(board["task"] == t) & (board["variant"] == "none")].set_index("encoding") for t in (a, b))
    out, held, shown = holds_table(pa, pb, a, b, lambda enc: _steps(rows, a, enc), lambda enc: _steps(rows, b, enc))
    out += ["", f"findings that hold at both budgets: {held} of {shown} entries "
                "(the same learnability verdict and the same rank); * = stopped on convergence"]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="a run or report directory, or its results.csv")
    ap.add_argument("a", help="the task label at the first budget")
    ap.add_argument("b", help="the task label at the second budget")
    args = ap.parse_args()
    src = Path(args.source)
    rows = load_results(src / "results.csv" if (src / "results.csv").is_file() else src)
    print(compare(rows, args.a, args.b))


if __name__ == "__main__":
    main()
