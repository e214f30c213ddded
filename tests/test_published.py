"""The published leaderboard in results/ agrees with a fresh report of the published raw results."""

from pathlib import Path

import pytest

from lenbench.results import load_results, write_report

RESULTS = Path(__file__).resolve().parent.parent / "results"
TABLES = ("results.csv", "leaderboard.csv", "leaderboard_wide.csv", "leaderboard.md")


def _predates_bucket_column() -> bool:
    """results/results.csv was published before the tidy schema gained the `bucket` column (issue 11)."""
    path = RESULTS / "results.csv"
    return path.exists() and "bucket" not in path.read_text().splitlines()[0].split(",")


@pytest.mark.skipif(not (RESULTS / "bench.json").exists(), reason="no published results/bench.json yet")
@pytest.mark.skipif(_predates_bucket_column(), reason="results/ predates the `bucket` column (issue 11); "
                    "republish with `lenbench report results/bench.json --out results`")
def test_published_tables_match_a_fresh_report(tmp_path):
    write_report(RESULTS / "bench.json", tmp_path, plots=False)
    for name in TABLES:
        assert (tmp_path / name).read_text() == (RESULTS / name).read_text(), f"results/{name} is stale: rerun `lenbench report results/bench.json --out results`"


@pytest.mark.skipif(not (RESULTS / "cells").is_dir(), reason="no published per-cell results")
def test_published_cells_and_benchmark_json_hold_the_same_rows():
    assert load_results(RESULTS).equals(load_results(RESULTS / "bench.json"))  # a directory reads its cells/


@pytest.mark.skipif(not (RESULTS / "results.csv").exists(), reason="no published results.csv yet")
def test_readme_leaderboard_matches_the_published_rows():
    """The README's table is written from results/results.csv; it must not drift from it."""
    import re

    import pandas as pd

    df = pd.read_csv(RESULTS / "results.csv")
    readme = (RESULTS.parent / "README.md").read_text()
    table = readme.split("| encoding | copy acc 1×")[1].split("\n\n")[0].splitlines()[2:]
    columns = [("copy", 1), ("copy", 2), ("copy", 4), ("passkey", 1), ("passkey", 4), ("passkey", 16),
               ("lm", 1), ("lm", 4), ("lm", 16)]
    assert len(table) == df[df.variant == "none"].encoding.nunique() + df[df.variant != "none"].variant.nunique()
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        encoding, variant = (cells[0].split("+") + ["none"])[:2]
        for (task, ratio), shown in zip(columns, cells[1:10], strict=True):
            metric = "perplexity" if task == "lm" else "token_accuracy"
            whole = df.bucket.fillna("") == "" if "bucket" in df.columns else True  # not per-position / depth rows
            value = df[(df.task == task) & (df.encoding == encoding) & (df.variant == variant) & (df.ratio == ratio)
                       & (df.metric == metric) & whole].value.item()
            decimals = len(shown.split(".")[1])
            assert f"{value:.{decimals}f}" == shown, f"README {cells[0]} {task} {ratio}x: {shown} vs {value}"
        assert re.fullmatch(r"\d+", cells[10])
