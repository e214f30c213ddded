"""The published leaderboard in results/ agrees with a fresh report of the published raw results."""

from pathlib import Path

import pytest

from lenbench.page import write_report
from lenbench.results import load_results

RESULTS = Path(__file__).resolve().parent.parent / "results"
TABLES = ("results.csv", "leaderboard.csv", "leaderboard_wide.csv", "leaderboard.md", "summary.md")


def _predates_bucket_column() -> bool:
    """results/results.csv was published before the tidy schema gained the `bucket` column (issue 11)."""
    path = RESULTS / "results.csv"
    return path.exists() and "bucket" not in path.read_text().splitlines()[0].split(",")



def _published_schema() -> int:
    """The leaderboard schema of the published results/: 2 once leaderboard.csv carries
    schema_version (intervals, not_learned, support ranks, issue 10), else 1."""
    path = RESULTS / "leaderboard.csv"
    if not path.exists():
        return 0
    header = path.read_text().split("\n", 1)[0].split(",")
    return 2 if "schema_version" in header and "sample_scores" in (RESULTS / "results.csv").read_text().split("\n", 1)[0] else 1


OLD_SCHEMA = pytest.mark.skipif(
    _published_schema() == 1,
    reason="results/ was published before leaderboard schema 2 (per-sample scores, intervals, exact-match primary, "
           "issue 10); republish it (`pytest bench --benchmark-json runs/bench.json`, then "
           "`lenbench publish runs/quick --benchmark-json runs/bench.json --to results`) "
           "and these checks apply again")


@OLD_SCHEMA
@pytest.mark.skipif(not (RESULTS / "bench.json").exists(), reason="no published results/bench.json yet")
@pytest.mark.skipif(_predates_bucket_column(), reason="results/ predates the `bucket` column (issue 11); "
                    "republish with `lenbench report results/bench.json --out results`")
def test_published_tables_match_a_fresh_report(tmp_path):
    header = (RESULTS / "results.csv").read_text().split("\n", 1)[0].split(",")
    if "code_fingerprint" not in header:
        pytest.skip("results/ predates the provenance columns (python_version, threads, code_fingerprint, "
                    "data_fingerprint); the lead republishes it")
    write_report(RESULTS / "bench.json", tmp_path, plots=False)
    for name in TABLES:
        assert (tmp_path / name).read_text() == (RESULTS / name).read_text(), f"results/{name} is stale: rerun `lenbench report results/bench.json --out results`"


@pytest.mark.skipif(not (RESULTS / "cells").is_dir(), reason="no published per-cell results")
def test_published_cells_and_benchmark_json_hold_the_same_rows():
    assert load_results(RESULTS).equals(load_results(RESULTS / "bench.json"))  # a directory reads its cells/


@OLD_SCHEMA
@pytest.mark.skipif(not (RESULTS / "summary.md").exists(), reason="no published results/summary.md yet")
def test_readme_leaderboard_matches_the_published_summary():
    """The README quotes results/summary.md (written by `lenbench report` from the same rows as
    leaderboard.csv, which the test above keeps fresh) verbatim: its tables must not drift."""
    readme = (RESULTS.parent / "README.md").read_text()
    summary = (RESULTS / "summary.md").read_text().strip()
    assert summary in readme, "the README's leaderboard differs from results/summary.md: paste the file into the README"


@pytest.mark.skipif(not (RESULTS / "cost.md").exists(), reason="results/ predates the cost view (cost.md, issue 13); "
                    "the lead republishes it")
def test_readme_cost_table_matches_the_published_cost():
    """The README quotes the training-step table of results/cost.md verbatim."""
    cost = (RESULTS / "cost.md").read_text()
    table = cost.split("relative to `nope`:\n\n", 1)[1].split("\n\n", 1)[0]
    assert table in (RESULTS.parent / "README.md").read_text(), "the README's cost table differs from results/cost.md"


@pytest.mark.skipif(not (RESULTS / "index.html").exists(), reason="results/ predates index.html (issue 13)")
def test_published_page_is_self_contained():
    import re

    text = (RESULTS / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"https?:", text) and "<link" not in text
