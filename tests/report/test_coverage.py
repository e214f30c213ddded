"""The leaderboard's 95 % interval covers, measured by simulation with known truth: a reduced run of
studies/statistics/coverage.py (docs/statistics.md has the full table and its command)."""

from pathlib import Path

import numpy as np
import pytest
from lenbench_testing import load_script

STUDY = Path(__file__).resolve().parents[2] / "studies" / "statistics" / "coverage.py"
coverage = load_script(STUDY, "coverage_study")

REPS, BOOT = 600, 200


@pytest.mark.parametrize(("k", "sd", "mean"), [
    (3, 0.05, 0.5), (3, 0.2, 0.5), (3, 0.02, 0.9), (3, 0.05, 0.1), (5, 0.05, 0.5), (5, 0.2, 0.5), (5, 0.02, 0.9),
])
def test_the_seed_interval_covers_where_the_seed_distribution_is_unimodal(k, sd, mean):
    assert coverage.shape(mean, sd) == "unimodal"
    cov, _ = coverage.simulate(k, mean, sd, REPS, BOOT, np.random.default_rng(k * 100 + int(sd * 100)),
                               methods=("lenbench",))["lenbench"]
    assert cov >= 0.93, f"coverage {cov:.3f} of the nominal 95 % interval at K={k}, seed SD {sd}, mean {mean}"


def test_the_percentile_bootstrap_it_replaced_under_covers_with_three_seeds():
    cov, _ = coverage.simulate(3, 0.5, 0.2, REPS, BOOT, np.random.default_rng(7),
                               methods=("percentile bootstrap", "lenbench"))["percentile bootstrap"]
    assert cov < 0.93


def test_the_paired_difference_covers_its_truth():
    for delta in (0.0, 0.1):
        cov, _ = coverage.simulate_difference(3, 0.5, 0.1, delta, 300, BOOT, np.random.default_rng(11))
        assert cov >= 0.93, (delta, cov)


def test_docs_show_the_studys_table():
    docs = (STUDY.parents[2] / "docs" / "statistics.md").read_text()
    table = (STUDY.parent / "coverage.md").read_text()
    start, end = "<!-- coverage: studies/statistics/coverage.md -->\n", "<!-- /coverage -->"
    assert docs.split(start, 1)[1].split(end, 1)[0].strip() == table.strip(), \
        "docs/statistics.md's coverage table differs from studies/statistics/coverage.md: paste it"
