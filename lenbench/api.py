"""The Python API: load a suite, run it, load its board as pandas frames, build its report, compare runs.

    >>> import lenbench
    >>> suite = lenbench.load_suite("smoke")                 # a preset, a YAML file or a mapping
    >>> run = lenbench.run_suite(suite, "runs/smoke")        # any registered executor: executor="process"
    >>> board = lenbench.load_board("runs/smoke")            # rows and leaderboard as DataFrames
    >>> lenbench.write_report("runs/smoke", "runs/smoke-report")
    >>> lenbench.compare_runs("runs/base", "runs/smoke").exit_code

Each function is a thin wrapper over what the command line runs (`lenbench.config.load_suite`,
`lenbench.run.driver.run_suite`, `lenbench.report.rows.load_results` and
`lenbench.report.tables.leaderboard`, `lenbench.report.build.write_report`,
`lenbench.compare.compare`), so a notebook and ``lenbench run`` / ``report`` / ``compare`` give the same
bits and the same one-line errors: ValueErrors (`SuiteError`, `ResultsError`, a plain one), and
`lenbench.registry.UnknownNameError` (a KeyError, with "did you mean") for an unknown name. The page is
docs/api.md; its example is run by tests/docs/test_docs_api.py.

`lenbench/__init__.py` exposes `__all__` lazily (PEP 562), so ``import lenbench`` imports neither this
module nor pandas nor torch; this module imports torch only inside `load_suite` and `run_suite`
(loading a board and comparing need none; a report imports it to draw the encodings' position patterns).

Import side effect, of ``import lenbench`` itself (not of this module): in the default numeric mode, on
an x86 CPU with AVX2, it sets `lenbench.numerics.PINNED_ENV` in ``os.environ`` (``ATEN_CPU_CAPABILITY``,
``MKL_CBWR``, ``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``) so that torch, MKL and oneDNN take the
same vector code paths on every machine and a cell gives the same bits (`lenbench.numerics`). It
overrides values of those variables set before. ``LENBENCH_NUMERICS=native`` in the environment before
the import sets nothing. It starts no thread, adds no warnings filter or logging handler and changes
no torch setting (tests/test_api.py holds that list, docs/api.md states it).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from lenbench.compare import Comparison, compare
from lenbench.report.rows import load_results
from lenbench.report.tables import Leaderboard, leaderboard

if TYPE_CHECKING:
    from lenbench.config import Suite
    from lenbench.run.driver import SuiteRun

#: The names `lenbench` exposes (``from lenbench import load_board``; `lenbench.__all__` states them again, so
#: that listing them imports nothing). None is the name of a lenbench module (`lenbench.report`,
#: `lenbench.compare`): an imported submodule is an attribute of its package and would shadow the function.
__all__ = ["Board", "compare_runs", "load_board", "load_suite", "run_suite", "write_report"]


def load_suite(suite: str | Path | Mapping[str, Any]) -> Suite:
    """A suite, checked against the encoding and task registries.

    Args:
        suite: a preset name (``lenbench list suites``: "smoke", "quick" …), the path of a suite YAML
            file, or the YAML's content as a mapping (docs/suite-reference.md; its plugins' paths
            are relative to the current directory).

    Returns:
        The typed `lenbench.config.Suite`; ``suite.cells()`` lists its cells with their stable ids.

    Raises:
        SuiteError: one line naming the field, what is wrong and the fix.
    """
    from lenbench.config import load_suite as load
    from lenbench.config import parse_suite

    if isinstance(suite, Mapping):
        return parse_suite(dict(suite), source="<mapping>", base_dir=Path.cwd())
    return load(suite)


def run_suite(suite: Suite | str | Path | Mapping[str, Any], out_dir: str | Path, *, executor: str = "serial",
              workers: int | None = None, device: str = "auto", progress: bool = True,
              **options: Any) -> SuiteRun:
    """Run every cell of `suite` without a current result into `out_dir` (``lenbench run``'s driver).

    A rerun reuses finished cells whose fingerprint matches, so a killed run resumes; the same suite
    on the same machine gives bit-identical rows whichever executor runs it.

    Args:
        suite: a `lenbench.config.Suite` or what `load_suite` takes.
        out_dir: the results directory (``cells/``, ``checkpoints/``), made when missing.
        executor: any registered executor: "serial" (this process), "process" (a pool of `workers`
            processes), "ray", or "auto" (``lenbench run``'s default: processes for CPU cells).
        workers: processes of the process executor (default: one per usable core).
        device: "auto", "cpu", "cuda", "cuda:1", "xpu" …
        progress: show the tqdm progress bars.
        options: the driver's other keywords (`lenbench.run.driver.run_suite`: ``threads``,
            ``retry_failed``, ``keep_stale``, ``only``, ``log``) and the executor's (Ray's ``address``).

    Returns:
        What ran (`lenbench.run.driver.SuiteRun`): ``computed`` (the cell results computed now),
        ``done`` (cells reused), ``failed``, ``stale``, ``busy``.

    Raises:
        SuiteError: a bad suite (`load_suite`).
        UnknownNameError: an unknown executor (a KeyError, one line with "did you mean").
        ValueError: one line before anything trains: an unknown device, a cell that cannot fit
            memory or the time limit, an unwritable `out_dir`.
    """
    from lenbench.config import Suite
    from lenbench.run.driver import run_suite as run

    if not isinstance(suite, Suite):
        suite = load_suite(suite)
    return run(suite, out_dir, device=device, executor=executor, workers=workers, progress=progress, **options)


@dataclasses.dataclass(frozen=True)
class Board:
    """A results source as pandas frames: its rows and its leaderboard with intervals.

    Attributes:
        source: the source as given (a path, or "rows" for a frame).
        rows: the tidy rows, one per measurement (docs/DESIGN.md, "Results schema"): task, encoding,
            variant, train_len, eval_len, ratio, metric, value, seed, … and their provenance.
        leaderboard: the `lenbench.report.tables.Leaderboard` the report prints (``per_task``,
            ``overall``, ``wide``, ``seeds``, ``long()``).
    """

    source: str
    rows: pd.DataFrame
    leaderboard: Leaderboard

    @property
    def entries(self) -> pd.DataFrame:
        """One row per (task, train_len, encoding, variant): every statistic (``in_dist``,
        ``past_train_area``, ``degradation`` …) with its 95 % interval (``<stat>_ci_low``,
        ``<stat>_ci_high``), ``ranked_on`` (the statistic the board ranks by), ``rank`` (NaN:
        unranked), ``not_learned``, ``kind`` ("model", "variant", "baseline"), n_seeds, provenance."""
        return self.leaderboard.per_task

    @property
    def overall(self) -> pd.DataFrame:
        """One row per trained encoding: mean_rank over the boards where it is ranked, n_tasks, rank."""
        return self.leaderboard.overall

    @property
    def wide(self) -> pd.DataFrame:
        """The primary metric per entry and length ratio ("1x", "2x", … with ``<r>x_ci_low`` /
        ``<r>x_ci_high``): leaderboard_wide.csv."""
        return self.leaderboard.wide


def load_board(source: str | Path | pd.DataFrame, *, n_boot: int | None = None) -> Board:
    """The rows and the leaderboard of a results source, as `lenbench report` computes them.

    Args:
        source: a results directory (``runs/NAME``: its ``cells/*.json``), a publication
            (``results/``, ``results/catalog``: their ``cells/``), a report directory (its
            ``results.csv``), a tidy ``results.csv``, a pytest-benchmark JSON
            (``pytest bench --benchmark-json``), or a tidy DataFrame.
        n_boot: bootstrap resamples of the intervals that use them (default: the report's).

    Returns:
        A `Board`: ``rows`` (tidy frame), ``entries`` (the leaderboard with intervals), ``overall``,
        ``wide``.

    Raises:
        ResultsError: one line naming the source and what was expected.
    """
    rows = load_results(source)
    name = "rows" if isinstance(source, pd.DataFrame) else str(source)
    return Board(name, rows, leaderboard(rows, n_boot=n_boot))


def write_report(source: str | Path | pd.DataFrame, out_dir: str | Path | None = None, *, plots: bool = True,
                 log: Callable[[str], None] | None = None,
                 notes: Callable[[str], None] | None = None) -> list[Path]:
    """Build the report of a results source (``lenbench report SOURCE --out OUT_DIR``).

    Writes results.csv, leaderboard.csv / .md, leaderboard_wide.csv, summary.md, findings.md,
    claims.md, learnability.csv, index.html (one self-contained page), the figures with `plots`,
    and the cost tables when the source has kernel timings; every file atomically.

    Args:
        source: what `load_board` takes (a DataFrame needs `out_dir`).
        out_dir: where to write: a new or empty directory (marked as a report's), a report directory
            made before, or lenbench's own results directory or publication; any other directory is
            refused and left as it is (`lenbench.report_target`). None: beside the source (the
            results directory, or the directory holding the file), unchecked, as the command line.
        plots: draw the figures (False: tables and page only, faster).
        log: where a note about a killed ``lenbench publish`` recovered there goes (default stderr).
        notes: told one line per figure the report left out and how to draw it (e.g. a plugin
            encoding's, with the ``--plugin`` that draws it); default: not told.

    Returns:
        The paths written, in order.

    Raises:
        ResultsError: an unreadable source, or one without rows or kernel timings.
        ValueError: `out_dir` is not lenbench's to write, or not writable (one line).
    """
    from lenbench.atomic import check_writable
    from lenbench.publication import recover
    from lenbench.report.build import write_report as build
    from lenbench.report_target import claim_report_dir

    note = log or (lambda line: print(line, file=sys.stderr))
    out = report_dir(source, out_dir)
    if not isinstance(source, pd.DataFrame):
        path = Path(source)
        if line := recover(path if path.is_dir() or not path.exists() else path.parent):  # after a killed publish
            note(line)
    if out_dir is not None:  # before reading or plotting anything: lenbench's own, or new or empty
        if line := recover(out):
            note(line)
        claim_report_dir(out)
    else:
        check_writable(out, "report directory")
    return build(source, out, plots=plots, notes=notes)


def report_dir(source: str | Path | pd.DataFrame, out_dir: str | Path | None = None) -> Path:
    """The directory `write_report` writes to: `out_dir`, or without it the results directory given
    or the directory holding the file given.

    Raises:
        ValueError: a DataFrame without `out_dir` (it lies nowhere).
    """
    if out_dir is not None:
        return Path(out_dir)
    if isinstance(source, pd.DataFrame):
        raise ValueError("a report of a DataFrame needs out_dir: give the directory to write it to")
    path = Path(source)
    return path if path.is_dir() else path.parent


def compare_runs(base: str | Path, head: str | Path, *, method: str = "auto", **options: Any) -> Comparison:
    """Compare two runs for quality and speed regressions (``lenbench compare BASE HEAD``).

    Args:
        base, head: a results directory, a publication, a tidy or leaderboard CSV, or a
            pytest-benchmark JSON each.
        method: "auto" (exact on one numeric kind, unpaired across kinds), "exact", "paired" or
            "unpaired" (docs/regression.md).
        options: `lenbench.compare.compare`'s other keywords: ``tolerance``, ``speed_threshold``,
            ``allow_missing``, ``allow_no_overlap``, ``force_speed``, ``top``, ``margins``.

    Returns:
        The `lenbench.compare.Comparison`: ``exit_code`` (0 passes, 1 a regression), ``failures()``,
        ``quality`` (one row per measurement or entry, with base, head and status), ``speed``,
        ``cells``, ``warnings`` and ``format()``, the report ``lenbench compare`` prints.

    Raises:
        ResultsError: unreadable input, bad options, a task measured on different data (one line).
    """
    return compare(base, head, method=method, **options)
