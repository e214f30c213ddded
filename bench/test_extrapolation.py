"""One benchmark per grid cell of the selected suite (`--suite`, default quick).

Each test drives the engine (finished cells in the results directory whose code fingerprint still
matches are reused, stale ones rerun), times the cell in one round, and puts every metric row into
`benchmark.extra_info`:

    extra_info["lenbench_rows"]  the cell's tidy rows (DESIGN.md schema), so the benchmark JSON
                                 alone rebuilds the leaderboard (`lenbench report out.json`)
    extra_info["lenbench_cell"]  cell_id, title, status, error, train_seconds, reused, timed

What the benchmark's timing means: for a cell computed now (`reused: false`, `timed: "compute"`)
it is training plus evaluation; for a reused cell (`reused: true`, `timed: "cache load"`) it is
only reading the stored result, so use `train_seconds` (measured when the cell was computed) for
training cost. pytest-benchmark cannot record a test without a timed round, hence the marking.

A cell whose training diverged is a measurement (recorded, test passes); any other failure of a
cell fails its test after its rows are recorded. The other cells are never affected.

With `--executor ray` (or `process`) a session fixture first runs every pending cell of the suite
through that executor (`lenbench.engine.run_suite`: in parallel, across a Ray cluster with
`--ray-address`); each test then reads its cell's file, so there is still one benchmark per cell,
but its timed round is the read, and `extra_info["lenbench_cell"]["train_seconds"]` holds the
training time measured on the worker. The whole suite runs even when `-k` selects a few cells.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from lenbench.engine import ensure_cell, run_suite
from lenbench.evaluate import PRIMARY_METRIC
from lenbench.suite import load_suite


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per cell, parametrized by strings (the cell's title and id), so pytest-benchmark's
    JSON records readable, serialisable ``params`` ({"cell_title": …, "cell_id": …}) and
    ``--benchmark-group-by=param:cell_title`` works."""
    if "cell_title" in metafunc.fixturenames:
        cells = load_suite(metafunc.config.getoption("--suite")).cells()
        metafunc.parametrize(("cell_title", "cell_id"), [(c.title, c.cell_id) for c in cells],
                             ids=[c.title for c in cells])


@pytest.fixture
def cell(request, cell_title: str, cell_id: str):
    """The suite's cell of this test."""
    return next(c for c in load_suite(request.config.getoption("--suite")).cells() if c.cell_id == cell_id)


def headline(result: dict) -> str:
    """One line of a finished cell's rows: its primary metric at 1× and the mean past the training
    length (model as trained), e.g. ``exact_match 1x 0.984, past train 0.312``."""
    rows = [r for r in result.get("rows") or [] if r.get("variant") == "none" and r.get("metric") in PRIMARY_METRIC.values()
            and not str(r.get("encoding", "")).startswith("baseline:")]
    if not rows:
        return result.get("error") or "no rows"
    metric = rows[0]["metric"]
    def ok(v) -> bool:
        return v is not None and v == v  # a failed length: None or NaN

    at_1 = [r["value"] for r in rows if r["metric"] == metric and r["ratio"] == 1 and ok(r["value"])]
    past = [r["value"] for r in rows if r["metric"] == metric and r["ratio"] > 1]
    past_text = "fail" if not all(ok(v) for v in past) else (f"{sum(past) / len(past):.3f}" if past else "–")
    return f"{metric} 1x {at_1[0]:.3f}, past train {past_text}" if at_1 else f"{metric} 1x fail"


@pytest.fixture(scope="session")
def cells_run_by_executor(request, results_dir, device) -> str:
    """Runs every pending cell through `--executor` first unless it is serial; returns its name."""
    executor = request.config.getoption("--executor")
    address = request.config.getoption("--ray-address")
    if address is not None and executor != "ray":
        raise pytest.UsageError("--ray-address needs --executor ray")
    if executor != "serial":
        options = {"address": address} if address is not None else {}
        run_suite(load_suite(request.config.getoption("--suite")), results_dir, device=device.type,
                  executor=executor, workers=request.config.getoption("--workers"),
                  threads=request.config.getoption("--threads"),
                  keep_stale=request.config.getoption("--keep-stale"), progress=False, **options)
    return executor


def test_cell(cell, benchmark, device, results_dir, request, cells_run_by_executor):
    benchmark.group = f"extrapolation-{cell.suite}"
    outcome = {}

    def run():
        start = time.perf_counter()
        outcome["result"], outcome["reused"] = ensure_cell(
            cell, results_dir, device, progress=False, threads=request.config.getoption("--threads"),
            keep_stale=request.config.getoption("--keep-stale"))
        outcome["seconds"] = time.perf_counter() - start

    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
    result = outcome["result"]
    benchmark.extra_info["lenbench_rows"] = result["rows"]
    benchmark.extra_info["lenbench_cell"] = {
        "cell_id": result["cell_id"], "title": result["title"], "status": result["status"],
        "error": result["error"], "train_seconds": result.get("train_seconds"), "reused": outcome["reused"],
        "timed": "cache load" if outcome["reused"] else "compute",
    }
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None:  # dots say nothing for minutes: one line per finished cell, past output capturing
        how = "reused" if outcome["reused"] else "computed"
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            if reporter.verbosity < 0:  # -q: the progress dots carry no file name, so end their line here
                reporter.write("\n")
            reporter.write_line(f"lenbench: {cell.title} {how} in {outcome['seconds']:.1f} s: {headline(result)}")
    if result["status"] == "failed" and not result["error"].startswith("TrainingDiverged"):
        pytest.fail(f"cell {cell.title} failed: {result['error']}")
