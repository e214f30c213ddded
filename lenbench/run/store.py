"""The one owner of the results-directory layout: where cells, checkpoints and locks live.

Layout of a results directory (a publication holds the same ``cells/``):

    OUT/cells/<cell_id>.json        one file per finished cell (status ok or failed), written atomically
    OUT/checkpoints/<train_id>.pt   trained weights + their metadata in one file, cached so evaluation
                                    variants never retrain
    OUT/locks/<cell_id>.lock        a cell being computed by a live run (pid and host inside)
    OUT/**/<name>.corrupt           a damaged cell file or checkpoint, moved aside and recomputed
    OUT/**/.<name>.tmp              a file being written (`lenbench.atomic`); left only by a kill

Every module that reads or writes these paths asks this one (the driver, the report's reader,
`lenbench compare`, `lenbench publish`). It reads and writes files only: checkpoint *bytes* are
made and read by `lenbench.run.cell`, and this module imports neither torch nor the model, so the
report path can import it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lenbench.atomic import atomic_write_bytes, atomic_write_json, check_writable
from lenbench.results.cell import CellResult
from lenbench.results.check import check_cell_result, check_measured
from lenbench.results.labels import error_line, is_baseline

if TYPE_CHECKING:
    from lenbench.config import Cell
    from lenbench.run.cell import CellOutcome

#: Subdirectories of a results directory.
CELLS, CHECKPOINTS, LOCKS = "cells", "checkpoints", "locks"
#: Suffix of a damaged file moved aside.
CORRUPT = ".corrupt"

Log = Callable[[str], None]


def stderr_log(message: str) -> None:
    """The default `Log`: one line on stderr, above any progress bar."""
    from tqdm.auto import tqdm

    tqdm.write(message, file=sys.stderr)


def _cell_id(cell: Cell | str) -> str:
    return cell if isinstance(cell, str) else cell.cell_id


# --- cell files ---------------------------------------------------------------------------------


def cells_dir(out: str | Path) -> Path:
    """``OUT/cells``: the finished cells of a results directory or a publication."""
    return Path(out) / CELLS


def has_cells(out: str | Path) -> bool:
    """Whether `out` has a ``cells/`` directory (a results directory or a publication)."""
    return cells_dir(out).is_dir()


def cell_path(out: str | Path, cell: Cell | str) -> Path:
    """``OUT/cells/<cell_id>.json`` of a cell (or a cell id)."""
    return cells_dir(out) / f"{_cell_id(cell)}.json"


def cell_files(out: str | Path) -> list[Path]:
    """The cell files of `out`, sorted: ``cells/*.json`` (no temporary or moved-aside files); []
    without a ``cells/`` directory."""
    return sorted(cells_dir(out).glob("*.json")) if has_cells(out) else []


def load_cell_results(out: str | Path) -> list[CellResult]:
    """Every cell result in a results directory (temporary files of a killed run are ignored).

    Raises:
        ValueError: one line naming a damaged cell file (`lenbench run` moves it aside and recomputes it).
    """
    results = []
    for p in cell_files(out):
        try:
            results.append(CellResult.from_json(json.loads(p.read_text()), p))
        except (ValueError, UnicodeDecodeError) as err:
            raise ValueError(f"cell file {p} is damaged ({error_line(err)}); rerun `lenbench run` on {out} to "
                             "move it aside and recompute it") from None
    return results


def load_rows(out: str | Path) -> list[dict]:
    """All metric rows of a results directory, in a stable order."""
    return [row for result in load_cell_results(out) for row in result.rows]


def readable_cell_results(directory: str | Path) -> Iterator[CellResult]:
    """The cell results of `directory/cells/*.json` that read as cell results, in file order; an
    unreadable or damaged file is skipped (`load_results` reports it, `lenbench run` sets it aside).
    For summaries that must not fail on one bad file (`lenbench compare`'s cell records, the time
    estimate of `lenbench list suites`)."""
    for path in cell_files(directory):
        try:
            result = CellResult.from_json(json.loads(path.read_text()), path)
        except (OSError, ValueError):  # ResultsError is a ValueError
            continue
        yield result


def read_cell(out: Path, cell: Cell, log: Log = stderr_log) -> CellResult | None:
    """The cell's stored result, or None when it has none; a truncated or invalid file, or one whose
    rows are not this cell's (`foreign_row`), is moved aside (`quarantine`) and counts as none."""
    path = cell_path(out, cell)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("cell_id") != cell.cell_id:
            raise ValueError(f"not the result of cell {cell.cell_id}")
        if data.get("status") not in ("ok", "failed") or not isinstance(data.get("rows"), list):
            raise ValueError("no status or rows")
        result = CellResult.from_json(data, path)
        check_measured(path, result.rows)
        foreign = foreign_row(cell, result.rows)
        if foreign:
            raise ValueError(foreign)
    except (ValueError, UnicodeDecodeError) as err:
        quarantine(path, error_line(err), log)
        return None
    return result


def foreign_row(cell: Cell, rows: list[dict]) -> str:
    """Why `rows` are not all measurements of `cell` (another cell's, seed's, task's or encoding's: a
    file copied or edited by hand); "" when they are. A baseline row is any cell's."""
    expected = {"cell_id": cell.cell_id, "task": cell.task.key, "seed": cell.seed, "train_len": cell.train_len}
    for i, row in enumerate(rows):
        for key, value in expected.items():
            if key in row and row[key] != value:
                return f"row {i} has {key} {row[key]!r}, not this cell's {value!r}"
        encoding = row.get("encoding")
        if encoding != cell.encoding.key and not (isinstance(encoding, str) and is_baseline(encoding)):
            return f"row {i} has encoding {encoding!r}, not this cell's {cell.encoding.key!r}"
    return ""


def write_cell(out: str | Path, cell_id: str, result: CellResult) -> Path:
    """Write a cell's result to ``OUT/cells/<cell_id>.json`` atomically; returns the path.

    The result is checked against the results contract first (`lenbench.results.check`), so a file
    the readers would refuse is never written."""
    path = cell_path(out, cell_id)
    data = result.to_json()
    check_cell_result(path, data)
    check_measured(path, data["rows"])
    atomic_write_json(path, data)
    return path


# --- checkpoint files ---------------------------------------------------------------------------


def checkpoint_path(out: str | Path, name: str) -> Path:
    """``OUT/checkpoints/<name>.pt`` (a base model's `train_id`, or a fine-tune's name)."""
    return Path(out) / CHECKPOINTS / f"{name}.pt"


def write_checkpoint(out: str | Path, name: str, data: bytes) -> Path:
    """Write checkpoint `name` atomically; returns the path."""
    path = checkpoint_path(out, name)
    atomic_write_bytes(path, data)
    return path


def store_outcome(out: Path, outcome: CellOutcome) -> CellResult:
    """Write an outcome's new checkpoints, then its cell file (each atomically); return the result."""
    for name, data in outcome.checkpoints.items():
        write_checkpoint(out, name, data)
    write_cell(out, outcome.cell_id, outcome.result)
    return outcome.result


# --- damaged and temporary files ----------------------------------------------------------------


def quarantine(path: Path, why: str, log: Log) -> Path:
    """Move a damaged file aside as `<name>.corrupt` (replacing an older one) and say so in one line."""
    aside = path.with_name(path.name + CORRUPT)
    os.replace(path, aside)
    log(f"lenbench: {path} is damaged ({why}); moved it aside to {aside.name} and will recompute it")
    return aside


def prepare_output(out: Path, log: Log = stderr_log) -> Path:
    """Check up front that `out` (and its cells/, checkpoints/, locks/) can be written, then remove
    temporary files a killed run left behind, unless another live run is using the directory."""
    out = Path(out)
    for directory in (out, out / CELLS, out / CHECKPOINTS, out / LOCKS):
        check_writable(directory)
    if not any(holder_alive(h) for h in map(read_lock, (out / LOCKS).glob("*.lock"))):
        leftovers = [p for p in (*(out / CELLS).glob(".*.tmp"), *(out / CHECKPOINTS).glob(".*.tmp"))
                     if p.is_file()]  # `lenbench.atomic` makes files: a directory of that name is someone else's
        for tmp in leftovers:
            tmp.unlink(missing_ok=True)
        if leftovers:
            log(f"lenbench: removed {len(leftovers)} temporary file(s) left by a killed run in {out}")
    return out


# --- locks: one live process computes a cell ----------------------------------------------------


def lock_path(out: Path, cell: Cell | str) -> Path:
    """``OUT/locks/<cell_id>.lock`` of a cell (or a cell id)."""
    return Path(out) / LOCKS / f"{_cell_id(cell)}.lock"


def read_lock(path: Path) -> dict:
    """A lock file's holder ({"pid", "host", "started"}); {} when it is empty or unreadable."""
    try:
        holder = json.loads(path.read_text())
        return holder if isinstance(holder, dict) else {}
    except (OSError, ValueError):
        return {}


def holder_alive(holder: dict) -> bool:
    """Whether a lock's holder may still be running: its pid is alive on this host, or it is on
    another host (which cannot be checked from here). Locks of this very process are leftovers."""
    if not holder:
        return False
    if holder.get("host") != socket.gethostname():
        return True
    pid = holder.get("pid")
    return isinstance(pid, int) and pid_alive(pid)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` may still be running on this machine (this very process counts as not:
    its own leftovers cannot exist before it made any, so they are an earlier process's)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError, OSError):
        return False
    return True


def claim_cell(out: Path, cell: Cell | str) -> Path | dict:
    """Claim `cell` for this process: its lock file, created with O_CREAT | O_EXCL (pid and host
    inside); a lock whose holder is dead is taken over. Returns the lock's path, or the live
    holder ({"pid", "host", "started"}) when another process has the cell."""
    path = lock_path(out, cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    me = {"pid": os.getpid(), "host": socket.gethostname(),
          "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = read_lock(path)
            if not holder and time.time() - _mtime(path) < 5:
                holder = {"pid": None, "host": "?", "started": "just now"}  # being written right now
                return holder
            if holder_alive(holder):
                return holder
            path.unlink(missing_ok=True)  # a dead holder's lock: take it over
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        return path
    return read_lock(path) or {"pid": None, "host": "?", "started": "?"}


def release_cell(lock: Path) -> None:
    """Give up a claim: remove the lock file `claim_cell` returned (gone already is fine)."""
    lock.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
