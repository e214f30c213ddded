"""Cell files, part of step 1 of the report path: the raw rows of a results directory's cells, and
the check that no two cells measure the same thing.

A results directory may hold, beside a suite's cells, cells an earlier configuration of the same
suite left there (another training budget or length, other task parameters) under other cell ids.
`check_one_cell_per_measurement` refuses such a mix, and `superseded_cells` names the older cells,
so that `lenbench.report.rows.load_results` and `lenbench.publish` never put two configurations on
one board. Its own module: both read cell files through it, apart from the other sources of rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from lenbench.results.labels import is_baseline
from lenbench.results.schema import ROW_KEY, ResultsError, read_json


def cell_rows(paths: Iterable[Path]) -> dict[Path, list[dict]]:
    """The raw rows of each cell file, in the order given.

    Raises:
        ResultsError: one line naming a file that is not a cell result.
    """
    rows: dict[Path, list[dict]] = {}
    for path in paths:
        result = read_json(path)
        if not isinstance(result, dict) or not isinstance(result.get("rows"), list):
            raise ResultsError(f"{path}: not a cell result (expected a JSON object with a 'rows' list, "
                               "as written by lenbench.run.driver)")
        rows[path] = result["rows"]
    return rows


def _model_key(row: dict, fields: Iterable[str]) -> tuple[str, ...] | None:
    """`fields` of a raw model row as strings; None for a baseline row, which every cell of a task
    and seed carries."""
    if is_baseline(str(row.get("encoding", ""))):
        return None
    return tuple(str(row.get(k) if row.get(k) is not None else "") for k in fields)


def _measurement(row: dict) -> tuple[str, ...] | None:
    """The identity of a raw model row: `ROW_KEY` (the ratio follows from the lengths)."""
    return _model_key(row, (k for k in ROW_KEY if k != "ratio"))


def _slot(row: dict) -> tuple[str, ...] | None:
    """The place a raw model row's cell fills in a suite's grid (suite, task, encoding, seed), whatever
    budget, training length or task parameters it ran at."""
    return _model_key(row, ("suite", "task", "encoding", "seed"))


def superseded_cells(kept: dict[Path, list[dict]], others: dict[Path, list[dict]]) -> list[Path]:
    """The cells of `others` that fill a place of the suite's grid (`_slot`: suite, task, encoding,
    seed) a cell of `kept` fills: what an earlier configuration of the same suite (another training
    budget or length, other task parameters) left in a results directory, under another cell id."""
    filled = {slot for rows in kept.values() for row in rows if (slot := _slot(row)) is not None}
    return [path for path, rows in others.items() if any(_slot(row) in filled for row in rows)]


def check_one_cell_per_measurement(by_cell: dict[Path, list[dict]], directory: Path) -> None:
    """Refuse cells that measure the same thing under different cell ids (`superseded_cells`):
    `normalize` would keep one of them by cell id, mixing two configurations on one board.

    Raises:
        ResultsError: one line naming two such cells, the count and the fix.
    """
    owner: dict[tuple[str, ...], Path] = {}
    clashing: set[Path] = set()
    first: tuple[Path, Path, dict] | None = None
    for path, rows in by_cell.items():
        for row in rows:
            key = _measurement(row)
            if key is None:
                continue
            earlier = owner.setdefault(key, path)
            if earlier != path:
                clashing.add(path)
                first = first or (earlier, path, row)
    if first is not None:
        a, b, row = first
        raise ResultsError(
            f"{directory / 'cells'}: {a.name} and {b.name} both measure {row.get('task')} / {row.get('encoding')}"
            f" ({row.get('variant')}) seed {row.get('seed')}, and {len(clashing)} cell(s) in all measure what an"
            " other cell does: runs of two configurations of the suite (e.g. an older training budget); move the"
            " outdated cell files aside (their 'config' says which), or report or publish the run's"
            " --benchmark-json, which names its own cells")
