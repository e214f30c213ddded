"""docs/api.md to the code: its example runs, in order, in a fresh interpreter, and prints what the page
says; its table of what `import lenbench` sets is `lenbench.numerics.PINNED_ENV` (tests/test_api.py holds
that a fresh import sets exactly those); it names every function of the API."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from docs_markdown import DOCS, table_after

from lenbench import api, numerics
from lenbench.report.build import REPORT_FILES

pytestmark = pytest.mark.docs

PAGE = DOCS / "api.md"
EFFECTS = "<!-- import-effects: checked by tests/docs/test_docs_api.py against lenbench.numerics.PINNED_ENV -->"


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of a Markdown page, in order (```text blocks are illustrations, not run)."""
    return re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def test_the_example_is_found():
    blocks = python_blocks(PAGE.read_text())
    assert len(blocks) == 4 and blocks[0].startswith("import lenbench")


def test_the_table_of_the_imports_effects_is_the_pinned_environment():
    rows = table_after(PAGE.read_text(), EFFECTS)
    assert {r["variable"].strip("`"): r["set to"].strip("`") for r in rows} == numerics.PINNED_ENV
    assert "LENBENCH_NUMERICS=native" in PAGE.read_text()


def test_the_page_names_every_function_of_the_api():
    text = PAGE.read_text()
    assert all(f"`{name}(" in text for name in api.__all__ if name != "Board")


def test_the_parser_reads_python_blocks_only():
    text = "x\n```python\na = 1\n```\n```text\nb = 2\n```\n```python\nc = 3\nd = 4\n```\n"
    assert python_blocks(text) == ["a = 1\n", "c = 3\nd = 4\n"]


@pytest.mark.subprocess
def test_the_example_runs_and_prints_what_the_page_says(tmp_path):
    """The blocks joined, run with `python -c` in an empty directory (so the process executor's workers,
    fresh interpreters, do not run the example again: there is no main module to import)."""
    code = "\n".join(python_blocks(PAGE.read_text()))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "9 cells\n" in out
    assert "9 computed, 0 reused, 0 failed\n" in out  # the first run; the process run prints nothing
    # the leaderboard: lm ranks by degradation, each trained encoding with its interval and a rank
    header = next(line for line in out.splitlines() if line.lstrip().startswith("encoding"))
    assert header.split() == ["encoding", "kind", "in_dist", "degradation", "degradation_ci_low",
                              "degradation_ci_high", "rank"]
    models = [line.split() for line in out.splitlines() if line.split()[1:2] == ["model"]]
    assert sorted(m[0] for m in models) == ["alibi", "nope", "rope"]
    for _, _, _, value, low, high, _ in models:
        assert float(low) <= float(value) <= float(high)
    assert any(rank != "NaN" for *_, rank in models)  # above the unigram floor with support (by far, here)
    # the report: the files it says, on disk
    report = tmp_path / "runs" / "tiny-report"
    assert str(sorted({*REPORT_FILES, "index.html"})) in out
    assert all((report / name).is_file() for name in REPORT_FILES)
    # the two executors' runs are the same bits: the comparison passes, every measurement unchanged
    assert "exit code 0\n" in out and "OK: no regression" in out
    assert re.search(r"0 regression\(s\).* 0 missing in head", out)
