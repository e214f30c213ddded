"""Shape checks of what `lenbench compare` reads: malformed input is one line and exit 2, always.

`lenbench compare` reads a pytest-benchmark JSON (``machine_info``, each benchmark's ``name`` /
``fullname`` / ``group``, ``extra_info`` with ``lenbench_rows`` / ``lenbench_cell`` or a kernel's
identity and ratios, ``stats``) and a results directory's ``cells/*.json`` (``config``, ``status``,
``error``, ``timestamp``, ``task_fingerprint``, ``provenance``, ``rows``). Each field is checked
here before anything uses it, so a wrong type (a list or a string where an object or a number
belongs), a missing required key, a non-finite timing or an out-of-range length or seed is one
`ResultsError` naming the file, the place in it and what was expected. What the checks cannot
foresee is caught by `guard`, which turns any other exception while reading a side into the same
kind of one-line error.

Accepted on purpose: an absent optional key; a null ``group`` (pytest-benchmark writes one); a NaN
or infinite measurement *value* (a failed or worst-case measurement, compared as such).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lenbench.numerics import MACHINE_KEYS
from lenbench.report.schema import REQUIRED, ResultsError, _read_json
from lenbench.run.store import cell_files

#: Row fields that are integers (lengths, seeds, counts): finite and within 64 bits.
INT_FIELDS = ("train_len", "eval_len", "seed", "n_samples", "schema_version")
#: Integer fields that must be present and at least 1 (a ratio divides by train_len).
POSITIVE_FIELDS = ("train_len", "eval_len")
#: Row / cell / machine fields that are text when present (the machine provenance of issue 19 among them).
TEXT_FIELDS = MACHINE_KEYS
#: Kernel extra_info fields compare reads as numbers, and the stats it reads.
KERNEL_NUMBERS = ("T", "bytes", "gbps", "copy_ratio", "copy_seconds", "ratio_to_nope")
KERNEL_TEXT = ("encoding", "kind", "impl", "dtype")
STATS = ("median", "mean", "min", "max", "stddev", "rounds")
INT64 = 2**63


def one_line(text: str) -> str:
    """`text` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(text).split())


@contextlib.contextmanager
def guard(source: str | Path) -> Iterator[None]:
    """Turn any exception but `ResultsError` raised while reading `source` into a one-line `ResultsError`.

    Args:
        source: the side being read, named in the message.
    """
    try:
        yield
    except ResultsError as err:
        raise ResultsError(one_line(err)) from None
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError, RecursionError,
            UnicodeError, OSError) as err:
        raise ResultsError(f"{source}: malformed input ({type(err).__name__}: {one_line(err) or 'no detail'}); "
                           "expected a results directory, a results / leaderboard CSV or a pytest-benchmark JSON "
                           "as lenbench writes them") from None


def read_json(path: Path) -> Any:
    """The parsed JSON of `path`; a one-line ResultsError naming it when unreadable, not JSON, or nested too deep."""
    try:
        return _read_json(path)
    except RecursionError:
        raise ResultsError(f"{path}: JSON nested too deep to read; expected a pytest-benchmark JSON or a cell "
                           "result as lenbench writes them") from None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def _fail(where: str, what: str, value: Any, expected: str) -> None:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise ResultsError(f"{where}: {what} is {_kind(value)} ({shown}), expected {expected}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_object(where: str, what: str, value: Any, *, optional: bool = True) -> dict:
    """`value` when it is a JSON object; {} when absent and `optional`; a ResultsError otherwise."""
    if value is ... and optional:
        return {}
    if not isinstance(value, dict):
        _fail(where, what, value if value is not ... else None, "an object")
    return value


def check_text(where: str, record: dict, keys: tuple[str, ...], *, nullable: tuple[str, ...] = ()) -> None:
    """Each of `keys` present in `record` is a string (or null where listed in `nullable`)."""
    for key in keys:
        if key in record and not isinstance(record[key], str) and not (key in nullable and record[key] is None):
            _fail(where, key, record[key], "a string")


def check_number(where: str, what: str, value: Any, *, finite: bool = True) -> None:
    """`value` is a number (finite unless not `finite`); null counts as absent."""
    if value is None:
        return
    if not _is_number(value):
        _fail(where, what, value, "a number")
    if finite and not math.isfinite(value):
        _fail(where, what, value, "a finite number")


def check_row(where: str, row: Any) -> None:
    """One tidy row as the engine writes it: an object with the required fields, integer lengths and
    seed in range, a numeric (or null: failed) value, text where text belongs."""
    if not isinstance(row, dict):
        _fail(where, "the row", row, "an object (one measurement)")
    absent = [k for k in REQUIRED if k not in row or (row[k] is None and k != "value")]
    if absent:
        raise ResultsError(f"{where}: row without {', '.join(absent)} (every row needs {', '.join(REQUIRED)})")
    for key in INT_FIELDS:
        value = row.get(key)
        if value is None and key not in POSITIVE_FIELDS:
            continue
        check_number(where, key, value)
        if abs(value) >= INT64 or value != int(value):
            _fail(where, key, value, "an integer within 64 bits")
        if key in POSITIVE_FIELDS and value < 1:
            _fail(where, key, value, "a length of at least 1")
    if not (row["value"] is None or _is_number(row["value"])):
        _fail(where, "value", row["value"], "a number or null (a failed measurement)")
    if not isinstance(row.get("higher_is_better", True), (bool, type(None))):
        _fail(where, "higher_is_better", row["higher_is_better"], "true or false")
    if row.get("ratio") is not None:
        check_number(where, "ratio", row["ratio"])
        if row["ratio"] <= 0:
            _fail(where, "ratio", row["ratio"], "a positive length ratio")
    scores = row.get("sample_scores")
    if isinstance(scores, list) and not all(_is_number(x) or (isinstance(x, list) and len(x) == 2 and all(map(_is_number, x)))
                                            for x in scores):
        _fail(where, "sample_scores", scores, "a string or a list of numbers / [numerator, denominator] pairs")
    check_text(where, row, ("task", "encoding", "variant", "metric", "bucket", "status", *TEXT_FIELDS))
    if not isinstance(scores, (str, list, type(None))):
        _fail(where, "sample_scores", scores, "a string")


def check_rows(where: str, rows: Any) -> None:
    if not isinstance(rows, list):
        _fail(where, "rows", rows, "a list of rows")
    for i, row in enumerate(rows):
        check_row(f"{where}: row {i}", row)


def check_machine_info(where: str, data: dict) -> None:
    """machine_info and the parts of it compare reads (cpu brand and flags, lenbench's facts)."""
    if "machine_info" not in data:
        return
    info = check_object(where, "machine_info", data["machine_info"])
    cpu = check_object(where, "machine_info.cpu", info.get("cpu", ...))
    check_text(f"{where}: machine_info.cpu", cpu, ("brand_raw",))
    flags = cpu.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        _fail(where, "machine_info.cpu.flags", flags, "a list of strings")
    lb = check_object(where, "machine_info.lenbench", info.get("lenbench", ...))
    for key, value in lb.items():
        if isinstance(value, (dict, list)):
            _fail(where, f"machine_info.lenbench.{key}", value, "a string or a number")
    check_text(f"{where}: machine_info", info, ("python_version",))
    check_text(f"{where}: machine_info.lenbench", lb, TEXT_FIELDS)


def check_benchmark_json(path: Path, data: Any) -> None:
    """Every field of a pytest-benchmark JSON that compare reads (see the module docstring).

    Args:
        path: the file (named in the message).
        data: its parsed JSON.

    Raises:
        ResultsError: one line naming the file, the benchmark and the field.
    """
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ResultsError(f"{path}: not a pytest-benchmark JSON (expected an object with a 'benchmarks' list, "
                           f"got {_kind(data) if not isinstance(data, dict) else 'benchmarks ' + _kind(data.get('benchmarks'))})")
    check_machine_info(str(path), data)
    for i, bench in enumerate(data["benchmarks"]):
        where = f"{path}: benchmark {i}"
        if not isinstance(bench, dict):
            _fail(where, "the benchmark", bench, "an object")
        check_text(where, bench, ("name", "fullname", "group"), nullable=("group",))
        where = f"{path}: benchmark {bench.get('fullname', bench.get('name', i))!r}"
        extra = check_object(where, "extra_info", bench.get("extra_info", ...))
        if "lenbench_rows" in extra:
            check_rows(f"{where}: extra_info.lenbench_rows", extra["lenbench_rows"])
            if "lenbench_cell" in extra:
                cell = check_object(where, "extra_info.lenbench_cell", extra["lenbench_cell"])
                check_text(f"{where}: extra_info.lenbench_cell", cell, ("title", "status", "error"), nullable=("error",))
            continue
        check_text(f"{where}: extra_info", extra, KERNEL_TEXT)
        for key in KERNEL_NUMBERS:
            check_number(f"{where}: extra_info", key, extra.get(key), finite=key not in ("copy_ratio", "ratio_to_nope"))
        if "stats" not in bench:
            raise ResultsError(f"{where}: a kernel timing without 'stats' (expected pytest-benchmark's stats "
                               "object with a 'median')")
        stats = check_object(where, "stats", bench["stats"], optional=False)
        if stats.get("median") is None:
            raise ResultsError(f"{where}: stats without a 'median' (expected pytest-benchmark's stats)")
        for key in STATS:
            check_number(f"{where}: stats", key, stats.get(key))


def check_cell_result(path: Path, data: Any) -> None:
    """One ``cells/*.json``: an object with a rows list, and the fields compare reads typed as the engine writes them.

    Raises:
        ResultsError: one line naming the file and the field.
    """
    where = str(path)
    if not isinstance(data, dict):
        _fail(where, "the cell result", data, "an object with a 'rows' list, as lenbench.run.driver writes it")
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
                _fail(f"{where}: config", key, config[key], "an integer within 64 bits")
    check_text(where, data, ("status", "timestamp"))
    check_text(where, data, ("error",), nullable=("error",))
    fp = check_object(where, "task_fingerprint", data.get("task_fingerprint", ...))
    check_text(f"{where}: task_fingerprint", fp, ("corpus_sha256",))
    provenance = check_object(where, "provenance", data.get("provenance", ...))
    check_text(f"{where}: provenance", provenance, TEXT_FIELDS)
    check_text(where, data, TEXT_FIELDS)


def check_cells_directory(directory: Path) -> list[Path]:
    """The cell files of a results directory (``directory/cells/*.json``), each checked.

    An empty cells/ is not malformed: against a base with rows it is everything missing in head (the
    gate fails, exit 1); two empty sides are "nothing to compare" (exit 2, `lenbench.compare.gate.compare`).
    """
    files = cell_files(directory)
    for path in files:
        check_cell_result(path, read_json(path))
    return files
