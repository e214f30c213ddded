"""The coverage of the leaderboard's 95 % intervals, measured by simulation with known truth.

Each simulated entry has K seeds; seed s's true accuracy p_s is drawn from a Beta distribution with
mean μ and standard deviation σ (the seed-to-seed spread of training), and the seed scores n
Bernoulli(p_s) evaluation samples. The estimand is μ. Three intervals of the seed-mean accuracy:

- ``percentile bootstrap``: the two-stage percentile bootstrap the board used before (draw K seeds
  with replacement, then each drawn seed's n samples with replacement; 2.5 / 97.5 % quantiles);
- ``t over seeds``: mean ± t(K − 1) · s / √K of the K seed accuracies;
- ``lenbench``: `lenbench.report.intervals.estimate`, the t interval with the sampling-variance floor
  se² = max(s²/K, Σ V_s / K²), V_s from a bootstrap of seed s's samples (what the board uses).

``difference`` rows: two entries scored on the same samples (each of the second's wrong answers is
made right with probability `delta`), the paired difference's interval by `estimate`, truth
(1 − μ)·delta: the test the ranks and claims use.

Usage: python studies/statistics/coverage.py [--reps 1000] [--boot 1000] [--out studies/statistics]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from lenbench.report.intervals import SeedValues, estimate

KS = (3, 5)
SDS = (0.02, 0.05, 0.1, 0.2)
MEANS = (0.1, 0.5, 0.9, 0.95)
N = 64


def beta_params(mean: float, sd: float) -> tuple[float, float] | None:
    """Beta(a, b) with the given mean and SD, None where no Beta has them."""
    var = sd * sd
    if var >= mean * (1 - mean):
        return None
    common = mean * (1 - mean) / var - 1
    return mean * common, (1 - mean) * common


def shape(mean: float, sd: float) -> str:
    """The Beta distribution's shape: "unimodal" when a, b > 1; otherwise "J/U": its mass piles up at
    0 or 1, as when some seeds learn a task and others fail it."""
    a, b = beta_params(mean, sd)
    return "unimodal" if a > 1 and b > 1 else "J/U"


def simulate(k: int, mean: float, sd: float, reps: int, boot: int, rng: np.random.Generator,
             methods=("percentile bootstrap", "t over seeds", "lenbench")) -> dict[str, tuple[float, float]]:
    """{method: (coverage, mean width)} of the nominal 95 % interval of one configuration."""
    a, b = beta_params(mean, sd)
    hits = {m: 0 for m in methods}
    widths = {m: 0.0 for m in methods}
    for _ in range(reps):
        p = rng.beta(a, b, k)  # (K,) each seed's true accuracy
        samples = (rng.random((k, N)) < p[:, None]).astype(float)  # (K, N)
        theta = samples.mean(1)
        idx = rng.integers(0, N, (boot, k, N))  # (B, K, N) each seed's samples resampled
        within = np.take_along_axis(samples[None].repeat(boot, 0), idx, 2).mean(-1)  # (B, K)
        for m in methods:
            if m == "lenbench":
                lo, hi = estimate(SeedValues(theta, within)).interval()
            elif m == "t over seeds":
                half = sps.t.ppf(0.975, k - 1) * theta.std(ddof=1) / np.sqrt(k)
                lo, hi = theta.mean() - half, theta.mean() + half
            else:  # every drawn slot resamples its seed's samples afresh, as the board's bootstrap did
                pick = rng.integers(0, k, (boot, k))  # (B, K) seeds drawn
                fresh = rng.integers(0, N, (boot, k, N))
                reps_ = np.take_along_axis(samples[pick], fresh, 2).mean(-1).mean(1)
                lo, hi = np.quantile(reps_, 0.025, method="lower"), np.quantile(reps_, 0.975, method="higher")
            lo, hi = max(lo, 0.0), min(hi, 1.0)
            hits[m] += lo <= mean <= hi
            widths[m] += hi - lo
    return {m: (hits[m] / reps, widths[m] / reps) for m in methods}


def simulate_difference(k: int, mean: float, sd: float, delta: float, reps: int, boot: int,
                        rng: np.random.Generator) -> tuple[float, float]:
    """(coverage, mean width) of `estimate`'s interval of a paired difference with truth `delta`:
    entry B is entry A's samples with a fraction `delta` of them (drawn per seed) made right, on
    top of its own seed noise."""
    a, b = beta_params(mean, sd)
    hits, width = 0, 0.0
    for _ in range(reps):
        pa, pb = rng.beta(a, b, k), rng.beta(a, b, k)
        u = rng.random((k, N))
        sa = (u < pa[:, None]).astype(float)
        sb = (u < pb[:, None]).astype(float)  # the same samples' difficulty (shared u): paired
        sb = np.maximum(sb, (rng.random((k, N)) < delta).astype(float)) if delta else sb
        idx = rng.integers(0, N, (boot, k, N))
        ra = np.take_along_axis(sa[None].repeat(boot, 0), idx, 2).mean(-1)
        rb = np.take_along_axis(sb[None].repeat(boot, 0), idx, 2).mean(-1)
        est = estimate(SeedValues(sb.mean(1), rb) - SeedValues(sa.mean(1), ra))
        lo, hi = est.interval()
        truth = (1 - mean) * delta  # E[p_B + (1 − p_B) δ − p_A] over seeds
        hits += lo <= truth <= hi
        width += hi - lo
    return hits / reps, width / reps


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).parent))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = []
    for k in KS:
        for sd in SDS:
            for mean in MEANS:
                if beta_params(mean, sd) is None:
                    continue
                for method, (cov, width) in simulate(k, mean, sd, args.reps, args.boot, rng).items():
                    rows.append({"k": k, "seed_sd": sd, "mean": mean, "shape": shape(mean, sd), "method": method,
                                 "coverage": cov,
                                 "mean_width": width, "reps": args.reps})
    for delta in (0.0, 0.1):
        for sd in (0.05, 0.2):
            cov, width = simulate_difference(3, 0.5, sd, delta, args.reps, args.boot, rng)
            rows.append({"k": 3, "seed_sd": sd, "mean": 0.5, "shape": shape(0.5, sd),
                         "method": f"lenbench (difference, truth {(1 - 0.5) * delta:g})",
                         "coverage": cov, "mean_width": width, "reps": args.reps})
    df = pd.DataFrame(rows)
    out = Path(args.out)
    df.to_csv(out / "coverage.csv", index=False, float_format="%.4f")
    (out / "coverage.md").write_text(markdown(df, args, time.perf_counter() - start))


def markdown(df: pd.DataFrame, args, seconds: float) -> str:
    single = df[df["method"].isin(["percentile bootstrap", "t over seeds", "lenbench"])]
    wide = single.pivot_table(index=["k", "seed_sd", "mean", "shape"], columns="method", values="coverage").reset_index()
    cols = ["percentile bootstrap", "t over seeds", "lenbench"]
    lines = ["| seeds | seed SD | true mean | seed distribution | " + " | ".join(cols) + " |",
             "| ---: | ---: | ---: | --- | " + " | ".join("---:" for _ in cols) + " |"]
    for r in wide.to_dict("records"):
        lines.append(f"| {r['k']} | {r['seed_sd']:g} | {r['mean']:g} | {r['shape']} | "
                     + " | ".join(f"{r[c]:.3f}" for c in cols) + " |")
    summary = ["", "| method | seed distribution | min coverage | mean coverage | mean width |",
               "| --- | --- | ---: | ---: | ---: |"]
    for (m, sh), g in df.groupby(["method", "shape"], sort=False):
        summary.append(f"| {m} | {sh} | {g['coverage'].min():.3f} | {g['coverage'].mean():.3f} | "
                       f"{g['mean_width'].mean():.3f} |")
    head = [f"Coverage of the nominal 95 % interval, {args.reps} simulated entries per row, {args.boot} bootstrap "
            f"resamples, {N} samples per seed (`python studies/statistics/coverage.py --reps {args.reps} --boot "
            f"{args.boot} --seed {args.seed}`, {seconds:.0f} s). A row is left out where no Beta distribution has "
            "that mean and SD.", ""]
    import textwrap

    head = [textwrap.fill(head[0], width=110, break_long_words=False, break_on_hyphens=False), ""]
    return "\n".join(head + lines + summary) + "\n"


if __name__ == "__main__":
    main()
