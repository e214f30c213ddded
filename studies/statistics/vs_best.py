"""Family-wise error under the global null: every pair of a table (the board's ranks) against each entry
tested only against the observed best, and against Hsu's multiple comparisons with the best (proposals for
larger tables), by simulation with known truth; and what each keeps at rank 1 on a real board.

    python studies/statistics/vs_best.py [--reps 2000] [--seeds 3] [--seed 0]
    python studies/statistics/vs_best.py --board RESULTS_DIR TASK

Each simulated table has K entries with equal true means, scored on the same seeds (a shared seed effect,
SD 1, plus each entry's own noise, SD 1), so any separation is a false one. "All pairs": the paired t test
over seeds for every pair, Holm-corrected over the K(K-1)/2 pairs, as `lenbench.report.ranks.support_ranks`
does. "Versus the best": the entry with the best observed mean, then the paired t test of it against each
other entry, Holm-corrected over the K - 1 tests. The printed rate is how often at least one pair is
separated (the family-wise error); a valid procedure stays at or below 0.05. The best is chosen by the same
data it is then tested with, which is why "versus the best" exceeds it; Hsu's multiple comparisons with the
best (Hsu 1984) are the form of it that accounts for the choice: "MCB" keeps entry i among the possibly
best unless its mean trails the best of the others by more than d · s · sqrt(2 / n), s the residual SD of
the two-way (entry x seed) model with (K - 1)(n - 1) degrees of freedom, d the one-sided 95 % point of the
largest of K - 1 equicorrelated (rho 1/2) t statistics (by Monte Carlo). MCB's exclusion says "i is no
better than the best of the others", which a tie satisfies, so dropping a tied entry is no error of its
own; the rate printed counts it, because rank 1 claims that no entry is better with support. Its pooled s
borrows strength across entries, which is where its power comes from, and assumes every entry is equally
noisy: the "unequal noise" rows draw each entry's own SD log-uniformly over 0.05-2 (a board's spread:
lm's interval half-widths run from 0.000 to 0.400), where pooling misstates the noise of each comparison.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats


def _p(d: np.ndarray) -> float:
    """Two-sided p of the paired t test of the seed differences `d`."""
    t = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
    return float(2 * stats.t.sf(abs(t), len(d) - 1))


def mcb_critical(k: int, df: int, rng: np.random.Generator, draws: int = 200_000) -> float:
    """d: the 95 % point of max_j (Z_j - Z_0) / sqrt(2) / sqrt(chi2_df / df), j = 1 .. k - 1."""
    z = rng.normal(size=(draws, k))
    t = (z[:, 1:] - z[:, :1]).max(axis=1) / np.sqrt(2) / np.sqrt(rng.chisquare(df, draws) / df)
    return float(np.quantile(t, 0.95))


def mcb_best(x: np.ndarray, d: float) -> np.ndarray:
    """(K,) bool: the entries Hsu's MCB keeps as possibly the best (larger is better) of seed values `x` (K, n)."""
    k, n = x.shape
    resid = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()
    s = np.sqrt((resid ** 2).sum() / ((k - 1) * (n - 1)))
    m = x.mean(axis=1)
    others = np.array([np.delete(m, i).max() for i in range(k)])
    return m >= others - d * s * np.sqrt(2 / n)


def family_wise(k: int, seeds: int, reps: int, rng: np.random.Generator,
                sd: tuple[float, float] | None = None) -> tuple[float, float, float]:
    """(all pairs, versus the best, MCB): the share of null tables with at least one separation; `sd`:
    each entry's noise SD drawn log-uniformly over that range (None: SD 1 for every entry)."""
    all_pairs = vs_best = mcb = 0
    d = mcb_critical(k, (k - 1) * (seeds - 1), rng)
    for _ in range(reps):
        scale = np.exp(rng.uniform(*np.log(sd), size=(k, 1))) if sd else 1.0
        x = rng.normal(0, 1, size=(1, seeds)) + scale * rng.normal(0, 1, size=(k, seeds))
        mcb += not mcb_best(x, d).all()
        best = int(np.argmax(x.mean(axis=1)))
        # Holm rejects anything iff its smallest p clears alpha / (number of tests)
        p_best = [_p(x[best] - x[j]) for j in range(k) if j != best]
        vs_best += min(p_best) <= 0.05 / len(p_best)
        p_all = [_p(x[i] - x[j]) for i in range(k) for j in range(i + 1, k)]
        all_pairs += min(p_all) <= 0.05 / len(p_all)
    return all_pairs / reps, vs_best / reps, mcb / reps


def board(results: str, task: str) -> None:
    """On one board of a results directory: its rank 1 (all pairs) against MCB's possibly-best set."""
    from lenbench.report.rows import load_results
    from lenbench.report.stats import RANKING
    from lenbench.report.tables import leaderboard

    rows = load_results(results)
    lb = leaderboard(rows[rows["task"] == task])
    per = lb.per_task[(lb.per_task["variant"] == "none") & lb.per_task["rank"].notna()]
    stat = per["ranked_on"].iloc[0]
    declared = dict(RANKING.values())[stat]  # the statistic's own direction, else its metric's
    up = bool(per["higher_is_better"].iloc[0]) if declared is None else declared
    (board_,) = [b for key, b in lb.boards.items() if key[0] == task]
    x = np.array([board_.seed_stats[(e, "none")][stat].theta for e in per["encoding"]])
    x = x if up else -x
    rng = np.random.default_rng(0)
    d = mcb_critical(len(x), (len(x) - 1) * (x.shape[1] - 1), rng)
    keep = mcb_best(x, d)
    print(f"{task}, {stat}: {len(x)} ranked entries, all pairs' rank 1: {int((per['rank'] == 1).sum())}, "
          f"MCB's possibly best: {int(keep.sum())} ({', '.join(per['encoding'][keep])})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--board", nargs=2, metavar=("RESULTS_DIR", "TASK"))
    args = parser.parse_args()
    if args.board:
        board(*args.board)
        return
    rng = np.random.default_rng(args.seed)
    print(f"family-wise error under the global null, {args.seeds} seeds, {args.reps} tables per row")
    print("| entries | noise | all pairs (the board) | versus the observed best | MCB |")
    print("|---:|---|---:|---:|---:|")
    for sd, label in ((None, "equal"), ((0.05, 2.0), "unequal")):
        for k in (5, 10, 20, 26):
            a, b, c = family_wise(k, args.seeds, args.reps, rng, sd)
            print(f"| {k} | {label} | {a:.3f} | {b:.3f} | {c:.3f} |")


if __name__ == "__main__":
    main()
