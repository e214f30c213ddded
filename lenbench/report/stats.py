"""The leaderboard's statistics: seed-level intervals, family-wise paired ranks, learnability, floors.

The report path is rows → statistics (this module) → tables (`lenbench.report.tables`) → figures
(`lenbench.report.plots`) → page (`lenbench.report.page`). Everything here works on one *board*:
the rows of one task, training length and metric, every (encoding, variant) series of it, scored
on the same evaluation samples (same generator seed, `lenbench.evaluate.eval_generator`).

**The unit of replication is the training seed.** Every statistic (below) is computed per seed
from that seed's rows; the board's value is its mean over seeds. Its 95 % interval is a Student t
interval on the seed values, ``mean ± t(K−1) · se``, with ``se² = max(s²/K, ΣV_s/K²)``: ``s²`` the
variance of the K seed values, ``V_s`` the sampling variance of seed s's value (a bootstrap of
its evaluation samples, `N_BOOT` resamples, fixed `BOOT_SEED`). The floor keeps three identical
seeds (0.000, 0.000, 0.000) from claiming an interval narrower than their samples allow. With one
seed the interval is from sampling alone (normal quantile); rows without sample scores have only
``s²``. docs/statistics.md shows this interval's coverage, measured by simulation with known truth
(`coverage`), next to the percentile bootstrap it replaced (which under-covers with 3 seeds).

**Shared resampling.** One draw of sample indices per (resample, seed) serves every ratio and
every series of the board (`Resampler`): where the same samples are scored at several ratios
(lm's windows) or by several encodings, every difference is paired by construction.

**Statistics of a series** (`STATS`; a failed length scores the metric's worst value: 0 for
accuracies, +inf for perplexity): ``in_dist`` (ratio 1), ``past_train_mean`` (mean over ratios >
1), ``retention`` (mean over ratios > 1 of (score − chance) / (score₁ₓ − chance), chance from the
``baseline:chance`` rows; score₁ₓ / score for lower-is-better metrics), ``degradation`` (metrics
built from nll sums: mean nll past the training length − nll at 1×, in nats, on the same scored
samples; NaN otherwise) and ``max_ratio_within_10pct`` ("holds to": the largest ratio up to which
every score stays within 10 % of in_dist; discrete, so it has no interval).

**Learnability** (`learnability`): learned when the interval of in_dist lies at or above the
metric's `learned_min` (per-task overrides in `TASK_LEARNED_MIN`), not learned when it lies
below, uncertain otherwise; for perplexity, the paired interval of the difference to
``baseline:unigram`` at 1× decides the same way. The same verdict is given per seed from that
seed's sampling interval (`seed_learnability`). Only learned entries are ranked.

**Complete**: an entry missing a (seed, ratio) of the board is incomplete: shown, never ranked.

**Floor**: the best trivial baseline of the board (the ``baseline:*`` series with the best mean
past train; on a board without baseline rows, the metric's worst score where it is finite: 0
for accuracies). An entry is above the floor when the 95 % interval of its paired margin over that
baseline (the seed differences, as above) lies above 0; an entry at the floor is shown with its
margin and never ranked. Like learnability, this is a gate per entry, not a comparison between
entries, so it is not corrected for multiplicity.

**Ranks** (`support_ranks`): among the learned, complete entries above the floor, rank = 1 + the
number of entries better with support: the paired t test on the seed differences of mean past train
(same seeds, same samples) rejects "no difference", two-sided, with Holm's step-down correction over
every pair of the table at family-wise level `ALPHA`. Entries that cannot be told apart share a
rank. The main table ranks trained models (variant "none"); each encoding with inference-time
variants gets its own table (``variant_rank``).

**Overall** (`overall_ranks`): per trained encoding, the mean over the boards where it learned the
task and the board ranked anything of its rank there, an entry at the floor counting as the
board's last place (1 + the entries ranked); the overall table says on how many boards.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import stats as sps

from lenbench.results.labels import BASELINE_PREFIX
from lenbench.metrics import decode_arrays as decode
from lenbench.metrics import get_metric, learned_min, worst_value
from lenbench.metrics import transform_array as transform

N_BOOT = 1000
BOOT_SEED = 1234
LEVEL = 0.95
#: The family-wise error rate of every table's set of comparisons (ranks, floors, claims).
ALPHA = 0.05
WITHIN = 0.10
#: Per-task overrides of a metric's `learned_min` (lenbench.metrics): {task: {metric: minimum}}.
TASK_LEARNED_MIN: dict[str, dict[str, float]] = {}
#: The baseline a lower-is-better metric must beat at 1× to count as learned.
LEARNED_BASELINE = "baseline:unigram"
CHANCE = "baseline:chance"
#: Learnability verdicts (`learnability`).
LEARNED, NOT_LEARNED, UNCERTAIN = "learned", "not learned", "uncertain"

STATS = ("in_dist", "past_train_mean", "max_ratio_within_10pct", "retention", "degradation")
#: Statistics without an interval (discrete).
POINT_ONLY = ("max_ratio_within_10pct",)


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


def _nanvar(x: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanvar(x, axis=axis, ddof=1)


@dataclasses.dataclass
class Resampler:
    """Shared resampling indices of one board (makes every comparison paired).

    Attributes:
        seed_idx: (B, K) index of the seed drawn into slot k of resample b (K = number of seeds);
            `lenbench compare --statistical` resamples seeds, the leaderboard does not.
        u: (B, K, N) uniforms; the sample drawn at position i for (b, k) out of n samples is
            floor(u · n): the same at every ratio and for every series with the same n.
    """

    seed_idx: np.ndarray
    u: np.ndarray

    @classmethod
    def make(cls, n_seeds: int, n_max: int, n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> Resampler:
        rng = np.random.default_rng(seed)
        seed_idx = rng.integers(0, n_seeds, size=(n_boot, n_seeds))  # (B, K)
        u = rng.random((n_boot, n_seeds, max(1, n_max)), dtype=np.float32)  # (B, K, N)
        return cls(seed_idx, u)

    def indices(self, n: int, cache: dict) -> np.ndarray:
        """(B, K, n) sample indices for series of n samples (cached per n)."""
        idx = cache.get(n)
        if idx is None:
            idx = cache[n] = (self.u[:, :, :n] * n).astype(np.intp).clip(0, n - 1)
        return idx


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


def _resampled(series: Series, s: int, r: int, res: Resampler, slot: int | slice, metric: str, cache: dict,
               raw: bool = False) -> np.ndarray | None:
    """Bootstrap replicates of (seed s, ratio r)'s value, its samples drawn with the indices of seed
    slot `slot`; `raw`: Σ num / Σ den before the metric's transform. None without sample scores."""
    dec = series.samples.get((s, r))
    if dec is None:
        return None
    num, den = dec
    idx = res.indices(len(num), cache)[:, slot]  # (B, [K,] n)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = num[idx].sum(-1) / den[idx].sum(-1)
    return ratio if raw else transform(metric, ratio)


def replicate_curves(series: Series, res: Resampler, metric: str, cache: dict) -> np.ndarray:
    """(B, R) replicates of the seed-mean curve, seeds and samples resampled (`lenbench compare`)."""
    B, K = res.seed_idx.shape
    R = series.value.shape[1]
    reps = np.full((B, K, R), np.nan)
    for r in range(R):
        for s in range(series.value.shape[0]):
            point = series.value[s, r]
            if np.isnan(point):
                continue
            vals = _resampled(series, s, r, res, slice(None), metric, cache)  # (B, K)
            reps[:, :, r] = np.where(res.seed_idx == s, point if vals is None else vals, reps[:, :, r])
    return _nanmean(reps, axis=1)  # (B, R)


def seed_curves(series: Series, res: Resampler, metric: str, cache: dict, raw: bool = False) -> np.ndarray:
    """(B, S, R) replicates of each seed's curve, its own samples resampled (seeds fixed); NaN
    where a (seed, ratio) is missing or has no sample scores. `raw`: Σ num / Σ den (nats for nll
    sums) instead of the metric's value."""
    S, R = series.value.shape
    out = np.full((res.u.shape[0], S, R), np.nan)
    for s in range(S):
        for r in range(R):
            vals = _resampled(series, s, r, res, s, metric, cache, raw)
            if vals is not None:
                out[:, s, r] = vals
            elif not raw and not np.isnan(series.value[s, r]) and not series.samples:
                out[:, s, r] = series.value[s, r]  # no sample scores anywhere: no sampling variance
    return out


def raw_curve(series: Series) -> np.ndarray:
    """(S, R) Σ num / Σ den of each (seed, ratio) with sample scores (nats for nll sums), else NaN."""
    out = np.full(series.value.shape, np.nan)
    for (s, r), (num, den) in series.samples.items():
        with np.errstate(divide="ignore", invalid="ignore"):
            out[s, r] = num.sum() / den.sum()
    return out


def curve_stats(curve: np.ndarray, ratios: np.ndarray, hib: bool, chance: np.ndarray | None,
                nats: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The statistics of curves.

    Args:
        curve: (..., R) the metric at each ratio (ascending ratios).
        ratios: (R,) the length ratios.
        hib: higher is better.
        chance: (R,) the chance level at each ratio (higher-is-better metrics), or None (0).
        nats: (..., R) the mean nll behind each value (metrics built from nll sums), or None:
            then ``degradation`` is NaN.

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
        degr = nan if nats is None or not (one.any() and past.any()) else \
            nats[..., past].mean(-1) - nats[..., np.argmax(one)]
    return {"in_dist": in_dist, "past_train_mean": past_mean, "max_ratio_within_10pct": max_ratio, "retention": ret,
            "degradation": degr}


# --- seed-level inference ----------------------------------------------------------------------


@dataclasses.dataclass
class SeedValues:
    """One statistic of one series, per seed.

    Attributes:
        theta: (S,) the statistic of each seed (NaN where the seed is missing).
        boot: (B, S) its bootstrap replicates over that seed's evaluation samples (NaN without
            sample scores).
    """

    theta: np.ndarray
    boot: np.ndarray

    def __sub__(self, other: SeedValues) -> SeedValues:
        """The paired per-seed difference (same seeds, same resampled samples); two equal
        infinities (failed everywhere on both) differ by 0."""
        with np.errstate(invalid="ignore"):
            theta = self.theta - other.theta
            boot = self.boot - other.boot
        same = np.isinf(self.theta) & (self.theta == other.theta)
        theta = np.where(same, 0.0, theta)
        boot = np.where(np.isinf(self.boot) & (self.boot == other.boot), 0.0, boot)
        return SeedValues(theta, boot)

    def __neg__(self) -> SeedValues:
        return SeedValues(-self.theta, -self.boot)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A seed-level estimate: mean over K seeds, its standard error and degrees of freedom
    (K − 1; infinite with one seed, where the error is sampling alone)."""

    mean: float
    se: float
    df: float
    k: int

    def quantile(self, level: float = LEVEL) -> float:
        q = 1 - (1 - level) / 2
        return float(sps.norm.ppf(q)) if math.isinf(self.df) else float(sps.t.ppf(q, self.df))

    def interval(self, level: float = LEVEL, center: float | None = None) -> tuple[float, float]:
        c = self.mean if center is None else center
        if math.isnan(self.se) or math.isnan(c):
            return math.nan, math.nan
        if math.isinf(c):
            return c, c
        h = self.quantile(level) * self.se
        return c - h, c + h

    def p_two_sided(self) -> float:
        """P-value of "the mean is 0", two-sided."""
        if math.isnan(self.mean):
            return 1.0
        if math.isinf(self.mean):
            return 0.0
        if self.se == 0 or math.isnan(self.se):
            return 1.0 if self.mean == 0 or math.isnan(self.se) else 0.0
        t = abs(self.mean) / self.se
        return float(2 * (sps.norm.sf(t) if math.isinf(self.df) else sps.t.sf(t, self.df)))

    def p_greater(self) -> float:
        """P-value of "the mean is ≤ 0", one-sided."""
        if math.isnan(self.mean):
            return 1.0
        if math.isinf(self.mean):
            return 0.0 if self.mean > 0 else 1.0
        if self.se == 0 or math.isnan(self.se):
            return 0.0 if self.mean > 0 and self.se == 0 else 1.0
        t = self.mean / self.se
        return float(sps.norm.sf(t) if math.isinf(self.df) else sps.t.sf(t, self.df))


def estimate(values: SeedValues) -> Estimate:
    """The seed-level estimate of a statistic: ``se² = max(s²/K, ΣV_s/K²)`` over the K seeds
    present (module docstring). Any infinite seed value makes the mean infinite (a failed length
    on one side) with no error, unless the infinities disagree in sign (then NaN)."""
    present = ~np.isnan(values.theta)
    k = int(present.sum())
    if k == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    theta = values.theta[present]
    if not np.isfinite(theta).all():
        inf = theta[np.isinf(theta)]
        mean = float(inf[0]) if (inf == inf[0]).all() else math.nan
        return Estimate(mean, 0.0, math.inf if k == 1 else k - 1.0, k)
    boot = values.boot[:, present]
    finite = np.where(np.isfinite(boot), boot, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        spread = np.nanmax(finite, axis=0) - np.nanmin(finite, axis=0)
    within = np.where(spread == 0, 0.0, _nanvar(finite, axis=0))  # (K,); exactly 0 for constant replicates
    sampled = np.isfinite(within)
    floor = float(within[sampled].sum()) / k**2 if sampled.all() else math.nan
    mean = float(theta.mean())
    if k >= 2:
        between = 0.0 if np.ptp(theta) == 0 else float(theta.var(ddof=1)) / k
        se2 = between if math.isnan(floor) else max(between, floor)
        return Estimate(mean, math.sqrt(se2), k - 1.0, k)
    # one seed without sample scores (results from before schema 2): nothing measures its error, so
    # it is compared by its point value (se 0), as those results always were; its tables print no interval
    return Estimate(mean, math.sqrt(floor) if not math.isnan(floor) else 0.0, math.inf, 1)


def holm(pvalues: list[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down rejections of a family of p-values at family-wise level `alpha`."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    reject = [False] * len(pvalues)
    m = len(pvalues)
    for step, i in enumerate(order):
        if pvalues[i] > alpha / (m - step):
            break
        reject[i] = True
    return reject


def support_ranks(goodness: Mapping, keys: list, alpha: float = ALPHA) -> dict:
    """rank = 1 + the number of entries better with support (module docstring).

    Args:
        goodness: {key: `SeedValues` of the ranking statistic, oriented so higher is better}.
        keys: the entries of one table; every pair of them is one test of the family.
    """
    pairs = [(i, j) for a, i in enumerate(keys) for j in keys[a + 1:]]
    tests = [estimate(goodness[j] - goodness[i]) for i, j in pairs]
    rejected = holm([t.p_two_sided() for t in tests], alpha)
    better = dict.fromkeys(keys, 0)
    for (i, j), t, rej in zip(pairs, tests, rejected, strict=True):
        if rej:
            better[i if t.mean > 0 else j] += 1
    return {k: 1 + better[k] for k in keys}


def learned_threshold(task: str, metric: str) -> float | None:
    return TASK_LEARNED_MIN.get(task, {}).get(metric, learned_min(metric))


def verdict(lo: float, hi: float, threshold: float) -> str:
    """Learned when [lo, hi] lies at or above `threshold`, not learned when below it, else uncertain."""
    if math.isnan(lo) or math.isnan(hi):
        return UNCERTAIN
    if lo >= threshold:
        return LEARNED
    return NOT_LEARNED if hi < threshold else UNCERTAIN


def ci_method(n_seeds: int, has_samples: bool) -> str:
    if n_seeds > 1:
        return "t over seeds, sampling-variance floor" if has_samples else "t over seeds"
    return "sampling only (1 seed)" if has_samples else "none (1 seed, no sample scores)"


def _bounds(metric: str) -> tuple[float, float]:
    """The range a metric's value can take (an interval is clipped to it)."""
    try:
        sums = get_metric(metric).sums
    except Exception:  # an unregistered metric: no known range
        sums = None
    return (0.0, 1.0) if sums in ("tokens", "examples") else (-math.inf, math.inf)


def _clip(lo: float, hi: float, bounds: tuple[float, float]) -> tuple[float, float]:
    if math.isnan(lo):
        return lo, hi
    return max(lo, bounds[0]), min(hi, bounds[1])


@dataclasses.dataclass
class Board:
    """The statistics of one board: entries, curves, and per entry the seed values of every
    statistic (`seed_stats`: {key: {stat: SeedValues}}) for tests the tables do not print
    (paper claims, `lenbench.report.claims`)."""

    entries: pd.DataFrame
    curves: pd.DataFrame
    seed_stats: dict


def board_statistics(mdf: pd.DataFrame, task: str, metric: str, hib: bool, *, n_boot: int = N_BOOT,
                     seed: int = BOOT_SEED, learnability: Mapping[tuple[str, str], str] | None = None,
                     ) -> Board:
    """Statistics of one board (tidy rows of one task, train_len and metric; columns of
    `lenbench.results.schema.COLUMNS`).

    Args:
        learnability: {(encoding, variant): verdict} to use instead of this metric's own (a
            secondary metric's board ranks the entries its primary metric learned).

    Returns:
        a `Board` whose entries hold one row per series: encoding, variant, kind ("model",
        "variant", "baseline"), n_seeds, n_samples, ci_method, for each of `STATS` the point value
        and ``<stat>_ci_low`` / ``<stat>_ci_high`` (NaN for `POINT_ONLY`), n_failed, complete,
        learnability, learned_ci_low / learned_ci_high (the interval the verdict used),
        not_learned (verdict is not "learned"), floor_baseline, margin (over it, better
        positive) with margin_ci_low / margin_ci_high, above_floor, rank (main table),
        variant_rank (the encoding's variant table), NaN where unranked; and curves: one row per
        series and ratio: encoding, variant, ratio, mean, ci_low, ci_high, all_failed.
    """
    seeds = sorted(mdf["seed"].unique())
    ratios = np.array(sorted(mdf["ratio"].unique()), dtype=float)
    series = board_series(mdf, metric, hib, seeds, list(ratios))
    n_max = max([s.n_samples for s in series.values()] + [1])
    res = Resampler.make(len(seeds), n_max, n_boot, seed)
    bounds = _bounds(metric)
    try:
        nll_sums = get_metric(metric).sums == "nll"
    except Exception:  # an unregistered metric
        nll_sums = False
    cache: dict = {}
    curves, per_seed, points = [], {}, {}
    for key, s in series.items():
        seed_boot = seed_curves(s, res, metric, cache)  # (B, S, R)
        points[key] = _nanmean(s.value, axis=0)  # (R,) the seed-mean curve
        per_seed[key] = (s.value, seed_boot,
                         (raw_curve(s), seed_curves(s, res, metric, cache, raw=True)) if nll_sums else (None, None))
        rows = mdf[(mdf["encoding"] == key[0]) & (mdf["variant"] == key[1])]
        for r, ratio in enumerate(ratios):
            est = estimate(SeedValues(s.value[:, r], seed_boot[:, :, r]))
            lo, hi = _clip(*est.interval(center=float(points[key][r])), bounds) \
                if (s.samples or len(seeds) > 1) else (math.nan, math.nan)
            at = rows[np.isclose(rows["ratio"], ratio)]
            curves.append({"encoding": key[0], "variant": key[1], "ratio": float(ratio), "mean": float(points[key][r]),
                           "ci_low": lo, "ci_high": hi, "all_failed": bool(len(at)) and bool((at["status"] != "ok").all())})
    chance = points.get((CHANCE, "none")) if hib else None
    entries, seed_stats = [], {}
    for key, s in series.items():
        value, seed_boot, (raw, raw_boot) = per_seed[key]
        point = curve_stats(points[key], ratios, hib, chance)
        theta = curve_stats(value, ratios, hib, chance, raw)  # {stat: (S,)}
        boot = curve_stats(seed_boot, ratios, hib, chance, raw_boot)  # {stat: (B, S)}
        stats_k = {stat: SeedValues(theta[stat], boot[stat]) for stat in STATS}
        seed_stats[key] = stats_k
        n_seeds = int(s.present.any(axis=1).sum())
        has_interval = n_seeds > 1 or bool(s.samples)
        rows = mdf[(mdf["encoding"] == key[0]) & (mdf["variant"] == key[1])]
        entry = {"encoding": key[0], "variant": key[1],
                 "kind": "baseline" if is_baseline(key[0]) else ("model" if key[1] == "none" else "variant"),
                 "n_seeds": n_seeds, "n_samples": int(s.n_samples), "ci_method": ci_method(n_seeds, bool(s.samples)),
                 "n_failed": float(((rows["status"] != "ok") & (rows["ratio"] > 1.0 + 1e-9)).sum()),
                 "complete": bool(s.present.all())}
        for stat in STATS:
            est = estimate(stats_k[stat])
            center = float(np.nanmean(theta[stat])) if stat == "degradation" and k_present(theta[stat]) else \
                float(point[stat])
            lo, hi = (math.nan, math.nan) if stat in POINT_ONLY or not has_interval else est.interval(center=center)
            if stat in ("in_dist", "past_train_mean"):
                lo, hi = _clip(lo, hi, bounds)
            entry.update({stat: center, f"{stat}_ci_low": lo, f"{stat}_ci_high": hi})
        entries.append(entry)
    by_key = {(e["encoding"], e["variant"]): e for e in entries}
    _learnability(by_key, seed_stats, task, metric, hib, learnability)
    _floor(by_key, seed_stats, metric, hib)
    for e in entries:
        e["rank"] = math.nan
        e["variant_rank"] = math.nan
    main = [k for k, e in by_key.items() if e["kind"] == "model" and rankable(e)]
    goodness = {k: (v["past_train_mean"] if hib else -v["past_train_mean"]) for k, v in seed_stats.items()}
    for k, rank in support_ranks(goodness, main).items():
        by_key[k]["rank"] = float(rank)
    for encoding in dict.fromkeys(e["encoding"] for e in entries if e["kind"] == "variant"):
        table = [k for k, e in by_key.items() if k[0] == encoding and e["kind"] != "baseline" and rankable(e)]
        for k, rank in support_ranks(goodness, table).items():
            by_key[k]["variant_rank"] = float(rank)
    return Board(pd.DataFrame(entries), pd.DataFrame(curves), seed_stats)


def k_present(x: np.ndarray) -> bool:
    return bool((~np.isnan(x)).any())


def rankable(entry: Mapping) -> bool:
    """Learned, complete and above the floor: an entry the tables rank."""
    return entry["learnability"] == LEARNED and bool(entry["complete"]) and bool(entry["above_floor"])


def _learnability(by_key: dict, seed_stats: dict, task: str, metric: str, hib: bool,
                  given: Mapping[tuple[str, str], str] | None) -> None:
    """Set each entry's learnability, the interval it used, and not_learned (module docstring)."""
    threshold = learned_threshold(task, metric)
    ref = seed_stats.get((LEARNED_BASELINE, "none"))
    for key, e in by_key.items():
        e["learned_ci_low"] = e["learned_ci_high"] = math.nan
        if e["kind"] == "baseline":
            e["learnability"] = ""
        elif given is not None:
            e["learnability"] = given.get(key, UNCERTAIN)
        elif hib:
            lo, hi = estimate(seed_stats[key]["in_dist"]).interval(center=e["in_dist"])
            e["learnability"] = LEARNED if threshold is None else verdict(lo, hi, threshold)
            e["learned_ci_low"], e["learned_ci_high"] = lo, hi
        elif ref is None:  # no unigram rows (old results): nothing to hold a perplexity to
            e["learnability"] = LEARNED
        else:  # lower is better: the paired difference to the unigram baseline at 1× must be < 0
            est = estimate(seed_stats[key]["in_dist"] - ref["in_dist"])
            lo, hi = est.interval()
            e["learned_ci_low"], e["learned_ci_high"] = lo, hi
            e["learnability"] = verdict(-hi, -lo, 0.0)
        e["not_learned"] = e["learnability"] != LEARNED if e["kind"] != "baseline" else False


#: The floor's name on a board without baseline rows: the metric's worst score (0 for accuracies).
WORST_SCORE = "worst score"


def _floor(by_key: dict, seed_stats: dict, metric: str, hib: bool) -> None:
    """Each entry's margin over the board's floor past the training length (better positive) with
    its 95 % interval, and whether that interval lies above 0. The floor is the best trivial
    baseline; on a board without baseline rows, the metric's worst score where it is finite."""
    baselines = [k for k, e in by_key.items() if e["kind"] == "baseline" and not math.isnan(e["past_train_mean"])]
    sign = 1.0 if hib else -1.0
    best = max(baselines, key=lambda k: sign * by_key[k]["past_train_mean"], default=None)
    worst = worst_value(metric, hib)
    for key, e in by_key.items():
        e.update(floor_baseline="", margin=math.nan, margin_ci_low=math.nan, margin_ci_high=math.nan,
                 above_floor=e["kind"] != "baseline")
        if e["kind"] == "baseline" or (best is None and not math.isfinite(worst)):
            continue
        own = seed_stats[key]["past_train_mean"]
        floor = seed_stats[best]["past_train_mean"] if best is not None else \
            SeedValues(np.where(np.isnan(own.theta), np.nan, worst), np.where(np.isnan(own.boot), np.nan, worst))
        diff = own - floor
        est = estimate(diff if hib else -diff)
        lo, hi = est.interval()
        e.update(floor_baseline=best[0] if best is not None else WORST_SCORE, margin=est.mean, margin_ci_low=lo,
                 margin_ci_high=hi, above_floor=bool(lo > 0))


def seed_learnability(mdf: pd.DataFrame, task: str, metric: str, hib: bool, *, n_boot: int = N_BOOT,
                      seed: int = BOOT_SEED) -> pd.DataFrame:
    """Per seed, each trained entry's 1× score, its sampling interval (percentile bootstrap of that
    seed's samples) and the verdict against the learned threshold (for perplexity: the paired
    difference to the unigram baseline).

    Returns:
        one row per (encoding, variant, seed): encoding, variant, seed, in_dist, ci_low, ci_high,
        threshold (NaN for perplexity: the baseline), learnability.
    """
    seeds = sorted(mdf["seed"].unique())
    ratios = np.array(sorted(mdf["ratio"].unique()), dtype=float)
    one = int(np.argmax(np.isclose(ratios, 1.0)))
    series = board_series(mdf, metric, hib, seeds, list(ratios))
    n_max = max([s.n_samples for s in series.values()] + [1])
    res = Resampler.make(len(seeds), n_max, n_boot, seed)
    cache: dict = {}
    threshold = learned_threshold(task, metric)
    boots = {k: seed_curves(s, res, metric, cache)[:, :, one] for k, s in series.items()}  # (B, S)
    ref = series.get((LEARNED_BASELINE, "none"))
    rows = []
    for key, s in series.items():
        if is_baseline(key[0]):
            continue
        for i, sd in enumerate(seeds):
            v = s.value[i, one]
            if np.isnan(v):
                continue
            lo, hi = interval(boots[key][:, i])
            if hib or ref is None:
                thr = threshold if hib else math.nan
                word = LEARNED if (threshold is None or not hib) else verdict(lo, hi, threshold)
            else:
                thr = math.nan
                dlo, dhi = interval(boots[key][:, i] - boots[(LEARNED_BASELINE, "none")][:, i])
                word = verdict(-dhi, -dlo, 0.0)
            rows.append({"encoding": key[0], "variant": key[1], "seed": int(sd), "in_dist": float(v),
                         "ci_low": lo, "ci_high": hi, "threshold": thr, "learnability": word})
    return pd.DataFrame(rows, columns=["encoding", "variant", "seed", "in_dist", "ci_low", "ci_high", "threshold",
                                       "learnability"])


def overall_ranks(per_task: pd.DataFrame) -> pd.DataFrame:
    """The overall ranking of trained models (module docstring).

    Returns:
        one row per encoding (variant "none"): encoding, variant, mean_rank, n_tasks (boards
        counted: learned, complete, on a board that ranked anything), n_at_floor (of those, at the
        floor: counted as the board's last place), n_uncertain, n_not_learned, rank (competition
        ranking by mean_rank; NaN when no board counted).
    """
    models = per_task[per_task["kind"] == "model"]
    boards = per_task.groupby(["task", "train_len"], sort=False)
    last = {k: 1.0 + float(g.loc[g["kind"] == "model", "rank"].notna().sum()) for k, g in boards}
    rows = []
    for encoding, g in models.groupby("encoding", sort=False):
        scores, at_floor = [], 0
        for r in g.to_dict("records"):
            place = (r["task"], r["train_len"])
            if r["learnability"] != LEARNED or not r["complete"] or last[place] == 1.0:
                continue
            if math.isnan(r["rank"]):
                scores.append(last[place])
                at_floor += 1
            else:
                scores.append(float(r["rank"]))
        rows.append({"encoding": encoding, "variant": "none", "mean_rank": float(np.mean(scores)) if scores else math.nan,
                     "n_tasks": len(scores), "n_at_floor": at_floor,
                     "n_uncertain": int((g["learnability"] == UNCERTAIN).sum()),
                     "n_not_learned": int((g["learnability"] == NOT_LEARNED).sum())})
    means = [r["mean_rank"] for r in rows if r["n_tasks"]]
    for r in rows:
        r["rank"] = float(1 + sum(m < r["mean_rank"] - 1e-12 for m in means)) if r["n_tasks"] else math.nan
    return pd.DataFrame(rows, columns=["encoding", "variant", "mean_rank", "n_tasks", "n_at_floor", "n_uncertain",
                                       "n_not_learned", "rank"])
