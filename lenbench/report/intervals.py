"""Seed-level intervals of the leaderboard's statistics and the board's shared resampling of its samples.

Every statistic of a board (`lenbench.report.stats`) gets its 95 % interval here, and every paired
comparison (`lenbench.report.ranks`, `lenbench.compare.stats`) reads the same resamples.

**The unit of replication is the training seed.** Every statistic (`lenbench.report.stats`) is computed per seed
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
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats as sps

from lenbench.metrics import decode_arrays as decode
from lenbench.metrics import find_metric, worst_value
from lenbench.metrics import transform_array as transform

N_BOOT = 1000
BOOT_SEED = 1234
LEVEL = 0.95


def interval(boot: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates (the outer order statistics, robust to ±inf)."""
    boot = boot[~np.isnan(boot)]
    if len(boot) == 0:
        return math.nan, math.nan
    a = (1 - level) / 2
    return float(np.quantile(boot, a, method="lower")), float(np.quantile(boot, 1 - a, method="higher"))


def nanmean(x: np.ndarray, axis: int) -> np.ndarray:
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
    return nanmean(reps, axis=1)  # (B, R)


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


def ci_method(n_seeds: int, has_samples: bool) -> str:
    if n_seeds > 1:
        return "t over seeds, sampling-variance floor" if has_samples else "t over seeds"
    return "sampling only (1 seed)" if has_samples else "none (1 seed, no sample scores)"


def metric_bounds(metric: str) -> tuple[float, float]:
    """The range a metric's value can take (an interval is clipped to it)."""
    facts = find_metric(metric)  # an unregistered metric: no known range
    return facts.bounds if facts is not None and facts.bounds is not None else (-math.inf, math.inf)


def clip_interval(lo: float, hi: float, bounds: tuple[float, float]) -> tuple[float, float]:
    if math.isnan(lo):
        return lo, hi
    return max(lo, bounds[0]), min(hi, bounds[1])
