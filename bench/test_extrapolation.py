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

import pytest

from lenbench.engine import ensure_cell, run_suite
from lenbench.suite import load_suite


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" in metafunc.fixturenames:
        suite = load_suite(metafunc.config.getoption("--suite"))
        cells = suite.cells()
        metafunc.parametrize("cell", cells, ids=[c.title for c in cells])


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
        outcome["result"], outcome["reused"] = ensure_cell(
            cell, results_dir, device, progress=False, threads=request.config.getoption("--threads"),
            keep_stale=request.config.getoption("--keep-stale"))

    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
    result = outcome["result"]
    benchmark.extra_info["lenbench_rows"] = result["rows"]
    benchmark.extra_info["lenbench_cell"] = {
        "cell_id": result["cell_id"], "title": result["title"], "status": result["status"],
        "error": result["error"], "train_seconds": result.get("train_seconds"), "reused": outcome["reused"],
        "timed": "cache load" if outcome["reused"] else "compute",
    }
    if result["status"] == "failed" and not result["error"].startswith("TrainingDiverged"):
        pytest.fail(f"cell {cell.title} failed: {result['error']}")
