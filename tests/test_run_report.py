"""`lenbench run` writes the report into its results directory (as `pytest bench` does), and a suite's
declared `purpose:` puts its note in that report and in the run's output."""

from __future__ import annotations

import re

import pytest
from lenbench_testing import TINY_RUN, suite_load_error, write_suite

from lenbench.cli import main
from lenbench.config import PURPOSE_NOTES, load_suite, parse_suite
from lenbench.report.build import REPORT_FILES


@pytest.mark.slow
def test_run_writes_the_report_and_the_smoke_note(tmp_path, capsys):
    suite = write_suite(tmp_path, {**TINY_RUN, "purpose": "smoke"})
    out = tmp_path / "run"
    assert main(["run", "--suite", str(suite), "--out", str(out), "--executor", "serial", "--quiet"]) == 0
    printed = capsys.readouterr().out
    for name in (*REPORT_FILES, "index.html", "extrapolation.png"):
        assert (out / name).is_file(), name
    assert not (out / "cost.md").exists()  # no kernels timed: no cost view
    assert re.search(rf"^report: [1-9][0-9]* file\(s\) in {re.escape(str(out))}; open {re.escape(str(out / 'index.html'))}$",
                     printed, re.M)
    note = PURPOSE_NOTES["smoke"]
    assert printed.rstrip().endswith(note)
    summary = (out / "summary.md").read_text()
    assert " ".join(summary.split("\n\n", 1)[0].split()) == note  # first, before the boards
    assert note.split(":")[0] in (out / "leaderboard.md").read_text()


@pytest.mark.slow
def test_no_report_leaves_the_directory_to_lenbench_report(tmp_path, capsys):
    suite = write_suite(tmp_path, TINY_RUN)
    out = tmp_path / "run"
    assert main(["run", "--suite", str(suite), "--out", str(out), "--executor", "serial", "--quiet",
                 "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "report:" not in printed and not any(out.glob("*.md")) and not (out / "index.html").exists()
    assert PURPOSE_NOTES["smoke"] not in printed  # a benchmark suite gets no note
    assert main(["report", str(out)]) == 0
    assert "This is a smoke suite" not in (out / "summary.md").read_text()


def test_purpose_is_a_declared_fact_of_the_suite():
    assert load_suite("smoke").purpose == "smoke" and load_suite("smoke").note == PURPOSE_NOTES["smoke"]
    assert load_suite("quick").purpose == "benchmark" and load_suite("quick").note == ""
    # not part of any cell: the smoke preset's cell ids are those of the same suite without it
    assert [c.cell_id for c in parse_suite({**TINY_RUN, "purpose": "smoke"}).cells()] == \
        [c.cell_id for c in parse_suite(TINY_RUN).cells()]


def test_an_unknown_purpose_is_one_line_naming_the_choices(tmp_path):
    error = suite_load_error(write_suite(tmp_path, {**TINY_RUN, "purpose": "demo"}))
    assert "purpose must be one of benchmark, smoke, got 'demo'" in error
