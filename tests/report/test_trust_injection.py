"""Issue 19, defect 7: labels anyone can write (encoding, variant, suite, kernel names) reach every
report file escaped for its format: CSV cells a spreadsheet would run as formulas get a leading
``'`` (numbers stay numbers), markdown gets ``\\|`` and HTML entities, the page stays escaped."""

import csv
import gzip
import json
import re

import pytest

from lenbench.escape import csv_cell, csv_frame, csv_uncell, md_cell
from lenbench.report.build import write_report
from lenbench.report.rows import load_results

HOSTILE = ['=HYPERLINK("http://x")', "+1", "-cmd", "@SUM(A1)", "<script>alert(1)</script>", "a|b", "\tTAB", "\rCR"]
FORMULA = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?inf|nan")


def row(encoding: str, ratio: float, value: float, task: str = "copy", metric: str = "exact_match",
        seed: int = 0) -> dict:
    return {"schema_version": 2, "cell_id": f"{task}-{HOSTILE.index(encoding) if encoding in HOSTILE else 'r'}-{seed}",
            "suite": "=SUM(A1:A9)", "task": task, "encoding": encoding, "variant": "none", "train_len": 8, "eval_len": int(8 * ratio),
            "ratio": float(ratio), "bucket": "", "metric": metric, "value": value, "n_samples": 4, "seed": seed,
            "higher_is_better": metric != "nll", "status": "ok", "error": "", "lenbench_version": "0.1.0",
            "git_sha": "0123abcd", "torch_version": "2.13.0+cpu", "device": "cpu", "dtype": "float32",
            "timestamp": "2026-01-01T00:00:00+00:00", "train_seconds": 1.0,
            "sample_scores": "1 1 1 1" if metric == "exact_match" else ""}  # samples.csv holds the labels too


def rows() -> list[dict]:
    out = []
    for i, enc in enumerate(["rope", *HOSTILE]):
        for seed in (0, 1):
            for ratio, value in ((1, 1.0 - 0.01 * i), (2, 0.5 - 0.01 * i)):
                out.append(row(enc, ratio, value, seed=seed))
            for ratio in (1, 2):  # a task named like a formula, scored by a negative metric
                out.append(row(enc, ratio, -0.5 - 0.01 * i * ratio, task="-gain", metric="log_gain", seed=seed))
    return out


def kernel(encoding: str) -> dict:
    return {"group": "kernels", "name": f"test_kernel[{encoding}]", "fullname": f"bench/test_kernels.py::k[{encoding}]",
            "extra_info": {"encoding": encoding, "kind": "rotate", "impl": "-fused", "T": 256, "dtype": "float32",
                           "bytes": 1024, "gbps": 1.5, "copy_ratio": 2.0},
            "stats": {"median": 1e-3, "mean": 1e-3, "min": 1e-3, "max": 1e-3, "stddev": 0.0, "rounds": 3}}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A report directory written from a benchmark JSON holding hostile labels in rows and kernels."""
    root = tmp_path_factory.mktemp("hostile")
    by_cell: dict[str, list[dict]] = {}
    for r in rows():
        by_cell.setdefault(r["cell_id"], []).append(r)
    benchmarks = [{"group": "extrapolation", "name": f"t[{c}]", "fullname": f"bench/test_extrapolation.py::t[{c}]",
                   "extra_info": {"lenbench_rows": rs}, "stats": {"median": 1.0, "mean": 1.0, "min": 1.0}}
                  for c, rs in by_cell.items()]
    benchmarks += [kernel(e) for e in ("rope", *HOSTILE)]
    data = {"machine_info": {"lenbench": {"device": "cpu", "device_name": "@cpu <b>"}}, "commit_info": {},
            "benchmarks": benchmarks, "datetime": "2026-01-01T00:00:00", "version": "5.2.3"}
    (root / "bench.json").write_text(json.dumps(data))
    out = root / "report"
    write_report(root / "bench.json", out, plots=False)
    return out


def _cells(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="", encoding="utf-8") as f:  # keep a \r inside a quoted cell
        return list(csv.reader(f))


def test_every_csv_quotes_formula_cells_and_keeps_numbers(report):
    csvs = sorted([*report.glob("*.csv"), *report.glob("*.csv.gz")])
    assert [p.name for p in csvs] == ["cost.csv", "leaderboard.csv", "leaderboard_wide.csv", "learnability.csv", "results.csv",
                                         "samples.csv.gz"]
    for path in csvs:
        table = _cells(path)
        header, body = table[0], table[1:]
        for line in body:
            for col, cell in zip(header, line, strict=True):
                assert not cell.startswith(FORMULA) or NUMBER.fullmatch(cell), f"{path.name}:{col}: {cell!r}"
        encodings = {line[header.index("encoding")] for line in body}
        assert {"'=HYPERLINK(\"http://x\")", "'+1", "'-cmd", "'@SUM(A1)", "'\tTAB", "'\rCR"} <= encodings, path.name
        assert {"<script>alert(1)</script>", "a|b", "rope"} <= encodings, path.name  # not formulas: as given
    results = _cells(report / "results.csv")
    header = results[0]
    assert {line[header.index("suite")] for line in results[1:]} == {"'=SUM(A1:A9)"}
    assert {line[header.index("task")] for line in results[1:]} == {"copy", "'-gain"}
    values = [float(line[header.index("value")]) for line in results[1:]]  # every value still parses as a number
    assert -0.5 in values and min(values) < -0.5
    board = _cells(report / "leaderboard.csv")
    assert any(float(line[board[0].index("value")]) < 0 for line in board[1:] if line[board[0].index("value")])
    cost = _cells(report / "cost.csv")
    assert {line[cost[0].index("fused_impl")] for line in cost[1:]} == {"'-fused"}


def test_results_csv_reads_back_the_labels_as_written(report):
    """The readers undo the quoting: the labels and values of results.csv equal the source's."""
    back = load_results(report / "results.csv")
    source = load_results(report.parent / "bench.json")
    assert sorted(set(back["encoding"])) == sorted({"rope", *HOSTILE})
    assert set(back["suite"]) == {"=SUM(A1:A9)"}
    assert back[["encoding", "metric", "seed", "ratio", "value"]].equals(source[["encoding", "metric", "seed", "ratio", "value"]])


def _unescaped_pipes(line: str) -> int:
    """Pipes of a markdown table line that end a cell (not preceded by an odd run of backslashes)."""
    return sum(1 for m in re.finditer(r"\|", line) if (len(line[:m.start()]) - len(line[:m.start()].rstrip("\\"))) % 2 == 0)


def test_markdown_has_no_raw_html_and_no_cell_split_by_a_label(report):
    mds = sorted(report.glob("*.md"))
    assert [p.name for p in mds] == ["claims.md", "cost.md", "findings.md", "leaderboard.md", "summary.md"]
    for path in mds:
        text = path.read_text()
        assert "<script>" not in text and "<b>" not in text, path.name
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("| ") and (i == 0 or not lines[i - 1].startswith("| ")):  # a table's header
                width = _unescaped_pipes(line)
                j = i
                while j < len(lines) and lines[j].startswith("| "):
                    assert _unescaped_pipes(lines[j]) == width, f"{path.name} line {j + 1}: {lines[j]!r}"
                    j += 1
        if path.name not in ("findings.md", "claims.md"):  # prose naming only leaders / papers' entries
            assert "a\\|b" in text, path.name
    board = (report / "leaderboard.md").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in board and "Suite: =SUM(A1:A9)" in board
    assert "Device: @cpu &lt;b&gt;" in (report / "cost.md").read_text()


def test_the_page_escapes_every_label(report):
    page = (report / "index.html").read_text()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>" not in page


def test_ordinary_labels_and_numbers_are_unchanged():
    import pandas as pd

    for text in ("rope", "rope+yarn@4", "finetune-linear-x4", "2.13.0+cpu", "", "x=1", "pos:0-31", "0.5"):
        assert csv_cell(text) == text and md_cell(text) == text
    for value in (-0.5, -1, 0, float("-inf"), True, None):  # numbers are never quoted, only strings
        assert csv_cell(value) is value
    assert csv_cell("-0.5") == "'-0.5"  # a label that looks like a number is still a label
    frame = pd.DataFrame({"label": ["-cmd", "ok"], "value": [-0.5, 2.0], "n": [-3, 4]})
    out = csv_frame(frame)
    assert list(out["label"]) == ["'-cmd", "ok"] and out["value"].tolist() == [-0.5, 2.0] and out["n"].tolist() == [-3, 4]
    assert list(frame["label"]) == ["-cmd", "ok"]  # the frame itself is not modified


@pytest.mark.parametrize("text", ["=1+1", "'=1+1", "''=x", "'", "'plain", "-", "@", "'-0.5", "+", "\t", "a'"])
def test_csv_quoting_round_trips_exactly(text):
    assert csv_uncell(csv_cell(text)) == text
    assert not csv_cell(text).startswith(FORMULA) or NUMBER.fullmatch(csv_cell(text))


def test_markdown_cells_escape_backslash_pipe_html_and_line_breaks():
    assert md_cell("a|b") == "a\\|b"
    assert md_cell("a\\|b") == "a\\\\\\|b"  # the backslash cannot un-escape the pipe
    assert md_cell("<i>&") == "&lt;i&gt;&amp;"
    assert md_cell("two\nlines") == "two lines"
