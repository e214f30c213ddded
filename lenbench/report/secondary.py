"""The secondary metric of a board: shown beside the primary, ranking past the training length
where the primary cannot.

Every task kind declares its secondary metric with the reason (`lenbench.metrics.register_metric`,
``secondary_for`` and ``why``): token accuracy for sequence tasks, bits per byte for lm. The
leaderboard (`lenbench.report.tables.leaderboard`) adds to each board's entries

- ``secondary_metric`` and its ``secondary_in_dist`` / ``secondary_past_train_mean`` with their
  95 % intervals (the same hierarchical bootstrap, `lenbench.report.stats.board_statistics`);
- ``ranked_by``: the metric the board's ranks use. That is the primary, unless the primary is *at
  its floor* past the training length: every learned trained model's 95 % interval of mean past
  train reaches the metric's worst score (0 exact match), with at least two learned to rank. Then
  the ranks (main and variant tables) are the secondary's, among the same entries — learned is
  always the primary's verdict — and the board says so (`ranking_note`).
"""

from __future__ import annotations

import math

import pandas as pd

from lenbench.metrics import METRICS, get_metric, secondary_metric, worst_value
from lenbench.report import stats

#: The secondary statistics each entry carries (each with ``_ci_low`` / ``_ci_high``).
STATS = ("in_dist", "past_train_mean")
COLUMNS = ("ranked_by", "secondary_metric",
           *(f"secondary_{s}{suffix}" for s in STATS for suffix in ("", "_ci_low", "_ci_high")))


def at_floor(entries: pd.DataFrame, metric: str, hib: bool) -> bool:
    """Whether `metric` cannot separate a board's learned models past the training length: at
    least two learned, a length past 1× measured, and each one's interval of mean past train
    reaching the worst score (the point value where it has no interval)."""
    floor = worst_value(metric, hib)
    if not math.isfinite(floor):
        return False
    learned = entries[(entries["kind"] == "model") & ~entries["not_learned"].astype(bool)]
    if len(learned) < 2 or learned["past_train_mean"].isna().all():
        return False
    edge = learned["past_train_mean_ci_low" if hib else "past_train_mean_ci_high"]
    reach = edge.where(edge.notna(), learned["past_train_mean"])
    return bool(((reach <= floor) if hib else (reach >= floor)).all())


def with_secondary(entries: pd.DataFrame, rows: pd.DataFrame, task: str, metric: str, hib: bool,
                   n_boot: int) -> pd.DataFrame:
    """`entries` (`board_statistics` of the primary `metric`) with the `COLUMNS` of its secondary,
    computed from `rows` (the board's rows of every metric), and the ranks replaced by the
    secondary's where the primary is `at_floor`."""
    out = entries.assign(ranked_by=metric, secondary_metric="",
                         **{c: math.nan for c in COLUMNS if c.startswith("secondary_") and c != "secondary_metric"})
    second = secondary_metric(metric)
    board = rows[rows["metric"] == second] if second else rows.iloc[:0]
    if board.empty:
        return out
    flags = {(e, v): bool(n) for e, v, n in zip(out["encoding"], out["variant"], out["not_learned"], strict=True)}
    shib = bool(METRICS.get(second, True))
    sec, _ = stats.board_statistics(board, task, second, shib, n_boot=n_boot, not_learned=flags)
    sec = sec.set_index(["encoding", "variant"])
    keys = list(zip(out["encoding"], out["variant"], strict=True))

    def pick(column: str) -> list[float]:
        return [float(sec.at[k, column]) if k in sec.index else math.nan for k in keys]

    out["secondary_metric"] = second
    for stat in STATS:
        for suffix in ("", "_ci_low", "_ci_high"):
            out[f"secondary_{stat}{suffix}"] = pick(f"{stat}{suffix}")
    if at_floor(out, metric, hib):
        out["rank"], out["variant_rank"], out["ranked_by"] = pick("rank"), pick("variant_rank"), second
    return out


def ranking_note(rows: pd.DataFrame) -> str | None:
    """The board's sentence on a rank taken from the secondary metric, None when the primary ranks."""
    metric, ranked_by = rows["metric"].iloc[0], rows["ranked_by"].iloc[0]
    if ranked_by == metric:
        return None
    floor = worst_value(metric, bool(rows["higher_is_better"].iloc[0]))
    return (f"Ranked by {ranked_by} past the training length: {metric} is at its floor ({floor:g}) there for every "
            f"learned entry (each one's 95 % interval of mean past train reaches it), so it cannot separate them; "
            f"{ranked_by}: {get_metric(ranked_by).why}. Learned or not is still {metric}'s verdict at 1×.")
