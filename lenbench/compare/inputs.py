"""Shape checks of what `lenbench compare` reads: malformed input is one line and exit 2, always.

`lenbench compare` reads a pytest-benchmark JSON (``machine_info``, each benchmark's ``name`` /
``fullname`` / ``group``, ``extra_info`` with a cell's rows (packed, ``lenbench_table``, or a list,
``lenbench_rows``: `lenbench.results.bench_rows`) / ``lenbench_cell`` or a kernel's identity and ratios,
``stats``) and a results directory's ``cells/*.json``. The rows and cell files
are checked by the results contract (`lenbench.results.check`); the benchmark JSON's own fields
here. Each field is checked before anything uses it, so a wrong type (a list or a string where an object or a number
belongs), a missing required key, a non-finite timing or an out-of-range length or seed is one
`ResultsError` naming the file, the place in it and what was expected. What the checks cannot
foresee is caught by `guard`, which turns any other exception while reading a side into the same
kind of one-line error.

Accepted on purpose: an absent optional key; a null ``group`` (pytest-benchmark writes one); a NaN
or infinite measurement *value* (a failed or worst-case measurement, compared as such).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lenbench.results import schema
from lenbench.results.bench_rows import LEGACY, TABLE, cell_rows, is_cell_benchmark
from lenbench.results.check import (
    TEXT_FIELDS,
    check_cell_result,
    check_number,
    check_object,
    check_rows,
    check_text,
    fail_field,
    json_kind,
)
from lenbench.results.schema import ResultsError
from lenbench.run.store import cell_files

#: Kernel extra_info fields compare reads as numbers, and the stats it reads.
KERNEL_NUMBERS = ("T", "bytes", "gbps", "copy_ratio", "copy_seconds", "ratio_to_nope")
KERNEL_TEXT = ("encoding", "kind", "impl", "dtype")
STATS = ("median", "mean", "min", "max", "stddev", "rounds")


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
        return schema.read_json(path)
    except RecursionError:
        raise ResultsError(f"{path}: JSON nested too deep to read; expected a pytest-benchmark JSON or a cell "
                           "result as lenbench writes them") from None


def check_machine_info(where: str, data: dict) -> None:
    """machine_info and the parts of it compare reads (cpu brand and flags, lenbench's facts)."""
    if "machine_info" not in data:
        return
    info = check_object(where, "machine_info", data["machine_info"])
    cpu = check_object(where, "machine_info.cpu", info.get("cpu", ...))
    check_text(f"{where}: machine_info.cpu", cpu, ("brand_raw",))
    flags = cpu.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        fail_field(where, "machine_info.cpu.flags", flags, "a list of strings")
    lb = check_object(where, "machine_info.lenbench", info.get("lenbench", ...))
    for key, value in lb.items():
        if isinstance(value, (dict, list)):
            fail_field(where, f"machine_info.lenbench.{key}", value, "a string or a number")
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
                           f"got {json_kind(data) if not isinstance(data, dict) else 'benchmarks ' + json_kind(data.get('benchmarks'))})")
    check_machine_info(str(path), data)
    for i, bench in enumerate(data["benchmarks"]):
        where = f"{path}: benchmark {i}"
        if not isinstance(bench, dict):
            fail_field(where, "the benchmark", bench, "an object")
        check_text(where, bench, ("name", "fullname", "group"), nullable=("group",))
        where = f"{path}: benchmark {bench.get('fullname', bench.get('name', i))!r}"
        extra = check_object(where, "extra_info", bench.get("extra_info", ...))
        if is_cell_benchmark(extra):
            rows_at = f"extra_info.{TABLE}" if TABLE in extra else f"extra_info.{LEGACY}"
            check_rows(f"{where}: {rows_at}", extra[LEGACY] if TABLE not in extra else cell_rows(extra, where))
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


def check_cells_directory(directory: Path) -> list[Path]:
    """The cell files of a results directory (``directory/cells/*.json``), each checked.

    An empty cells/ is not malformed: against a base with rows it is everything missing in head (the
    gate fails, exit 1); two empty sides are "nothing to compare" (exit 2, `lenbench.compare.gate.compare`).
    """
    files = cell_files(directory)
    for path in files:
        check_cell_result(path, read_json(path))
    return files
