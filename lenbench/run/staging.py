"""A staging publication: the finished cells of a long run kept where git can commit them, so a run
that outlasts one machine (a CI job's limit, a reclaimed cluster node, a session) resumes on a fresh
one without losing work.

    lenbench run --suite catalog --stage staging/catalog --stage-commit 10
    # ... the machine is reclaimed; on a fresh clone of the same kind:
    lenbench run --suite catalog --stage staging/catalog --stage-commit 10
    lenbench stage staging/catalog                  # done / to do / stale, the kind, "complete"?
    pytest bench --suite catalog --benchmark-json runs/catalog-bench.json   # kernels; every cell reused
    lenbench publish staging/catalog --benchmark-json runs/catalog-bench.json --to results/catalog

How it works. A staging publication is a directory holding a marker (``.lenbench-staging``: the
suite as given, its name, the cell ids it has, the device, threads and numeric kind the cells are
computed with) and ``cells/<cell_id>.json``, the run's finished cell files, copied byte for byte.
`lenbench run --stage DIR`:

- *seeds* the run directory from it: each staged cell file of the suite that the run directory
  lacks is copied in, and then the driver decides as always whether it is still valid (its
  fingerprint: code, torch, threads, numeric kind). A cell staged by other code is recomputed,
  never reused, and its fresh file replaces the staged one;
- *stages* each cell as it finishes (ok, or failed for a reason inside the cell: the cells a rerun
  would not compute again); a cell that failed for a reason outside it (the machine's memory, a
  lost worker) is not staged, so the next run computes it;
- with ``--stage-commit MINUTES``, commits the directory (and nothing else: ``git commit --only``)
  at most that often and once at the end, so what finished survives the machine.

One numeric kind. Training diverges between CPU vendors even with pinned numerics
(docs/reproducibility.md), so a staging publication holds cells of one kind: a run on a machine
of another kind is refused in one line before anything is computed (resume it on a machine of the
staged kind, or stage into another directory). One code version: `publish` takes a staging
publication only when it is *complete* (`StageStatus.complete`): every cell of its suite staged,
each with the fingerprint this checkout computes now, all of one numeric kind. Until then the
published board is untouched; the tests of the published boards read ``results/`` only, never a
staging publication.

Not to be confused with `lenbench.publish`'s atomic stage (a hidden directory beside the target,
swapped in by a rename): that one lives for the seconds a publish takes; this one for as long as
the run needs, in git.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lenbench.atomic import atomic_write_bytes, atomic_write_json
from lenbench.results.cell import CellResult
from lenbench.results.labels import error_line
from lenbench.run.store import CELLS, cell_path, cells_dir

MARKER = ".lenbench-staging"
Log = Callable[[str], None]


class StagingError(ValueError):
    """A staging publication that cannot be used as asked (one line naming the problem and the fix)."""


@dataclasses.dataclass(frozen=True)
class Staging:
    """An open staging publication of one suite, on one numeric kind.

    Attributes:
        path: its directory.
        suite: the suite as given (a preset name or a YAML path), so `publish` can rebuild its cells.
        kind: the numeric kind (`lenbench.numerics.numerics_tag`) its cells are computed with.
        device: the device type its cells are computed on; threads: intra-op threads per cell.
        commit_every: seconds between git commits of the directory (None: never commit).
    """

    path: Path
    suite: str
    kind: str
    device: str
    threads: int
    commit_every: float | None = None


def read_marker(path: str | Path) -> dict | None:
    """The marker of the staging publication at `path`, or None when `path` holds none."""
    marker = Path(path) / MARKER
    if not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError) as err:
        raise StagingError(f"{marker} is not readable ({error_line(err)}): restore it from git "
                           f"(git checkout -- {marker})") from None
    if not isinstance(data, dict) or data.get("lenbench_staging") != 1:
        raise StagingError(f"{marker} is not a lenbench staging marker: restore it from git (git checkout -- {marker})")
    return data


def open_staging(path: str | Path, suite: str, suite_name: str, cell_ids: list[str], *, kind: str, device: str,
                 threads: int, commit_every: float | None = None) -> Staging:
    """Create the staging publication at `path`, or open the one there, for `suite` on this machine.

    Raises:
        StagingError: `path` is a file, or a non-empty directory that is not a staging publication
            (nothing is ever written into a directory this did not make), or a staging
            publication of another suite, device, thread count or numeric kind.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise StagingError(f"--stage {path} is a file: give a directory (new, or a staging publication)")
    marker = read_marker(path) if path.is_dir() else None
    if marker is None and path.is_dir() and any(path.iterdir()):
        raise StagingError(f"--stage {path} is a directory that is not a staging publication (no {MARKER}): "
                           "give a new or empty directory")
    if marker is not None:
        for key, mine, what in (("suite_name", suite_name, "suite"), ("numeric_kind", kind, "numeric kind"),
                                ("device", device, "device"), ("threads", threads, "thread count")):
            if marker.get(key) != mine:
                fix = ("resume it on a machine of that kind" if key == "numeric_kind" else
                       f"resume it with the same {what}")
                raise StagingError(f"--stage {path} holds cells of {what} {marker.get(key)!r}; this run computes "
                                   f"{mine!r}: {fix}, or stage into another directory (cells of two kinds never mix "
                                   "in one publication)")
    path.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path / MARKER, {
        "lenbench_staging": 1, "suite": suite, "suite_name": suite_name, "numeric_kind": kind, "device": device,
        "threads": threads, "cell_ids": sorted(cell_ids),
    })
    (path / CELLS).mkdir(exist_ok=True)
    return Staging(path, suite, kind, device, threads, commit_every)


def seed(staging: Staging, out: Path, cell_ids: list[str], log: Log) -> int:
    """Copy each staged cell file of `cell_ids` that `out` lacks into ``out/cells``; return how many.
    Whether a copied cell is still valid is the driver's decision (its fingerprint)."""
    copied = 0
    for cid in cell_ids:
        source, target = cell_path(staging.path, cid), cell_path(out, cid)
        if source.is_file() and not target.exists():
            atomic_write_bytes(target, source.read_bytes())
            copied += 1
    if copied:
        log(f"lenbench: {copied} finished cell(s) taken from the staging publication {staging.path}")
    return copied


def stage_cell(staging: Staging, out: Path, cell_id: str, *, outside: str | None) -> bool:
    """Copy the finished cell file ``out/cells/<cell_id>.json`` into the staging publication
    (atomically); a cell that failed for a reason outside it is not staged. Returns whether the
    staging publication changed (so there is something to commit)."""
    if outside:
        return False
    data = cell_path(out, cell_id).read_bytes()
    target = cell_path(staging.path, cell_id)
    if target.is_file() and target.read_bytes() == data:
        return False
    atomic_write_bytes(target, data)
    return True


class Committer:
    """Commits the staging publication's directory to git at most every `staging.commit_every`
    seconds (`maybe`) and once at the end (`final`); a failing git is one line, never a lost cell
    (the files are on disk either way)."""

    def __init__(self, staging: Staging, log: Log, clock: Callable[[], float] = time.monotonic) -> None:
        self.staging, self.log, self.clock = staging, log, clock
        self.last = clock()
        self.pending = 0

    def maybe(self) -> None:
        self.pending += 1
        if self.staging.commit_every is not None and self.clock() - self.last >= self.staging.commit_every:
            self.commit()

    def final(self) -> None:
        if self.staging.commit_every is not None and self.pending:
            self.commit()

    def commit(self) -> None:
        staged = len(list(cells_dir(self.staging.path).glob("*.json")))
        message = f"staging {self.staging.path.name}: {staged} cell(s) of suite {self.staging.suite} finished"
        path = self.staging.path.resolve()
        try:
            top = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True,
                                 text=True, check=True).stdout.strip()
            subprocess.run(["git", "-C", top, "add", "--", str(path)], capture_output=True, text=True, check=True)
            done = subprocess.run(["git", "-C", top, "commit", "-q", "--only", "-m", message, "--", str(path)],
                                  capture_output=True, text=True)
            if done.returncode != 0 and "nothing" not in (done.stdout + done.stderr):
                raise subprocess.CalledProcessError(done.returncode, "git commit", done.stdout, done.stderr)
        except (OSError, subprocess.CalledProcessError) as err:
            why = (getattr(err, "stderr", "") or str(err)).strip().splitlines()
            self.log(f"lenbench: could not commit the staging publication {self.staging.path} "
                     f"({why[-1] if why else err}); its cells are on disk: commit them by hand")
            return
        finally:
            self.last = self.clock()
        self.pending = 0
        self.log(f"lenbench: committed {message}")


@dataclasses.dataclass
class StageStatus:
    """What a staging publication holds against its suite and this checkout."""

    suite: str
    kind: str
    done: list[str]  # staged, with the fingerprint this checkout computes
    stale: dict[str, list[str]]  # cell id → why it must be recomputed (other code, torch, kind …)
    missing: list[str]  # cells of the suite not staged
    extra: list[str]  # staged cells the suite no longer has (left alone, never published)
    kinds: dict[str, int]  # numeric kind → staged cells of the suite
    #: task key → (cells done, cells of the suite, mean wall seconds of its done cells, NaN if none):
    #: where a resumed run stands, and what a cell of each begun task has cost on the staging machine.
    tasks: dict[str, tuple[int, int, float]] = dataclasses.field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return bool(self.done) and not self.stale and not self.missing and len(self.kinds) <= 1

    def lines(self) -> list[str]:
        total = len(self.done) + len(self.stale) + len(self.missing)
        out = [f"suite {self.suite}, numeric kind {self.kind}: {len(self.done)} of {total} cell(s) done, "
               f"{len(self.stale)} stale, {len(self.missing)} to compute"
               + (f"; {len(self.extra)} staged cell(s) not in the suite (never published)" if self.extra else "")]
        reasons: dict[str, int] = {}
        for why in self.stale.values():
            key = "; ".join(why)
            reasons[key] = reasons.get(key, 0) + 1
        out += [f"  stale ({n}): {why}" for why, n in reasons.items()]
        out += [f"  {task}: {done} of {total} done" + (f", {seconds:.0f} s a cell" if math.isfinite(seconds) else "")
                for task, (done, total, seconds) in self.tasks.items()]
        if len(self.kinds) > 1:
            out.append("  cells of several numeric kinds: " + ", ".join(f"{k or '(none)'} ({n})" for k, n in self.kinds.items()))
        out.append("complete: publish it with `lenbench publish` (docs/regression.md, staging publications)" if self.complete else
                   "not complete: `lenbench run --suite SUITE --stage DIR` on a machine of its kind computes the rest")
        return out


#: The fingerprint a run of a cell here would record, given the cell, device type and threads
#: (`lenbench.run.driver.expected_fingerprint`, passed in: the driver imports this module).
FingerprintOf = Callable[[Any, str, int], Any]


def stage_status(path: str | Path, fingerprint_of: FingerprintOf) -> StageStatus:
    """Read the staging publication at `path` against its suite and this checkout's fingerprints
    (`fingerprint_of`: `lenbench.run.driver.expected_fingerprint`)."""
    from lenbench.config import load_suite
    from lenbench.run.fingerprint import stale_reasons

    path = Path(path)
    marker = read_marker(path)
    if marker is None:
        raise StagingError(f"{path} is not a staging publication (no {MARKER}); make one with "
                           "`lenbench run --suite SUITE --stage DIR`")
    try:
        suite = load_suite(marker["suite"])
    except (OSError, ValueError) as err:
        raise StagingError(f"{path}: its suite {marker['suite']!r} does not load here ({error_line(err)}); run this "
                           "where that suite (a preset name or a path from the working directory) is found") from None
    cells = suite.cells()
    ids = {cell.cell_id for cell in cells}
    done, stale, missing, kinds = [], {}, [], {}
    tasks: dict[str, list] = {}  # task key → [done, cells, the done cells' wall seconds (those timed)]
    for cell in cells:
        file = cell_path(path, cell)
        task = tasks.setdefault(cell.task.key, [0, 0, []])
        task[1] += 1
        if not file.is_file():
            missing.append(cell.cell_id)
            continue
        try:
            result = CellResult.from_json(json.loads(file.read_text()), file)
        except (OSError, ValueError) as err:
            stale[cell.cell_id] = [f"unreadable ({error_line(err)})"]
            continue
        fingerprint = result.fingerprint or {}
        kinds[fingerprint.get("numerics", "")] = kinds.get(fingerprint.get("numerics", ""), 0) + 1
        why = stale_reasons(result.fingerprint, fingerprint_of(cell, marker["device"], marker["threads"]))
        if result.outside:
            why = [*why, f"failed outside the cell: {result.outside}"]
        if why:
            stale[cell.cell_id] = why
        else:
            done.append(cell.cell_id)
            task[0] += 1
            task[2] += [result.seconds] if math.isfinite(result.seconds) else []
    extra = sorted(p.stem for p in cells_dir(path).glob("*.json") if p.stem not in ids)
    return StageStatus(marker["suite"], marker["numeric_kind"], done, stale, missing, extra, kinds,
                       {key: (d, n, sum(sec) / len(sec) if sec else math.nan) for key, (d, n, sec) in tasks.items()})


def check_complete(path: str | Path, fingerprint_of: FingerprintOf) -> list[str]:
    """The cell ids of the complete staging publication at `path`, in suite order (`fingerprint_of`:
    as for `stage_status`).

    Raises:
        StagingError: it is not complete (one line: what is missing and how to finish it).
    """
    status = stage_status(path, fingerprint_of)
    if not status.complete:
        parts = [f"{len(status.missing)} cell(s) to compute"] if status.missing else []
        parts += [f"{len(status.stale)} stale (computed by other code or another environment)"] if status.stale else []
        parts += [f"cells of {len(status.kinds)} numeric kinds"] if len(status.kinds) > 1 else []
        raise StagingError(f"{path} is not complete ({', '.join(parts) or 'no cells'}): finish it with `lenbench run "
                           f"--suite {status.suite} --stage {path}` on a machine of kind {status.kind}; the published "
                           "board is left as it is")
    return status.done
