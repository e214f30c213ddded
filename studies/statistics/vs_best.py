"""Family-wise error under the global null: every pair of a table (the board's ranks) against each entry
tested only against the observed best (a proposal for larger tables), by simulation with known truth.

    python studies/statistics/vs_best.py [--reps 2000] [--seeds 3] [--seed 0]

Each simulated table has K entries with equal true means, scored on the same seeds (a shared seed effect,
SD 1, plus each entry's own noise, SD 1), so any separation is a false one. "All pairs": the paired t test
over seeds for every pair, Holm-corrected over the K(K-1)/2 pairs, as `lenbench.report.ranks.support_ranks`
does. "Versus the best": the entry with the best observed mean, then the paired t test of it against each
other entry, Holm-corrected over the K - 1 tests. The printed rate is how often at least one pair is
separated (the family-wise error); a valid procedure stays at or below 0.05. The best is chosen by the same
data it is then tested with, which is why "versus the best" exceeds it; Hsu's multiple comparisons with the
best (Hsu 1984) are the form of it that accounts for the choice.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats


def _p(d: np.ndarray) -> float:
    """Two-sided p of the paired t test of the seed differences `d`."""
    t = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
    return float(2 * stats.t.sf(abs(t), len(d) - 1))


def family_wise(k: int, seeds: int, reps: int, rng: np.random.Generator) -> tuple[float, float]:
    """(all pairs, versus the best): the share of null tables with at least one separation."""
    all_pairs = vs_best = 0
    for _ in range(reps):
        x = rng.normal(0, 1, size=(1, seeds)) + rng.normal(0, 1, size=(k, seeds))
        best = int(np.argmax(x.mean(axis=1)))
        # Holm rejects anything iff its smallest p clears alpha / (number of tests)
        p_best = [_p(x[best] - x[j]) for j in range(k) if j != best]
        vs_best += min(p_best) <= 0.05 / len(p_best)
        p_all = [_p(x[i] - x[j]) for i in range(k) for j in range(i + 1, k)]
        all_pairs += min(p_all) <= 0.05 / len(p_all)
    return all_pairs / reps, vs_best / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"family-wise error under the global null, {args.seeds} seeds, {args.reps} tables per row")
    print("| entries | all pairs (the board) | versus the observed best |")
    print("|---:|---:|---:|")
    for k in (5, 10, 20, 26):
        a, b = family_wise(k, args.seeds, args.reps, rng)
        print(f"| {k} | {a:.3f} | {b:.3f} |")


if __name__ == "__main__":
    main()
