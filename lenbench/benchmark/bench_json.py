"""lenbench's pytest-benchmark JSON as written: what a cell benchmark's stats mean, its layout, and the
conversion of an earlier file (`lenbench slim-bench`).

**A cell's stats are its compute time.** pytest-benchmark records one timed round per cell
benchmark, which is a read of the stored result when the executor computed the cell first or an
earlier session did; a chart of those rounds charts the disk. So at the end of the session
(pytest-benchmark's `pytest_benchmark_update_json` hook, `time_cells`) each cell benchmark's
``stats`` become one round of the cell's own wall seconds, measured when it was computed
(`CellResult.seconds`: training, or loading its trained checkpoint from the cache, then every
evaluation and baseline), with ``extra_info["lenbench_cell"]["timed"]`` = `CELL_TIMED` saying so, and
``"round"`` what the session's own round timed ("compute" or "cache load"). The training alone is
``train_seconds``. A cell whose result holds no time (a file of an older lenbench) keeps its round
and says so in ``timed``. pytest-benchmark's terminal table, printed before the JSON is written,
still shows the round.

**The layout.** A cell's rows are packed once per cell (`lenbench.results.bench_rows`), and the file
is written with one row per line (`dumps`: objects indented, a list of numbers or strings on one
line), not pytest-benchmark's four-space indent that puts every value of a row on its own line: the
published quick board's JSON is 1.9 MB instead of 24 MB, and a diff shows the rows that changed.

**Earlier files.** `slim` turns a file of lenbench 0.1 (rows as dicts, ``lenbench_rows``; stats of
the round) into this form without recomputing anything: the same rows, packed, and each cell's
stats from its cell file's ``seconds`` where the cell files are at hand (a publication's
``cells/``). Torch-free: `lenbench publish` and the CLI import it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lenbench.atomic import atomic_write_text
from lenbench.results.bench_rows import LEGACY, TABLE, pack
from lenbench.results.schema import ResultsError

#: What a cell benchmark's stats time (``extra_info["lenbench_cell"]["timed"]``).
CELL_TIMED = "cell compute (train + eval), measured when computed"
#: The extra_info key of a cell benchmark's record (cell id, title, status, times).
CELL = "lenbench_cell"


def one_round_stats(seconds: float) -> dict[str, Any]:
    """pytest-benchmark's stats object of a single round of `seconds` (every field it writes, so
    `pytest-benchmark compare` and github-action-benchmark's ``pytest`` tool read it as their own)."""
    return {"min": seconds, "max": seconds, "mean": seconds, "stddev": 0, "rounds": 1, "median": seconds,
            "iqr": 0.0, "q1": seconds, "q3": seconds, "iqr_outliers": 0, "stddev_outliers": 0, "outliers": "0;0",
            "ld15iqr": seconds, "hd15iqr": seconds, "ops": 1 / seconds if seconds > 0 else 0.0, "total": seconds,
            "data": [seconds], "iterations": 1}


def _finite_positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _cell_record(bench: dict[str, Any]) -> dict[str, Any] | None:
    """The cell record of a benchmark entry (``extra_info[CELL]``); None for a kernel or
    training-step timing."""
    info = (bench.get("extra_info") or {}).get(CELL)
    return info if isinstance(info, dict) else None


def time_cells(output_json: dict[str, Any]) -> None:
    """Give each cell benchmark of `output_json` whose record says `CELL_TIMED` the stats of its
    recorded compute seconds (in place)."""
    for bench in output_json.get("benchmarks") or []:
        info = _cell_record(bench)
        if info is not None and info.get("timed") == CELL_TIMED and _finite_positive(info.get("seconds")):
            bench["stats"] = one_round_stats(float(info["seconds"]))


def drop_failed(output_json: dict[str, Any], failed: set[str]) -> list[str]:
    """Remove from `output_json` (in place) the benchmarks of the tests in `failed` (node ids) that
    time a kernel or a training step: a test that failed after timing (its output wrong, a
    reference broken) must not publish a timing. A cell benchmark stays: its cell records its own
    failure, and the publication keeps every cell, failed ones included. Returns the removed names.
    """
    kept, dropped = [], []
    for bench in output_json.get("benchmarks") or []:
        (dropped if bench.get("fullname") in failed and _cell_record(bench) is None else kept).append(bench)
    output_json["benchmarks"] = kept
    return [bench.get("name", "") for bench in dropped]


def cell_timing(seconds: float, round_timed: str) -> dict[str, Any]:
    """The time fields of a cell benchmark's record: its compute ``seconds``, what the session's
    ``round`` timed, and what its stats will be (``timed``: `CELL_TIMED`, else the round when the
    cell holds no time)."""
    known = _finite_positive(seconds)
    return {"seconds": seconds if known else None, "round": round_timed, "timed": CELL_TIMED if known else round_timed}


# --- layout ---------------------------------------------------------------------------------------


def dumps(data: Any) -> str:
    """`data` as JSON text: objects and lists of objects or lists indented by one space, any list of
    plain values (a row, the CPU flags, a round's data) on one line. ASCII, NaN as pytest-benchmark
    writes it."""
    return _dump(data, 0) + "\n"


def _dump(value: Any, level: int) -> str:
    inner, outer = " " * (level + 1), " " * level
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(str(k))}: {_dump(v, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{outer}}}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) and v for v in value):
        return "[\n" + ",\n".join(inner + _dump(v, level + 1) for v in value) + f"\n{outer}]"
    return json.dumps(value, ensure_ascii=True)


def write(path: str | Path, data: Any) -> Path:
    """Write a benchmark JSON in lenbench's layout, atomically (`lenbench.atomic`)."""
    return atomic_write_text(path, dumps(data))


def rewrite(path: str | Path) -> None:
    """Rewrite the benchmark JSON pytest-benchmark just wrote at `path` in lenbench's layout (the
    same JSON value, fewer bytes)."""
    path = Path(path)
    write(path, json.loads(path.read_text(encoding="utf-8")))


# --- earlier files --------------------------------------------------------------------------------


def slim(data: Any, cell_seconds: Mapping[str, float] | None = None, where: str = "benchmark JSON") -> dict[str, Any]:
    """An earlier lenbench benchmark JSON in this form: rows packed, cells timed by their compute
    seconds. Nothing is recomputed; the rows are the same rows.

    Args:
        data: the parsed JSON (left unchanged).
        cell_seconds: cell id → the cell's compute seconds (its cell file's ``seconds``), for cells
            whose record holds none; a cell found in neither keeps its round and says so.
        where: the file, named in errors.

    Raises:
        ResultsError: one line when `data` is not a pytest-benchmark JSON or a benchmark's rows are
            not a list.
    """
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ResultsError(f"{where}: not a pytest-benchmark JSON (expected an object with a 'benchmarks' list); "
                           "give the file `pytest bench --benchmark-json FILE` wrote")
    out = json.loads(json.dumps(data))  # a deep copy
    for i, bench in enumerate(out["benchmarks"]):
        extra = bench.get("extra_info") if isinstance(bench, dict) else None
        if not isinstance(extra, dict) or (LEGACY not in extra and TABLE not in extra):
            continue  # a timing
        if LEGACY in extra:
            rows = extra.pop(LEGACY)
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise ResultsError(f"{where}: benchmark {i}: extra_info.{LEGACY} is not a list of rows; "
                                   "give the file `pytest bench --benchmark-json FILE` wrote")
            extra[TABLE] = pack(rows)
        info = _cell_record(bench)
        if info is None or info.get("timed") == CELL_TIMED:
            continue
        seconds = info.get("seconds")
        if not _finite_positive(seconds):
            seconds = (cell_seconds or {}).get(str(info.get("cell_id", "")))
        round_timed = info.get("round", info.get("timed", ""))
        info.update(cell_timing(seconds if seconds is not None else math.nan, round_timed))
    time_cells(out)
    return out


def cell_seconds(cells: str | Path) -> dict[str, float]:
    """cell id → ``seconds`` of each readable cell file in `cells` (a results directory or its
    ``cells/``); cells without a time are left out."""
    from lenbench.run.store import readable_cell_results

    directory = Path(cells)
    directory = directory.parent if directory.name == "cells" else directory
    return {r.cell_id: float(r.seconds) for r in readable_cell_results(directory) if _finite_positive(r.seconds)}

