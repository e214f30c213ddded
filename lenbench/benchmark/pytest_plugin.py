"""The pytest plugin of lenbench: the options, fixtures and hooks of `pytest bench` (shared with
`pytest tests`).

Installed as the `pytest11` entry point `lenbench` (pyproject.toml), the way pytest-benchmark
ships its own plugin, so an installed lenbench can time kernels without a checkout's conftest.py;
the root conftest.py of a checkout loads it only where the entry point did not
(`lenbench.benchmark.entry_point.autoloaded`).

Fixtures: `device` (the selected torch device; skips when unavailable), `results_dir` (where cells
write; the report is written at the end of the session), `timed` (a device-synchronised
pytest-benchmark run). Hooks: the benchmark JSON's `machine_info["lenbench"]`, each cell benchmark's
stats as its compute time and the file's compact layout (`lenbench.benchmark.bench_json`), and
`--benchmark-group-by=param:NAME` across benchmarks without that parameter.

Options:
    --device {cpu,auto,cuda,xpu,mps}   where cells train and kernels run (default cpu, so published
                                       baselines compare like with like; auto: accelerator, else CPU)
    --suite NAME|PATH                  suite preset or YAML file for bench/test_extrapolation.py (default quick)
    --results-dir DIR                  per-cell results and the report (default runs/<suite name>)
    --threads N                        intra-op CPU threads per cell (default 1); in every row
    --keep-stale                       reuse finished cells whose code fingerprint changed (default: recompute)
    --executor auto|serial|process|ray where the cells of bench/test_extrapolation.py run (default auto:
                                       CPU cells in one process per core, run before the tests read them;
                                       serial: in each test; ray: every selected cell on Ray first)
    --workers N                        with --executor process / auto: worker processes (default one per core)
    --ray-address auto|HOST:PORT       with --executor ray: the cluster to join (default: a local Ray)
    --numerics pinned|native           CPU numeric code paths (default pinned: the same bits on every x86
                                       machine of one CPU vendor with AVX2; native: each library's own)
    --lenbench-plugin MODULE_OR_PATH   load an encoding / task plugin first (repeatable; the suite's
                                       `plugins:` load too; see docs/add-encoding.md)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lenbench.benchmark.machine import lenbench_machine_info
from lenbench.device import DEVICES, DeviceError, resolve_device, synchronize


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lenbench")
    group.addoption("--device", default="cpu", choices=DEVICES,
                    help="device for cells and kernels (default cpu); auto picks CUDA / XPU / MPS when present")
    group.addoption("--suite", default="quick", help="suite preset (`lenbench list suites` lists them) or YAML path")
    group.addoption("--results-dir", default=None, help="results directory (default: runs/<suite name>)")
    group.addoption("--threads", type=int, default=None,
                    help="intra-op CPU threads per cell (default: 1); recorded in every row")
    group.addoption("--keep-stale", action="store_true",
                    help="reuse finished cells whose code/environment fingerprint changed (default: recompute them)")
    group.addoption("--executor", default="auto",
                    help="where suite cells run: auto (default: CPU cells in one process per core, else serial), "
                         "serial (in each test), process or ray (the selected pending cells first, then each test "
                         "reads its cell)")
    group.addoption("--workers", type=int, default=None,
                    help="with --executor process or auto: worker processes (default: one per usable core)")
    group.addoption("--numerics", default=None, choices=("pinned", "native"),
                    help="CPU numeric code paths (default: $LENBENCH_NUMERICS, else pinned: the same bits on every "
                         "x86 machine of one CPU vendor with AVX2); native: each library's own choice, faster on "
                         "AVX-512, bits depend on the CPU (lenbench.numerics)")
    group.addoption("--ray-address", default=None,
                    help="with --executor ray: auto or HOST:PORT of a running cluster (default: start a local Ray)")
    group.addoption("--lenbench-plugin", action="append", default=[], metavar="MODULE_OR_PATH",
                    help="load an encoding / task plugin before collection: an importable module name or a path to "
                         "a .py file (repeatable; the suite's own `plugins:` are loaded with it)")


def results_path(config: pytest.Config) -> Path:
    """--results-dir, or runs/<suite name>."""
    chosen = config.getoption("--results-dir")
    if chosen:
        return Path(chosen)
    from lenbench.config import load_suite

    return Path("runs") / load_suite(config.getoption("--suite")).name


@pytest.fixture(scope="session")
def results_dir(request: pytest.FixtureRequest) -> Path:
    """Where cells write their result files (and the report is written at the end of the session)."""
    path = results_path(request.config)
    request.config.stash[_RAN_CELLS] = True
    return path


_RAN_CELLS = pytest.StashKey[bool]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After cells ran, write the leaderboard, wide CSV, markdown and plots into the results directory.

    First, the benchmark JSON pytest-benchmark has just written (its own sessionfinish is a hook
    wrapper that writes the file before it yields to this one) is rewritten in lenbench's layout
    (`lenbench.benchmark.bench_json.rewrite`); the report then takes its kernel timings and training
    steps from that file, so `pytest bench --benchmark-json X` writes the cost view (``cost.md``,
    ``cost.png``, ``quality_cost.png``, the page's "What it costs") with the board."""
    bench_json = _rewrite_benchmark_json(session.config)
    if not session.config.stash.get(_RAN_CELLS, False):
        return
    out = results_path(session.config)
    if not (out / "cells").is_dir():
        return
    try:
        from lenbench.report.build import write_report
    except ImportError:
        return
    from lenbench.config import load_suite

    # the suite's cells: those an earlier configuration of it (another budget) left in `out` are not its board
    suite = load_suite(session.config.getoption("--suite"))
    suite_cells = [cell.cell_id for cell in suite.cells()]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter is not None:
            reporter.write_line(f"lenbench: {line}")

    written = write_report(out, out, cell_ids=suite_cells, benchmark_json=bench_json, notes=say, note=suite.note)
    if suite.note:
        say(suite.note)
    say(f"report of {out} written: {', '.join(p.name for p in written)}")


def _rewrite_benchmark_json(config: pytest.Config) -> Path | None:
    """The `--benchmark-json` file in lenbench's layout, when pytest-benchmark wrote one; its path
    (None without one)."""
    target = config.getoption("benchmark_json", None)
    if target is None:
        return None
    if hasattr(target, "flush"):  # pytest-benchmark 4 opens it as a file (argparse.FileType)
        target.flush()
        target = target.name
    path = Path(target)
    if path.is_file() and path.stat().st_size:
        from lenbench.benchmark.bench_json import rewrite

        rewrite(path)
        return path
    return None


_FAILED_TESTS = pytest.StashKey[set]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Remember the tests that failed (any phase), for `pytest_benchmark_update_json`."""
    report = yield
    if report.failed:
        item.config.stash.setdefault(_FAILED_TESTS, set()).add(item.nodeid)
    return report


@pytest.hookimpl(optionalhook=True)  # a pytest-benchmark hook: no error in a session without it
def pytest_benchmark_update_json(config: pytest.Config, benchmarks: list, output_json: dict) -> None:
    """Each cell benchmark's stats: one round of its compute time (`lenbench.benchmark.bench_json.time_cells`);
    the kernel and training-step benchmarks of failed tests left out (`bench_json.drop_failed`)."""
    from lenbench.benchmark.bench_json import drop_failed, time_cells

    time_cells(output_json)
    dropped = drop_failed(output_json, config.stash.get(_FAILED_TESTS, set()))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if dropped and reporter is not None:
        reporter.write_line(f"lenbench: {len(dropped)} timing(s) of failed tests left out of the benchmark JSON: "
                            f"{', '.join(dropped)}")


@pytest.fixture(scope="session")
def device(request: pytest.FixtureRequest) -> torch.device:
    """The selected device; tests that need it are skipped, with the reason, when it is unavailable."""
    name = request.config.getoption("--device")
    try:
        return resolve_device(name)
    except DeviceError as err:
        pytest.skip(str(err))


_SESSION_START = pytest.StashKey[float]()


def pytest_configure(config: pytest.Config) -> None:
    import time

    config.stash[_SESSION_START] = time.perf_counter()
    if config.getoption("--numerics", None):
        from lenbench.numerics import set_mode

        set_mode(config.getoption("--numerics"))
    if config.getoption("--lenbench-plugin", None):
        from lenbench.plugins import PluginError, load_plugins

        try:
            load_plugins(config.getoption("--lenbench-plugin"))  # before collection reads the registries
        except PluginError as err:
            raise pytest.UsageError(str(err)) from None
    if config.getoption("--suite", "quick") != "quick":  # a bad --suite: one line, not an error per bench module
        from lenbench.config import SuiteError, load_suite

        try:
            load_suite(config.getoption("--suite"))
        except SuiteError as err:
            raise pytest.UsageError(f"--suite: {err}") from None


@pytest.hookimpl(optionalhook=True)  # a pytest-benchmark hook: no error in a session without it
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    import time

    try:
        dev = resolve_device(config.getoption("--device"))
    except DeviceError:
        dev = torch.device("cpu")
    machine_info["lenbench"] = lenbench_machine_info(dev)
    # The session's wall time when the JSON is written (its end) and what ran: the budget targets
    # of `python bench/kernel_plans.py` (smoke <= 60 s, the main command <= 15 min) read these.
    start = config.stash.get(_SESSION_START, None)
    machine_info["lenbench"]["session_seconds"] = None if start is None else time.perf_counter() - start
    machine_info["lenbench"]["suite"] = config.getoption("--suite")
    machine_info["lenbench"]["selection"] = config.getoption("-k") or ""


class SyncedTimer:
    """Times `fn` with pytest-benchmark so that asynchronous CUDA / XPU kernels are timed in full:
    each round ends with a device synchronise, after warm-up rounds (compilation and autotuning
    happen there, never inside a timed round).

    On the CPU a round is one call. On an accelerator it is `lenbench.benchmark.timing.calls_per_round`
    calls (pytest-benchmark's `iterations`; its statistics are per call) with one synchronise
    after the last: one launch and synchronise per µs-scale kernel would time mostly latency.
    """

    def __init__(self, benchmark, device: torch.device) -> None:
        self.benchmark = benchmark
        self.device = device

    def __call__(self, fn, *args, rounds: int = 20, warmup_rounds: int = 3):
        from lenbench.benchmark.timing import synced_every

        for _ in range(warmup_rounds):
            fn(*args)
        synchronize(self.device)
        target, calls = synced_every(lambda: fn(*args), self.device)
        result = self.benchmark.pedantic(target, rounds=rounds, iterations=calls, warmup_rounds=0)
        if calls > 1:
            self.benchmark.extra_info["calls_per_round"] = calls
        return result


@pytest.fixture
def timed(benchmark, device) -> SyncedTimer:
    """`timed(fn, *args, rounds=…, warmup_rounds=…)`: a device-synchronised pytest-benchmark run."""
    return SyncedTimer(benchmark, device)


# tryfirst: the hook returns its first result, and an entry-point plugin may be registered before
# pytest-benchmark's own implementation (which would then answer first and fail on param:NAME)
@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_benchmark_group_stats(config: pytest.Config | None, benchmarks: list, group_by: str) -> list:
    """pytest-benchmark's grouping, except that `--benchmark-group-by=param:NAME` does not fail
    (KeyError) on benchmarks without that parameter: `pytest bench -k kernels
    --benchmark-group-by=param:T` groups the kernel timings by length and leaves the training-step
    and MFU benchmarks (which have no T) in their own benchmark groups.

    Always returns the groups, never None: `pytest-benchmark compare` calls a conftest's
    implementation directly, without pytest's fallback to the next one, and iterates the result.
    """
    from pytest_benchmark.plugin import pytest_benchmark_group_stats as default

    wanted = [g[len("param:"):] for g in group_by.split(",") if g.startswith("param:")]

    def has_all(bench) -> bool:
        params = bench["params"] or {}
        return all(name in params for name in wanted)

    if not wanted or all(has_all(b) for b in benchmarks):
        return default(config, benchmarks, group_by)
    complete = [b for b in benchmarks if has_all(b)]
    rest = [b for b in benchmarks if not has_all(b)]
    groups = (default(config, complete, group_by) if complete else []) + default(config, rest, "group")
    return sorted(groups, key=lambda pair: pair[0] or "")
