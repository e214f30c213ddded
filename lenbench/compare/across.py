"""Quality compared across numeric kinds: each side's seeds an independent draw, Welch t, Holm.

Two machines of different numeric kinds (`lenbench.numerics.numeric_kind`: another CPU vendor, or
another numerics mode) train the same cell into another model: float rounding differs from the
first step and training amplifies it (measured: 18 catalog cells recomputed on the other vendor moved
the 1× exact match of one cell by 0.21 and flipped a learned verdict). Seed s on one side is then
not seed s on the other, so the sides are compared as two independent samples of seeds:

**Unit**: one measurement over seeds, (task, encoding, variant, train_len, eval_len, metric), as on
the leaderboard; each side's seeds ok there (a measurement failed or missing on one side keeps its
exact status).

**Each side's error is the board's**: the mean over its K seeds with
``se² = max(s²/K, Σ V_s / K²)`` (`lenbench.report.intervals.estimate`: between-seed variance, floored by
the sampling variance of each seed's evaluation samples), K − 1 degrees of freedom.

**Test**: Welch's t on head − base (Welch–Satterthwaite degrees of freedom), one-sided against the
metric's practical margin (`lenbench.metrics`, as the paired comparison): a *regression* is a unit
whose "worse than base by more than the margin" survives Holm's step-down correction over every
unit of the comparison at family-wise `ALPHA` (the board's own correction, docs/statistics.md), so
the whole gate fails unchanged code at most 5 % of the time whatever the number of units; an
*improvement* is the mirror image, its own family. The interval shown is the uncorrected 95 %
Welch interval of head − base.

What it can detect with three seeds per side is little (docs/regression.md has the measurement):
across kinds, a regression must be large against the spread of seeds to show. To judge a
change finely, recompute the base on the head's kind, as the pull-request workflow does, and
compare exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from lenbench.compare.stats import (
    COLUMNS,
    IMPROVED,
    NO_INTERVAL,
    NOT_SIGNIFICANT,
    REGRESSION,
    UNCHANGED,
    margin_of,
    per_board,
    with_exact_rows,
)
from lenbench.metrics import METRICS, Margin
from lenbench.report.intervals import (
    BOOT_SEED,
    LEVEL,
    N_BOOT,
    Estimate,
    Resampler,
    SeedValues,
    board_series,
    estimate,
    seed_curves,
)
from lenbench.report.ranks import ALPHA, holm

#: The units' columns: the paired comparison's, with the one-sided p-values of each direction.
UNPAIRED_COLUMNS = (*COLUMNS, "p_worse", "p_better")


def welch(b: Estimate, h: Estimate) -> tuple[float, float, float]:
    """(head − base, its standard error, Welch–Satterthwaite degrees of freedom) of two seed-level estimates."""
    diff = h.mean - b.mean
    var = b.se**2 + h.se**2
    den = sum(e.se**4 / e.df for e in (b, h) if e.df > 0 and math.isfinite(e.df))
    df = var**2 / den if den > 0 else math.inf
    return diff, math.sqrt(var), df


def p_beyond(excess: float, se: float, df: float) -> float:
    """One-sided p-value of "the true excess is ≤ 0" given the estimated excess over the margin."""
    if math.isnan(excess):
        return 1.0
    if se == 0 or math.isinf(excess):
        return 0.0 if excess > 0 else 1.0
    t = excess / se
    return float(sps.norm.sf(t) if math.isinf(df) else sps.t.sf(t, df))


def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.loc[(rows["status"] == "ok") & rows["value"].notna()]


def _side_values(rows: pd.DataFrame, metric: str, hib: bool, ratios: list, n_boot: int, seed: int) -> dict:
    """{(encoding, variant): (value (S, R), replicates (B, S, R), has sample scores)} of one side's board."""
    seeds = sorted(rows["seed"].unique())
    series = board_series(rows, metric, hib, seeds, ratios)
    n_max = max([s.n_samples for s in series.values()] + [1])
    res = Resampler.make(len(seeds), n_max, n_boot, seed)
    cache: dict = {}
    return {key: (s.value, seed_curves(s, res, metric, cache), bool(s.samples)) for key, s in series.items()}


def _board_units(board: tuple, base: pd.DataFrame, head: pd.DataFrame, margins: dict[str, Margin],
                 n_boot: int, seed: int) -> list[dict]:
    task, train_len, metric = board
    hib = bool(METRICS.get(metric, base["higher_is_better"].iloc[0]))
    base, head = _ok(base), _ok(head)
    ratios = sorted(set(base["ratio"]) & set(head["ratio"]))
    if not ratios:
        return []
    base, head = base[base["ratio"].isin(ratios)], head[head["ratio"].isin(ratios)]
    vb = _side_values(base, metric, hib, ratios, n_boot, seed)
    vh = _side_values(head, metric, hib, ratios, n_boot, seed)
    eval_len = base.groupby("ratio")["eval_len"].first().to_dict()
    margin = margin_of(margins, metric)
    units = []
    for key in vb.keys() & vh.keys():
        (xb, rb, sb), (xh, rh, sh) = vb[key], vh[key]
        for r, ratio in enumerate(ratios):
            if np.isnan(xb[:, r]).all() or np.isnan(xh[:, r]).all():
                continue
            eb, eh = estimate(SeedValues(xb[:, r], rb[:, :, r])), estimate(SeedValues(xh[:, r], rh[:, :, r]))
            diff, se, df = welch(eb, eh)
            m = margin.of(eb.mean)
            worse = -diff if hib else diff
            if (eb.k < 2 and not sb) or (eh.k < 2 and not sh):  # one seed without sample scores: no error
                lo = hi = math.nan
                p_worse = p_better = 1.0
            else:
                half = (sps.norm.ppf(0.5 + LEVEL / 2) if math.isinf(df) else sps.t.ppf(0.5 + LEVEL / 2, df)) * se
                lo, hi = diff - half, diff + half
                p_worse, p_better = p_beyond(worse - m, se, df), p_beyond(-worse - m, se, df)
            units.append({"task": task, "encoding": key[0], "variant": key[1], "train_len": train_len,
                          "eval_len": int(eval_len[ratio]), "ratio": float(ratio), "metric": metric, "seed": "all",
                          "n_seeds": f"{eb.k}+{eh.k}", "base": eb.mean, "head": eh.mean, "diff": diff,
                          "ci_low": lo, "ci_high": hi, "margin": m, "higher_is_better": hib,
                          "status": NO_INTERVAL if math.isnan(lo) else None, "p_worse": p_worse,
                          "p_better": p_better, "_same": bool(np.array_equal(np.sort(xb[:, r]), np.sort(xh[:, r]),
                                                                            equal_nan=True))})
    return units


def unpaired_quality(base: pd.DataFrame, head: pd.DataFrame, exact: pd.DataFrame, margins: dict[str, Margin],
                     sources: tuple[str, str] = ("base", "head"), *, n_boot: int = N_BOOT, seed: int = BOOT_SEED,
                     alpha: float = ALPHA) -> pd.DataFrame:
    """The comparison across numeric kinds (module docstring).

    Args:
        base, head: the tidy rows of each side (`lenbench.report.rows.load_results`).
        exact: `lenbench.compare.quality.compare_rows` of the same rows; its measurements not ok on both
            sides keep their exact status.
        margins: per metric (`lenbench.compare.stats.parse_margins`).
        alpha: the family-wise error rate of the regressions (and, separately, of the improvements).

    Returns:
        One row per unit (`UNPAIRED_COLUMNS`; ``seed`` "all") plus the kept exact rows.

    Raises:
        ResultsError: unreadable sample scores (one line naming the board and both sources).
    """
    units = per_board(base, head, lambda board, bg, hg: _board_units(board, bg, hg, margins, n_boot, seed), sources)
    frame = pd.DataFrame(units, columns=[*UNPAIRED_COLUMNS, "_same"])
    if len(frame):
        worse = holm(frame["p_worse"].tolist(), alpha)
        better = holm(frame["p_better"].tolist(), alpha)
        status = [s if s is not None else REGRESSION if w else IMPROVED if b else UNCHANGED if same else NOT_SIGNIFICANT
                  for s, w, b, same in zip(frame["status"], worse, better, frame["_same"], strict=True)]
        frame["status"] = status
    return with_exact_rows(frame.drop(columns="_same"), exact, UNPAIRED_COLUMNS)


def unpaired_summary_line(quality: pd.DataFrame, margins: dict[str, Margin], kinds: str) -> str:
    """The counts line of a comparison across numeric kinds, naming the kinds and the test."""
    units = quality[quality["seed"].astype(str) == "all"]
    counts = {s: int((units["status"] == s).sum()) for s in (REGRESSION, IMPROVED, NOT_SIGNIFICANT, UNCHANGED,
                                                             NO_INTERVAL)}
    shown = sorted(set(units["metric"]))
    return (f"Quality (across numeric kinds: {kinds}; each side's seeds an independent draw, so unpaired: Welch t "
            f"on head − base, each side's error the board's (t over seeds, sampling-variance floor), one-sided "
            f"beyond a practical margin, Holm over all {len(units)} measurements at family-wise {ALPHA:g}; margins "
            f"{', '.join(f'{m} {margin_of(margins, m).describe()}' for m in shown)}): "
            f"{counts[REGRESSION]} regression(s), {counts[IMPROVED]} improved, {counts[NOT_SIGNIFICANT]} without a "
            f"significant change, {counts[UNCHANGED]} identical, {counts[NO_INTERVAL]} without an interval (1 seed, "
            f"no sample scores).")
