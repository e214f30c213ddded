"""The published leaderboard in results/ agrees with a fresh report of the published raw results."""

import re
from pathlib import Path

import pytest

from lenbench.numerics import MACHINE_KEYS
from lenbench.report.build import write_report
from lenbench.report.rows import load_results

RESULTS = Path(__file__).resolve().parent.parent.parent / "results"
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


@pytest.mark.slow
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
        fresh, published = (tmp_path / name).read_text(), (RESULTS / name).read_text()
        if name.endswith(".csv"):
            fresh = _without_new_columns(fresh, published)
        assert_same_text_within_tolerance(fresh, published, f"results/{name} is stale: rerun "
                                          "`lenbench report results/bench.json --out results`")


#: Columns a fresh report has that a results/ published before them lacks (issue 19's machine facts,
#: issue 24's `settings`).
NEW_COLUMNS = {*MACHINE_KEYS, "settings"}


def _without_new_columns(fresh: str, published: str) -> str:
    """`fresh` CSV text without the columns that `published` predates (they must be `NEW_COLUMNS`)."""
    import csv
    import io

    old_header = next(csv.reader(io.StringIO(published)), [])
    rows = list(csv.reader(io.StringIO(fresh)))
    extra = [c for c in rows[0] if c not in old_header] if rows else []
    assert set(extra) <= NEW_COLUMNS, f"columns {sorted(set(extra) - NEW_COLUMNS)} are not in the published table"
    keep = [i for i, c in enumerate(rows[0]) if c not in extra]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([[row[i] for i in keep] for row in rows])
    return out.getvalue()


#: A number in a table's text: the published tables are compared number by number.
#: A token glued to letters (a hash such as "c1e5a", a ratio label such as "2x") is text, not a number.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
#: Relative tolerance for a number printed with full precision (CSV): float sums differ in the
#: last bits between CPUs and numpy builds (seen: ...818422 vs ...818425 in the 16th digit).
RTOL = 1e-9


def assert_same_text_within_tolerance(fresh: str, published: str, message: str) -> None:
    """The texts are equal except that each decimal number may differ by `RTOL` relative, or by one
    unit of its last printed digit (a rounded display whose value lies on a rounding boundary).
    Integers (counts, lengths, seeds) must be equal."""
    fresh_parts, published_parts = NUMBER.split(fresh), NUMBER.split(published)
    assert fresh_parts == published_parts, message  # every word, separator and layout identical
    for a, b in zip(NUMBER.findall(fresh), NUMBER.findall(published), strict=True):
        if a == b:
            continue
        assert "." in a + b or "e" in (a + b).lower(), f"{message}: {a} vs {b}"
        x, y = float(a), float(b)
        decimals = len(b.split(".")[1].split("e")[0].split("E")[0]) if "." in b else 0
        exponent = int(b.lower().split("e")[1]) if "e" in b.lower() else 0
        unit = 10.0 ** (exponent - decimals)
        assert abs(x - y) <= max(RTOL * max(abs(x), abs(y)), unit * 1.000001), f"{message}: {a} vs {b}"


@pytest.mark.skipif(not (RESULTS / "cells").is_dir(), reason="no published per-cell results")
def test_published_cells_and_benchmark_json_hold_the_same_rows():
    assert load_results(RESULTS).equals(load_results(RESULTS / "bench.json"))  # a directory reads its cells/


#: The page that quotes the published tables (the README links it and quotes only a headline,
#: which tests/docs/test_readme.py checks against leaderboard.csv).
BOARD_PAGE = RESULTS.parent / "docs" / "board.md"


@OLD_SCHEMA
@pytest.mark.skipif(not (RESULTS / "summary.md").exists(), reason="no published results/summary.md yet")
def test_board_page_leaderboard_matches_the_published_summary():
    """docs/board.md quotes results/summary.md (written by `lenbench report` from the same rows as
    leaderboard.csv, which the test above keeps fresh) verbatim: its tables must not drift."""
    summary = (RESULTS / "summary.md").read_text().strip()
    assert summary in BOARD_PAGE.read_text(), \
        "docs/board.md's leaderboard differs from results/summary.md: paste the file between its summary markers"


@pytest.mark.skipif(not (RESULTS / "findings.md").exists(), reason="results/ predates findings.md (issue 24)")
def test_board_page_quotes_the_published_findings():
    """What the board's numbers support, on docs/board.md, is results/findings.md verbatim: sentences
    read off leaderboard.csv by `lenbench.report.findings`, never a hand-kept copy of its numbers."""
    findings = (RESULTS / "findings.md").read_text().split("\n", 2)[2].strip()  # after its title
    assert findings in BOARD_PAGE.read_text(), \
        "docs/board.md's findings differ from results/findings.md: paste the file between its findings markers"


@pytest.mark.skipif(not (RESULTS / "cost.md").exists(), reason="results/ predates the cost view (cost.md, issue 13); "
                    "the lead republishes it")
def test_board_page_cost_table_matches_the_published_cost():
    """docs/board.md quotes the training-step table of results/cost.md verbatim."""
    cost = (RESULTS / "cost.md").read_text()
    table = cost.split("relative to `nope`:\n\n", 1)[1].split("\n\n", 1)[0]
    assert table in BOARD_PAGE.read_text(), "docs/board.md's cost table differs from results/cost.md"


@pytest.mark.skipif(not (RESULTS / "index.html").exists(), reason="results/ predates index.html (issue 13)")
def test_published_page_is_self_contained():
    import re

    text = (RESULTS / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"https?:", text) and "<link" not in text
