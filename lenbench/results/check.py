"""The shape of a row and of a cell file as the engine writes them, checked field by field.

A wrong type (a list or a string where an object or a number belongs), a missing required column,
a non-finite number or an out-of-range length or seed is one `ResultsError` naming the file, the
place in it and what was expected. The column facts (which are required, which are integers) are
`lenbench.results.schema`'s.

Accepted on purpose: an absent optional key; a NaN or infinite measurement *value* (a failed or
worst-case measurement in a table or benchmark file, compared as such). The engine's own cell
files are held to more (`check_measured`): a row of status ok there holds a finite value.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from lenbench.numerics import MACHINE_KEYS
from lenbench.results.schema import INT_COLUMNS, REQUIRED, ResultsError

#: Row fields that are integers (lengths, seeds, counts): finite and within 64 bits.
INT_FIELDS = INT_COLUMNS
#: Integer fields that must be present and at least 1 (a ratio divides by train_len).
POSITIVE_FIELDS = tuple(c for c in INT_COLUMNS if c in REQUIRED)
#: Row / cell / machine fields that are text when present (the machine provenance among them).
TEXT_FIELDS = MACHINE_KEYS
INT64 = 2**63
#: A row's status: measured, or failed with its error.
STATUSES = ("ok", "failed")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan"
#: sample_scores as `lenbench.metrics.encode_samples` writes it: numbers or numerator/denominator pairs.
SAMPLES_TEXT = re.compile(rf"(?:(?:{_NUMBER})(?:/(?:{_NUMBER}))?(?: (?=.)|$))*")


def json_kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def fail_field(where: str, what: str, value: Any, expected: str) -> None:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise ResultsError(f"{where}: {what} is {json_kind(value)} ({shown}), expected {expected}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_object(where: str, what: str, value: Any, *, optional: bool = True) -> dict:
    """`value` when it is a JSON object; {} when absent and `optional`; a ResultsError otherwise."""
    if value is ... and optional:
        return {}
    if not isinstance(value, dict):
        fail_field(where, what, value if value is not ... else None, "an object")
    return value


def check_text(where: str, record: dict, keys: tuple[str, ...], *, nullable: tuple[str, ...] = ()) -> None:
    """Each of `keys` present in `record` is a string (or null where listed in `nullable`)."""
    for key in keys:
        if key in record and not isinstance(record[key], str) and not (key in nullable and record[key] is None):
            fail_field(where, key, record[key], "a string")


def check_number(where: str, what: str, value: Any, *, finite: bool = True) -> None:
    """`value` is a number (finite unless not `finite`); null counts as absent."""
    if value is None:
        return
    if not _is_number(value):
        fail_field(where, what, value, "a number")
    if finite and not math.isfinite(value):
        fail_field(where, what, value, "a finite number")


def check_row(where: str, row: Any) -> None:
    """One tidy row as the engine writes it: an object with the required fields, integer lengths and
    seed in range, a numeric (or null: failed) value, text where text belongs."""
    if not isinstance(row, dict):
        fail_field(where, "the row", row, "an object (one measurement)")
    absent = [k for k in REQUIRED if k not in row or (row[k] is None and k != "value")]
    if absent:
        raise ResultsError(f"{where}: row without {', '.join(absent)} (every row needs {', '.join(REQUIRED)})")
    for key in INT_FIELDS:
        value = row.get(key)
        if value is None and key not in POSITIVE_FIELDS:
            continue
        check_number(where, key, value)
        if abs(value) >= INT64 or value != int(value):
            fail_field(where, key, value, "an integer within 64 bits")
        if key in POSITIVE_FIELDS and value < 1:
            fail_field(where, key, value, "a length of at least 1")
    if not (row["value"] is None or _is_number(row["value"])):
        fail_field(where, "value", row["value"], "a number or null (a failed measurement)")
    if not isinstance(row.get("higher_is_better", True), (bool, type(None))):
        fail_field(where, "higher_is_better", row["higher_is_better"], "true or false")
    status = row.get("status")
    if status is not None and status not in STATUSES:
        fail_field(where, "status", status, " or ".join(map(repr, STATUSES)))
    if row.get("ratio") is not None:
        check_number(where, "ratio", row["ratio"])
        if row["ratio"] <= 0:
            fail_field(where, "ratio", row["ratio"], "a positive length ratio")
        if not math.isclose(row["ratio"], row["eval_len"] / row["train_len"], rel_tol=1e-9):
            fail_field(where, "ratio", row["ratio"], f"eval_len / train_len = {row['eval_len'] / row['train_len']:g}")
    scores = row.get("sample_scores")
    if isinstance(scores, str) and not SAMPLES_TEXT.fullmatch(scores):
        fail_field(where, "sample_scores", scores, "numbers or numerator/denominator pairs separated by spaces")
    if isinstance(scores, list) and not all(_is_number(x) or (isinstance(x, list) and len(x) == 2 and all(map(_is_number, x)))
                                            for x in scores):
        fail_field(where, "sample_scores", scores, "a string or a list of numbers / [numerator, denominator] pairs")
    check_text(where, row, ("task", "encoding", "variant", "metric", "bucket", "status", *TEXT_FIELDS))
    if not isinstance(scores, (str, list, type(None))):
        fail_field(where, "sample_scores", scores, "a string")


def check_measured(path: Path, rows: list[dict]) -> None:
    """The engine's own cell files hold a finite value in every row of status ok (a NaN or infinite
    measurement is written as a failed row with its reason); checked when a cell file is written
    and when a run reads it back, so a cell with such a row is recomputed, never reused."""
    for i, row in enumerate(rows):
        if row.get("status") == "ok" and not (_is_number(row["value"]) and math.isfinite(row["value"])):
            fail_field(f"{path}: row {i}", "value", row["value"], "a finite number in a row of status ok (a "
                       "failed measurement has status failed)")


def check_rows(where: str, rows: Any) -> None:
    if not isinstance(rows, list):
        fail_field(where, "rows", rows, "a list of rows")
    for i, row in enumerate(rows):
        check_row(f"{where}: row {i}", row)


def check_cell_result(path: Path, data: Any) -> None:
    """One ``cells/*.json``: an object with a rows list, and the fields compare reads typed as the engine writes them.

    Raises:
        ResultsError: one line naming the file and the field.
    """
    where = str(path)
    if not isinstance(data, dict):
        fail_field(where, "the cell result", data, "an object with a 'rows' list, as lenbench.run.driver writes it")
    if "rows" not in data:
        raise ResultsError(f"{path}: cell result without 'rows' (expected an object with a 'rows' list, "
                           "as lenbench.run.driver writes it)")
    check_rows(where, data["rows"])
    config = check_object(where, "config", data.get("config", ...))
    check_text(f"{where}: config", config, ("task", "label", "encoding"))
    for key in ("train_len", "seed"):
        if key in config:
            check_number(f"{where}: config", key, config[key])
            if config[key] is None or abs(config[key]) >= INT64 or config[key] != int(config[key]):
                fail_field(f"{where}: config", key, config[key], "an integer within 64 bits")
    check_text(where, data, ("status", "timestamp"))
    check_text(where, data, ("error",), nullable=("error",))
    fp = check_object(where, "task_fingerprint", data.get("task_fingerprint", ...))
    check_text(f"{where}: task_fingerprint", fp, ("corpus_sha256",))
    provenance = check_object(where, "provenance", data.get("provenance", ...))
    check_text(f"{where}: provenance", provenance, TEXT_FIELDS)
    check_text(where, data, TEXT_FIELDS)
    training = check_object(where, "training", data.get("training", ...))
    check_number(f"{where}: training", "best_step", training.get("best_step"))
    check_number(f"{where}: training", "val_loss", training.get("val_loss"))
    for i, entry in enumerate(training.get("val_history", [])):
        if not (isinstance(entry, list) and len(entry) == 3 and all(map(_is_number, entry))):
            fail_field(f"{where}: training", f"val_history.{i}", entry, "[step, validation loss, learning rate]")
