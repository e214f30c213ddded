"""Quality in `lenbench compare`: metric regressions, and cells failed or missing in head.

Measurements are joined on (task, encoding, variant, train_len, eval_len, ratio, metric, seed)
(plus suite when that alone is ambiguous). A value is *worse* in the metric's direction
(`higher_is_better`, `lenbench.metrics`); it is a regression when it is worse by more than
``tolerance × |base|`` (relative; the default 0 flags any worse value, since same-platform runs are
deterministic). A measurement that was ok and now failed is a regression; one that failed and is
now ok an improvement. When either side is a leaderboard CSV, both are compared at the leaderboard
level instead: the statistics of `lenbench.report.stats.STATS` (in_dist, past_train_mean,
past_train_area, effective_length, retention, degradation) per (task,
train_len, encoding, variant), ranks left out (one entry's gain moves every other entry's rank).

Cells: a cell that diverged stores no rows, so cells are compared as well, on (task, encoding,
train_len, seed) — never on cell ids, which change with the code. A cell ok in base and failed in
head is a regression (``FAILED in head``, with the reason), and so are its measurements; a cell or
measurement ok in base and absent from head is ``missing in head``.

Across machines the exact comparison is expected to differ, and a warning says to pass
``statistical`` (`lenbench.compare.stats`: paired bootstrap over seeds × samples against per-metric
practical margins) unless both sides have the same numeric kind (pinned, on one CPU vendor:
`lenbench.numerics.numeric_kind`); an AMD and an Intel machine are two kinds, even pinned.

The status labels here are the comparison's vocabulary (`lenbench.compare.speed` and
`lenbench.compare.gate` read them).
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from lenbench.compare.across import unpaired_quality
from lenbench.compare.sides import BOARD_JOIN, CELL_KEY, CELL_OK, Setup, Side, check_fingerprints
from lenbench.compare.stats import statistical_quality
from lenbench.metrics import METRICS
from lenbench.report.rows import whole_length
from lenbench.report.tables import SCORE_STATS
from lenbench.results.schema import ResultsError

ROW_JOIN = ("task", "encoding", "variant", "train_len", "eval_len", "ratio", "metric", "seed")

REGRESSION, IMPROVED, WITHIN, UNCHANGED, MISSING, NEW = (
    "REGRESSION", "improved", "worse (within tolerance)", "unchanged", "missing in head", "new in head")
FAILED = "FAILED in head"  # the whole cell failed in head (diverged): it stored no rows


def _worse_by(base: float, head: float, higher_is_better: bool) -> float:
    """How much worse head is than base (negative: better); inf-safe."""
    if base == head:
        return 0.0
    return (base - head) if higher_is_better else (head - base)


def _classify(base_ok: bool, head_ok: bool, base: float, head: float, hib: bool, tolerance: float) -> str:
    if base_ok and head_ok:
        worse = _worse_by(base, head, hib)
        if worse > 0:
            return REGRESSION if worse > tolerance * abs(base) else WITHIN
        return IMPROVED if worse < 0 else UNCHANGED
    if base_ok and not head_ok:
        return REGRESSION
    if head_ok and not base_ok:
        return IMPROVED
    return UNCHANGED


def _unique_key(frame: pd.DataFrame, key: list[str], what: str, source: str) -> None:
    dup = frame.duplicated(subset=key, keep=False)
    if dup.any():
        first = frame.loc[dup, key].iloc[0].to_dict()
        raise ResultsError(f"{source}: {int(dup.sum())} {what} share one key, e.g. {first}; "
                           "compare needs one measurement per key")


def compare_rows(base: pd.DataFrame, head: pd.DataFrame, tolerance: float, sources=("base", "head")) -> pd.DataFrame:
    """Row-level quality comparison; one row per measurement with base, head, change, status.
    Bucketed rows (per position / needle depth) are left out, as on the leaderboard."""
    base, head = whole_length(base), whole_length(head)
    key = list(ROW_JOIN)
    if base.duplicated(subset=key).any() or head.duplicated(subset=key).any():
        key = ["suite", *key]
    _unique_key(base, key, "measurements", sources[0])
    _unique_key(head, key, "measurements", sources[1])
    cols = [*key, "value", "status", "higher_is_better"]
    merged = base[cols].merge(head[cols], on=key, how="outer", suffixes=("_base", "_head"), indicator=True, sort=False)
    out = []
    for r in merged.to_dict("records"):
        hib = METRICS.get(r["metric"], r["higher_is_better_head"] if r["_merge"] != "left_only" else r["higher_is_better_base"])
        rec = {k: r[k] for k in key}
        b, h = float(r["value_base"]), float(r["value_head"])
        rec.update(base=b, head=h, higher_is_better=bool(hib))
        if r["_merge"] == "left_only":
            rec["status"] = MISSING
        elif r["_merge"] == "right_only":
            rec["status"] = NEW
        else:
            b_ok = r["status_base"] == "ok" and not math.isnan(b)
            h_ok = r["status_head"] == "ok" and not math.isnan(h)
            rec["status"] = _classify(b_ok, h_ok, b, h, bool(hib), tolerance)
        out.append(rec)
    return pd.DataFrame(out, columns=[*key, "base", "head", "higher_is_better", "status"])


def compare_boards(base: pd.DataFrame, head: pd.DataFrame, tolerance: float, sources=("base", "head")) -> pd.DataFrame:
    """Leaderboard-level quality comparison on the score statistics (ranks left out)."""
    key = list(BOARD_JOIN)
    base = base[base["statistic"].isin(SCORE_STATS) & (base["task"] != "overall")]
    head = head[head["statistic"].isin(SCORE_STATS) & (head["task"] != "overall")]
    _unique_key(base, key, "leaderboard entries", sources[0])
    _unique_key(head, key, "leaderboard entries", sources[1])
    cols = [*key, "value", "higher_is_better"]
    merged = base[cols].merge(head[cols], on=key, how="outer", suffixes=("_base", "_head"), indicator=True, sort=False)
    out = []
    for r in merged.to_dict("records"):
        hib = bool(r["higher_is_better_head"] if r["_merge"] != "left_only" else r["higher_is_better_base"])
        b, h = float(r["value_base"]), float(r["value_head"])
        rec = {**{k: r[k] for k in key}, "base": b, "head": h, "higher_is_better": hib}
        if r["_merge"] == "left_only":
            rec["status"] = MISSING
        elif r["_merge"] == "right_only":
            rec["status"] = NEW
        else:
            rec["status"] = _classify(not math.isnan(b), not math.isnan(h), b, h, hib, tolerance)
        out.append(rec)
    return pd.DataFrame(out, columns=[*key, "base", "head", "higher_is_better", "status"])


def compare_cells(base: pd.DataFrame, head: pd.DataFrame) -> pd.DataFrame:
    """Cell-level comparison on CELL_KEY: one row per cell with base_status, head_status, error (head's), status.

    status: FAILED (ok in base, failed in head), MISSING (ok in base, absent from head), NEW, IMPROVED
    (failed in base, ok in head), UNCHANGED otherwise.
    """
    merged = base.merge(head, on=list(CELL_KEY), how="outer", suffixes=("_base", "_head"), sort=False)
    merged = merged.rename(columns={"status_base": "base_status", "status_head": "head_status", "error_head": "error"})
    merged = merged.astype({"base_status": object, "head_status": object})
    b_ok, h_ok = merged["base_status"] == CELL_OK, merged["head_status"] == CELL_OK
    status = pd.Series(UNCHANGED, index=merged.index, dtype=object)
    status[b_ok & merged["head_status"].notna() & ~h_ok] = FAILED
    status[b_ok & merged["head_status"].isna()] = MISSING
    status[merged["base_status"].isna()] = NEW
    status[merged["base_status"].notna() & ~b_ok & h_ok] = IMPROVED
    merged["status"] = status
    merged["error"] = merged["error"].fillna("")
    return merged[[*CELL_KEY, "base_status", "head_status", "error", "status"]]


@dataclasses.dataclass
class Quality:
    """The quality part of a comparison (`compare_quality`).

    Attributes:
        level: "rows", "leaderboard" or "none".
        frame: one row per measurement (or leaderboard statistic, or statistical unit) with status.
        cells: `compare_cells` (rows level), else None.
        warnings, notes: lines for the report, in its order.
    """

    level: str
    frame: pd.DataFrame
    cells: pd.DataFrame | None
    warnings: list[str]
    notes: list[str]


def compare_quality(b: Side, h: Side, tolerance: float, margins: dict | None, setup: Setup,
                    method: str = "exact") -> Quality:
    """Quality of head against base (module docstring): ``method`` "exact"; "paired", the paired
    bootstrap of `lenbench.compare.stats`; or "unpaired", across numeric kinds
    (`lenbench.compare.across`). The statistical methods need `margins`
    (`lenbench.compare.stats.parse_margins`).

    Raises:
        ResultsError: a task measured on different data, or measurements sharing one key (one line).
    """
    notes: list[str] = []
    warnings: list[str] = []
    machines, pinned = setup.machines, setup.pinned
    cells = None
    if b.board is not None or h.board is not None:
        level = "leaderboard"
        quality = compare_boards(b.leaderboard_long(), h.leaderboard_long(), tolerance, (b.source, h.source))
    elif (b.rows is None or b.rows.empty) and (h.rows is None or h.rows.empty) and not (
            (b.cells is not None and len(b.cells)) or (h.cells is not None and len(h.cells))):
        level = "none"
        quality = pd.DataFrame(columns=["status"])
    else:
        level = "rows"
        notes += check_fingerprints(b, h)
        quality = compare_rows(b.rows, h.rows, tolerance, (b.source, h.source))
        if method == "unpaired":
            quality = unpaired_quality(b.rows, h.rows, quality, margins, (b.source, h.source))
        elif method == "paired":
            quality = statistical_quality(b.rows, h.rows, quality, margins, (b.source, h.source))
        elif machines and not pinned:
            warnings.append("the exact comparison is expected to differ across machines (float rounding of another "
                            "vector ISA or BLAS): compare with --method unpaired (seeds as independent draws, the "
                            "default when both sides record their numeric kinds and they differ) or --method paired")
        elif machines:
            notes.append("both sides pinned the same numerics on one CPU vendor: exact values should match across these machines")
        cells = compare_cells(b.cells, h.cells)
        failed = cells.loc[cells["status"] == FAILED, list(CELL_KEY)]
        if len(failed) and len(quality):
            in_failed = quality[list(CELL_KEY)].merge(failed, how="left", indicator=True)["_merge"].eq("both").to_numpy()
            quality.loc[in_failed & (quality["status"] == MISSING).to_numpy(), "status"] = FAILED
    return Quality(level, quality, cells, warnings, notes)
