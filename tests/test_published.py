"""The published leaderboard in results/ agrees with a fresh report of the published raw results."""

from pathlib import Path

import pytest

from lenbench.results import load_results, write_report

RESULTS = Path(__file__).resolve().parent.parent / "results"
TABLES = ("results.csv", "leaderboard.csv", "leaderboard_wide.csv", "leaderboard.md")


@pytest.mark.skipif(not (RESULTS / "bench.json").exists(), reason="no published results/bench.json yet")
def test_published_tables_match_a_fresh_report(tmp_path):
    write_report(RESULTS / "bench.json", tmp_path, plots=False)
    for name in TABLES:
        assert (tmp_path / name).read_text() == (RESULTS / name).read_text(), f"results/{name} is stale: rerun `lenbench report results/bench.json --out results`"


@pytest.mark.skipif(not (RESULTS / "cells").is_dir(), reason="no published per-cell results")
def test_published_cells_and_benchmark_json_hold_the_same_rows():
    assert load_results(RESULTS).equals(load_results(RESULTS / "bench.json"))  # a directory reads its cells/
