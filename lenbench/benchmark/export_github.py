"""github-action-benchmark's custom format of a benchmark JSON: `lenbench export-bench BENCH_JSON --out DIR`.

github-action-benchmark (``benchmark-action/github-action-benchmark``) charts a series per name
across commits from a JSON array of ``{"name", "unit", "value", "range"?, "extra"?}``, read by its
``customBiggerIsBetter`` or ``customSmallerIsBetter`` tool, one direction per file. This module
owns that export and writes two files:

- ``smaller-is-better.json``: every timing (``time <benchmark name>``, in ms: the fastest round,
  the least noisy on a shared machine, with the median in ``extra``), each cell's compute time
  (``compute <cell title>``, in s: training plus evaluation, measured when the cell was computed,
  `lenbench.benchmark.bench_json.CELL_TIMED`; a cell whose JSON holds no compute time has none), and
  the quality of metrics where lower is better (perplexity);
- ``bigger-is-better.json``: the quality of metrics where higher is better (exact match).

Quality is what a chart of the leaderboard wants, not per-seed rows: per (task, encoding, variant,
train_len, ratio), the mean over seeds of the task's leaderboard metric
(`lenbench.metrics.leaderboard_metric`), whole-length rows only, baselines left out, named
``quality <task> <encoding>[+<variant>] L<train_len> x<ratio> <metric>`` (e.g. ``quality sort alibi L8
x4 exact_match``), with the seeds' spread as ``range``. A measurement that failed in any seed has no
finite mean and is left out (the report shows it). Which file a metric goes to is the metric
registry's ``higher_is_better`` (`lenbench.metrics`), else the rows' own column for a metric no
registered module declares: no name is special here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from lenbench.atomic import atomic_write_json
from lenbench.benchmark.bench_json import CELL, CELL_TIMED
from lenbench.metrics import find_metric, leaderboard_metric
from lenbench.results.bench_rows import is_cell_benchmark
from lenbench.results.labels import BASE_VARIANT, is_baseline
from lenbench.results.schema import ResultsError, read_json

#: The two files, by direction.
BIGGER, SMALLER = "bigger-is-better.json", "smaller-is-better.json"


def entry(name: str, unit: str, value: float, range_: str | None = None, extra: str | None = None) -> dict[str, Any]:
    """One github-action-benchmark entry; `value` must be finite (the tool cannot chart anything else)."""
    out: dict[str, Any] = {"name": name, "unit": unit, "value": value}
    if range_ is not None:
        out["range"] = range_
    if extra is not None:
        out["extra"] = extra
    return out


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def timing_entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A `time …` entry per timing (kernel, training step) and a `compute …` entry per cell timed
    by its compute time, in the JSON's order."""
    out = []
    for bench in data["benchmarks"]:
        extra, stats = bench.get("extra_info") or {}, bench.get("stats") or {}
        if is_cell_benchmark(extra):
            info = extra.get(CELL) or {}
            seconds = _number(info.get("seconds"))
            if info.get("timed") == CELL_TIMED and seconds is not None:
                train = _number(info.get("train_seconds"))
                note = f"train {train:.1f} s; {CELL_TIMED}" if train is not None else CELL_TIMED
                out.append(entry(f"compute {info.get('title') or bench['name']}", "s", seconds, extra=note))
            continue
        fastest, median = _number(stats.get("min")), _number(stats.get("median"))
        if fastest is None:
            continue
        rounds, stddev = stats.get("rounds"), _number(stats.get("stddev"))
        out.append(entry(f"time {bench['name']}", "ms", fastest * 1e3,
                         range_=f"± {stddev * 1e3:.4g}" if stddev is not None else None,
                         extra=f"fastest of {rounds} rounds; median {median * 1e3:.4g} ms" if median is not None
                         else f"fastest of {rounds} rounds"))
    return out


def quality_entries(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(bigger-is-better, smaller-is-better) quality entries of the JSON's rows (module docstring)."""
    from lenbench.report.rows import load_results, whole_length

    rows = whole_length(load_results(path))
    rows = rows[~rows["encoding"].map(is_baseline)]
    bigger: list[dict[str, Any]] = []
    smaller: list[dict[str, Any]] = []
    for (task, train_len), board in rows.groupby(["task", "train_len"], sort=True):
        metric = leaderboard_metric(None, board["metric"].unique())
        declared = find_metric(metric)
        board = board[board["metric"] == metric]
        higher = declared.higher_is_better if declared is not None else bool(board["higher_is_better"].iloc[0])
        keys = ["encoding", "variant", "ratio"]
        for (encoding, variant, ratio), series in board.groupby(keys, sort=True):
            values = series["value"].astype(float)
            if values.isna().any() or not values.map(math.isfinite).all():
                continue
            label = encoding if variant == BASE_VARIANT else f"{encoding}+{variant}"
            seeds = len(values)
            spread = f"± {values.std(ddof=1):.4g}" if seeds > 1 else None
            item = entry(f"quality {task} {label} L{train_len} x{ratio:g} {metric}", metric, float(values.mean()),
                         range_=spread, extra=f"mean over {seeds} seed(s)")
            (bigger if higher else smaller).append(item)
    return bigger, smaller


def export_entries(bench_json: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The two files' entries, by file name.

    Raises:
        ResultsError: one line when the file is not a pytest-benchmark JSON lenbench wrote.
    """
    path = Path(bench_json)
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list) or \
            not all(isinstance(b, dict) and isinstance(b.get("name"), str) for b in data["benchmarks"]):
        raise ResultsError(f"{path}: not a pytest-benchmark JSON (expected an object with a 'benchmarks' list of "
                           "named benchmarks); give the file `pytest bench --benchmark-json FILE` wrote")
    bigger, smaller = quality_entries(path)
    return {BIGGER: bigger, SMALLER: timing_entries(data) + smaller}


def export(bench_json: str | Path, out: str | Path) -> dict[Path, int]:
    """Write `BIGGER` and `SMALLER` into `out` (created), atomically; returns each path and its
    number of entries."""
    entries = export_entries(bench_json)
    directory = Path(out)
    if directory.exists() and not directory.is_dir():
        raise ResultsError(f"--out {directory}: a file, not a directory; give a directory to write "
                           f"{BIGGER} and {SMALLER} into")
    directory.mkdir(parents=True, exist_ok=True)
    return {atomic_write_json(directory / name, items): len(items) for name, items in entries.items()}
