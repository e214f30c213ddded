"""Issue 19, defect 5: every malformed input to `lenbench compare` exits 2 with one line naming the file.

Each case takes a valid side (a benchmark JSON with cell rows, kernel timings and machine_info, or
a results directory of cells/*.json), breaks one field compare reads (a wrong type, a missing key,
a non-finite or huge number, an unreadable file), and runs ``lenbench compare GOOD BAD`` through
`lenbench.cli.main`: exit 2 (never 1, the regression code), exactly one line on stderr naming the
broken file, no traceback.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lenbench.atomic import atomic_write_json
from lenbench.cli import main


def row(encoding: str, ratio: int, metric: str, value: float, seed: int = 0) -> dict:
    return {"schema_version": 2, "cell_id": f"copy-{encoding}-{seed}", "suite": "tiny", "task": "copy",
            "encoding": encoding, "variant": "none", "train_len": 8, "eval_len": 8 * ratio, "ratio": float(ratio),
            "bucket": "", "metric": metric, "value": value, "n_samples": 4, "seed": seed,
            "higher_is_better": True, "status": "ok", "error": "", "torch_version": "2.13.0+cpu", "device": "cpu",
            "sample_scores": "1 0 1 1" if metric == "exact_match" else "3/4 2/4 4/4 4/4"}


def rows() -> list[dict]:
    return [row(enc, ratio, metric, 0.75 / ratio, seed) for enc in ("rope", "alibi") for seed in (0, 1)
            for ratio in (1, 2) for metric in ("exact_match", "token_accuracy")]


def benchmark() -> dict:
    """A valid pytest-benchmark JSON: two cells with rows, one kernel timing, machine_info."""
    cells: dict[str, list[dict]] = {}
    for r in rows():
        cells.setdefault(r["cell_id"], []).append(r)
    benches = [{"name": f"test_cell[{c}]", "fullname": f"bench/test_extrapolation.py::test_cell[{c}]", "group": None,
                "extra_info": {"lenbench_rows": rs, "lenbench_cell": {"title": f"{c}-L8-s0", "status": "ok", "error": None}},
                "stats": {"median": 1.0}} for c, rs in cells.items()]
    benches.append({"name": "test_kernel[rope-eager-256]", "fullname": "bench/test_kernels.py::test_kernel[rope-eager-256]",
                    "group": "kernels", "extra_info": {"encoding": "rope", "kind": "forward", "impl": "eager", "T": 256,
                                                       "dtype": "float32", "copy_ratio": 2.0, "copy_seconds": 5e-4},
                    "stats": {"median": 1e-3, "mean": 1e-3, "min": 1e-3, "max": 1e-3, "stddev": 0.0, "rounds": 10}})
    return {"machine_info": {"python_version": "3.11.7", "cpu": {"brand_raw": "AMD EPYC", "flags": ["avx2"]},
                             "lenbench": {"device": "cpu", "device_name": "cpu", "cpu_count": 2}},
            "benchmarks": benches}


def cell(encoding: str, seed: int) -> dict:
    return {"schema_version": 2, "cell_id": f"copy-{encoding}-{seed}", "title": f"copy-{encoding}-L8-s{seed}",
            "config": {"task": "copy", "label": encoding, "encoding": encoding, "train_len": 8, "seed": seed},
            "status": "ok", "error": "", "timestamp": "2026-01-01T00:00:00+00:00", "task_fingerprint": {},
            "provenance": {"device": "cpu", "cpu_capability": "AVX2"},
            "rows": [r for r in rows() if r["encoding"] == encoding and r["seed"] == seed]}


def write_cells(directory: Path, edit: Callable[[dict], None] | None = None) -> Path:
    """A results directory; `edit` changes the first cell (copy-alibi-0) in place."""
    for i, (enc, seed) in enumerate([("alibi", 0), ("alibi", 1), ("rope", 0), ("rope", 1)]):
        data = cell(enc, seed)
        if i == 0 and edit is not None:
            edit(data)
        atomic_write_json(directory / "cells" / f"{data['cell_id']}.json", data)
    return directory


def setter(path: str, value) -> Callable[[dict], None]:
    """An edit that sets (or with `value` DELETE removes) the key at a dotted path; digits index lists."""

    def edit(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is DELETE:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = copy.deepcopy(value)

    return edit


DELETE = object()
ROW = "benchmarks.0.extra_info.lenbench_rows.0"
KERNEL = "benchmarks.4"  # after the four cells

#: (case id, dotted path in the benchmark JSON, value): the JSON with that one field broken.
BENCHMARK_CASES = [
    ("machine_info-list", "machine_info", [1]),
    ("machine_info-str", "machine_info", "amd"),
    ("machine_info-int", "machine_info", 3),
    ("machine_info-null", "machine_info", None),
    ("machine_info.cpu-list", "machine_info.cpu", ["AMD"]),
    ("machine_info.cpu-str", "machine_info.cpu", "AMD EPYC"),
    ("machine_info.cpu.brand_raw-int", "machine_info.cpu.brand_raw", 7),
    ("machine_info.cpu.flags-str", "machine_info.cpu.flags", "avx2 avx512f"),
    ("machine_info.cpu.flags-ints", "machine_info.cpu.flags", [1, 2]),
    ("machine_info.lenbench-list", "machine_info.lenbench", ["cpu"]),
    ("machine_info.lenbench-int", "machine_info.lenbench", 1),
    ("machine_info.lenbench.device-dict", "machine_info.lenbench.device", {"type": "cpu"}),
    ("machine_info.python_version-list", "machine_info.python_version", [3, 11]),
    ("benchmarks-null", "benchmarks", None),
    ("benchmarks-dict", "benchmarks", {}),
    ("benchmarks-missing", "benchmarks", DELETE),
    ("benchmark-int", "benchmarks.0", 42),
    ("benchmark-str", "benchmarks.0", "test_cell"),
    ("benchmark-null", "benchmarks.0", None),
    ("benchmark-list", "benchmarks.0", []),
    ("name-int", "benchmarks.0.name", 5),
    ("fullname-list", "benchmarks.2.fullname", ["x"]),
    ("extra_info-list", "benchmarks.0.extra_info", [1]),
    ("extra_info-str", "benchmarks.0.extra_info", "rows"),
    ("extra_info-int", "benchmarks.4.extra_info", 0),
    ("extra_info-null", "benchmarks.4.extra_info", None),
    ("lenbench_rows-str", "benchmarks.0.extra_info.lenbench_rows", "rows"),
    ("lenbench_rows-dict", "benchmarks.0.extra_info.lenbench_rows", {}),
    ("lenbench_rows-null", "benchmarks.0.extra_info.lenbench_rows", None),
    ("row-int", ROW, 1),
    ("row-null", ROW, None),
    ("row-list", ROW, [1, 2]),
    ("row-missing-task", f"{ROW}.task", DELETE),
    ("row-missing-value", f"{ROW}.value", DELETE),
    ("row-value-str", f"{ROW}.value", "high"),
    ("row-value-list", f"{ROW}.value", [0.5]),
    ("row-value-dict", f"{ROW}.value", {"v": 1}),
    ("row-train_len-str", f"{ROW}.train_len", "eight"),
    ("row-train_len-float", f"{ROW}.train_len", 8.5),
    ("row-train_len-zero", f"{ROW}.train_len", 0),
    ("row-train_len-huge", f"{ROW}.train_len", 10**30),
    ("row-train_len-inf", f"{ROW}.train_len", float("inf")),
    ("row-eval_len-nan", f"{ROW}.eval_len", float("nan")),
    ("row-seed-huge", f"{ROW}.seed", 2**70),
    ("row-seed-list", f"{ROW}.seed", [0]),
    ("row-ratio-nan", f"{ROW}.ratio", float("nan")),
    ("row-ratio-inf", f"{ROW}.ratio", float("inf")),
    ("row-ratio-negative", f"{ROW}.ratio", -1.0),
    ("row-metric-int", f"{ROW}.metric", 3),
    ("row-status-int", f"{ROW}.status", 1),
    ("row-higher_is_better-str", f"{ROW}.higher_is_better", "maybe"),
    ("row-higher_is_better-list", f"{ROW}.higher_is_better", [True]),
    ("row-sample_scores-dict", f"{ROW}.sample_scores", {"0": 1}),
    ("row-sample_scores-words", f"{ROW}.sample_scores", ["a", "b"]),
    ("row-cpu_capability-list", f"{ROW}.cpu_capability", ["AVX2"]),
    ("row-numerics-int", f"{ROW}.numerics", 1),
    ("lenbench_cell-list", "benchmarks.0.extra_info.lenbench_cell", ["ok"]),
    ("lenbench_cell-str", "benchmarks.0.extra_info.lenbench_cell", "ok"),
    ("lenbench_cell-status-int", "benchmarks.0.extra_info.lenbench_cell.status", 0),
    ("kernel-stats-missing", f"{KERNEL}.stats", DELETE),
    ("kernel-stats-list", f"{KERNEL}.stats", [1e-3]),
    ("kernel-stats-null", f"{KERNEL}.stats", None),
    ("kernel-median-missing", f"{KERNEL}.stats.median", DELETE),
    ("kernel-median-str", f"{KERNEL}.stats.median", "fast"),
    ("kernel-median-nan", f"{KERNEL}.stats.median", float("nan")),
    ("kernel-median-inf", f"{KERNEL}.stats.median", float("inf")),
    ("kernel-median-huge", f"{KERNEL}.stats.median", 1e400),
    ("kernel-min-str", f"{KERNEL}.stats.min", "0.001"),
    ("kernel-rounds-bool", f"{KERNEL}.stats.rounds", True),
    ("kernel-T-str", f"{KERNEL}.extra_info.T", "long"),
    ("kernel-T-inf", f"{KERNEL}.extra_info.T", float("inf")),
    ("kernel-copy_seconds-str", f"{KERNEL}.extra_info.copy_seconds", "fast"),
    ("kernel-copy_seconds-nan", f"{KERNEL}.extra_info.copy_seconds", float("nan")),
    ("kernel-copy_ratio-list", f"{KERNEL}.extra_info.copy_ratio", [2.0]),
    ("kernel-ratio_to_nope-str", f"{KERNEL}.extra_info.ratio_to_nope", "1.2x"),
    ("kernel-encoding-list", f"{KERNEL}.extra_info.encoding", ["rope"]),
    ("kernel-impl-int", f"{KERNEL}.extra_info.impl", 0),
]

#: (case id, dotted path in the first cell file, value): the results directory with that field broken.
CELL_CASES = [
    ("cell-rows-missing", "rows", DELETE),
    ("cell-rows-str", "rows", "none"),
    ("cell-rows-dict", "rows", {}),
    ("cell-rows-null", "rows", None),
    ("cell-row-int", "rows.0", 7),
    ("cell-row-null", "rows.0", None),
    ("cell-row-value-str", "rows.0.value", "abc"),
    ("cell-row-value-list", "rows.0.value", [1]),
    ("cell-row-train_len-str", "rows.0.train_len", "eight"),
    ("cell-row-train_len-huge", "rows.0.train_len", 10**30),
    ("cell-row-seed-huge", "rows.0.seed", 2**64),
    ("cell-row-eval_len-inf", "rows.0.eval_len", float("inf")),
    ("cell-row-missing-metric", "rows.0.metric", DELETE),
    ("cell-row-missing-encoding", "rows.0.encoding", DELETE),
    ("cell-row-higher_is_better-str", "rows.0.higher_is_better", "often"),
    ("cell-row-sample_scores-list-of-str", "rows.0.sample_scores", ["x"]),
    ("cell-row-blas-dict", "rows.0.blas", {"name": "mkl"}),
    ("cell-config-list", "config", ["copy"]),
    ("cell-config-str", "config", "copy"),
    ("cell-config-int", "config", 1),
    ("cell-config-null", "config", None),
    ("cell-config-train_len-str", "config.train_len", "eight"),
    ("cell-config-train_len-null", "config.train_len", None),
    ("cell-config-seed-huge", "config.seed", 2**80),
    ("cell-config-seed-float", "config.seed", 0.5),
    ("cell-config-task-list", "config.task", ["copy"]),
    ("cell-status-int", "status", 0),
    ("cell-status-list", "status", ["ok"]),
    ("cell-error-list", "error", ["boom"]),
    ("cell-timestamp-int", "timestamp", 0),
    ("cell-task_fingerprint-list", "task_fingerprint", ["sha"]),
    ("cell-task_fingerprint-str", "task_fingerprint", "sha"),
    ("cell-task_fingerprint-sha-int", "task_fingerprint", {"corpus_sha256": 5}),
    ("cell-provenance-list", "provenance", ["cpu"]),
    ("cell-provenance-str", "provenance", "cpu"),
    ("cell-provenance-cpu_capability-int", "provenance.cpu_capability", 2),
    ("cell-cpu_model-list", "cpu_model", ["AMD"]),
]


def run_compare(capsys, base: Path, head: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["compare", str(base), str(head), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, err: str, names: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lenbench: error: ") and names in lines[0], lines[0]
    assert "Traceback" not in err


def test_the_valid_sides_compare_clean(tmp_path, capsys):
    """The fixtures the cases break are themselves valid: identical sides pass with exit 0."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(benchmark()))
    d = write_cells(tmp_path / "run")
    code, out, err = run_compare(capsys, good, good)
    assert code == 0 and "OK: no regression" in out, out + err
    code, out, err = run_compare(capsys, d, good)
    assert code == 0 and "OK: no regression" in out, out + err


@pytest.mark.parametrize(("path", "value"), [c[1:] for c in BENCHMARK_CASES], ids=[c[0] for c in BENCHMARK_CASES])
def test_a_malformed_benchmark_json_exits_2_in_one_line(tmp_path, capsys, path, value):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(benchmark()))
    data = benchmark()
    setter(path, value)(data)
    bad.write_text(json.dumps(data))
    code, _, err = run_compare(capsys, good, bad)
    assert_one_line_error(code, err, "bad.json")
    code, _, err = run_compare(capsys, bad, good)  # the same as the base
    assert_one_line_error(code, err, "bad.json")


@pytest.mark.parametrize(("path", "value"), [c[1:] for c in CELL_CASES], ids=[c[0] for c in CELL_CASES])
def test_a_malformed_cell_file_exits_2_in_one_line(tmp_path, capsys, path, value):
    good = write_cells(tmp_path / "good")
    bad = write_cells(tmp_path / "bad", setter(path, value))
    code, _, err = run_compare(capsys, good, bad)
    assert_one_line_error(code, err, "copy-alibi-0.json")


#: (case id, file content): a whole file that is not a benchmark JSON.
FILE_CASES = [
    ("empty", b""),
    ("whitespace", b"  \n"),
    ("broken", b'{"benchmarks": ['),
    ("list", b"[]"),
    ("number", b"42"),
    ("string", b'"benchmarks"'),
    ("null", b"null"),
    ("not-utf8", b"\xff\xfe\x00{"),
    ("deeply-nested", b"[" * 200_000 + b"]" * 200_000),
    ("huge-exponent", b'{"benchmarks": [], "machine_info": 1e99999}'),
]


@pytest.mark.parametrize("content", [c[1] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_an_unreadable_file_exits_2_in_one_line(tmp_path, capsys, content):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(benchmark()))
    bad.write_bytes(content)
    code, _, err = run_compare(capsys, good, bad)
    assert_one_line_error(code, err, "bad.json")
    # the same content as a cell file of a results directory
    d = write_cells(tmp_path / "run")
    (d / "cells" / "copy-alibi-0.json").write_bytes(content)
    code, _, err = run_compare(capsys, good, d)
    assert_one_line_error(code, err, "copy-alibi-0.json")


def test_a_directory_without_cells_exits_2_in_one_line(tmp_path, capsys):
    good = write_cells(tmp_path / "good")
    (tmp_path / "bare").mkdir()  # no cells/, results.csv or bench.json
    code, _, err = run_compare(capsys, good, tmp_path / "bare")
    assert_one_line_error(code, err, "bare")
    assert "directory without cells/*.json, results.csv or bench.json" in err
    for name in ("empty-a", "empty-b"):
        (tmp_path / name / "cells").mkdir(parents=True)
    code, _, err = run_compare(capsys, tmp_path / "empty-a", tmp_path / "empty-b")  # two empty runs
    assert_one_line_error(code, err, "empty-a")
    assert "nothing to compare" in err
    # an empty head against a base with rows is everything missing in head: the gate's exit 1
    # (tests/compare/test_compare.py::test_no_overlap_fails_unless_allowed), not malformed input
    code, out, err = run_compare(capsys, good, tmp_path / "empty-b")
    assert code == 1 and err == "" and "no measurement or kernel in common" in out
    d = write_cells(tmp_path / "odd")
    (d / "cells" / "copy-rope-0.json").unlink()
    (d / "cells" / "copy-rope-0.json").mkdir()  # a directory where a cell file belongs
    code, _, err = run_compare(capsys, good, d)
    assert_one_line_error(code, err, "copy-rope-0.json")


@pytest.mark.parametrize("content", ["", "task,encoding\n", "a\n\"unclosed\n", "\xff"], ids=["empty", "no-rows-columns", "bad-quote", "latin"])
def test_a_malformed_csv_exits_2_in_one_line(tmp_path, capsys, content):
    good = write_cells(tmp_path / "good")
    bad = tmp_path / "bad.csv"
    bad.write_bytes(content.encode("latin-1"))
    code, _, err = run_compare(capsys, good, bad)
    assert_one_line_error(code, err, "bad.csv")


def test_a_bad_sibling_bench_json_of_a_results_directory_exits_2(tmp_path, capsys):
    """A results directory's bench.json is read for its timings and machine_info: checked the same way."""
    good = write_cells(tmp_path / "good")
    bad = write_cells(tmp_path / "bad")
    data = benchmark()
    data["machine_info"]["cpu"] = "AMD EPYC"
    (bad / "bench.json").write_text(json.dumps(data))
    code, _, err = run_compare(capsys, good, bad)
    assert_one_line_error(code, err, "bench.json")
    assert "machine_info.cpu is a string ('AMD EPYC'), expected an object" in err


def test_the_message_says_what_is_wrong(tmp_path, capsys):
    """The one line names the place in the file and what was expected (defect 5's own reproduction)."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(benchmark()))
    data = benchmark()
    data["machine_info"] = ["not", "a", "dict"]
    bad.write_text(json.dumps(data))
    code, _, err = run_compare(capsys, good, bad)
    assert code == 2
    assert err.strip() == f"lenbench: error: {bad}: machine_info is a list (['not', 'a', 'dict']), expected an object"
    data = benchmark()
    data["benchmarks"][4]["extra_info"] = "x"
    bad.write_text(json.dumps(data))
    code, _, err = run_compare(capsys, good, bad)
    assert err.strip() == (f"lenbench: error: {bad}: benchmark 'bench/test_kernels.py::test_kernel[rope-eager-256]': "
                           "extra_info is a string ('x'), expected an object")
    bad_dir = write_cells(tmp_path / "run", setter("rows.0.seed", 2**70))
    code, _, err = run_compare(capsys, good, bad_dir)
    assert err.strip() == (f"lenbench: error: {bad_dir / 'cells' / 'copy-alibi-0.json'}: row 0: seed is a number "
                           f"({2**70}), expected an integer within 64 bits")


@pytest.mark.parametrize(("value", "code", "line"), [(float("nan"), 1, "FAIL: 1 quality regression(s)"),
                                                     (None, 1, "FAIL: 1 quality regression(s)"),
                                                     (float("inf"), 0, "OK: no regression")])
def test_non_finite_measurement_values_are_compared_not_refused(tmp_path, capsys, value, code, line):
    """A NaN / null value is a failed measurement (ok in base, failed in head: a regression) and inf
    a value (better, for exact match): data, compared, not malformed input."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(benchmark()))
    data = benchmark()
    data["benchmarks"][0]["extra_info"]["lenbench_rows"][0]["value"] = value
    head = tmp_path / "head.json"
    head.write_text(json.dumps(data))
    got, out, err = run_compare(capsys, good, head)
    assert got == code and err == "" and line in out, out + err
