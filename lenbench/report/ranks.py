"""The leaderboard's ranks: paired, Holm-corrected support ranks of the entries of one table.

**Ranks** (`support_ranks`): among the learned, complete entries above the floor, rank = 1 + the
number of entries better with support: the paired t test on the seed differences of the area past
train (`lenbench.report.stats.AREA`; same seeds, same samples) rejects "no difference",
two-sided, with Holm's step-down correction over every pair of the table at family-wise level
`ALPHA`. Entries that cannot be told apart share a
rank. The main table ranks trained models (variant "none"); each encoding with inference-time
variants gets its own table (``variant_rank``).
"""

from __future__ import annotations

from collections.abc import Mapping

from lenbench.report.intervals import estimate

#: The family-wise error rate of every table's set of comparisons (ranks, floors, claims).
ALPHA = 0.05


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
