"""The leaderboard's statistics of each board: its series' statistics, learnability, floors, and the board
assembled with its intervals and ranks.

The report path is rows → statistics (this module) → tables (`lenbench.report.tables`) → figures
(`lenbench.report.plots`) → page (`lenbench.report.page`). Everything here works on one *board*:
the rows of one task, training length and metric, every (encoding, variant) series of it, scored
on the same evaluation samples (same generator seed, `lenbench.evaluate.eval_generator`).

Intervals and the shared resampling are `lenbench.report.intervals`'s; ranks within a table (paired,
Holm-corrected) are `lenbench.report.ranks`'s.

**Statistics of a series** (`STATS`; a failed length scores the metric's worst value: 0 for
accuracies, +inf for perplexity): ``in_dist`` (ratio 1), ``past_train_mean`` (mean over ratios >
1), ``past_train_area`` (the area under the score-vs-length curve past the training length, per
doubling of length: the trapezoid rule over log2(ratio) from 1× to the board's longest ratio, the
1× end valued at the first ratio past it so the in-distribution score never enters, divided by
log2 of the longest ratio; a weighted mean of the scores past 1× in which each doubling of length
weighs the same, however densely it was evaluated — DeepMind's mean over unseen lengths
(Delétang et al. 2023) on a log-length axis), ``retention`` (mean over ratios > 1 of (score −
chance) / (score₁ₓ − chance), chance from the ``baseline:chance`` rows; score₁ₓ / score for
lower-is-better metrics), ``degradation`` (metrics built from nll sums: the area past train of the
nll − the nll at 1×, in nats, on the same scored samples; NaN otherwise) and
``effective_length`` (RULER's effective length, Hsieh et al. 2024, as a ratio of the training
length: the longest evaluated ratio up to which every score keeps at least 90 % of the entry's
own 1× score (for lower-is-better metrics at most 110 % of it) and stays above the board's best
trivial baseline at that ratio; 1 when the first length past training already fails; NaN when
the 1× score itself is not above the baseline; discrete, so it has no interval).

**Floors use `AREA`**, the area past training: unlike the plain mean, it does not let the densely
evaluated first doubling outweigh the rest, and unlike the effective length it is continuous, so
the paired test over seeds can judge it. **Ranks use the statistic the metric declares**
(`lenbench.metrics.Metric.ranks_on`, `rank_statistic`): the area, or for perplexity and bits per
byte the degradation, since their level past training mostly restates the fit at 1× (a model that
ignores everything past its training window keeps its level and degrades by 0; one that uses the
longer context degrades by less than 0). The floor still gates on the level: an lm entry is ranked
only where its perplexity past training beats the unigram baseline's.

**Learnability** (`learnability`): learned when the interval of in_dist lies at or above the
metric's `learned_min` (per-task overrides in `TASK_LEARNED_MIN`), not learned when it lies
below, uncertain otherwise; for perplexity, the paired interval of the difference to
``baseline:unigram`` at 1× decides the same way. The same verdict is given per seed from that
seed's sampling interval (`seed_learnability`). Only learned entries are ranked.

**Complete**: an entry missing a (seed, ratio) of the board is incomplete: shown, never ranked.

**Floor**: the best trivial baseline of the board (the ``baseline:*`` series with the best area
past train, `AREA`; on a board without baseline rows, the metric's worst score where it is finite:
0 for accuracies). An entry is above the floor when the 95 % interval of its paired margin (of the
area past train) over that baseline (the seed differences, as above) lies above 0; an entry at the
floor is shown with its margin and never ranked. Like learnability, this is a gate per entry, not a
comparison between entries, so it is not corrected for multiplicity.

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

from lenbench.metrics import find_metric, get_metric, learned_min, worst_value
from lenbench.report.intervals import (
    BOOT_SEED,
    N_BOOT,
    Resampler,
    SeedValues,
    board_series,
    ci_method,
    clip_interval,
    estimate,
    interval,
    metric_bounds,
    nanmean,
    raw_curve,
    seed_curves,
)
from lenbench.report.ranks import support_ranks
from lenbench.results.labels import BASELINE_PREFIX

WITHIN = 0.10
#: Per-task overrides of a metric's `learned_min` (lenbench.metrics): {task: {metric: minimum}}.
TASK_LEARNED_MIN: dict[str, dict[str, float]] = {}
#: The baseline a lower-is-better metric must beat at 1× to count as learned.
LEARNED_BASELINE = "baseline:unigram"
CHANCE = "baseline:chance"
#: Learnability verdicts (`learnability`).
LEARNED, NOT_LEARNED, UNCERTAIN = "learned", "not learned", "uncertain"

STATS = ("in_dist", "past_train_mean", "past_train_area", "effective_length", "retention", "degradation")
#: Statistics without an interval (discrete).
POINT_ONLY = ("effective_length",)
#: The area past train: the statistic every floor margin is taken on, and every table ranks by unless
#: its metric declares otherwise (module docstring).
AREA = "past_train_area"
#: What a metric's `ranks_on` (`lenbench.metrics.Metric`) names: the statistic and whether higher is better
#: (None: the metric's own direction).
RANKING = {"area": (AREA, None), "degradation": ("degradation", False)}


def rank_statistic(metric: str) -> str:
    """The statistic `metric`'s boards rank by (`RANKING`; the area for an unregistered metric)."""
    found = find_metric(metric)
    return RANKING[found.ranks_on if found is not None else "area"][0]


def is_baseline(encoding: str) -> bool:
    return encoding.startswith(BASELINE_PREFIX)


def past_area_weights(ratios: np.ndarray) -> np.ndarray:
    """The weights of ``past_train_area``: (R,) summing to 1 over the ratios past 1× (0 elsewhere).

    The trapezoid rule over log2(ratio) from 1× to the longest ratio, the 1× end valued at the
    first ratio past it, divided by log2 of the longest ratio. On 1, 2, 4, 8, 16: 0.375, 0.25, 0.25,
    0.125 for 2×, 4×, 8×, 16×."""
    past = np.flatnonzero(ratios > 1.0 + 1e-9)
    w = np.zeros(len(ratios))
    if not len(past):
        return w
    x = np.log2(np.concatenate([[1.0], ratios[past]]))  # (P+1,) the 1× end, then each past ratio
    seg = np.diff(x)  # (P,) each segment's width in doublings
    w[past] += seg / 2  # every segment's right end
    w[past[:-1]] += seg[1:] / 2  # every segment's left end but the first's
    w[past[0]] += seg[0] / 2  # the first segment's left end (1×) takes the first past score
    return w / x[-1]


def curve_stats(curve: np.ndarray, ratios: np.ndarray, hib: bool, chance: np.ndarray | None,
                nats: np.ndarray | None = None, floor: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The statistics of curves.

    Args:
        curve: (..., R) the metric at each ratio (ascending ratios).
        ratios: (R,) the length ratios.
        hib: higher is better.
        chance: (R,) the chance level at each ratio (higher-is-better metrics), or None (0).
        nats: (..., R) the mean nll behind each value (metrics built from nll sums), or None:
            then ``degradation`` is NaN.
        floor: (R,) the best trivial baseline's score at each ratio, which ``effective_length``
            must stay above (None: no such condition).

    Returns:
        {stat: (...)} for every name in `STATS`.
    """
    one = np.isclose(ratios, 1.0)
    past = ratios > 1.0 + 1e-9
    shape = curve.shape[:-1]
    nan = np.full(shape, np.nan)
    in_dist = curve[..., np.argmax(one)] if one.any() else nan
    sign = 1.0 if hib else -1.0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        past_mean = curve[..., past].mean(-1) if past.any() else nan
        weights = past_area_weights(ratios)
        area = (curve[..., past] * weights[past]).sum(-1) if past.any() else nan
        bound = in_dist * (1 - WITHIN) if hib else in_dist * (1 + WITHIN)
        ok = (curve[..., past] >= bound[..., None]) if hib else (curve[..., past] <= bound[..., None])
        above = np.ones(len(ratios), bool) if floor is None else sign * curve > sign * np.asarray(floor)
        ok &= above[..., past]
        held = np.logical_and.accumulate(ok, axis=-1) if past.any() else np.zeros((*shape, 0), bool)
        n_held = held.sum(-1)
        past_ratios = np.concatenate([[1.0], ratios[past]])
        base_ok = above[..., np.argmax(one)] if one.any() else np.zeros(shape, bool)
        effective = np.where(np.isnan(in_dist) | ~base_ok, np.nan, past_ratios[n_held])
        if hib:
            c = np.zeros(len(ratios)) if chance is None else np.nan_to_num(chance)
            denom = in_dist - c[np.argmax(one)] if one.any() else nan
            ret = ((curve[..., past] - c[past]) / denom[..., None]).mean(-1) if past.any() else nan
            ret = np.where(denom > 0, ret, np.nan)
        else:
            ret = (in_dist[..., None] / curve[..., past]).mean(-1) if past.any() else nan
        degr = nan if nats is None or not (one.any() and past.any()) else \
            (nats[..., past] * weights[past]).sum(-1) - nats[..., np.argmax(one)]
    return {"in_dist": in_dist, "past_train_mean": past_mean, "past_train_area": area, "effective_length": effective,
            "retention": ret, "degradation": degr}


def best_baseline_curve(points: Mapping[tuple[str, str], np.ndarray], hib: bool) -> np.ndarray | None:
    """(R,) the best of the baselines' seed-mean curves at each ratio (None without baselines)."""
    if not points:
        return None
    stacked = np.stack(list(points.values()))  # (K, R)
    with warnings.catch_warnings():  # a ratio no baseline measured stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmax(stacked, axis=0) if hib else np.nanmin(stacked, axis=0)


def learned_threshold(task: str, metric: str) -> float | None:
    return TASK_LEARNED_MIN.get(task, {}).get(metric, learned_min(metric))


def verdict(lo: float, hi: float, threshold: float) -> str:
    """Learned when [lo, hi] lies at or above `threshold`, not learned when below it, else uncertain."""
    if math.isnan(lo) or math.isnan(hi):
        return UNCERTAIN
    if lo >= threshold:
        return LEARNED
    return NOT_LEARNED if hi < threshold else UNCERTAIN


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
        variant_rank (the encoding's variant table), NaN where unranked, ranked_on (the statistic
        the ranks used: `rank_statistic`, or the area where an entry has no degradation); and curves: one row per
        series and ratio: encoding, variant, ratio, mean, ci_low, ci_high, all_failed.
    """
    seeds = sorted(mdf["seed"].unique())
    ratios = np.array(sorted(mdf["ratio"].unique()), dtype=float)
    series = board_series(mdf, metric, hib, seeds, list(ratios))
    n_max = max([s.n_samples for s in series.values()] + [1])
    res = Resampler.make(len(seeds), n_max, n_boot, seed)
    bounds = metric_bounds(metric)
    try:
        nll_sums = get_metric(metric).sums == "nll"
    except Exception:  # an unregistered metric
        nll_sums = False
    cache: dict = {}
    curves, per_seed, points = [], {}, {}
    for key, s in series.items():
        seed_boot = seed_curves(s, res, metric, cache)  # (B, S, R)
        points[key] = nanmean(s.value, axis=0)  # (R,) the seed-mean curve
        per_seed[key] = (s.value, seed_boot,
                         (raw_curve(s), seed_curves(s, res, metric, cache, raw=True)) if nll_sums else (None, None))
        rows = mdf[(mdf["encoding"] == key[0]) & (mdf["variant"] == key[1])]
        for r, ratio in enumerate(ratios):
            est = estimate(SeedValues(s.value[:, r], seed_boot[:, :, r]))
            lo, hi = clip_interval(*est.interval(center=float(points[key][r])), bounds) \
                if (s.samples or len(seeds) > 1) else (math.nan, math.nan)
            at = rows[np.isclose(rows["ratio"], ratio)]
            curves.append({"encoding": key[0], "variant": key[1], "ratio": float(ratio), "mean": float(points[key][r]),
                           "ci_low": lo, "ci_high": hi, "all_failed": bool(len(at)) and bool((at["status"] != "ok").all())})
    chance = points.get((CHANCE, "none")) if hib else None
    floor_curve = best_baseline_curve({k: v for k, v in points.items() if is_baseline(k[0])}, hib)
    entries, seed_stats = [], {}
    for key, s in series.items():
        value, seed_boot, (raw, raw_boot) = per_seed[key]
        floor = None if is_baseline(key[0]) else floor_curve
        point = curve_stats(points[key], ratios, hib, chance, floor=floor)
        theta = curve_stats(value, ratios, hib, chance, raw, floor=floor)  # {stat: (S,)}
        boot = curve_stats(seed_boot, ratios, hib, chance, raw_boot, floor=floor)  # {stat: (B, S)}
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
            if stat in ("in_dist", "past_train_mean", "past_train_area"):
                lo, hi = clip_interval(lo, hi, bounds)
            entry.update({stat: center, f"{stat}_ci_low": lo, f"{stat}_ci_high": hi})
        entries.append(entry)
    by_key = {(e["encoding"], e["variant"]): e for e in entries}
    _learnability(by_key, seed_stats, task, metric, hib, learnability)
    _floor(by_key, seed_stats, metric, hib)
    for e in entries:
        e["rank"] = math.nan
        e["variant_rank"] = math.nan
    main = [k for k, e in by_key.items() if e["kind"] == "model" and rankable(e)]
    ranked = rank_statistic(metric)
    if ranked != AREA and any(math.isnan(by_key[k][ranked]) for k in by_key if by_key[k]["kind"] != "baseline"):
        ranked = AREA  # rows without per-sample nll (older results): no degradation to rank by
    for e in entries:
        e["ranked_on"] = ranked
    up = hib if (declared := dict(RANKING.values())[ranked]) is None else declared  # the declared direction
    goodness = {k: (v[ranked] if up else -v[ranked]) for k, v in seed_stats.items()}
    for k, rank in support_ranks(goodness, main).items():
        by_key[k]["rank"] = float(rank)
    for encoding in dict.fromkeys(e["encoding"] for e in entries if e["kind"] == "variant"):
        table = [k for k, e in by_key.items() if k[0] == encoding and e["kind"] != "baseline" and rankable(e)]
        for k, rank in support_ranks(goodness, table).items():
            by_key[k]["variant_rank"] = float(rank)
    return Board(pd.DataFrame(entries), pd.DataFrame(curves), seed_stats)


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
    baselines = [k for k, e in by_key.items() if e["kind"] == "baseline" and not math.isnan(e[AREA])]
    sign = 1.0 if hib else -1.0
    best = max(baselines, key=lambda k: sign * by_key[k][AREA], default=None)
    worst = worst_value(metric, hib)
    for key, e in by_key.items():
        e.update(floor_baseline="", margin=math.nan, margin_ci_low=math.nan, margin_ci_high=math.nan,
                 above_floor=e["kind"] != "baseline")
        if e["kind"] == "baseline" or (best is None and not math.isfinite(worst)):
            continue
        own = seed_stats[key][AREA]
        floor = seed_stats[best][AREA] if best is not None else \
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


def k_present(x: np.ndarray) -> bool:
    return bool((~np.isnan(x)).any())


def rankable(entry: Mapping) -> bool:
    """Learned, complete and above the floor: an entry the tables rank."""
    return entry["learnability"] == LEARNED and bool(entry["complete"]) and bool(entry["above_floor"])


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
