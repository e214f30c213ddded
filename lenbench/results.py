"""Results: load the tidy rows of DESIGN.md, build the leaderboard, write the report.

Sources `load_results` understands (the same rows whichever is given):

- a results directory: ``OUT/cells/*.json`` (one file per cell, written by the engine); a directory
  without ``cells/`` but with a ``results.csv`` (a report directory) or a ``bench.json`` works too;
- a tidy CSV: the ``results.csv`` that `write_report` writes (one row per measurement);
- a pytest-benchmark JSON (``pytest bench --benchmark-json out.json``): each extrapolation
  benchmark carries its cell's rows in ``extra_info["lenbench_rows"]``.

The leaderboard (`leaderboard`) aggregates per task (and training length) and per (encoding,
variant) on the task's primary metric (`lenbench.evaluate.PRIMARY_METRIC`: exact match for sequence
tasks, perplexity for lm); the statistics themselves are `lenbench.stats` (hierarchical bootstrap
intervals, paired support ranks, not-learned flags, retention, variant tables), whose docstring
defines them:

- ``in_dist``, ``past_train_mean`` (a failed length counts as the worst score: 0 for accuracies,
  +inf for perplexity; ``n_failed`` counts them), ``max_ratio_within_10pct`` and ``retention``,
  each with ``_ci_low`` / ``_ci_high``;
- ``rank`` in the task's main table (trained models, variant "none"), ``variant_rank`` in the table
  of one encoding's inference-time variants; baselines and not-learned entries are unranked;
- overall: trained encodings by the number of tasks they learned, then their mean rank there.

Each tidy row may carry ``sample_scores`` (per-sample scores, compact string; see
`lenbench.evaluate.encode_samples`), which every source round-trips unchanged. The leaderboard CSVs
carry ``schema_version`` (`LEADERBOARD_SCHEMA_VERSION`) and the provenance columns `PROVENANCE`.
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
    "python_version", "threads", "code_fingerprint", "data_fingerprint",  # provenance; "" when absent
    "sample_scores",  # per-sample scores, compact string (lenbench.evaluate.encode_samples); "" when absent
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


def _samples_str(v: Any) -> str:
    """sample_scores as its compact string: a string is kept, a list of numbers or of
    [numerator, denominator] pairs is encoded (`lenbench.evaluate.encode_samples`)."""
    if isinstance(v, (list, tuple)):
        from lenbench.evaluate import encode_samples

        pairs = [(x[0], x[1]) if isinstance(x, (list, tuple)) else (x, 1) for x in v]
        return encode_samples([float(n) for n, _ in pairs], [float(d) for _, d in pairs])
    return _to_str(v)


def empty_frame() -> pd.DataFrame:
    return normalize(pd.DataFrame({c: [] for c in COLUMNS}))


def normalize(df: pd.DataFrame, source: str = "rows") -> pd.DataFrame:
    """The tidy frame: fixed columns and dtypes, failed values NaN, duplicates dropped, stable order.

    Duplicates (same `ROW_KEY`) keep the row of the greatest cell_id, and among rows of one cell
    the last one, independent of the order of the source.

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
            elif col == "sample_scores":
                out[col] = [_samples_str(v) for v in raw]
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
    # Sort first (stable), so a measurement recorded by several cells (the baseline rows every cell of
    # a task and seed carries) keeps the same copy whatever order the source lists the cells in.
    frame = frame.sort_values(list(SORT_KEY), kind="mergesort")
    frame = frame.drop_duplicates(subset=list(ROW_KEY), keep="last")
    return frame.reset_index(drop=True)


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


SCORE_STATS = ("in_dist", "past_train_mean", "max_ratio_within_10pct", "retention")
#: The leaderboard CSVs' schema: 2 adds intervals from the hierarchical bootstrap, retention,
#: not_learned, kind, support ranks (rank, variant_rank), n_seeds, ci_method and provenance.
LEADERBOARD_SCHEMA_VERSION = 2
#: Provenance columns of the leaderboard CSVs: the distinct values of the board's rows, joined by "; ".
PROVENANCE = ("suite", "lenbench_version", "git_sha", "torch_version", "device", "dtype", "python_version",
              "threads", "code_fingerprint", "data_fingerprint")
KIND_ORDER = {"model": 0, "baseline": 1, "variant": 2}


def _provenance(rows: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {"schema_version": LEADERBOARD_SCHEMA_VERSION}
    for col in PROVENANCE:
        values = sorted({str(v) for v in rows[col]} - {""}) if col in rows.columns else []
        out[col] = "; ".join(values)
    return out


@dataclasses.dataclass
class Leaderboard:
    """The leaderboard of a results frame (statistics: `lenbench.stats`).

    Attributes:
        per_task: one row per (task, train_len, encoding, variant): task, train_len, metric,
            higher_is_better (of the metric), encoding, variant, series, kind ("model": a trained
            encoding, variant "none"; "variant": an inference-time or fine-tuned variant;
            "baseline"), n_seeds, n_samples, ci_method, for each of `SCORE_STATS` the point value
            and ``<stat>_ci_low`` / ``<stat>_ci_high``, n_failed, not_learned, rank (main table:
            models only; NaN when unranked), variant_rank (the encoding's variant table), then
            schema_version and `PROVENANCE`. Ordered by task, train_len, kind (models, baselines,
            variants), rank, canonical series order.
        overall: one row per trained encoding: encoding, variant, series, mean_rank, n_tasks,
            n_not_learned, rank.
        wide: the primary metric (mean over seeds) per (task, train_len, encoding, variant) and
            length ratio ("1x", "2x", …), then "<r>x_ci_low" / "<r>x_ci_high", with kind,
            not_learned, n_seeds, rank, schema_version and provenance.
    """

    per_task: pd.DataFrame
    overall: pd.DataFrame
    wide: pd.DataFrame

    def long(self) -> pd.DataFrame:
        """Tidy long form: one row per task × train_len × encoding × variant × statistic, with
        value, ci_low, ci_high, n (seeds; tasks for the overall rows), higher_is_better of the
        statistic, kind, not_learned, ci_method, schema_version and provenance. The overall
        ranking appears under task "overall" (train_len 0, metric "rank")."""
        rows = []
        prov_cols = ["schema_version", *PROVENANCE]
        for r in self.per_task.to_dict("records"):
            base = {"task": r["task"], "train_len": r["train_len"], "metric": r["metric"], "encoding": r["encoding"],
                    "variant": r["variant"], "series": r["series"], "kind": r["kind"], "not_learned": r["not_learned"],
                    "n": r["n_seeds"], "ci_method": r["ci_method"], **{c: r[c] for c in prov_cols}}
            for stat in SCORE_STATS:
                hib = True if stat in ("max_ratio_within_10pct", "retention") else r["higher_is_better"]
                rows.append({**base, "statistic": stat, "value": r[stat], "ci_low": r[f"{stat}_ci_low"],
                             "ci_high": r[f"{stat}_ci_high"], "higher_is_better": hib})
            for stat in ("n_failed", "rank", "variant_rank"):
                rows.append({**base, "statistic": stat, "value": float(r[stat]), "ci_low": math.nan,
                             "ci_high": math.nan, "higher_is_better": False})
        prov = self.per_task[prov_cols].iloc[0].to_dict() if len(self.per_task) else {c: "" for c in prov_cols}
        if len(self.per_task):  # the overall ranking spans every board: join their provenance
            for c in PROVENANCE:
                prov[c] = "; ".join(sorted({v for s in self.per_task[c] for v in str(s).split("; ")} - {""}))
        for r in self.overall.to_dict("records"):
            base = {"task": "overall", "train_len": 0, "metric": "rank", "encoding": r["encoding"],
                    "variant": r["variant"], "series": r["series"], "kind": "model",
                    "not_learned": r["n_tasks"] == 0, "ci_low": math.nan, "ci_high": math.nan, "n": r["n_tasks"],
                    "ci_method": "", "higher_is_better": False, **prov}
            rows.append({**base, "statistic": "mean_rank", "value": r["mean_rank"]})
            rows.append({**base, "statistic": "rank", "value": float(r["rank"])})
        columns = ["task", "train_len", "metric", "encoding", "variant", "series", "kind", "statistic", "value",
                   "ci_low", "ci_high", "n", "higher_is_better", "not_learned", "ci_method", *prov_cols]
        out = pd.DataFrame(rows, columns=columns)
        return out.astype({"train_len": "int64", "n": "int64", "value": "float64", "ci_low": "float64",
                           "ci_high": "float64", "higher_is_better": bool, "not_learned": bool,
                           "schema_version": "int64"})


def whole_length(df: pd.DataFrame) -> pd.DataFrame:
    """The whole-length rows of a tidy frame (bucket ""): bucketed rows (per position, per needle
    depth) are not leaderboard rows."""
    return df[df["bucket"] == ""] if "bucket" in df.columns else df


def _series_key(encoding: str, variant: str) -> tuple:
    from lenbench.stats import is_baseline

    return (int(is_baseline(encoding)), series_sort_key(encoding, variant))


def leaderboard(df: pd.DataFrame, *, n_boot: int | None = None) -> Leaderboard:
    """Aggregate a tidy results frame into the leaderboard (see the module docstring and
    `lenbench.stats`). `n_boot` overrides the number of bootstrap resamples."""
    from lenbench import stats

    df = load_results(df) if not list(df.columns) == list(COLUMNS) else df
    df = whole_length(df)  # bucketed rows (per position, per needle depth) are not leaderboard rows
    per_task_parts, wide_rows = [], []
    ratios_all: set[float] = set()
    for task in task_order(df["task"]):
        tdf = df[df["task"] == task]
        metric = primary_metric(task, tdf["metric"].unique())
        hib = bool(METRICS.get(metric, tdf.loc[tdf["metric"] == metric, "higher_is_better"].iloc[0]))
        mdf = tdf[tdf["metric"] == metric]
        for train_len in sorted(mdf["train_len"].unique()):
            board = mdf[mdf["train_len"] == train_len]
            entries, curves = stats.board_statistics(board, task, metric, hib, n_boot=n_boot or stats.N_BOOT)
            prov = _provenance(tdf[tdf["train_len"] == train_len])
            entries = entries.assign(task=task, train_len=int(train_len), metric=metric, higher_is_better=hib,
                                     series=[series_label(e, v) for e, v in zip(entries["encoding"], entries["variant"],
                                                                                strict=True)], **prov)
            entries["_order"] = [(KIND_ORDER[k], math.inf if math.isnan(r) else r, _series_key(e, v))
                                 for k, r, e, v in zip(entries["kind"], entries["rank"], entries["encoding"],
                                                       entries["variant"], strict=True)]
            entries = entries.iloc[sorted(range(len(entries)), key=lambda i: entries["_order"].iloc[i])]
            per_task_parts.append(entries.drop(columns="_order"))
            for e in sorted(entries.to_dict("records"), key=lambda e: _series_key(e["encoding"], e["variant"])):
                c = curves[(curves["encoding"] == e["encoding"]) & (curves["variant"] == e["variant"])]
                sdf = board[(board["encoding"] == e["encoding"]) & (board["variant"] == e["variant"])]
                # A length where any seed failed shows as failed (NaN) in the wide table.
                shown = sdf.groupby("ratio", sort=True)["value"].agg(lambda v: v.mean() if v.notna().all() else math.nan)
                ratios_all.update(shown.index)
                row = {"task": task, "train_len": int(train_len), "metric": metric, "higher_is_better": hib,
                       "encoding": e["encoding"], "variant": e["variant"], "series": e["series"], "kind": e["kind"],
                       "not_learned": e["not_learned"], "n_seeds": e["n_seeds"], "rank": e["rank"],
                       "variant_rank": e["variant_rank"], **prov}
                row.update({float(k): float(v) for k, v in shown.items()})
                for ratio, lo, hi, ok in zip(c["ratio"], c["ci_low"], c["ci_high"], ~c["ratio"].map(shown).isna(),
                                             strict=True):
                    row[(float(ratio), "lo")] = lo if ok else math.nan
                    row[(float(ratio), "hi")] = hi if ok else math.nan
                wide_rows.append(row)
    stat_cols = [c for s in SCORE_STATS for c in (s, f"{s}_ci_low", f"{s}_ci_high")]
    prov_cols = ["schema_version", *PROVENANCE]
    columns = ["task", "train_len", "metric", "higher_is_better", "encoding", "variant", "series", "kind", "n_seeds",
               "n_samples", "ci_method", *stat_cols, "n_failed", "not_learned", "rank", "variant_rank", *prov_cols]
    per_task = pd.concat(per_task_parts, ignore_index=True)[columns] if per_task_parts else pd.DataFrame(columns=columns)
    per_task = per_task.astype({"train_len": "int64", "n_seeds": "int64", "n_samples": "int64", "higher_is_better": bool,
                                "not_learned": bool, "schema_version": "int64",
                                **{c: "float64" for c in (*stat_cols, "n_failed", "rank", "variant_rank")}})

    overall = stats.overall_ranks(per_task)
    overall.insert(2, "series", overall["encoding"])
    overall["_o"] = [(math.inf if math.isnan(r) else r, encoding_sort_key(e)) for r, e in
                     zip(overall["rank"], overall["encoding"], strict=True)]
    overall = overall.iloc[sorted(range(len(overall)), key=lambda i: overall["_o"].iloc[i])].drop(columns="_o")
    overall = overall.astype({"mean_rank": "float64", "n_tasks": "int64", "n_not_learned": "int64", "rank": "float64"})

    ratio_cols = sorted(ratios_all)
    ci_cols = [(r, side) for r in ratio_cols for side in ("lo", "hi")]
    wide = pd.DataFrame(wide_rows, columns=["task", "train_len", "metric", "higher_is_better", "encoding", "variant",
                                            "series", "kind", "not_learned", "n_seeds", "rank", "variant_rank",
                                            *ratio_cols, *ci_cols, *prov_cols])
    names = {r: ratio_label(r) for r in ratio_cols}
    names.update({(r, s): f"{ratio_label(r)}_ci_{'low' if s == 'lo' else 'high'}" for r, s in ci_cols})
    wide.columns = [names.get(c, c) for c in wide.columns]
    wide = wide.astype({"train_len": "int64", "higher_is_better": bool, "not_learned": bool, "n_seeds": "int64",
                        "rank": "float64", "variant_rank": "float64", "schema_version": "int64",
                        **{names[c]: "float64" for c in (*ratio_cols, *ci_cols)}})
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
        return "fail" if metric and metric != "retention" else "–"
    if math.isinf(value):
        return "fail" if value > 0 and metric in ("perplexity", "nll") else f"{value}"
    if metric in ("perplexity", "nll") and abs(value) >= 1000:
        return f"{value:.4g}"
    return f"{value:.3f}"


def _fmt_ci(mean: float, lo: float, hi: float, metric: str) -> str:
    text = _fmt(mean, metric)
    if math.isfinite(lo) and math.isfinite(hi) and math.isfinite(mean):
        text += f" ± {_fmt((hi - lo) / 2)}"
    return text


def _fmt_ratio(mean: float, lo: float, hi: float) -> str:
    if math.isnan(mean):
        return "–"
    text = f"{mean:g}×"
    if math.isfinite(lo) and math.isfinite(hi):
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


def _fmt_rank(rank: float, ranks: Iterable[float], not_learned: bool = False, kind: str = "model") -> str:
    """"3" for a rank of its own, "=3" for a rank shared with another entry of the table,
    "n/l" for a not-learned entry, "–" for an unranked one (baselines)."""
    if kind == "baseline":
        return "–"
    if not_learned:
        return "n/l"
    if math.isnan(rank):
        return "–"
    shared = sum(1 for r in ranks if r == rank) > 1
    return f"{'=' if shared else ''}{int(rank)}"


def _board_sections(board: Leaderboard, task: str, train_len: int, rows: pd.DataFrame) -> list[str]:
    arrow = {True: "↑", False: "↓"}
    metric = rows["metric"].iloc[0]
    hib = bool(rows["higher_is_better"].iloc[0])
    parts = [f"## {task} (train length {train_len}, {metric} {arrow[hib]})", ""]
    methods = sorted(set(rows.loc[rows["kind"] != "baseline", "ci_method"]))
    if methods:
        parts += [f"Intervals: {'; '.join(methods)}.", ""]
    header = ["rank ↓", "encoding", f"in-dist {metric} {arrow[hib]}", f"mean past train {arrow[hib]}",
              "retention ↑", "holds to (ratio) ↑", "failed lengths ↓", "seeds"]

    def body(table: pd.DataFrame, rank_col: str) -> list[list[str]]:
        ranks = list(table[rank_col])
        return [[_fmt_rank(r[rank_col], ranks, r["not_learned"], r["kind"]),
                 r["series"] + (" (not learned)" if r["not_learned"] else ""),
                 _fmt_ci(r["in_dist"], r["in_dist_ci_low"], r["in_dist_ci_high"], metric),
                 _fmt_ci(r["past_train_mean"], r["past_train_mean_ci_low"], r["past_train_mean_ci_high"], metric),
                 _fmt_ci(r["retention"], r["retention_ci_low"], r["retention_ci_high"], "retention"),
                 _fmt_ratio(r["max_ratio_within_10pct"], r["max_ratio_within_10pct_ci_low"],
                            r["max_ratio_within_10pct_ci_high"]),
                 f"{r['n_failed']:g}", str(r["n_seeds"])] for r in table.to_dict("records")]

    align = ["r", "l", "r", "r", "r", "r", "r", "r"]
    main = rows[rows["kind"].isin(["model", "baseline"])]
    parts += [markdown_table(header, body(main, "rank"), align), ""]
    wide = board.wide[(board.wide["task"] == task) & (board.wide["train_len"] == train_len)
                      & (board.wide["kind"] != "variant")]
    ratio_cols = [c for c in wide.columns if c.endswith("x") and wide[c].notna().any()]
    if ratio_cols:
        parts += [f"{metric} {arrow[hib]} by length ratio (mean over seeds ± 95 % half-width):", ""]
        lines = [[r["series"] + (" (not learned)" if r["not_learned"] else ""),
                  *(_fmt_ci(r[c], r[f"{c}_ci_low"], r[f"{c}_ci_high"], metric) for c in ratio_cols)]
                 for r in wide.to_dict("records")]
        parts += [markdown_table(["encoding", *ratio_cols], lines, ["l", *["r"] * len(ratio_cols)]), ""]
    for encoding in dict.fromkeys(rows.loc[rows["kind"] == "variant", "encoding"]):
        table = rows[(rows["encoding"] == encoding) & (rows["kind"] != "baseline")]
        table = table.iloc[sorted(range(len(table)), key=lambda i: (
            math.inf if math.isnan(table["variant_rank"].iloc[i]) else table["variant_rank"].iloc[i],
            variant_sort_key(table["variant"].iloc[i])))]
        parts += [f"### {task}: {encoding} and its inference-time variants (ranked among themselves)", ""]
        parts += [markdown_table(header, body(table, "variant_rank"), align), ""]
    return parts


def leaderboard_markdown(board: Leaderboard, df: pd.DataFrame | None = None) -> str:
    """The leaderboard as markdown: per task (and training length) the main table (trained
    models and baselines), the scores by length ratio and one table per encoding with variants;
    then the overall ranking. Values are ``mean ± 95 % half-width``; shared ranks show as "=3"."""
    parts = ["# lenbench leaderboard", ""]
    if df is not None and len(df):
        suites = ", ".join(sorted(set(df["suite"]) - {""})) or "?"
        seeds = sorted(set(df["seed"]))
        prov = {c: ", ".join(sorted(set(df[c]) - {""})) or "?" for c in ("lenbench_version", "torch_version", "device", "git_sha")}
        one = " (one seed: intervals from evaluation sampling alone)" if len(seeds) == 1 else ""
        parts += [f"Suite: {suites}; seeds: {', '.join(map(str, seeds))}{one}; lenbench {prov['lenbench_version']}, "
                  f"torch {prov['torch_version']}, device {prov['device']}, commit {prov['git_sha'][:12]}.", ""]
    parts += ["↑ higher is better, ↓ lower is better. Every value is the mean over seeds ± the half-width of its 95 % "
              "hierarchical bootstrap interval (seeds, then evaluation samples). *In-dist*: score at the training "
              "length; *mean past train*: mean over ratios > 1 (a failed length scores 0 accuracy / infinite "
              "perplexity); *retention*: (score − chance) / (in-dist − chance) averaged past 1× (ppl: in-dist / ppl); "
              "*holds to*: largest ratio up to which the score stays within 10 % of in-dist. Rank = 1 + the number "
              "of entries better with support (paired 95 % interval of the difference in mean past train excludes "
              "0); \"=3\" is a shared rank. *n/l*: not learned at 1× (exact match < 0.9, or perplexity no better "
              "than the unigram baseline), shown but not ranked. Baselines are not ranked.", ""]
    for (task, train_len), rows in board.per_task.groupby(["task", "train_len"], sort=False):
        parts += _board_sections(board, task, int(train_len), rows)
    parts += ["## Overall ranking (trained models; mean rank over the tasks where each learned)", ""]
    ranks = list(board.overall["rank"])
    body = [[_fmt_rank(r.rank, ranks, r.n_tasks == 0), r.series,
             "–" if math.isnan(r.mean_rank) else f"{r.mean_rank:.2f}", str(r.n_tasks), str(r.n_not_learned)]
            for r in board.overall.itertuples(index=False)]
    parts += [markdown_table(["rank ↓", "encoding", "mean rank ↓", "tasks ranked", "tasks not learned"], body,
                             ["r", "l", "r", "r", "r"]), ""]
    return "\n".join(parts)


SUMMARY_RATIOS = (1.0, 2.0, 4.0, 16.0)


def _summary_body(table: pd.DataFrame, rank_col: str, wide: pd.DataFrame, cols: list[str], metric: str) -> list[list[str]]:
    """Lines of a summary table: rank, series, the metric at each ratio column, mean past train."""
    ranks = list(table[rank_col])
    lines = []
    for r in table.to_dict("records"):
        w = wide.loc[(r["encoding"], r["variant"])]
        lines.append([_fmt_rank(r[rank_col], ranks, r["not_learned"], r["kind"]),
                      r["series"] + (" (not learned)" if r["not_learned"] else ""),
                      *(_fmt_ci(w[c], w[f"{c}_ci_low"], w[f"{c}_ci_high"], metric) for c in cols),
                      _fmt_ci(r["past_train_mean"], r["past_train_mean_ci_low"], r["past_train_mean_ci_high"], metric)])
    return lines


def summary_markdown(board: Leaderboard, ratios: Iterable[float] = SUMMARY_RATIOS) -> str:
    """The short tables the README quotes: per task (and training length) the trained models and
    baselines, primary metric at `ratios` (mean ± 95 % half-width), main-table rank ("=2" shared,
    "n/l" not learned, "–" baseline); then the overall ranking. `write_report` writes it as
    ``summary.md``; a test keeps the README's copy equal to the published one."""
    arrow = {True: "↑", False: "↓"}
    parts = []
    for (task, train_len), rows in board.per_task.groupby(["task", "train_len"], sort=False):
        metric = rows["metric"].iloc[0]
        hib = bool(rows["higher_is_better"].iloc[0])
        wide = board.wide[(board.wide["task"] == task) & (board.wide["train_len"] == train_len)].set_index(
            ["encoding", "variant"])
        cols = [ratio_label(r) for r in ratios if ratio_label(r) in wide.columns and wide[ratio_label(r)].notna().any()]
        header = ["rank", "encoding", *(f"{metric} {c.replace('x', '×')}" for c in cols), f"mean past train {arrow[hib]}"]
        align = ["r", "l", *["r"] * (len(cols) + 1)]
        parts += [f"**{task}** (train length {train_len}, {metric} {arrow[hib]})", "",
                  markdown_table(header, _summary_body(rows[rows["kind"].isin(["model", "baseline"])], "rank", wide, cols,
                                                       metric), align), ""]
        for encoding in dict.fromkeys(rows.loc[rows["kind"] == "variant", "encoding"]):
            table = rows[(rows["encoding"] == encoding) & (rows["kind"] != "baseline")]
            table = table.iloc[sorted(range(len(table)), key=lambda i: (
                math.inf if math.isnan(table["variant_rank"].iloc[i]) else table["variant_rank"].iloc[i],
                variant_sort_key(table["variant"].iloc[i])))]
            parts += [f"**{task}**: {encoding} and its inference-time variants, ranked among themselves", "",
                      markdown_table(header, _summary_body(table, "variant_rank", wide, cols, metric), align), ""]
    ranks = list(board.overall["rank"])
    body = [[_fmt_rank(r.rank, ranks, r.n_tasks == 0), r.series, "–" if math.isnan(r.mean_rank) else f"{r.mean_rank:.2f}",
             str(r.n_tasks)] for r in board.overall.itertuples(index=False)]
    parts += ["**overall** (trained models: more tasks learned first, then mean rank over them)", "",
              markdown_table(["rank", "encoding", "mean rank", "tasks learned"], body, ["r", "l", "r", "r"]), ""]
    return "\n".join(parts)


REPORT_FILES = ("results.csv", "leaderboard.csv", "leaderboard_wide.csv", "leaderboard.md", "summary.md")


def write_report(source: str | Path | pd.DataFrame, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write the report of a results source into `out_dir`, every file atomically.

    Files: ``results.csv`` (the tidy rows, re-loadable by `load_results`), ``leaderboard.csv``
    (`Leaderboard.long`), ``leaderboard_wide.csv`` (primary metric, encoding × length ratio per
    task), ``leaderboard.md``, ``summary.md`` (the README's tables, `summary_markdown`), and with `plots`: ``extrapolation.{png,svg}`` (metric against
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
        atomic_write_text(out / "summary.md", summary_markdown(board)),
    ]
    if plots:
        from lenbench import plots as lplots

        for suffix in ("png", "svg"):
            written.append(lplots.extrapolation_plot(df, out / f"extrapolation.{suffix}", board=board))
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
