"""How a pytest-benchmark JSON carries a cell's tidy rows: packed once, columnar, read in both forms.

A cell benchmark of ``pytest bench`` (`lenbench.benchmark.bench.test_extrapolation`) stores its
cell's rows in ``extra_info[TABLE]`` so that the benchmark JSON alone rebuilds the leaderboard.
Stored as one dict per row, every row repeated what every row of its cell shares (the settings,
the versions, the machine, the cell id: two thirds of a row), so the table keeps those values once:

    {"format": 1,
     "same":   {column: value, ...},                       # the columns every row holds with one value
     "blocks": [{"columns": [column, ...],                 # the other columns of a run of rows
                 "data": [[value, ...], ...]}, ...]}       # one list per row, in `columns` order

Blocks follow the rows' order; a new block starts where the set of columns a row holds changes (a
baseline row has no ``bucket``, a failed one no ``sample_scores``), so a row reads back with exactly
the keys and values it had: `unpack(pack(rows)) == rows`.

Earlier files (the published ``results/bench.json`` of lenbench 0.1) hold the rows as a list of
dicts under ``extra_info[LEGACY]``; `cell_rows` reads either, and every reader (the report,
`compare`, `publish`) goes through it. A benchmark with neither key is a kernel or training-step
timing.
"""

from __future__ import annotations

from typing import Any

from lenbench.results.check import check_object, fail_field
from lenbench.results.schema import ResultsError

#: The extra_info key of a cell's packed rows, and of its rows as a list of dicts in earlier files.
TABLE, LEGACY = "lenbench_table", "lenbench_rows"
#: The version of the packed form this module writes and reads.
FORMAT = 1


def pack(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The packed table of one cell's rows (module docstring): shared values once, the rest columnar."""
    order: dict[str, None] = {}
    for row in rows:
        order.update(dict.fromkeys(row))
    first = rows[0] if rows else {}
    same = {c: first[c] for c in order if all(c in r and _same(r[c], first[c]) for r in rows)}
    blocks: list[dict[str, Any]] = []
    for row in rows:
        columns = [c for c in order if c in row and c not in same]
        if not blocks or blocks[-1]["columns"] != columns:
            blocks.append({"columns": columns, "data": []})
        blocks[-1]["data"].append([row[c] for c in columns])
    return {"format": FORMAT, "same": same, "blocks": blocks}


def _same(a: Any, b: Any) -> bool:
    """Equal as stored: NaN equals NaN, and 1 never equals 1.0 or True (JSON keeps them apart)."""
    if type(a) is not type(b):
        return False
    return a == b or (a != a and b != b)


def unpack(table: Any, where: str = "benchmark") -> list[dict[str, Any]]:
    """The rows of a packed table, each a new dict.

    Raises:
        ResultsError: one line naming `where` and the part of the table that is malformed.
    """
    check_table(where, table)
    same = table["same"]
    return [{**same, **dict(zip(block["columns"], values, strict=True))}
            for block in table["blocks"] for values in block["data"]]


def check_table(where: str, table: Any) -> None:
    """A packed table's shape: its format, an object ``same``, blocks of string columns and rows as
    long as them (one-line `ResultsError` naming the field otherwise). The rows' own fields are the
    results contract's (`lenbench.results.check.check_rows`)."""
    what = f"extra_info.{TABLE}"
    check_object(where, what, table, optional=False)
    if table.get("format") != FORMAT:
        raise ResultsError(f"{where}: {what}.format is {table.get('format')!r}, expected {FORMAT} (written by a "
                           "newer lenbench? upgrade lenbench to read it)")
    check_object(where, f"{what}.same", table.get("same", ...), optional=False)
    blocks = table.get("blocks")
    if not isinstance(blocks, list):
        fail_field(where, f"{what}.blocks", blocks, "a list of blocks")
    for i, block in enumerate(blocks):
        check_object(where, f"{what}.blocks.{i}", block, optional=False)
        columns, data = block.get("columns"), block.get("data")
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            fail_field(where, f"{what}.blocks.{i}.columns", columns, "a list of column names")
        if not isinstance(data, list):
            fail_field(where, f"{what}.blocks.{i}.data", data, "a list of rows")
        for j, values in enumerate(data):
            if not isinstance(values, list) or len(values) != len(columns):
                fail_field(where, f"{what}.blocks.{i}.data.{j}", values, f"a list of {len(columns)} values")


def is_cell_benchmark(extra_info: Any) -> bool:
    """Whether a benchmark's extra_info carries a cell's rows (either form), not a timing."""
    return isinstance(extra_info, dict) and (TABLE in extra_info or LEGACY in extra_info)


def cell_rows(extra_info: Any, where: str = "benchmark") -> list[dict[str, Any]] | None:
    """The rows a benchmark's extra_info carries, packed or as a list (earlier files); None for a
    benchmark without rows (a timing).

    Raises:
        ResultsError: one line naming `where` when the rows are not a packed table or a list.
    """
    if not is_cell_benchmark(extra_info):
        return None
    if TABLE in extra_info:
        return unpack(extra_info[TABLE], where)
    rows = extra_info[LEGACY]
    if not isinstance(rows, list):
        fail_field(where, f"extra_info.{LEGACY}", rows, "a list of rows")
    return rows
