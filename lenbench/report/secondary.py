"""The secondary metric of a board: shown beside the primary, ranking past the training length
where the primary cannot.

Every task kind declares its secondary metric with the reason (`lenbench.metrics.register_metric`,
``secondary_for`` and ``why``): token accuracy for sequence tasks, bits per byte for lm. The
leaderboard (`lenbench.report.tables.leaderboard`) adds to each board's entries

- ``secondary_metric`` and its ``secondary_in_dist`` / ``secondary_past_train_area`` with their
  95 % intervals (the same seed-level statistics, `lenbench.report.stats.board_statistics`);
- ``ranked_by``: the metric the board's ranks use. That is the primary, unless it *cannot rank*:
  no learned model is above the board's floor on it (the best trivial baseline, or the metric's
  worst score without baselines: `lenbench.report.stats`) while some are on the secondary. Then the ranks (main
  and variant tables) and the floor columns are the secondary's, among the same entries —
  learned is always the primary's verdict — and the board says so (`ranking_note`).
"""

from __future__ import annotations

import math

import pandas as pd

from lenbench.metrics import METRICS, get_metric, secondary_metric
from lenbench.report import stats

#: The secondary statistics each entry carries (each with ``_ci_low`` / ``_ci_high``).
STATS = ("in_dist", stats.AREA)
COLUMNS = ("ranked_by", "secondary_metric",
           *(f"secondary_{s}{suffix}" for s in STATS for suffix in ("", "_ci_low", "_ci_high")))
#: The columns that follow the metric the board ranks by.
RANKED_BY_COLUMNS = ("rank", "variant_rank", "floor_baseline", "margin", "margin_ci_low", "margin_ci_high",
                     "above_floor", "ranked_on")


def n_above_floor(entries: pd.DataFrame) -> int:
    """The trained models a board can rank: learned, complete and above its floor."""
    models = entries[entries["kind"] == "model"]
    return int(sum(stats.rankable(e) for e in models.to_dict("records")))


def with_secondary(board: stats.Board, rows: pd.DataFrame, task: str, metric: str, hib: bool,
                   n_boot: int) -> tuple[pd.DataFrame, stats.Board]:
    """`board.entries` (`board_statistics` of the primary `metric`) with the `COLUMNS` of its
    secondary, computed from `rows` (the board's rows of every metric), and the ranks and floor
    replaced by the secondary's where the primary cannot rank; with the `Board` the ranks came from."""
    entries = board.entries
    out = entries.assign(ranked_by=metric, secondary_metric="",
                         **{c: math.nan for c in COLUMNS if c.startswith("secondary_") and c != "secondary_metric"})
    second = secondary_metric(metric)
    rows2 = rows[rows["metric"] == second] if second else rows.iloc[:0]
    if rows2.empty:
        return out, board
    given = {(e, v): w for e, v, w in zip(out["encoding"], out["variant"], out["learnability"], strict=True)}
    shib = bool(METRICS.get(second, True))
    sboard = stats.board_statistics(rows2, task, second, shib, n_boot=n_boot, learnability=given)
    sec = sboard.entries.set_index(["encoding", "variant"])
    keys = list(zip(out["encoding"], out["variant"], strict=True))

    def pick(column: str) -> list:
        return [sec.at[k, column] if k in sec.index else math.nan for k in keys]

    out["secondary_metric"] = second
    for stat in STATS:
        for suffix in ("", "_ci_low", "_ci_high"):
            out[f"secondary_{stat}{suffix}"] = [float(x) for x in pick(f"{stat}{suffix}")]
    if n_above_floor(entries) == 0 and n_above_floor(sboard.entries) > 0:
        for column in RANKED_BY_COLUMNS:
            out[column] = pick(column)
        out["ranked_by"] = second
        return out, sboard
    return out, board


def ranking_note(rows: pd.DataFrame) -> str | None:
    """The board's sentence on a rank taken from the secondary metric, None when the primary ranks."""
    metric, ranked_by = rows["metric"].iloc[0], rows["ranked_by"].iloc[0]
    if ranked_by == metric:
        return None
    return (f"Ranked by {ranked_by} past the training length: on {metric} no learned entry is above the floor "
            f"with support, so it cannot rank them; {ranked_by}: "
            f"{get_metric(ranked_by).why}. Learned or not is still {metric}'s verdict at 1×.")
