"""Rows of any source as the typed tidy frame: the columns of `lenbench.results.schema`, in order,
each of its type, with defaults for what a source (or an older schema version) left out.

Upgrading older rows: a row without ``schema_version`` is version 1, and every column a version
added since has a default here (version 2 added ``sample_scores``: "" — intervals then come from
the seeds alone), so rows of every version load to one frame, their stored values unchanged. One
name changed meaning: before version 3 a sequence task's ``token_accuracy`` was scored under
teacher forcing, so such a row loads as ``tf_token_accuracy`` and is never compared with, or
ranked as, the token accuracy of generated answers.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from lenbench.metrics import METRICS
from lenbench.results.schema import (
    COLUMNS,
    FIRST_SCHEMA_VERSION,
    FLOAT_COLUMNS,
    GENERATED_ANSWERS_VERSION,
    INT_COLUMNS,
    REQUIRED,
    ROW_KEY,
    SCHEMA,
    SORT_KEY,
    STOP_BUDGET,
    STR_COLUMNS,
    ResultsError,
)
from lenbench.results.values import is_missing, samples_str, to_bool, to_float, to_int, to_str


def empty_frame() -> pd.DataFrame:
    return normalize(pd.DataFrame({c: [] for c in COLUMNS}))


_STEPS = re.compile(r"^train: steps=(\d+) ")


def _budget(settings: str) -> int:
    """The training budget a settings line names (``train: steps=N …``), if it trains no longer
    than that for certain (no ``patience=``); else 0."""
    found = _STEPS.match(settings)
    return int(found.group(1)) if found and "patience=" not in settings else 0


def _column(col: str, raw: list, present: bool, out: dict[str, list]) -> list:
    """The values of column `col` (its raw values, or Nones when absent) as the column's type;
    `out` holds the columns before it (defaults read them)."""
    if col == "schema_version":
        return [to_int(v, FIRST_SCHEMA_VERSION) for v in raw]
    if col == "train_steps":  # rows from before early stopping trained exactly their settings' steps
        return [to_int(v, 0) if not is_missing(v) and str(v) != "" else _budget(s)
                for v, s in zip(raw, out["settings"], strict=True)]
    if col == "stop_reason":
        return [to_str(v) or (STOP_BUDGET if _budget(s) else "") for v, s in zip(raw, out["settings"], strict=True)]
    if col in INT_COLUMNS:
        return [to_int(v, None if col in REQUIRED else 0) for v in raw]
    if col == "ratio" and not present:
        return [e / t for e, t in zip(out["eval_len"], out["train_len"], strict=True)]
    if col in FLOAT_COLUMNS:
        return [to_float(v) for v in raw]
    if col == "higher_is_better":
        return [to_bool(v) if not is_missing(v) and str(v) != "" else METRICS.get(m, True)
                for v, m in zip(raw, out["metric"], strict=True)]
    if col == "status":
        return [to_str(v) or ("ok" if not math.isnan(x) else "failed") for v, x in zip(raw, out["value"], strict=True)]
    if col == "sample_scores":
        return [samples_str(v) for v in raw]
    return [to_str(v) for v in raw]


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
                           f"docs/DESIGN.md ({', '.join(COLUMNS)})")
    df = df.reset_index(drop=True)
    out: dict[str, Any] = {}
    try:
        for spec in SCHEMA:
            col = spec.name
            present = col in df.columns
            out[col] = _column(col, df[col].tolist() if present else [None] * len(df), present, out)
    except (ValueError, TypeError) as err:
        raise ResultsError(f"{source}: column {col!r}: {err}") from None
    frame = pd.DataFrame(out, columns=list(COLUMNS))
    teacher_forced = (frame["schema_version"] < GENERATED_ANSWERS_VERSION) & (frame["metric"] == "token_accuracy")
    frame.loc[teacher_forced, "metric"] = "tf_token_accuracy"
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
