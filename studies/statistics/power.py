"""What more seeds would buy a board's ranks: each main table's pairs separated now, and projected at more seeds.

    python studies/statistics/power.py RESULTS_DIR [--seeds 5 10]

The board ranks by the paired t test over seeds of every pair of a table, Holm-corrected over the table's
pairs (`lenbench.report.ranks.support_ranks`). With 3 seeds the test has 2 degrees of freedom, and a table
of K entries has K(K-1)/2 pairs, so its first Holm step needs p < 0.05 / (K(K-1)/2): at 26 entries |t| > 81
at 3 seeds. This reads every main table of RESULTS_DIR as the board builds it (the same goodness, the same
`estimate` of each pair's difference) and prints, per task: the ranked entries, the pairs, the pairs
separated now, and those a table of n seeds would separate if each pair's observed mean difference and
per-seed spread were the truth (plug-in: se scales as sqrt(3 / n), the test has n - 1 degrees of freedom;
Holm over the same pairs), with the number of distinct ranks. A projection, not a measurement: a 3-seed
spread is itself noisy (it can be near 0 by luck, which flatters a pair), so read the counts as what the
observed effects could support, and the decision for more seeds as a cost against that.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lenbench.report import stats as board_stats  # noqa: E402
from lenbench.report.intervals import estimate  # noqa: E402
from lenbench.report.ranks import ALPHA, holm  # noqa: E402
from lenbench.report.rows import load_results  # noqa: E402
from lenbench.report.tables import leaderboard  # noqa: E402


def tables(rows) -> dict[str, tuple[list, list]]:
    """Per task, the main table's entries and its pairs as (`estimate` of their difference, i, j), as the board
    tests them."""
    captured: dict[str, tuple[list, list]] = {}
    real = board_stats.support_ranks

    def spy(goodness, keys, alpha=ALPHA):
        if spy.task not in captured:  # the board ranks its main table first, then each variant table
            captured[spy.task] = (list(keys), [(estimate(goodness[j] - goodness[i]), i, j)
                                               for a, i in enumerate(keys) for j in keys[a + 1:]])
        return real(goodness, keys, alpha)

    board_stats.support_ranks = spy
    try:
        for task in dict.fromkeys(rows["task"]):
            spy.task = task
            leaderboard(rows[rows["task"] == task])
    finally:
        board_stats.support_ranks = real
    return captured


def separated(keys: list, pairs: list, seeds: int | None) -> tuple[int, int]:
    """(pairs separated, distinct ranks among `keys`) at the observed seeds (None) or projected to `seeds`."""
    ps, signs = [], []
    for est, _, _ in pairs:
        if seeds is None:
            ps.append(est.p_two_sided())
        elif est.se == 0 or math.isnan(est.se):
            ps.append(0.0 if est.mean != 0 else 1.0)
        else:
            t = est.mean / (est.se * math.sqrt(est.k / seeds))
            ps.append(float(2 * sps.t.sf(abs(t), seeds - 1)))
        signs.append(est.mean > 0)
    rejected = holm(ps)
    better = dict.fromkeys(keys, 0)
    for (_, i, j), up, rej in zip(pairs, signs, rejected, strict=True):
        if rej:
            better[i if up else j] += 1
    return sum(rejected), len(set(better.values()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--seeds", type=int, nargs="+", default=[5, 10])
    args = ap.parse_args()
    by_task = tables(load_results(args.results))
    head = ["task", "ranked entries", "pairs", "separated now (distinct ranks)",
            *(f"at {n} seeds (distinct ranks)" for n in args.seeds)]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for task, (keys, pairs) in by_task.items():
        entries = len(keys)
        cells = [f"{s} ({r})" for s, r in (separated(keys, pairs, n) for n in (None, *args.seeds))]
        print(f"| {task} | {entries} | {len(pairs)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
