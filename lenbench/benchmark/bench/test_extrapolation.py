"""One benchmark per grid cell of the selected suite (`--suite`, default quick).

Each test drives the engine (finished cells in the results directory whose code fingerprint still
matches are reused, stale ones rerun), times the cell in one round, and puts every metric row into
`benchmark.extra_info`:

    extra_info["lenbench_table"] the cell's tidy rows (DESIGN.md schema), packed once per cell
                                 (`lenbench.results.bench_rows`), so the benchmark JSON alone
                                 rebuilds the leaderboard (`lenbench report out.json`)
    extra_info["lenbench_cell"]  cell_id, title, status, error, seconds (the cell's compute time,
                                 measured when it was computed), train_seconds, timed (what the
                                 JSON's stats are), round (what this session's round timed),
                                 reused (computed by an earlier session), computed_by (the executor
                                 that computed it in this session, None when reused)

What the benchmark JSON's stats of a cell mean: one round of the cell's compute time (training, or
loading its cached checkpoint, then evaluation), measured when the cell was computed, whichever
session that was (`lenbench.benchmark.bench_json`: ``timed`` says "cell compute (train + eval),
measured when computed"). The session's own round, which pytest-benchmark's terminal table shows,
is the compute for a cell this test computed (``round: "compute"``) and only a read of the stored
result otherwise (``round: "cache load"``); pytest-benchmark cannot record a test without one.

A cell whose training diverged is a measurement (recorded, test passes); any other failure of a
cell fails its test after its rows are recorded. The other cells are never affected.

By default (`--executor auto`: CPU cells on a machine with several cores) and with `--executor
process` or `ray`, a session fixture first runs every pending cell that the session selected
(`-k` included) through that executor (`lenbench.run.driver.run_suite`: one process per core, or
across a Ray cluster with `--ray-address`); each test then reads its cell's file, so there is
still one benchmark per cell, whose round is the read and whose stats in the JSON are the compute
time measured on the worker. With `--executor serial` each test computes its own cell in its round.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from lenbench.benchmark.bench_json import CELL, cell_timing
from lenbench.config import load_suite
from lenbench.evaluate import PRIMARY_METRIC
from lenbench.results.bench_rows import TABLE, pack
from lenbench.results.cell import CellResult
from lenbench.run.driver import ensure_cell, run_suite
from lenbench.run.executors.base import plan_execution


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


def headline(result: CellResult) -> str:
    """One line of a finished cell's rows: its primary metric at 1× and the mean past the training
    length (model as trained), e.g. ``exact_match 1x 0.984, past train 0.312``."""
    rows = [r for r in result.rows if r.get("variant") == "none" and r.get("metric") in PRIMARY_METRIC.values()
            and not str(r.get("encoding", "")).startswith("baseline:")]
    if not rows:
        return result.error or "no rows"
    metric = rows[0]["metric"]
    def ok(v) -> bool:
        return v is not None and v == v  # a failed length: None or NaN

    at_1 = [r["value"] for r in rows if r["metric"] == metric and r["ratio"] == 1 and ok(r["value"])]
    past = [r["value"] for r in rows if r["metric"] == metric and r["ratio"] > 1]
    past_text = "fail" if not all(ok(v) for v in past) else (f"{sum(past) / len(past):.3f}" if past else "–")
    return f"{metric} 1x {at_1[0]:.3f}, past train {past_text}" if at_1 else f"{metric} 1x fail"


@pytest.fixture(scope="session")
def cells_run_by_executor(request, results_dir, device) -> tuple[str, dict[str, float]]:
    """Runs the session's selected pending cells through the executor first unless it resolves to
    serial (`lenbench.run.executors.base.plan_execution`), with a progress bar on the terminal; returns the
    executor's name and the cells it computed (cell id → seconds it took on its worker)."""
    executor = request.config.getoption("--executor")
    address = request.config.getoption("--ray-address")
    if address is not None and executor != "ray":
        raise pytest.UsageError("--ray-address needs --executor ray")
    workers = request.config.getoption("--workers")
    executor = plan_execution(executor, workers, device.type).executor
    computed: dict[str, float] = {}
    if executor != "serial":
        selected = {item.callspec.params["cell_id"] for item in request.session.items
                    if hasattr(item, "callspec") and "cell_id" in item.callspec.params}
        options = {"address": address} if address is not None else {}
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        with _uncaptured(request):
            if reporter is not None:
                reporter.write_line("")
            results = run_suite(load_suite(request.config.getoption("--suite")), results_dir, device=device.type,
                                executor=executor, workers=workers, threads=request.config.getoption("--threads"),
                                keep_stale=request.config.getoption("--keep-stale"), only=selected,
                                progress=reporter is not None, **options)
        computed = {r.cell_id: r.seconds or 0.0 for r in results.computed}
    return executor, computed


def _uncaptured(request):
    """A context in which output reaches the terminal (the progress bar, the engine's notices)."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    return capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext()


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
    benchmark.extra_info[TABLE] = pack(result.rows)
    executor, computed = cells_run_by_executor
    benchmark.extra_info[CELL] = {
        "cell_id": result.cell_id, "title": result.title, "status": result.status,
        "error": result.error, "train_seconds": result.train_seconds,
        **cell_timing(result.seconds, "cache load" if outcome["reused"] else "compute"),
        "reused": outcome["reused"] and cell.cell_id not in computed,
        "computed_by": executor if cell.cell_id in computed else ("serial" if not outcome["reused"] else None),
    }
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:  # dots say nothing for minutes: one line per finished cell, past output capturing
        if cell.cell_id in computed:
            how = f"computed by the {executor} executor in {computed[cell.cell_id]:.1f} s"
        else:
            how = f"{'reused' if outcome['reused'] else 'computed'} in {outcome['seconds']:.1f} s"
        with _uncaptured(request):
            if reporter.verbosity < 0:  # -q: the progress dots carry no file name, so end their line here
                reporter.write("\n")
            reporter.write_line(f"lenbench: {cell.title} {how}: {headline(result)}")
    if result.failed and not result.error.startswith("TrainingDiverged"):
        pytest.fail(f"cell {cell.title} failed: {result.error}")
