"""studies/statistics/vs_best.py: Hsu's multiple comparisons with the best, the proposal the rank-testing
decision weighs against the board's all-pairs ranks. Its critical value against closed forms and
Dunnett's published table, and its possibly-best set on tables whose answer is known."""

from pathlib import Path

import numpy as np
import pytest
from lenbench_testing import load_script
from scipy import stats

STUDY = Path(__file__).resolve().parents[2] / "studies" / "statistics" / "vs_best.py"
vs_best = load_script(STUDY)


@pytest.mark.parametrize("df", [5, 10, 10**6])
def test_one_comparison_is_the_one_sided_t_quantile(df):
    d = vs_best.mcb_critical(2, df, np.random.default_rng(0))
    assert d == pytest.approx(stats.t.ppf(0.95, df), abs=0.01)


@pytest.mark.parametrize(("k", "df", "table"), [(5, 20, 2.30), (5, 10**6, 2.16), (10, 10**6, 2.42)])
def test_more_comparisons_match_dunnetts_one_sided_table(k, df, table):
    """Dunnett (1955), one-sided 5 %: K - 1 treatments against one control, equal correlation 1/2."""
    assert vs_best.mcb_critical(k, df, np.random.default_rng(0)) == pytest.approx(table, abs=0.015)


def test_mcb_keeps_entries_within_its_margin_and_drops_those_beyond():
    """Residual SD 0.112 (each entry's seeds off its mean by +-0.1 in its own order), n = 3: the margin is
    d * 0.112 * sqrt(2 / 3) = 0.21 at d = 2.3. Larger is better: 5.0, 5.1 and 4.95 are within it of the best,
    4.8 trails by 0.3. Smaller is better (negated): 4.8, 4.95 and 5.0 are within it, 5.1 trails by 0.3."""
    noise = np.array([[0.1, -0.1, 0.0], [-0.1, 0.0, 0.1], [0.0, 0.1, -0.1], [0.1, 0.0, -0.1]])
    x = np.array([[5.0], [5.1], [4.95], [4.8]]) + noise
    resid = x - x.mean(1, keepdims=True) - x.mean(0, keepdims=True) + x.mean()
    assert np.sqrt((resid ** 2).sum() / 6) == pytest.approx(0.112, abs=0.001)
    assert vs_best.mcb_best(x, d=2.3).tolist() == [True, True, True, False]
    assert vs_best.mcb_best(-x, d=2.3).tolist() == [True, False, True, True]  # smaller is better, negated
