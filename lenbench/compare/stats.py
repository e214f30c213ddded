"""`lenbench compare --statistical`: quality compared by paired bootstrap, for results from two machines.

Two machines with a different vector ISA (or BLAS) round floats differently, so an exact comparison
of their rows flags thousands of tiny differences (774 "regressions" between two machines in the 5th
significant digit of a perplexity, exact-match flips of single samples). The statistical
comparison asks instead whether head is worse than base by more than chance and by more than a
stated practical margin.

**Unit**: one measurement over seeds, i.e. (task, encoding, variant, train_len, eval_len, metric),
its value the seed mean, as on the leaderboard. Base and head are paired by that key and, within
it, by seed and by sample index (both sides score the same evaluation samples:
`lenbench.evaluate.eval_generator`). Only (seed, length) pairs ok on both sides enter; a
measurement ok on one side and failed or absent on the other keeps its exact status (a regression
when it failed in head).

**Interval**: a hierarchical percentile bootstrap on the leaderboard's resampler
(`lenbench.report.intervals.Resampler`: `N_BOOT` resamples, `BOOT_SEED`, 95 %): one per board (task,
train_len, metric) draws seeds with replacement, then samples within each drawn seed (one draw of
sample indices for every length), the same draws for base and head, so ``head − base`` is a
paired difference; without sample scores only seeds are resampled, and with one seed and no sample
scores there is no interval (``no interval``, never a regression). (The leaderboard itself uses t
intervals over seeds, docs/statistics.md; this gate's statistics are the regression issue's.)

**Status**: a *regression* is a difference whose interval excludes 0 in the bad direction (the
metric's `higher_is_better`) **and** whose point estimate is worse than the margin; *improved* the
mirror image; *changed within margin* when the interval excludes 0 but the change is within the
margin; *no significant change* when the interval includes 0 (whatever the point estimate).

**Margins** (`DEFAULT_MARGINS`: each metric's ``margin`` in `lenbench.metrics`; override with
``--margin METRIC=X`` or ``--margin X`` for every metric, each keeping its kind): accuracies (exact_match, token_accuracy) 0.02 absolute (one sample
in 50); perplexity-like ratios (perplexity, window_perplexity, context_gain) 1 % of base; nll 0.01
nats absolute and bits_per_byte 0.01 / ln 2 bits absolute (the same 1 % of perplexity on their log
scale); any other metric 1 % of base.

With thousands of units some 2.5 % would exclude 0 by chance in each direction if nothing changed;
the margin, not the interval alone, is what keeps cross-machine rounding from failing the gate.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lenbench.metrics import FALLBACK_MARGIN, MARGINS, METRICS, Margin
from lenbench.report.formatting import markdown_table
from lenbench.report.intervals import (
    BOOT_SEED,
    LEVEL,
    N_BOOT,
    Resampler,
    board_series,
    interval,
    nanmean,
    replicate_curves,
)
from lenbench.report.rows import whole_length
from lenbench.results.schema import ResultsError

REGRESSION, IMPROVED, UNCHANGED = "REGRESSION", "improved", "unchanged"  # the same labels as lenbench.compare.quality
WITHIN_MARGIN = "changed (within margin)"
NOT_SIGNIFICANT = "no significant change"
NO_INTERVAL = "no interval"
STATUSES = (REGRESSION, IMPROVED, WITHIN_MARGIN, NOT_SIGNIFICANT, NO_INTERVAL, UNCHANGED)
BOARD = ("task", "train_len", "metric")
UNIT = ("task", "encoding", "variant", "train_len", "eval_len", "ratio", "metric")
PAIR = ("encoding", "variant", "seed", "ratio")
COLUMNS = (*UNIT, "seed", "n_seeds", "base", "head", "diff", "ci_low", "ci_high", "margin", "higher_is_better",
           "status")


#: The default margin of every registered metric (its `margin` in `lenbench.metrics`; a live view).
DEFAULT_MARGINS = MARGINS


def parse_margins(specs: list[str] | None) -> dict[str, Margin]:
    """The margins per metric: `DEFAULT_MARGINS` with ``--margin`` overrides applied.

    Args:
        specs: each ``X`` (every metric's margin becomes X, keeping its kind) or ``METRIC=X``.

    Raises:
        ResultsError: an unknown metric, or a value that is not a finite number ≥ 0.
    """
    margins = dict(DEFAULT_MARGINS)
    for spec in specs or []:
        metric, sep, text = spec.rpartition("=")
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            raise ResultsError(f"--margin {spec!r}: expected X or METRIC=X with X a number ≥ 0, e.g. exact_match=0.05")
        if not sep:
            margins = {m: Margin(value, g.relative) for m, g in margins.items()}
            continue
        if metric not in METRICS:
            raise ResultsError(f"--margin {spec!r}: unknown metric {metric!r}; known: {', '.join(METRICS)}")
        margins[metric] = Margin(value, margins.get(metric, FALLBACK_MARGIN).relative)
    return margins


def margin_of(margins: dict[str, Margin], metric: str) -> Margin:
    return margins.get(metric, FALLBACK_MARGIN)


def classify(diff: float, lo: float, hi: float, margin: float, hib: bool) -> str:
    """The status of one unit from its paired difference head − base and that difference's interval."""
    if diff == 0 and (math.isnan(lo) or lo == hi == 0):
        return UNCHANGED
    if math.isnan(lo) or math.isnan(hi):
        return NO_INTERVAL
    worse, better = (-diff, diff) if hib else (diff, -diff)
    bad_side = hi < 0 if hib else lo > 0  # the whole interval on the worse side of 0
    good_side = lo > 0 if hib else hi < 0
    if bad_side:
        return REGRESSION if worse > margin else WITHIN_MARGIN
    if good_side:
        return IMPROVED if better > margin else WITHIN_MARGIN
    return NOT_SIGNIFICANT


def _both_ok(base: pd.DataFrame, head: pd.DataFrame) -> pd.DataFrame:
    """The (encoding, variant, seed, ratio) keys measured ok, with a value, on both sides."""
    ok_b = base.loc[(base["status"] == "ok") & base["value"].notna(), list(PAIR)]
    ok_h = head.loc[(head["status"] == "ok") & head["value"].notna(), list(PAIR)]
    return ok_b.merge(ok_h, on=list(PAIR))


def _board_units(board: tuple, base: pd.DataFrame, head: pd.DataFrame, margins: dict[str, Margin],
                 n_boot: int, seed: int) -> list[dict]:
    """The units of one board (rows of one task, train_len and metric on each side)."""
    task, train_len, metric = board
    hib = bool(METRICS.get(metric, base["higher_is_better"].iloc[0]))
    keys = _both_ok(base, head)
    if keys.empty:
        return []
    base, head = base.merge(keys, on=list(PAIR)), head.merge(keys, on=list(PAIR))
    seeds, ratios = sorted(keys["seed"].unique()), sorted(keys["ratio"].unique())
    sb, sh = board_series(base, metric, hib, seeds, ratios), board_series(head, metric, hib, seeds, ratios)
    n_max = max([s.n_samples for s in (*sb.values(), *sh.values())] + [1])
    res = Resampler.make(len(seeds), n_max, n_boot, seed)
    cache: dict = {}
    eval_len = base.groupby("ratio")["eval_len"].first().to_dict()
    margin = margin_of(margins, metric)
    units = []
    for key, b in sb.items():
        h = sh[key]
        rb, rh = replicate_curves(b, res, metric, cache), replicate_curves(h, res, metric, cache)  # (B, R)
        pb, ph = nanmean(b.value, axis=0), nanmean(h.value, axis=0)  # (R,)
        has_interval = bool(b.samples and h.samples) or len(seeds) > 1
        for r, ratio in enumerate(ratios):
            present = b.present[:, r]
            if not present.any():
                continue
            with np.errstate(invalid="ignore"):
                boot = rh[:, r] - rb[:, r]
                diff = float(ph[r] - pb[r])
            lo, hi = interval(boot) if has_interval else (math.nan, math.nan)
            m = margin.of(float(pb[r]))
            units.append({"task": task, "encoding": key[0], "variant": key[1], "train_len": train_len,
                          "eval_len": int(eval_len[ratio]), "ratio": float(ratio), "metric": metric, "seed": "all",
                          "n_seeds": int(present.sum()), "base": float(pb[r]), "head": float(ph[r]), "diff": diff,
                          "ci_low": lo, "ci_high": hi, "margin": m, "higher_is_better": hib,
                          "status": classify(diff, lo, hi, m, hib)})
    return units


def statistical_quality(base: pd.DataFrame, head: pd.DataFrame, exact: pd.DataFrame, margins: dict[str, Margin],
                        sources: tuple[str, str] = ("base", "head"), *, n_boot: int = N_BOOT,
                        seed: int = BOOT_SEED) -> pd.DataFrame:
    """The statistical quality comparison (see the module docstring).

    Args:
        base, head: the tidy rows of each side (`lenbench.report.rows.load_results`).
        exact: `lenbench.compare.quality.compare_rows` of the same rows; its measurements that are not ok on
            both sides (failed in head, missing, new ...) are kept with their exact status.
        margins: per metric (`parse_margins`).
        sources: the sides' names, for error messages.
        n_boot, seed: the bootstrap (the leaderboard's defaults).

    Returns:
        One row per unit (`COLUMNS`; ``seed`` "all") plus the kept exact rows (``seed`` theirs).

    Raises:
        ResultsError: unreadable sample scores (one line naming the board and both sources).
    """
    units = per_board(base, head, lambda board, bg, hg: _board_units(board, bg, hg, margins, n_boot, seed), sources)
    return with_exact_rows(pd.DataFrame(units, columns=list(COLUMNS)), exact, COLUMNS)


def per_board(base: pd.DataFrame, head: pd.DataFrame, board_units, sources: tuple[str, str]) -> list[dict]:
    """`board_units(board, base rows, head rows)` of every board (task, train_len, metric) both sides hold,
    whole-length rows only, concatenated (the paired and the unpaired comparison share this walk).

    Raises:
        ResultsError: unreadable sample scores (one line naming the board and both sources).
    """
    base, head = whole_length(base), whole_length(head)
    units: list[dict] = []
    heads = {k: g for k, g in head.groupby(list(BOARD), sort=False)}
    for board, bg in base.groupby(list(BOARD), sort=False):
        if (hg := heads.get(board)) is None:
            continue
        try:
            units += board_units(board, bg, hg)
        except ValueError as err:
            raise ResultsError(f"{sources[0]} / {sources[1]}: task {board[0]} train_len {board[1]} metric {board[2]}: "
                               f"unreadable sample_scores ({err}); expected the strings lenbench.evaluate writes") from None
    return units


def with_exact_rows(units: pd.DataFrame, exact: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """`units` plus the exact comparison's measurements not ok on both sides, with their exact status
    (one seed each; the statistical columns empty)."""
    both = exact["base"].notna() & exact["head"].notna()
    kept = exact.loc[~both].assign(n_seeds=1).reindex(columns=list(columns))
    return pd.concat([units, kept], ignore_index=True) if len(kept) else units


def summary_line(quality: pd.DataFrame, margins: dict[str, Margin], machines: str) -> str:
    """The statistical quality section's counts line, naming the machine difference."""
    units = quality[quality["seed"].astype(str) == "all"]
    counts = {s: int((units["status"] == s).sum()) for s in STATUSES}
    shown = sorted(set(units["metric"])) or sorted(DEFAULT_MARGINS)
    where = f"across machines ({machines})" if machines else "no machine difference recorded"
    return (f"Quality (statistical: paired bootstrap of head − base over seeds × samples, {LEVEL:.0%} interval, "
            f"{N_BOOT} resamples; {where}; margins {', '.join(f'{m} {margin_of(margins, m).describe()}' for m in shown)}): "
            f"{len(units)} measurement(s) over seeds: {counts[REGRESSION]} regression(s), {counts[IMPROVED]} improved, "
            f"{counts[WITHIN_MARGIN]} changed within margin, {counts[NOT_SIGNIFICANT]} without significant change, "
            f"{counts[UNCHANGED]} identical, {counts[NO_INTERVAL]} without an interval (1 seed, no sample scores).")


def units_table(quality: pd.DataFrame, limit: int | None) -> str:
    """The changed units, regressions first then by |diff| / margin, as a markdown table."""
    units = quality[(quality["seed"].astype(str) == "all") & quality["status"].isin([REGRESSION, IMPROVED, WITHIN_MARGIN])]
    if units.empty:
        return ""
    order = {REGRESSION: 0, IMPROVED: 1, WITHIN_MARGIN: 2}
    size = (units["diff"].abs() / units["margin"].where(units["margin"] > 0)).fillna(math.inf)
    units = units.assign(_o=units["status"].map(order), _s=-size).sort_values(["_o", "_s"], kind="mergesort")
    cut = 0 if limit is None else max(0, len(units) - limit)
    units = units if limit is None else units.head(limit)
    body = [[r["status"], r["task"], r["encoding"], r["variant"], str(r["train_len"]), f"{r['ratio']:g}x",
             f"{r['metric']} {'↑' if r['higher_is_better'] else '↓'}", str(r["n_seeds"]), f"{r['base']:.6g}",
             f"{r['head']:.6g}", f"{r['diff']:+.4g}", f"[{r['ci_low']:+.3g}, {r['ci_high']:+.3g}]", f"{r['margin']:.3g}"]
            for _, r in units.iterrows()]
    header = ["status", "task", "encoding", "variant", "train_len", "ratio", "metric", "seeds", "base", "head",
              "head − base", "95% interval", "margin"]
    table = markdown_table(header, body, ["l"] * 8 + ["r"] * 5)
    return table + (f"\n… {cut} more changed measurement(s) not shown (--all shows every one)" if cut else "")
