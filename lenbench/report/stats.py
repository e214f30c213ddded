"""The leaderboard's statistics: intervals, paired tie-aware ranks, not-learned flags, retention.

The report path is rows → statistics (this module) → tables (`lenbench.report.tables`) → figures
(`lenbench.report.plots`) → page (`lenbench.report.page`). Everything here works on one *board*: the rows of one task, training
length and (primary) metric, every (encoding, variant) series of it, scored on the same evaluation
samples (same generator seed, `lenbench.evaluate.eval_generator`).

**Intervals** (95 %, percentile bootstrap, `N_BOOT` resamples, fixed `BOOT_SEED` so a report is
reproducible). Hierarchical: each resample draws the seeds with replacement, then within each drawn
seed the evaluation samples with replacement (per length), and recomputes every statistic from the
resampled per-sample scores (`sample_scores`: the metric is f(Σ numerators / Σ denominators), see
`lenbench.metrics`). One set of resampling indices serves the whole board, so differences between
two series are *paired* (same seeds, same samples). With one seed the intervals come from sampling
error alone; rows without sample scores (results from before schema 2) fall back to resampling
seeds only, and with one seed and no sample scores there is no interval (NaN). `ci_method` says
which applied.

**Statistics of a series** (the seed-mean curve: the metric at each length ratio averaged over
seeds; a failed length scores the metric's worst value: 0 for accuracies, +inf for perplexity/nll):
``in_dist`` (ratio 1), ``past_train_mean`` (mean over ratios > 1), ``max_ratio_within_10pct``
(largest ratio up to which every score stays within 10 % of in_dist) and ``retention`` (mean over
ratios > 1 of (score − chance) / (score₁ₓ − chance) for higher-is-better metrics, chance taken from
the ``baseline:chance`` rows at that length, 0 without them; score₁ₓ / score for lower-is-better
metrics such as perplexity).

**Not learned**: a model whose in-distribution score (seed mean) misses its metric's `learned_min`
(`lenbench.metrics`; exact match or token accuracy below 0.9, per-task overrides in
`TASK_LEARNED_MIN`), or, for perplexity, is no
better than the ``baseline:unigram`` perplexity at 1×, is flagged: shown, never ranked. The
threshold uses the point estimate (seed mean); results without baseline rows (schema 1) cannot
flag a perplexity as not learned.

**Ranks** (within one table): rank = 1 + the number of entries better with statistical support,
i.e. whose paired 95 % bootstrap interval of the difference in ``past_train_mean`` excludes 0 in
their favour. Entries that cannot be told apart share a rank. Baselines and not-learned entries get
no rank. The main table ranks trained models (variant "none"); each encoding with inference-time
variants gets its own table (``variant_rank``) ranking its variants against its unscaled model.
The overall rank orders trained encodings by the number of tasks they learned (``n_tasks``, more
first), then by the mean of their main-table ranks over those tasks (competition ranking).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from lenbench.labels import BASELINE_PREFIX
from lenbench.metrics import decode_arrays as decode
from lenbench.metrics import learned_min, worst_value
from lenbench.metrics import transform_array as transform

N_BOOT = 1000
BOOT_SEED = 1234
LEVEL = 0.95
WITHIN = 0.10
#: Per-task overrides of a metric's `learned_min` (lenbench.metrics): {task: {metric: minimum}}.
TASK_LEARNED_MIN: dict[str, dict[str, float]] = {}
#: The baseline a lower-is-better metric must beat at 1× to count as learned.
LEARNED_BASELINE = "baseline:unigram"
CHANCE = "baseline:chance"

STATS = ("in_dist", "past_train_mean", "max_ratio_within_10pct", "retention")


def is_baseline(encoding: str) -> bool:
    return encoding.startswith(BASELINE_PREFIX)


def interval(boot: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates (the outer order statistics, robust to ±inf)."""
    boot = boot[~np.isnan(boot)]
    if len(boot) == 0:
        return math.nan, math.nan
    a = (1 - level) / 2
    return float(np.quantile(boot, a, method="lower")), float(np.quantile(boot, 1 - a, method="higher"))


def _nanmean(x: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


@dataclasses.dataclass
class Resampler:
    """Shared resampling indices of one board (makes every comparison paired).

    Attributes:
        seed_idx: (B, K) index of the seed drawn into slot k of resample b (K = number of seeds).
        u: (B, K, R, N) uniforms; the sample drawn at position i for (b, k, r) out of n samples is
            floor(u · n), the same for every series with the same n.
    """

    seed_idx: np.ndarray
    u: np.ndarray

    @classmethod
    def make(cls, n_seeds: int, n_ratios: int, n_max: int, n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> Resampler:
        rng = np.random.default_rng(seed)
        seed_idx = rng.integers(0, n_seeds, size=(n_boot, n_seeds))  # (B, K)
        u = rng.random((n_boot, n_seeds, n_ratios, max(1, n_max)), dtype=np.float32)  # (B, K, R, N)
        return cls(seed_idx, u)


@dataclasses.dataclass
class Series:
    """One (encoding, variant) of a board: point values and per-sample scores per (seed, ratio).

    Attributes:
        value: (S, R) the row's value; failed lengths the metric's worst value; missing NaN.
        samples: {(s, r): (num, den)} per-sample scores where present.
    """

    encoding: str
    variant: str
    value: np.ndarray
    samples: dict
    n_samples: int

    @property
    def present(self) -> np.ndarray:
        return ~np.isnan(self.value)  # (S, R)


def board_series(mdf: pd.DataFrame, metric: str, hib: bool, seeds: list, ratios: list) -> dict[tuple[str, str], Series]:
    """The series of one board (rows of one task, train_len and metric)."""
    s_index = {s: i for i, s in enumerate(seeds)}
    r_index = {r: i for i, r in enumerate(ratios)}
    worst = worst_value(metric, hib)
    out = {}
    for (encoding, variant), g in mdf.groupby(["encoding", "variant"], sort=False):
        value = np.full((len(seeds), len(ratios)), np.nan)
        samples = {}
        n_samples = 0
        for seed, ratio, v, status, text in zip(g["seed"], g["ratio"], g["value"], g["status"], g["sample_scores"],
                                                strict=True):
            key = (s_index[seed], r_index[ratio])
            ok = status == "ok" and not math.isnan(v)
            value[key] = v if ok else worst
            if ok:
                dec = decode(text)
                if dec is not None and len(dec[0]):
                    samples[key] = dec
                    n_samples = max(n_samples, len(dec[0]))
        out[(encoding, variant)] = Series(encoding, variant, value, samples, n_samples)
    return out


def replicate_curves(series: Series, res: Resampler, metric: str, cache: dict) -> np.ndarray:
    """(B, R) bootstrap replicates of the seed-mean curve of `series`."""
    B, K = res.seed_idx.shape
    R = series.value.shape[1]
    reps = np.full((B, K, R), np.nan)
    for r in range(R):
        for s in range(series.value.shape[0]):
            point = series.value[s, r]
            if np.isnan(point):
                continue
            dec = series.samples.get((s, r))
            if dec is None:
                vals = point
            else:
                num, den = dec
                n = len(num)
                idx = cache.get((r, n))
                if idx is None:
                    idx = cache[(r, n)] = (res.u[:, :, r, :n] * n).astype(np.intp).clip(0, n - 1)  # (B, K, n)
                with np.errstate(divide="ignore", invalid="ignore"):
                    vals = transform(metric, num[idx].sum(-1) / den[idx].sum(-1))  # (B, K)
            reps[:, :, r] = np.where(res.seed_idx == s, vals, reps[:, :, r])
    return _nanmean(reps, axis=1)  # (B, R)


def curve_stats(curve: np.ndarray, ratios: np.ndarray, hib: bool, chance: np.ndarray | None) -> dict[str, np.ndarray]:
    """The statistics of seed-mean curves.

    Args:
        curve: (..., R) the metric at each ratio (ascending ratios).
        ratios: (R,) the length ratios.
        hib: higher is better.
        chance: (R,) the chance level at each ratio (higher-is-better metrics), or None (0).

    Returns:
        {stat: (...)} for every name in `STATS`.
    """
    one = np.isclose(ratios, 1.0)
    past = ratios > 1.0 + 1e-9
    shape = curve.shape[:-1]
    nan = np.full(shape, np.nan)
    in_dist = curve[..., np.argmax(one)] if one.any() else nan
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        past_mean = curve[..., past].mean(-1) if past.any() else nan
        bound = in_dist * (1 - WITHIN) if hib else in_dist * (1 + WITHIN)
        ok = (curve[..., past] >= bound[..., None]) if hib else (curve[..., past] <= bound[..., None])
        held = np.logical_and.accumulate(ok, axis=-1) if past.any() else np.zeros((*shape, 0), bool)
        n_held = held.sum(-1)
        past_ratios = np.concatenate([[1.0], ratios[past]])
        max_ratio = np.where(np.isnan(in_dist), np.nan, past_ratios[n_held])
        if hib:
            c = np.zeros(len(ratios)) if chance is None else np.nan_to_num(chance)
            denom = in_dist - c[np.argmax(one)] if one.any() else nan
            ret = ((curve[..., past] - c[past]) / denom[..., None]).mean(-1) if past.any() else nan
            ret = np.where(denom > 0, ret, np.nan)
        else:
            ret = (in_dist[..., None] / curve[..., past]).mean(-1) if past.any() else nan
    return {"in_dist": in_dist, "past_train_mean": past_mean, "max_ratio_within_10pct": max_ratio, "retention": ret}


def support_ranks(goodness: dict, keys: list, level: float = LEVEL) -> dict:
    """rank = 1 + the number of entries better with support (paired interval of the difference > 0).

    Args:
        goodness: {key: (B,) replicates of the ranking statistic, oriented so higher is better}.
        keys: the entries of one table.
    """
    ranks = {}
    for i in keys:
        better = 0
        for j in keys:
            if j == i:
                continue
            with np.errstate(invalid="ignore"):
                d = goodness[j] - goodness[i]  # (B,)
            # both at the same infinite value (failed everywhere: inf - inf) is no difference; any other
            # NaN is a replicate that drew only missing seeds of an entry, which says nothing either way,
            # so `interval` leaves it out (counted as 0, it let an entry with missing seeds tie rank 1)
            d = np.where(np.isinf(goodness[j]) & (goodness[j] == goodness[i]), 0.0, d)
            lo, _ = interval(d, level)
            better += int(lo > 0)
        ranks[i] = 1 + better
    return ranks


def ci_method(n_seeds: int, has_samples: bool) -> str:
    if has_samples:
        return "bootstrap: seeds × samples" if n_seeds > 1 else "bootstrap: samples only (1 seed)"
    return "bootstrap: seeds only (no sample scores)" if n_seeds > 1 else "none (1 seed, no sample scores)"


def learned_threshold(task: str, metric: str) -> float | None:
    return TASK_LEARNED_MIN.get(task, {}).get(metric, learned_min(metric))


def board_statistics(mdf: pd.DataFrame, task: str, metric: str, hib: bool, *, n_boot: int = N_BOOT,
                     seed: int = BOOT_SEED, not_learned: Mapping[tuple[str, str], bool] | None = None,
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Statistics of one board (tidy rows of one task, train_len and metric; columns of
    `lenbench.report.schema.COLUMNS`).

    Args:
        not_learned: {(encoding, variant): flag} to use instead of this metric's own learned
            threshold (a secondary metric's board ranks the entries its primary metric learned).

    Returns:
        entries: one row per series: encoding, variant, kind ("model", "variant", "baseline"),
            n_seeds, n_samples, ci_method, for each of `STATS` the point value and
            ``<stat>_ci_low`` / ``<stat>_ci_high``, n_failed, not_learned, rank (main table),
            variant_rank (the encoding's variant table), NaN where unranked.
        curves: one row per series and ratio: encoding, variant, ratio, mean, ci_low, ci_high,
            all_failed.
    """
    seeds = sorted(mdf["seed"].unique())
    ratios = np.array(sorted(mdf["ratio"].unique()), dtype=float)
    series = board_series(mdf, metric, hib, seeds, list(ratios))
    n_max = max([s.n_samples for s in series.values()] + [1])
    res = Resampler.make(len(seeds), len(ratios), n_max, n_boot, seed)
    cache: dict = {}
    points, boots, curves = {}, {}, []
    for key, s in series.items():
        point_curve = _nanmean(s.value, axis=0)  # (R,)
        boot_curve = replicate_curves(s, res, metric, cache)  # (B, R)
        points[key], boots[key] = point_curve, boot_curve
        failed_rows = mdf[(mdf["encoding"] == key[0]) & (mdf["variant"] == key[1])]
        for r, ratio in enumerate(ratios):
            lo, hi = interval(boot_curve[:, r]) if (s.samples or len(seeds) > 1) else (math.nan, math.nan)
            at = failed_rows[np.isclose(failed_rows["ratio"], ratio)]
            curves.append({"encoding": key[0], "variant": key[1], "ratio": float(ratio), "mean": float(point_curve[r]),
                           "ci_low": lo, "ci_high": hi, "all_failed": bool(len(at)) and bool((at["status"] != "ok").all())})
    chance_key = (CHANCE, "none")
    chance = points.get(chance_key) if hib else None
    entries = []
    goodness = {}
    for key, s in series.items():
        n_seeds = int(s.present.any(axis=1).sum())
        point = curve_stats(points[key], ratios, hib, chance)
        boot = curve_stats(boots[key], ratios, hib, chance)
        has_interval = bool(s.samples) or n_seeds > 1
        rows = mdf[(mdf["encoding"] == key[0]) & (mdf["variant"] == key[1])]
        entry = {"encoding": key[0], "variant": key[1],
                 "kind": "baseline" if is_baseline(key[0]) else ("model" if key[1] == "none" else "variant"),
                 "n_seeds": n_seeds, "n_samples": int(s.n_samples), "ci_method": ci_method(n_seeds, bool(s.samples)),
                 "n_failed": float(((rows["status"] != "ok") & (rows["ratio"] > 1.0 + 1e-9)).sum())}
        for stat in STATS:
            lo, hi = interval(boot[stat]) if has_interval else (math.nan, math.nan)
            entry.update({stat: float(point[stat]), f"{stat}_ci_low": lo, f"{stat}_ci_high": hi})
        entries.append(entry)
        goodness[key] = boot["past_train_mean"] if hib else -boot["past_train_mean"]
    baseline_in = {e["encoding"]: e["in_dist"] for e in entries if e["kind"] == "baseline"}
    threshold = learned_threshold(task, metric)
    for e in entries:
        if not_learned is not None and e["kind"] != "baseline":
            e["not_learned"] = bool(not_learned.get((e["encoding"], e["variant"]), True))
        elif e["kind"] == "baseline":
            e["not_learned"] = False
        elif hib:
            e["not_learned"] = threshold is not None and not (e["in_dist"] >= threshold)
        else:
            ref = baseline_in.get(LEARNED_BASELINE)
            e["not_learned"] = ref is not None and not (e["in_dist"] < ref)
    by_key = {(e["encoding"], e["variant"]): e for e in entries}
    main = [k for k, e in by_key.items() if e["kind"] == "model" and not e["not_learned"]]
    for e in entries:
        e["rank"] = math.nan
        e["variant_rank"] = math.nan
    for k, rank in support_ranks(goodness, main).items():
        by_key[k]["rank"] = float(rank)
    for encoding in dict.fromkeys(e["encoding"] for e in entries if e["kind"] == "variant"):
        table = [k for k, e in by_key.items() if k[0] == encoding and e["kind"] != "baseline" and not e["not_learned"]]
        for k, rank in support_ranks(goodness, table).items():
            by_key[k]["variant_rank"] = float(rank)
    return pd.DataFrame(entries), pd.DataFrame(curves)


def overall_ranks(per_task: pd.DataFrame) -> pd.DataFrame:
    """Overall ranking of trained models: mean main-table rank over the boards where each learned.

    Returns:
        one row per encoding (variant "none"): encoding, variant, mean_rank, n_tasks (boards with a
        rank), n_not_learned, rank (competition ranking by n_tasks, more first, then mean_rank, so
        an encoding never outranks one that learned more tasks; NaN when never ranked).
    """
    models = per_task[per_task["kind"] == "model"]
    rows = []
    for encoding, g in models.groupby("encoding", sort=False):
        ranked = g["rank"].dropna()
        rows.append({"encoding": encoding, "variant": "none", "mean_rank": float(ranked.mean()) if len(ranked) else math.nan,
                     "n_tasks": int(len(ranked)), "n_not_learned": int(g["not_learned"].sum())})
    # More tasks learned ranks first; among equal n_tasks, the lower mean rank.
    keys = [(-r["n_tasks"], r["mean_rank"]) for r in rows if r["n_tasks"]]
    for r in rows:
        key = (-r["n_tasks"], r["mean_rank"])
        r["rank"] = float(1 + sum(o[0] < key[0] or (o[0] == key[0] and o[1] < key[1] - 1e-12) for o in keys)) \
            if r["n_tasks"] else math.nan
    return pd.DataFrame(rows, columns=["encoding", "variant", "mean_rank", "n_tasks", "n_not_learned", "rank"])


# --- a t interval over seeds (kept for callers of the schema-1 report) ------------------------

# Student t 0.975 quantiles for 1..30 degrees of freedom (scipy.stats.t.ppf, 6 decimals).
_T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
         2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
         2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
_Z975 = 1.959963984540054


def t_quantile_975(df: int) -> float:
    """Two-sided 95 % Student t quantile: table for df ≤ 30, Cornish–Fisher expansion beyond."""
    if df < 1:
        return float("nan")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mean_ci(values: Iterable[float]) -> tuple[float, float, float, int]:
    """(mean, ci_low, ci_high, n) over the non-NaN values; the CI is NaN below two values or
    when a value is infinite."""
    arr = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    n = len(arr)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    mean = float(arr.mean())
    if n < 2 or not np.isfinite(arr).all():
        return mean, float("nan"), float("nan"), n
    half = t_quantile_975(n - 1) * float(arr.std(ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half, n
