"""Results, step 1 of the report path: the tidy rows of docs/DESIGN.md, loaded and normalised.

The report path, one module per step, each importing only the steps before it:
rows (this module) → statistics (`lenbench.report.stats`) → tables (`lenbench.report.tables`: the leaderboard
frames, CSV and markdown) → figures (`lenbench.report.plots`) → page (`lenbench.report.page`: `write_report`,
the files of a report directory). Step 1 has two more modules: the cell files (`lenbench.report.cells`),
which this one reads, and the timings of a benchmark JSON (`lenbench.report.timings`). What a row is
(its columns, types and defaults) is the results contract, `lenbench.results`, below all of them.

Sources `load_results` understands (the same rows whichever is given):

- a results directory: ``OUT/cells/*.json`` (one file per cell, written by the engine); a directory
  without ``cells/`` but with a ``results.csv`` (a report directory) or a ``bench.json`` works too.
  Two cells measuring the same thing under different cell ids (cells of an earlier configuration of
  the suite, left beside the new ones) are refused (`lenbench.report.cells.check_one_cell_per_measurement`),
  not mixed;
- a tidy CSV: the ``results.csv`` that `lenbench.report.build.write_report` writes (one row per measurement);
- a pytest-benchmark JSON (``pytest bench --benchmark-json out.json``): each extrapolation
  benchmark carries its cell's rows, packed (`lenbench.results.bench_rows`: ``extra_info["lenbench_table"]``)
  or, in earlier files, as a list (``extra_info["lenbench_rows"]``); its kernel timings are
  `lenbench.report.timings.load_kernel_timings`.

Each tidy row may carry ``sample_scores`` (per-sample scores, compact string; see
`lenbench.metrics.encode_samples`), which every source round-trips unchanged. Also here: the
canonical order of tasks, encodings and variants shared by tables and figures, and each task's
primary metric.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from lenbench.encoding_display import ROPE_TYPES, encoding_rank
from lenbench.escape import uncsv_frame
from lenbench.metrics import leaderboard_metric
from lenbench.report.cells import cell_rows, check_one_cell_per_measurement
from lenbench.results import bench_rows
from lenbench.results.frame import empty_frame, normalize
from lenbench.results.labels import BASE_VARIANT
from lenbench.results.schema import EXPECTED_SOURCES, REQUIRED, ResultsError, read_json
from lenbench.run.store import cell_files, readable_cell_results  # noqa: F401 (readable_cell_results: re-exported)
from lenbench.task_display import task_order  # noqa: F401 (re-exported for the tables and figures)

# --- canonical order of encodings and variants (shared by tables and plots) --------------------


def encoding_sort_key(encoding: str) -> tuple:
    """lenbench's own encodings in their declared order, then any other label alphabetically
    (`lenbench.encoding_display`: no torch, no registry, the same in every process)."""
    return encoding_rank(encoding)


def variant_rope_type(variant: str) -> str | None:
    """The rope_type behind a variant key ("yarn", "yarn@4", "finetune-linear-x4" → "linear"), else None.

    A key's "@<factor>" suffix marks a pinned factor (see `lenbench.config.schema.VariantSpec`)."""
    variant = variant.split("@", 1)[0] if not variant.startswith("finetune-") else variant
    if variant in ROPE_TYPES:
        return variant
    if variant.startswith("finetune-"):
        head = variant[len("finetune-"):].rsplit("-x", 1)[0].split("@", 1)[0]
        return head if head in ROPE_TYPES else None
    return None


def variant_sort_key(variant: str) -> tuple:
    """"none" first, then rope types in their declared order (each followed by its fine-tuned
    forms), then other names alphabetically."""
    if variant == BASE_VARIANT:
        return (0, 0, 0, "")
    rope_type = variant_rope_type(variant)
    if rope_type is None:
        return (2, 0, 0, variant)
    return (1, ROPE_TYPES.index(rope_type), int(variant != rope_type), variant)


def series_label(encoding: str, variant: str) -> str:
    """"rope" for the plain encoding, "rope+yarn" for a variant."""
    return encoding if variant == BASE_VARIANT else f"{encoding}+{variant}"


def series_sort_key(encoding: str, variant: str) -> tuple:
    return (encoding_sort_key(encoding), variant_sort_key(variant))


def series_order(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(encoding, variant) pairs, deduplicated, in the canonical order every table and figure uses."""
    return sorted(set(pairs), key=lambda p: series_sort_key(*p))




# --- loading ------------------------------------------------------------------------------------


def _rows_from_cells(directory: Path, cell_ids: Iterable[str] | None = None) -> list[dict]:
    files = cell_files(directory)
    if cell_ids is not None:
        wanted = set(cell_ids)
        files = [path for path in files if path.stem in wanted]
    by_cell = cell_rows(files)
    check_one_cell_per_measurement(by_cell, directory)
    return [row for rows in by_cell.values() for row in rows]


def _bad_cell_file(directory: Path, cell_ids: Iterable[str] | None) -> ResultsError:
    """The error of the first cell file of `directory` whose rows do not validate, naming it (a
    directory's rows are validated together; this runs only once they failed)."""
    wanted = None if cell_ids is None else set(cell_ids)
    for path in cell_files(directory):
        if wanted is not None and path.stem not in wanted:
            continue
        rows = [row for rows in cell_rows([path]).values() for row in rows]
        try:
            normalize(pd.DataFrame(rows), str(path))
        except ResultsError as err:
            return ResultsError(f"{err}; move the cell file aside (its cell is computed again) or fix it")
    return ResultsError(f"{directory}: the cells' rows do not validate together")


def is_benchmark_json(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("benchmarks"), list)


def _rows_from_benchmark(path: Path, data: Any) -> list[dict]:
    if not is_benchmark_json(data):
        raise ResultsError(f"{path}: JSON without a 'benchmarks' list; expected {EXPECTED_SOURCES}")
    rows: list[dict] = []
    for bench in data["benchmarks"]:
        bench = bench or {}
        found = bench_rows.cell_rows(bench.get("extra_info"),
                                     f"{path}: benchmark {bench.get('fullname', bench.get('name'))!r}")
        rows += found or []  # None: a kernel timing
    return rows


def csv_kind(columns: Iterable[str]) -> str:
    """"tidy" (results rows), "leaderboard" (long-form leaderboard) or "unknown"."""
    cols = set(columns)
    if {"statistic", "value", "task", "encoding", "variant"} <= cols:
        return "leaderboard"
    if set(REQUIRED) <= cols:
        return "tidy"
    return "unknown"


def read_csv_strings(path: Path) -> pd.DataFrame:
    """Every cell of a CSV as a string, with the writer's formula quoting undone
    (`lenbench.escape.csv_uncell`)."""
    try:
        return uncsv_frame(pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as err:
        raise ResultsError(f"{path}: unreadable CSV ({str(err).splitlines()[0] if str(err) else type(err).__name__}); "
                           f"expected {EXPECTED_SOURCES}") from None


def _load_csv(path: Path) -> pd.DataFrame:
    raw = read_csv_strings(path)
    kind = csv_kind(raw.columns)
    if kind == "leaderboard":
        raise ResultsError(f"{path}: a leaderboard CSV (aggregated statistics), not measurement rows; "
                           f"expected {EXPECTED_SOURCES}")
    if kind != "tidy":
        raise ResultsError(f"{path}: CSV without the tidy columns ({', '.join(REQUIRED)}); expected {EXPECTED_SOURCES}")
    return normalize(raw, str(path))


def resolve_source(source: str | Path) -> Path:
    """The file or directory a source names; a directory resolves to its cells/, results.csv or bench.json."""
    path = Path(source)
    if not path.exists():
        raise ResultsError(f"{path}: no such file or directory; expected {EXPECTED_SOURCES}")
    if path.is_dir():
        if (path / "cells").is_dir():
            return path
        for name in ("results.csv", "bench.json"):
            if (path / name).is_file():
                return path / name
        raise ResultsError(f"{path}: directory without cells/*.json, results.csv or bench.json; expected {EXPECTED_SOURCES}")
    return path


def load_results(source: str | Path | pd.DataFrame, *, cell_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """The tidy results frame (docs/DESIGN.md schema, `COLUMNS` order) of a source.

    Args:
        source: a results directory (``cells/*.json``; or a report directory with ``results.csv``
            or ``bench.json``), a tidy CSV, a pytest-benchmark JSON, or a DataFrame / list of rows.
        cell_ids: of a results directory, read only these cells (those present), e.g. a suite's
            (`lenbench.config.Suite.cells`), so cells an earlier configuration left beside them are
            not read; None: every cell.

    Returns:
        One row per measurement: ints for lengths, seeds and counts, float ``value`` (NaN where
        the measurement failed), bool ``higher_is_better``, strings elsewhere; duplicates of a
        measurement dropped (last wins); sorted by `SORT_KEY`, index 0..n-1.

    Raises:
        ResultsError (a ValueError): one line naming the file and what was expected, or two cells
            of a directory that measure the same thing (`check_one_cell_per_measurement`).
    """
    if isinstance(source, pd.DataFrame):
        return normalize(source)
    if isinstance(source, list):
        return normalize(pd.DataFrame(source)) if source else empty_frame()
    path = resolve_source(source)
    if path.is_dir():
        rows = _rows_from_cells(path, cell_ids)
        try:
            return normalize(pd.DataFrame(rows), str(path)) if rows else empty_frame()
        except ResultsError:
            raise _bad_cell_file(path, cell_ids) from None
    if path.suffix.lower() == ".csv":
        return _load_csv(path)
    if path.suffix.lower() == ".json":
        rows = _rows_from_benchmark(path, read_json(path))
        return normalize(pd.DataFrame(rows), str(path)) if rows else empty_frame()
    raise ResultsError(f"{path}: unknown file type {path.suffix or '(none)'}; expected {EXPECTED_SOURCES}")


def whole_length(df: pd.DataFrame) -> pd.DataFrame:
    """The whole-length rows of a tidy frame (bucket ""): bucketed rows (per position, per needle
    depth) are not leaderboard rows."""
    return df[df["bucket"] == ""] if "bucket" in df.columns else df


def board_rows(frame: pd.DataFrame, task: str, train_len: int) -> pd.DataFrame:
    """The rows of one board, (task, train_len), of any frame with those columns (a results frame,
    or a leaderboard's `per_task`, `wide`, `seeds` or `context`); an empty frame stays empty."""
    if frame.empty:
        return frame
    return frame[(frame["task"] == task) & (frame["train_len"] == train_len)]


def primary_metric(task: str, metrics: Iterable[str]) -> str:
    """The leaderboard metric of a task's rows: the primary metric of the kind its metrics belong
    to (a task records the metrics of one kind, `lenbench.metrics.task_metrics`), else the first
    present (`lenbench.metrics.leaderboard_metric`). Read from the rows alone, so the report never
    imports the tasks (and through them torch and the model)."""
    return leaderboard_metric(None, metrics)

