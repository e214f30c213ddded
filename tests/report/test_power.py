"""studies/statistics/power.py: a board's pairs separated now and projected at more seeds, by the board's own
Holm-corrected paired test (closed-form t tails against the projection's arithmetic)."""

import math
from pathlib import Path

from lenbench_testing import load_script
from scipy import stats as sps

from lenbench.report.intervals import Estimate

ROOT = Path(__file__).resolve().parents[2]
power = load_script(ROOT / "studies" / "statistics" / "power.py")


KEYS = ["a", "b", "c"]


def pairs(*estimates):
    return [(est, i, j) for est, (i, j) in zip(estimates, [(x, y) for n, x in enumerate(KEYS) for y in KEYS[n + 1:]],
                                               strict=True)]


def test_a_pair_short_of_holm_at_three_seeds_separates_at_five_when_its_effect_holds():
    # a - b: t = 5 on 2 df (p 0.038 > 0.05 / 3); projected to 5 seeds t = 5 sqrt(5 / 3) on 4 df
    table = pairs(Estimate(1.0, 0.2, 2.0, 3), Estimate(0.0, 0.2, 2.0, 3), Estimate(0.0, 0.2, 2.0, 3))
    assert 2 * sps.t.sf(5.0, 2) > 0.05 / 3
    assert 2 * sps.t.sf(5.0 * math.sqrt(5 / 3), 4) < 0.05 / 3
    assert power.separated(KEYS, table, None) == (0, 1)
    assert power.separated(KEYS, table, 5) == (1, 2)  # b better than a: two distinct ranks


def test_no_difference_never_separates_however_many_seeds():
    table = pairs(Estimate(0.0, 0.2, 2.0, 3), Estimate(0.0, 0.0, 2.0, 3), Estimate(0.0, 0.5, 2.0, 3))
    assert power.separated(KEYS, table, 100) == (0, 1)


def test_a_table_of_one_entry_has_one_rank_and_nothing_to_separate():
    assert power.separated(["a"], [], 5) == (0, 1)
