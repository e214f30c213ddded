"""Results: load the tidy rows of DESIGN.md, build the leaderboard, write the report.

Sources `load_results` understands (the same rows whichever is given):

- a results directory: ``OUT/cells/*.json`` (one file per cell, written by the engine); a directory
  without ``cells/`` but with a ``results.csv`` (a report directory) or a ``bench.json`` works too;
- a tidy CSV: the ``results.csv`` that `write_report` writes (one row per measurement);
- a pytest-benchmark JSON (``pytest bench --benchmark-json out.json``): each extrapolation
  benchmark carries its cell's rows in ``extra_info["lenbench_rows"]``.

The leaderboard (`leaderboard`) aggregates per task and per (encoding, variant) on the task's
primary metric (`lenbench.evaluate.PRIMARY_METRIC`):

- ``in_dist``: the score at the training length (ratio 1);
- ``past_train_mean``: the mean score over every evaluated ratio > 1. A failed length (e.g. past
  a learned table) counts as the worst score: 0 for accuracies, +inf for NLL / perplexity, so an
  encoding that cannot answer never outranks one that answers badly; ``n_failed`` counts them;
- ``max_ratio_within_10pct``: the largest ratio r such that the score at every evaluated ratio in
  [1, r] stays within 10 % of ``in_dist`` (relative: ≥ 0.9 × in_dist when higher is better,
  ≤ 1.1 × in_dist when lower is better; a failed length is not within);
- ``rank`` within the task (1 = best): by ``past_train_mean``, ties broken by
  ``max_ratio_within_10pct`` then ``in_dist``; equal keys share the lower rank;
- overall: the mean of an entry's ranks over the tasks it appears in, ranked again.

Each statistic is computed per seed and then averaged; with two or more seeds a 95 % confidence
interval ``mean ± t(0.975, n-1) · sd / sqrt(n)`` (Student t, sample sd) comes with it. The t
quantiles come from a table for n-1 ≤ 30 and from a Cornish–Fisher expansion beyond (agrees with
scipy to 1e-7), so the numbers never depend on whether scipy is installed.

A task evaluated at several training lengths gives one leaderboard per (task, train_len); the
overall ranking averages over all of them.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lenbench.atomic import atomic_write_text
from lenbench.evaluate import METRICS, PRIMARY_METRIC

#: The tidy schema of DESIGN.md, in the fixed column order of every frame `load_results` returns.
COLUMNS: tuple[str, ...] = (
    "schema_version", "cell_id", "suite", "task", "encoding", "variant", "train_len", "eval_len", "ratio",
    "bucket",  # "" for a whole-length measurement, else e.g. "pos:0-31" / "depth:0.20-0.40" (evaluate.parse_bucket)
    "metric", "value", "n_samples", "seed", "higher_is_better", "status", "error",
    "lenbench_version", "git_sha", "torch_version", "device", "dtype", "timestamp", "train_seconds",
)
INT_COLUMNS = ("schema_version", "train_len", "eval_len", "n_samples", "seed")
FLOAT_COLUMNS = ("ratio", "value", "train_seconds")
BOOL_COLUMNS = ("higher_is_better",)
STR_COLUMNS = tuple(c for c in COLUMNS if c not in (*INT_COLUMNS, *FLOAT_COLUMNS, *BOOL_COLUMNS))
#: Columns a source must provide; the rest get defaults (see `normalize`).
REQUIRED = ("task", "encoding", "variant", "train_len", "eval_len", "metric", "value")
#: One measurement: the identity of a row (duplicates are dropped, keeping the last).
ROW_KEY = ("suite", "task", "encoding", "variant", "train_len", "seed", "ratio", "eval_len", "metric", "bucket")
SORT_KEY = (*ROW_KEY, "cell_id")

BASE_VARIANT = "none"
WITHIN = 0.10  # "within 10 % of in-distribution"
#: The score a failed length gets in `past_train_mean` (others: ±inf by direction).
WORST = {"token_accuracy": 0.0, "exact_match": 0.0}

EXPECTED_SOURCES = ("a results directory (cells/*.json), a tidy results CSV (results.csv) "
                    "or a pytest-benchmark JSON")


class ResultsError(ValueError):
    """A results source that cannot be read; the message is one line naming the file."""


# --- canonical order of encodings and variants (shared by tables and plots) --------------------


def _registry_names() -> tuple[list[str], list[str]]:
    from lenbench.encodings import ENCODINGS
    from lenbench.encodings.rope_scaling import ROPE_TYPES

    return ENCODINGS.names(), ROPE_TYPES.names()


def encoding_sort_key(encoding: str) -> tuple:
    """Registered encodings in registry order, then any other label alphabetically."""
    names, _ = _registry_names()
    return (0, names.index(encoding), "") if encoding in names else (1, 0, encoding)


def variant_rope_type(variant: str) -> str | None:
    """The rope_type behind a variant key ("yarn", "yarn@4", "finetune-linear-x4" → "linear"), else None.

    A key's "@<factor>" suffix marks a pinned factor (see `lenbench.suite.VariantSpec`)."""
    _, rope_types = _registry_names()
    variant = variant.split("@", 1)[0] if not variant.startswith("finetune-") else variant
    if variant in rope_types:
        return variant
    if variant.startswith("finetune-"):
        head = variant[len("finetune-"):].rsplit("-x", 1)[0].split("@", 1)[0]
        return head if head in rope_types else None
    return None


def variant_sort_key(variant: str) -> tuple:
    """"none" first, then rope types in registry order (each followed by its fine-tuned forms),
    then other names alphabetically."""
    if variant == BASE_VARIANT:
        return (0, 0, 0, "")
    _, rope_types = _registry_names()
    rope_type = variant_rope_type(variant)
    if rope_type is None:
        return (2, 0, 0, variant)
    return (1, rope_types.index(rope_type), int(variant != rope_type), variant)


def series_label(encoding: str, variant: str) -> str:
    """"rope" for the plain encoding, "rope+yarn" for a variant."""
    return encoding if variant == BASE_VARIANT else f"{encoding}+{variant}"


def series_sort_key(encoding: str, variant: str) -> tuple:
    return (encoding_sort_key(encoding), variant_sort_key(variant))


def series_order(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(encoding, variant) pairs, deduplicated, in the canonical order every table and figure uses."""
    return sorted(set(pairs), key=lambda p: series_sort_key(*p))


def task_order(tasks: Iterable[str]) -> list[str]:
    from lenbench.tasks import TASKS

    names = TASKS.names()
    return sorted(set(tasks), key=lambda t: (0, names.index(t), "") if t in names else (1, 0, t))


# --- loading ------------------------------------------------------------------------------------


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA


def _to_float(v: Any) -> float:
    if _is_missing(v) or (isinstance(v, str) and v.strip() in ("", "None", "null")):
        return float("nan")
    return float(v)  # exact for repr()-written floats (pandas' own CSV parser is not always)


def _to_int(v: Any, default: int | None = None) -> int:
    if _is_missing(v) or (isinstance(v, str) and v.strip() == ""):
        if default is None:
            raise ValueError("missing value")
        return default
    f = float(v)
    if f != int(f):
        raise ValueError(f"{v!r} is not an integer")
    return int(f)


def _to_bool(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    s = str(v).strip().lower()
    if s in ("true", "1", "1.0"):
        return True
    if s in ("false", "0", "0.0"):
        return False
    raise ValueError(f"{v!r} is not a boolean")


def _to_str(v: Any) -> str:
    return "" if _is_missing(v) else str(v)


def empty_frame() -> pd.DataFrame:
    return normalize(pd.DataFrame({c: [] for c in COLUMNS}))


def normalize(df: pd.DataFrame, source: str = "rows") -> pd.DataFrame:
    """The tidy frame: fixed columns and dtypes, failed values NaN, duplicates dropped, stable order.

    Missing optional columns get defaults: ``ratio`` = eval_len / train_len, ``higher_is_better``
    from `METRICS`, ``status`` "ok" where a value is present else "failed", strings "", ``seed``
    0, ``n_samples`` 0, ``schema_version`` 1, ``train_seconds`` NaN.
    """
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ResultsError(f"{source}: missing column(s) {', '.join(missing)}; expected the tidy rows of "
                           f"DESIGN.md ({', '.join(COLUMNS)})")
    df = df.reset_index(drop=True)
    out: dict[str, Any] = {}
    try:
        for col in COLUMNS:
            present = col in df.columns
            raw = df[col].tolist() if present else [None] * len(df)
            if col in ("train_len", "eval_len"):
                out[col] = [_to_int(v) for v in raw]
            elif col in INT_COLUMNS:
                default = 1 if col == "schema_version" else 0
                out[col] = [_to_int(v, default) for v in raw]
            elif col == "ratio":
                out[col] = [_to_float(v) for v in raw] if present else [e / t for e, t in zip(out["eval_len"], out["train_len"], strict=True)]
            elif col in FLOAT_COLUMNS:
                out[col] = [_to_float(v) for v in raw]
            elif col == "higher_is_better":
                out[col] = [_to_bool(v) if not _is_missing(v) and str(v) != "" else METRICS.get(m, True)
                            for v, m in zip(raw, out["metric"], strict=True)]
            elif col == "status":
                out[col] = [_to_str(v) or ("ok" if not math.isnan(x) else "failed")
                            for v, x in zip(raw, out["value"], strict=True)]
            else:
                out[col] = [_to_str(v) for v in raw]
    except (ValueError, TypeError) as err:
        raise ResultsError(f"{source}: column {col!r}: {err}") from None
    frame = pd.DataFrame(out, columns=list(COLUMNS))
    # A failed measurement has no value, whatever was stored.
    frame.loc[frame["status"] != "ok", "value"] = float("nan")
    for col in INT_COLUMNS:
        frame[col] = frame[col].astype("int64")
    for col in FLOAT_COLUMNS:
        frame[col] = frame[col].astype("float64")
    frame["higher_is_better"] = frame["higher_is_better"].astype(bool)
    for col in STR_COLUMNS:
        frame[col] = frame[col].astype(str)
    frame = frame.drop_duplicates(subset=list(ROW_KEY), keep="last")
    return frame.sort_values(list(SORT_KEY), kind="mergesort").reset_index(drop=True)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ResultsError(f"{path}: invalid JSON ({err.msg} at line {err.lineno}); expected {EXPECTED_SOURCES}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: cannot read ({err}); expected {EXPECTED_SOURCES}") from None


def _rows_from_cells(directory: Path) -> list[dict]:
    rows: list[dict] = []
    for path in sorted((directory / "cells").glob("*.json")):
        result = _read_json(path)
        if not isinstance(result, dict) or not isinstance(result.get("rows"), list):
            raise ResultsError(f"{path}: not a cell result (expected a JSON object with a 'rows' list, "
                               "as written by lenbench.engine)")
        rows += result["rows"]
    return rows


def is_benchmark_json(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("benchmarks"), list)


def _rows_from_benchmark(path: Path, data: Any) -> list[dict]:
    if not is_benchmark_json(data):
        raise ResultsError(f"{path}: JSON without a 'benchmarks' list; expected {EXPECTED_SOURCES}")
    rows: list[dict] = []
    for bench in data["benchmarks"]:
        extra = (bench or {}).get("extra_info") or {}
        cell_rows = extra.get("lenbench_rows")
        if cell_rows is None:
            continue  # a kernel timing
        if not isinstance(cell_rows, list):
            raise ResultsError(f"{path}: benchmark {bench.get('fullname', bench.get('name'))!r}: "
                               "extra_info['lenbench_rows'] is not a list of rows")
        rows += cell_rows
    return rows


def csv_kind(columns: Iterable[str]) -> str:
    """"tidy" (results rows), "leaderboard" (long-form leaderboard) or "unknown"."""
    cols = set(columns)
    if {"statistic", "value", "task", "encoding", "variant"} <= cols:
        return "leaderboard"
    if set(REQUIRED) <= cols:
        return "tidy"
    return "unknown"


def _read_csv_strings(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as err:
        raise ResultsError(f"{path}: unreadable CSV ({str(err).splitlines()[0] if str(err) else type(err).__name__}); "
                           f"expected {EXPECTED_SOURCES}") from None


def _load_csv(path: Path) -> pd.DataFrame:
    raw = _read_csv_strings(path)
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


def load_results(source: str | Path | pd.DataFrame) -> pd.DataFrame:
    """The tidy results frame (DESIGN.md schema, `COLUMNS` order) of a source.

    Args:
        source: a results directory (``cells/*.json``; or a report directory with ``results.csv``
            or ``bench.json``), a tidy CSV, a pytest-benchmark JSON, or a DataFrame / list of rows.

    Returns:
        One row per measurement: ints for lengths, seeds and counts, float ``value`` (NaN where
        the measurement failed), bool ``higher_is_better``, strings elsewhere; duplicates of a
        measurement dropped (last wins); sorted by `SORT_KEY`, index 0..n-1.

    Raises:
        ResultsError (a ValueError): one line naming the file and what was expected.
    """
    if isinstance(source, pd.DataFrame):
        return normalize(source)
    if isinstance(source, list):
        return normalize(pd.DataFrame(source)) if source else empty_frame()
    path = resolve_source(source)
    if path.is_dir():
        rows = _rows_from_cells(path)
        return normalize(pd.DataFrame(rows), str(path)) if rows else empty_frame()
    if path.suffix.lower() == ".csv":
        return _load_csv(path)
    if path.suffix.lower() == ".json":
        rows = _rows_from_benchmark(path, _read_json(path))
        return normalize(pd.DataFrame(rows), str(path)) if rows else empty_frame()
    raise ResultsError(f"{path}: unknown file type {path.suffix or '(none)'}; expected {EXPECTED_SOURCES}")


KERNEL_COLUMNS = ("name", "fullname", "group", "encoding", "kind", "impl", "T", "dtype", "bytes", "gbps",
                  "copy_ratio", "copy_ratio_min", "median", "mean", "min", "max", "stddev", "rounds", "device",
                  "device_name")


def load_kernel_timings(bench_json: str | Path) -> pd.DataFrame:
    """Kernel timings of a pytest-benchmark JSON: benchmarks whose extra_info has no lenbench_rows.

    Columns `KERNEL_COLUMNS`: identity (name, fullname, group, encoding, kind, impl, T, dtype),
    bytes, gbps, copy_ratio (median time / time of a plain copy of the same bytes in the same
    session), the timing stats in seconds, and the device from machine_info; sorted by fullname.
    """
    path = Path(bench_json)
    if path.is_dir():
        path = path / "bench.json"
    if not path.is_file():
        raise ResultsError(f"{path}: no such file; expected a pytest-benchmark JSON")
    data = _read_json(path)
    if not is_benchmark_json(data):
        raise ResultsError(f"{path}: JSON without a 'benchmarks' list; expected a pytest-benchmark JSON")
    machine = (data.get("machine_info") or {}).get("lenbench") or {}
    records = []
    for bench in data["benchmarks"]:
        extra = bench.get("extra_info") or {}
        if "lenbench_rows" in extra:
            continue
        stats = bench.get("stats") or {}
        rec = {"name": bench.get("name", ""), "fullname": bench.get("fullname", bench.get("name", "")),
               "group": bench.get("group") or ""}
        for key in ("encoding", "kind", "impl", "dtype"):
            rec[key] = _to_str(extra.get(key))
        for key in ("T", "bytes"):
            rec[key] = _to_float(extra.get(key))
        for key in ("gbps", "copy_ratio"):
            rec[key] = _to_float(extra.get(key))
        for key in ("median", "mean", "min", "max", "stddev", "rounds"):
            rec[key] = _to_float(stats.get(key))
        # The fastest round over the copy floor: on a shared machine other load only ever adds
        # time, so the minimum is the least noisy estimate of a kernel's own cost.
        copy_s = _to_float(extra.get("copy_seconds"))
        rec["copy_ratio_min"] = rec["min"] / copy_s if copy_s and copy_s > 0 else math.nan
        rec["device"] = _to_str(extra.get("device", machine.get("device")))
        rec["device_name"] = _to_str(machine.get("device_name"))
        records.append(rec)
    frame = pd.DataFrame(records, columns=list(KERNEL_COLUMNS))
    return frame.sort_values("fullname", kind="mergesort").reset_index(drop=True)


# --- statistics ---------------------------------------------------------------------------------

# Student t 0.975 quantiles for 1..30 degrees of freedom (scipy.stats.t.ppf, 6 decimals).
_T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
         2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
         2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
_Z975 = 1.959963984540054


def t_quantile_975(df: int) -> float:
    """Two-sided 95 % Student t quantile: table for df ≤ 30, Cornish–Fisher expansion beyond."""
    if df < 1:
        return float("nan")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mean_ci(values: Iterable[float]) -> tuple[float, float, float, int]:
    """(mean, ci_low, ci_high, n) over the non-NaN values; the CI is NaN below two values or
    when a value is infinite."""
    arr = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    n = len(arr)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    mean = float(arr.mean())
    if n < 2 or not np.isfinite(arr).all():
        return mean, float("nan"), float("nan"), n
    half = t_quantile_975(n - 1) * float(arr.std(ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half, n


def primary_metric(task: str, metrics: Iterable[str]) -> str:
    """The leaderboard metric of a task: PRIMARY_METRIC of its kind, else the first primary metric present."""
    present = set(metrics)
    try:
        from lenbench.tasks import TASKS

        kind = TASKS.get(task).kind
        if PRIMARY_METRIC.get(kind) in present:
            return PRIMARY_METRIC[kind]
    except KeyError:
        pass
    for metric in PRIMARY_METRIC.values():
        if metric in present:
            return metric
    return sorted(present)[0]


def worst_value(metric: str, higher_is_better: bool) -> float:
    return WORST.get(metric, -math.inf if higher_is_better else math.inf)


def curve_statistics(curve: pd.DataFrame, metric: str, higher_is_better: bool) -> dict[str, float]:
    """in_dist, past_train_mean, n_failed and max_ratio_within_10pct of one seed's curve
    (rows of one metric: ratio, value; NaN = failed)."""
    curve = curve.sort_values("ratio")
    at_one = curve.loc[np.isclose(curve["ratio"], 1.0), "value"]
    in_dist = float(at_one.iloc[-1]) if len(at_one) else float("nan")
    past = curve.loc[curve["ratio"] > 1.0 + 1e-9, "value"].to_numpy(dtype=float)
    failed = np.isnan(past)
    scored = np.where(failed, worst_value(metric, higher_is_better), past)
    past_mean = float(scored.mean()) if len(scored) else float("nan")
    max_ratio = float("nan")
    if not math.isnan(in_dist):
        bound = in_dist * (1 - WITHIN) if higher_is_better else in_dist * (1 + WITHIN)
        max_ratio = 1.0
        for ratio, value in zip(curve["ratio"], curve["value"], strict=True):
            if ratio <= 1.0 + 1e-9:
                continue
            ok = not math.isnan(value) and (value >= bound if higher_is_better else value <= bound)
            if not ok:
                break
            max_ratio = float(ratio)
    return {"in_dist": in_dist, "past_train_mean": past_mean, "n_failed": float(failed.sum()),
            "max_ratio_within_10pct": max_ratio}


SCORE_STATS = ("in_dist", "past_train_mean", "max_ratio_within_10pct")


def _rank(keys: list[tuple]) -> list[int]:
    """Competition ranking ("1224"): 1 + the number of strictly better keys (smaller is better)."""
    return [1 + sum(other < key for other in keys) for key in keys]


def _order_key(value: float, higher_is_better: bool) -> float:
    if math.isnan(value):
        return math.inf
    return -value if higher_is_better else value


@dataclasses.dataclass
class Leaderboard:
    """The leaderboard of a results frame.

    Attributes:
        per_task: one row per (task, train_len, encoding, variant): task, train_len, metric,
            higher_is_better (of the metric), encoding, variant, series, n_seeds, for each of
            in_dist / past_train_mean / max_ratio_within_10pct the mean over seeds and
            ``<stat>_ci_low`` / ``<stat>_ci_high``, n_failed (failed lengths past the training
            length, summed over seeds), rank. Ordered by task, train_len, rank, canonical series order.
        overall: one row per (encoding, variant): series, mean_rank, n_tasks, rank.
        wide: the primary metric (mean over seeds) per (task, train_len, metric, encoding, variant)
            and length ratio; columns "1x", "2x", … in ascending ratio.
    """

    per_task: pd.DataFrame
    overall: pd.DataFrame
    wide: pd.DataFrame

    def long(self) -> pd.DataFrame:
        """Tidy long form: one row per task × train_len × encoding × variant × statistic, with
        value, ci_low, ci_high, n (seeds; tasks for the overall rows) and higher_is_better of the
        statistic. The overall ranking appears under task "overall" (train_len 0, metric "rank")."""
        rows = []
        for r in self.per_task.itertuples(index=False):
            base = {"task": r.task, "train_len": r.train_len, "metric": r.metric, "encoding": r.encoding,
                    "variant": r.variant, "series": r.series}
            for stat in SCORE_STATS:
                hib = True if stat == "max_ratio_within_10pct" else r.higher_is_better
                rows.append({**base, "statistic": stat, "value": getattr(r, stat), "ci_low": getattr(r, f"{stat}_ci_low"),
                             "ci_high": getattr(r, f"{stat}_ci_high"), "n": r.n_seeds, "higher_is_better": hib})
            rows.append({**base, "statistic": "n_failed", "value": r.n_failed, "ci_low": math.nan, "ci_high": math.nan,
                         "n": r.n_seeds, "higher_is_better": False})
            rows.append({**base, "statistic": "rank", "value": float(r.rank), "ci_low": math.nan, "ci_high": math.nan,
                         "n": r.n_seeds, "higher_is_better": False})
        for r in self.overall.itertuples(index=False):
            base = {"task": "overall", "train_len": 0, "metric": "rank", "encoding": r.encoding, "variant": r.variant,
                    "series": r.series, "ci_low": math.nan, "ci_high": math.nan, "n": r.n_tasks,
                    "higher_is_better": False}
            rows.append({**base, "statistic": "mean_rank", "value": r.mean_rank})
            rows.append({**base, "statistic": "rank", "value": float(r.rank)})
        columns = ["task", "train_len", "metric", "encoding", "variant", "series", "statistic", "value", "ci_low",
                   "ci_high", "n", "higher_is_better"]
        out = pd.DataFrame(rows, columns=columns)
        return out.astype({"train_len": "int64", "n": "int64", "value": "float64", "ci_low": "float64",
                           "ci_high": "float64", "higher_is_better": bool})


def whole_length(df: pd.DataFrame) -> pd.DataFrame:
    """The whole-length rows of a tidy frame (bucket ""): bucketed rows (per position, per needle
    depth) are not leaderboard rows."""
    return df[df["bucket"] == ""] if "bucket" in df.columns else df


def leaderboard(df: pd.DataFrame) -> Leaderboard:
    """Aggregate a tidy results frame into the leaderboard (see the module docstring); bucketed
    rows are left out (`whole_length`)."""
    df = load_results(df) if not list(df.columns) == list(COLUMNS) else df
    df = whole_length(df)
    per_task_rows = []
    wide_rows = []
    ratios_all: set[float] = set()
    for task in task_order(df["task"]):
        tdf = df[df["task"] == task]
        metric = primary_metric(task, tdf["metric"].unique())
        hib = bool(METRICS.get(metric, tdf.loc[tdf["metric"] == metric, "higher_is_better"].iloc[0]))
        mdf = tdf[tdf["metric"] == metric]
        for train_len in sorted(mdf["train_len"].unique()):
            board = mdf[mdf["train_len"] == train_len]
            entries = []
            for encoding, variant in series_order(zip(board["encoding"], board["variant"], strict=True)):
                sdf = board[(board["encoding"] == encoding) & (board["variant"] == variant)]
                per_seed = [curve_statistics(g, metric, hib) for _, g in sdf.groupby("seed", sort=True)]
                entry = {"task": task, "train_len": int(train_len), "metric": metric, "higher_is_better": hib,
                         "encoding": encoding, "variant": variant, "series": series_label(encoding, variant),
                         "n_seeds": int(sdf["seed"].nunique())}
                for stat in SCORE_STATS:
                    mean, lo, hi, _ = mean_ci(s[stat] for s in per_seed)
                    entry.update({stat: mean, f"{stat}_ci_low": lo, f"{stat}_ci_high": hi})
                entry["n_failed"] = float(sum(s["n_failed"] for s in per_seed))
                entries.append(entry)
                curve = sdf.groupby("ratio", sort=True)["value"].agg(lambda v: v.mean() if v.notna().all() else math.nan)
                ratios_all.update(curve.index)
                wide_rows.append({"task": task, "train_len": int(train_len), "metric": metric, "higher_is_better": hib,
                                  "encoding": encoding, "variant": variant, "series": series_label(encoding, variant),
                                  **{float(k): float(v) for k, v in curve.items()}})
            keys = [(_order_key(e["past_train_mean"], hib), _order_key(e["max_ratio_within_10pct"], True),
                     _order_key(e["in_dist"], hib)) for e in entries]
            for entry, rank in zip(entries, _rank(keys), strict=True):
                entry["rank"] = rank
            per_task_rows += sorted(entries, key=lambda e: (e["rank"], series_sort_key(e["encoding"], e["variant"])))
    stat_cols = [c for s in SCORE_STATS for c in (s, f"{s}_ci_low", f"{s}_ci_high")]
    per_task = pd.DataFrame(per_task_rows, columns=["task", "train_len", "metric", "higher_is_better", "encoding", "variant",
                                                    "series", "n_seeds", *stat_cols, "n_failed", "rank"])
    per_task = per_task.astype({"train_len": "int64", "n_seeds": "int64", "rank": "int64", "higher_is_better": bool,
                                **{c: "float64" for c in (*stat_cols, "n_failed")}})

    overall_rows = []
    for encoding, variant in series_order(zip(per_task["encoding"], per_task["variant"], strict=True)):
        ranks = per_task.loc[(per_task["encoding"] == encoding) & (per_task["variant"] == variant), "rank"]
        overall_rows.append({"encoding": encoding, "variant": variant, "series": series_label(encoding, variant),
                             "mean_rank": float(ranks.mean()), "n_tasks": int(len(ranks))})
    overall_ranks = _rank([(r["mean_rank"],) for r in overall_rows])
    for row, rank in zip(overall_rows, overall_ranks, strict=True):
        row["rank"] = rank
    overall_rows.sort(key=lambda r: (r["rank"], series_sort_key(r["encoding"], r["variant"])))
    overall = pd.DataFrame(overall_rows, columns=["encoding", "variant", "series", "mean_rank", "n_tasks", "rank"])
    overall = overall.astype({"mean_rank": "float64", "n_tasks": "int64", "rank": "int64"})

    ratio_cols = sorted(ratios_all)
    wide = pd.DataFrame(wide_rows, columns=["task", "train_len", "metric", "higher_is_better", "encoding", "variant",
                                            "series", *ratio_cols])
    wide = wide.rename(columns={r: ratio_label(r) for r in ratio_cols})
    wide = wide.astype({"train_len": "int64", "higher_is_better": bool, **{ratio_label(r): "float64" for r in ratio_cols}})
    return Leaderboard(per_task.reset_index(drop=True), overall.reset_index(drop=True), wide.reset_index(drop=True))


def ratio_label(ratio: float) -> str:
    return f"{ratio:g}x"


def read_leaderboard_csv(path: str | Path) -> pd.DataFrame:
    """A long-form leaderboard CSV (as `Leaderboard.long` writes it), typed."""
    path = Path(path)
    raw = _read_csv_strings(path)
    if csv_kind(raw.columns) != "leaderboard":
        raise ResultsError(f"{path}: not a leaderboard CSV (expected columns task, encoding, variant, statistic, "
                           "value, higher_is_better as written by `lenbench report`)")
    try:
        out = pd.DataFrame({
            "task": raw["task"].astype(str), "train_len": [_to_int(v, 0) for v in raw.get("train_len", [""] * len(raw))],
            "metric": raw.get("metric", pd.Series([""] * len(raw))).astype(str),
            "encoding": raw["encoding"].astype(str), "variant": raw["variant"].astype(str),
            "statistic": raw["statistic"].astype(str), "value": [_to_float(v) for v in raw["value"]],
            "higher_is_better": [_to_bool(v) for v in raw["higher_is_better"]],
        })
    except (ValueError, KeyError) as err:
        raise ResultsError(f"{path}: malformed leaderboard CSV ({err})") from None
    return out


# --- writing ------------------------------------------------------------------------------------


def to_csv_text(df: pd.DataFrame) -> str:
    """CSV text with floats written by repr (exact round trip), NaN as empty, inf as "inf"."""
    return df.to_csv(index=False, lineterminator="\n", na_rep="")


def _fmt(value: float, metric: str = "") -> str:
    if math.isnan(value):
        return "fail" if metric else "–"
    if math.isinf(value):
        return "fail" if value > 0 and metric in ("perplexity", "nll") else f"{value}"
    if metric in ("perplexity", "nll") and abs(value) >= 1000:
        return f"{value:.4g}"
    return f"{value:.3f}"


def _fmt_ci(mean: float, lo: float, hi: float, metric: str) -> str:
    text = _fmt(mean, metric)
    if not (math.isnan(lo) or math.isnan(hi)):
        text += f" ± {_fmt((hi - lo) / 2)}"
    return text


def _fmt_ratio(mean: float, lo: float, hi: float) -> str:
    if math.isnan(mean):
        return "–"
    text = f"{mean:g}×"
    if not (math.isnan(lo) or math.isnan(hi)):
        text = f"{mean:.3g}× ± {(hi - lo) / 2:.2g}"
    return text


def markdown_table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    """A GitHub markdown table (no tabulate needed); `align` per column: "l" or "r"."""
    align = align or ["l"] * len(header)

    def esc(cell: str) -> str:
        return str(cell).replace("|", "\\|")

    widths = [max(len(esc(h)), *(len(esc(r[i])) for r in rows)) if rows else len(esc(h)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(  # noqa: E731
        esc(c).rjust(w) if a == "r" else esc(c).ljust(w) for c, w, a in zip(cells, widths, align, strict=True)) + " |"
    rule = "| " + " | ".join(("-" * (w - 1) + ":") if a == "r" else "-" * w for w, a in zip(widths, align, strict=True)) + " |"
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def leaderboard_markdown(board: Leaderboard, df: pd.DataFrame | None = None) -> str:
    """The leaderboard as markdown: one table per task (and training length), then the overall ranking."""
    arrow = {True: "↑", False: "↓"}
    parts = ["# lenbench leaderboard", ""]
    if df is not None and len(df):
        suites = ", ".join(sorted(set(df["suite"]) - {""})) or "?"
        seeds = sorted(set(df["seed"]))
        prov = {c: ", ".join(sorted(set(df[c]) - {""})) or "?" for c in ("lenbench_version", "torch_version", "device", "git_sha")}
        parts += [f"Suite: {suites}; seeds: {', '.join(map(str, seeds))}; lenbench {prov['lenbench_version']}, "
                  f"torch {prov['torch_version']}, device {prov['device']}, commit {prov['git_sha'][:12]}.", ""]
    parts += ["↑ higher is better, ↓ lower is better. *In-dist*: score at the training length; *mean past train*: "
              "mean over ratios > 1 (a failed length scores 0 accuracy / infinite perplexity); *holds to*: largest "
              "ratio up to which the score stays within 10 % of in-dist. With several seeds: mean ± 95 % CI "
              "half-width (Student t). Rank by mean past train.", ""]
    for (task, train_len), rows in board.per_task.groupby(["task", "train_len"], sort=False):
        metric = rows["metric"].iloc[0]
        hib = bool(rows["higher_is_better"].iloc[0])
        parts += [f"## {task} (train length {train_len}, {metric} {arrow[hib]})", ""]
        header = ["rank ↓", "encoding", f"in-dist {metric} {arrow[hib]}", f"mean past train {arrow[hib]}",
                  "holds to (ratio) ↑", "failed lengths ↓", "seeds"]
        body = [[str(r.rank), r.series, _fmt_ci(r.in_dist, r.in_dist_ci_low, r.in_dist_ci_high, metric),
                 _fmt_ci(r.past_train_mean, r.past_train_mean_ci_low, r.past_train_mean_ci_high, metric),
                 _fmt_ratio(r.max_ratio_within_10pct, r.max_ratio_within_10pct_ci_low, r.max_ratio_within_10pct_ci_high),
                 f"{r.n_failed:g}", str(r.n_seeds)] for r in rows.itertuples(index=False)]
        parts += [markdown_table(header, body, ["r", "l", "r", "r", "r", "r", "r"]), ""]
        wide = board.wide[(board.wide["task"] == task) & (board.wide["train_len"] == train_len)]
        ratio_cols = [c for c in wide.columns if c.endswith("x") and wide[c].notna().any()]
        if ratio_cols:
            parts += [f"{metric} {arrow[hib]} by length ratio (mean over seeds):", ""]
            body = [[r["series"], *(_fmt(r[c], metric) for c in ratio_cols)] for _, r in wide.iterrows()]
            parts += [markdown_table(["encoding", *ratio_cols], body, ["l", *["r"] * len(ratio_cols)]), ""]
    parts += ["## Overall ranking (mean rank over tasks)", ""]
    body = [[str(r.rank), r.series, f"{r.mean_rank:.2f}", str(r.n_tasks)] for r in board.overall.itertuples(index=False)]
    parts += [markdown_table(["rank ↓", "encoding", "mean rank ↓", "tasks"], body, ["r", "l", "r", "r"]), ""]
    return "\n".join(parts)


REPORT_FILES = ("results.csv", "leaderboard.csv", "leaderboard_wide.csv", "leaderboard.md")


def write_report(source: str | Path | pd.DataFrame, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write the report of a results source into `out_dir`, every file atomically.

    Files: ``results.csv`` (the tidy rows, re-loadable by `load_results`), ``leaderboard.csv``
    (`Leaderboard.long`), ``leaderboard_wide.csv`` (primary metric, encoding × length ratio per
    task), ``leaderboard.md``, and with `plots`: ``extrapolation.{png,svg}`` (metric against
    length), ``leaderboard_heatmap.{png,svg}``, where the rows hold them ``position_loss.{png,svg}``
    (lm loss by position) and ``needle_depth.{png,svg}`` (passkey depth × length),
    and ``encodings/<name>.{png,svg}`` (the position
    heatmap of each registered encoding in the results whose pattern is fixed by its definition,
    see `lenbench.plots.has_fixed_pattern`). Rerunning on the same source rewrites
    identical files.

    Returns:
        The paths written, in that order.

    Raises:
        ResultsError: unreadable source, or a source without any rows.
    """
    df = load_results(source)
    if df.empty:
        raise ResultsError(f"{source if not isinstance(source, pd.DataFrame) else 'rows'}: no extrapolation rows to "
                           f"report; expected {EXPECTED_SOURCES} with at least one cell")
    out = Path(out_dir)
    board = leaderboard(df)
    written = [
        atomic_write_text(out / "results.csv", to_csv_text(df)),
        atomic_write_text(out / "leaderboard.csv", to_csv_text(board.long())),
        atomic_write_text(out / "leaderboard_wide.csv", to_csv_text(board.wide)),
        atomic_write_text(out / "leaderboard.md", leaderboard_markdown(board, df)),
    ]
    if plots:
        from lenbench import plots as lplots

        for suffix in ("png", "svg"):
            written.append(lplots.extrapolation_plot(df, out / f"extrapolation.{suffix}"))
        for suffix in ("png", "svg"):
            written.append(lplots.leaderboard_heatmap(df, out / f"leaderboard_heatmap.{suffix}", board=board))
        from lenbench.encodings import ENCODINGS

        for kind, name, plot in (("pos", "position_loss", lplots.position_loss_plot),
                                 ("depth", "needle_depth", lplots.needle_heatmap)):
            if lplots.has_bucket_rows(df, kind):  # bucketed rows (issue 11): loss by position, needle depth × length
                for suffix in ("png", "svg"):
                    written.append(plot(df, out / f"{name}.{suffix}"))
        for encoding in [e for e in ENCODINGS.names() if e in set(df["encoding"]) and lplots.has_fixed_pattern(e)]:
            for suffix in ("png", "svg"):
                path = lplots.safe_encoding_heatmap(encoding, out / "encodings" / f"{encoding}.{suffix}")
                if path is not None:
                    written.append(path)
    return written
