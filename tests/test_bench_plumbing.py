"""`pytest bench` plumbing on a tiny suite: one benchmark per cell, rows in extra_info, its compute time as its
stats, reuse, report."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lenbench_testing import TINY_SUITE

from lenbench.benchmark.bench_json import CELL_TIMED
from lenbench.config import parse_suite
from lenbench.results.bench_rows import cell_rows

ROOT = Path(__file__).resolve().parent.parent

TINY = {**TINY_SUITE, "train": {**TINY_SUITE["train"], "steps": 4},
        "tasks": [{"name": "copy", "train_len": 4}, {"name": "lm", "train_len": 16}]}  # TINY_SUITE's geometry


def run_bench(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    suite = tmp_path / "tiny.yaml"
    suite.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/test_extrapolation.py", "--suite", str(suite), "--device", "cpu",
         "--results-dir", str(tmp_path / "results"), "--benchmark-json", str(out), "-q", "-p", "no:cacheprovider",
         *extra],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


@pytest.fixture(scope="module")
def first_session(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, dict]:
    """One `pytest bench` session on TINY in a fresh directory, which three tests read (a session
    costs about 20 s): (its directory, the process, its benchmark JSON)."""
    directory = tmp_path_factory.mktemp("bench")
    return (directory, *run_bench(directory))


@pytest.mark.subprocess
def test_bench_json_holds_every_cell_and_its_rows(first_session):
    _, _, data = first_session
    cells = parse_suite(TINY).cells()
    benches = data["benchmarks"]
    assert sorted(b["param"] for b in benches) == sorted(c.title for c in cells)
    for b in benches:
        info = b["extra_info"]
        assert info["lenbench_cell"]["status"] == "ok" and not info["lenbench_cell"]["reused"]
        rows = cell_rows(info)
        assert {r["ratio"] for r in rows} == {1.0, 2.0}
        assert all(r["cell_id"] == info["lenbench_cell"]["cell_id"] for r in rows)
    variants = {r["variant"] for b in benches for r in cell_rows(b["extra_info"]) if r["encoding"] == "rope"}
    assert variants == {"none", "linear"}
    machine = data["machine_info"]["lenbench"]
    assert machine["torch_version"] and machine["device"] == "cpu" and machine["cpu_threads"] >= 1


@pytest.mark.subprocess
def test_params_are_readable_and_one_progress_line_per_cell(first_session):
    _, proc, data = first_session
    cells = {c.title: c for c in parse_suite(TINY).cells()}
    for b in data["benchmarks"]:  # strings, not UNSERIALIZABLE[Cell(...)]
        assert b["params"] == {"cell_title": b["param"], "cell_id": cells[b["param"]].cell_id}
    lines = [x for x in proc.stdout.splitlines() if x.startswith("lenbench: ") and " computed " in x]
    assert sorted(x.split()[1] for x in lines) == sorted(cells)
    # computed by the default executor (one process per core) before the tests, or in the test (serial)
    assert all(re.search(r" computed (by the (process|serial) executor )?in \d+\.\d s: (exact_match|perplexity) 1x "
                         r"(\d+\.\d{3}|fail), past train ", x) for x in lines), lines


@pytest.mark.subprocess
def test_second_session_reuses_finished_cells(first_session):
    directory, _, first = first_session
    _, second = run_bench(directory)  # a second session in the first one's directory
    assert all(b["extra_info"]["lenbench_cell"]["reused"] for b in second["benchmarks"])
    rows = lambda d: sorted(json.dumps(r, sort_keys=True) for b in d["benchmarks"] for r in cell_rows(b["extra_info"]))  # noqa: E731
    assert rows(first) == rows(second)
    # the reused cells' stats are the compute time of the first session, not the second's cache read
    assert [b["stats"] for b in second["benchmarks"]] == [b["stats"] for b in first["benchmarks"]]


def cell_result(tmp_path: Path, cell_id: str) -> dict:
    return json.loads((tmp_path / "results" / "cells" / f"{cell_id}.json").read_text())


@pytest.mark.subprocess
def test_a_cells_stats_are_its_recorded_compute_time_not_the_cache_read(tmp_path):
    """The default executor computes the cells before the tests, whose rounds then only read them:
    the JSON's stats are each cell's `seconds` from its cell file, and say so."""
    _, data = run_bench(tmp_path, "--executor", "process", "--workers", "2")
    for b in data["benchmarks"]:
        info = b["extra_info"]["lenbench_cell"]
        seconds = cell_result(tmp_path, info["cell_id"])["seconds"]
        assert info["round"] == "cache load" and info["timed"] == CELL_TIMED and info["seconds"] == seconds
        stats = b["stats"]
        assert stats["rounds"] == 1 and stats["stddev"] == 0 and stats["data"] == [seconds]
        assert stats["min"] == stats["max"] == stats["mean"] == stats["median"] == seconds
        assert seconds > info["train_seconds"] > 0
    text = (tmp_path / "bench.json").read_text()
    row = data["benchmarks"][0]["extra_info"]["lenbench_table"]["blocks"][0]["data"][0]
    assert json.dumps(row) in text  # lenbench's layout: one line per row, not one line per value


@pytest.mark.subprocess
def test_unavailable_device_skips_with_reason(tmp_path):
    suite = tmp_path / "tiny.yaml"
    suite.write_text(yaml.safe_dump(TINY))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/test_extrapolation.py", "--suite", str(suite), "--device", "cuda",
         "--results-dir", str(tmp_path / "r"), "-q", "-rs", "-p", "no:cacheprovider", "--benchmark-disable"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "4 skipped" in proc.stdout and "device 'cuda' is not available" in proc.stdout


@pytest.mark.subprocess
def test_an_unknown_suite_is_one_usage_line_not_a_collection_error_per_module():
    proc = subprocess.run([sys.executable, "-m", "pytest", "bench", "--suite", "nosuch", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    lines = [x for x in (proc.stdout + proc.stderr).splitlines() if x.strip()]
    assert lines == ["ERROR: --suite: unknown suite 'nosuch' (presets: calibration, catalog, paper, quick, smoke, "
                     "standard; or give a path to a .yaml file)"]


@pytest.mark.subprocess
def test_the_sessions_report_has_the_cost_view_of_its_benchmark_json(tmp_path):
    """`pytest bench --benchmark-json X` on cells and kernels: the report written at the end of the session
    holds the cost view of X's timings (cost.md names the timed kernels, the figures and the page's section),
    the same one `lenbench report X` builds, not only the board."""
    suite = tmp_path / "tiny.yaml"
    timed = {**TINY_SUITE, "variants": [], "encodings": ["nope", "alibi"],
             "train": {**TINY_SUITE["train"], "steps": 3, "warmup": 1},
             "kernels": {"lengths": [32], "dtypes": ["fp32"], "seconds": 0.01, "encodings": ["alibi"],
                         "train_rounds": 1}}
    suite.write_text(yaml.safe_dump(timed))
    results, bench = tmp_path / "results", tmp_path / "elsewhere" / "bench.json"
    bench.parent.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/test_extrapolation.py", "bench/test_kernels.py", "--suite", str(suite),
         "--device", "cpu", "--results-dir", str(results), "--benchmark-json", str(bench), "-q",
         "-p", "no:cacheprovider", "-k", "test_extrapolation or test_training_step or (test_kernel and alibi and (eager or cached))"],
        cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    timed_kernels = {b["extra_info"].get("encoding") for b in json.loads(bench.read_text())["benchmarks"]
                     if b["extra_info"].get("kind") == "bias"}
    assert timed_kernels == {"alibi"}
    cost = (results / "cost.md").read_text()
    assert "| alibi " in cost  # the timed kernel
    for name in ("cost.csv", "cost.png", "quality_cost.png", "leaderboard.md"):
        assert (results / name).is_file(), name
    assert "What it costs" in (results / "index.html").read_text()
    assert "cost.md" in proc.stdout  # the session's line lists what it wrote


FAILING_AFTER_TIMING = '''
def test_timed_then_right(benchmark):
    benchmark.extra_info["kind"] = "rotary"
    benchmark(lambda: sum(range(100)))


def test_timed_then_wrong(benchmark):  # a kernel whose output check fails after its timing
    benchmark.extra_info["kind"] = "rotary"
    benchmark(lambda: sum(range(100)))
    assert False, "fused output differs from the reference"


def test_a_cell_that_failed(benchmark):  # a cell benchmark: its cell records its failure, it stays
    benchmark.extra_info["lenbench_cell"] = {"timed": "x"}
    benchmark(lambda: None)
    assert False, "the cell failed"
'''


@pytest.mark.subprocess
def test_a_failed_tests_timing_never_reaches_the_benchmark_json(tmp_path):
    (tmp_path / "test_timed.py").write_text(FAILING_AFTER_TIMING)
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_timed.py"), "--benchmark-json", str(out),
                           "-q", "-p", "no:cacheprovider", "--benchmark-min-rounds", "1"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout[-3000:]
    names = [b["name"] for b in json.loads(out.read_text())["benchmarks"]]
    assert names == ["test_timed_then_right", "test_a_cell_that_failed"]
    assert "1 timing(s) of failed tests left out of the benchmark JSON: test_timed_then_wrong" in proc.stdout


def test_drop_failed_keeps_cells_and_passed_tests():
    from lenbench.benchmark.bench_json import drop_failed

    data = {"benchmarks": [{"name": "a", "fullname": "t.py::a", "extra_info": {}},
                           {"name": "b", "fullname": "t.py::b", "extra_info": {"kind": "bias"}},
                           {"name": "c", "fullname": "t.py::c", "extra_info": {"lenbench_cell": {}}}]}
    assert drop_failed(data, {"t.py::b", "t.py::c"}) == ["b"]
    assert [b["name"] for b in data["benchmarks"]] == ["a", "c"]
