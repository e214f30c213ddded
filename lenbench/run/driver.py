"""The driver: runs a suite's cells (through an executor) and alone writes the results directory.

`run_cell`, `ensure_cell` and `run_suite` hand out `CellJob`s (`lenbench.run.cell`) with the cached
checkpoints and write what comes back, atomically, through `lenbench.run.store`. A rerun skips
every cell whose file is valid and whose fingerprint (`lenbench.run.fingerprint`: the source it
depends on, torch version, device, dtype, threads, task data) still matches; stale cells are
recomputed and the run says why. A run killed at any moment resumes without losing or duplicating
rows; a second run on the same directory skips the cells the first one has claimed (lock files).
`pytest bench`, `lenbench run` and every executor share this one driver.

The driver never changes a result (it reads and writes files, picks executors, shows progress):
it is not in any cell's fingerprint, and nothing on the compute path imports it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from lenbench import plugins
from lenbench.config import Cell, Suite
from lenbench.device import resolve_device
from lenbench.results.cell import CellResult
from lenbench.results.labels import error_line
from lenbench.run.cell import CellJob, CellOutcome, default_threads
from lenbench.run.checkpoint import (
    checkpoint_mismatch,
    checkpoint_names,
    load_checkpoint_bytes,
    saved_as_another,
)
from lenbench.run.estimate import check_suite_fits, longest_first
from lenbench.run.executors import base as executors
from lenbench.run.executors.base import get_executor, plan_execution
from lenbench.run.fingerprint import Fingerprint, cell_fingerprint, data_fingerprint, stale_reasons
from lenbench.run.memory import available_bytes, memory_budget
from lenbench.run.staging import Committer, Staging, seed, stage_cell
from lenbench.run.store import (
    Log,
    cell_path,
    checkpoint_path,
    claim_cell,
    lock_path,
    prepare_output,
    quarantine,
    read_cell,
    release_cell,
    stderr_log,
    store_outcome,
)
from lenbench.tasks import build_task


def compute_in_process(job: CellJob) -> CellOutcome:
    """`compute_cell` in this process as the executors run it (`lenbench.run.executors.base.compute_cell`:
    freed memory kept for reuse first)."""
    return executors.compute_cell(job)


@functools.lru_cache(maxsize=64)
def _task_data_fingerprint(name: str, params_json: str) -> str:
    try:
        return data_fingerprint(build_task(name, **json.loads(params_json)).fingerprint())
    except Exception:  # the cell will fail building its task too, and record data ""
        return ""


def expected_fingerprint(cell: Cell, device: str | torch.device, threads: int) -> Fingerprint:
    """The fingerprint a run of `cell` here, now, would record."""
    device_type = resolve_device(device).type if not isinstance(device, torch.device) else device.type
    data = _task_data_fingerprint(cell.task.name, json.dumps(cell.task.params, sort_keys=True, default=str))
    return cell_fingerprint(cell, device_type, threads, data)


def read_checkpoints(out: Path, cell: Cell, fingerprint: Fingerprint | None = None,
                     log: Log = stderr_log) -> dict[str, bytes]:
    """The cached checkpoint files of `cell` in `out` (name → bytes) that are valid for `fingerprint`.

    A checkpoint that does not load (truncated, old format) or was saved as another checkpoint (a
    copied file) is moved aside (`quarantine`); one made by other code or another environment is
    left out (it is retrained and overwritten).
    """
    found = {}
    for name in checkpoint_names(cell):
        path = checkpoint_path(out, name)
        if not path.is_file():
            continue
        data = path.read_bytes()
        try:
            _, meta = load_checkpoint_bytes(data, torch.device("cpu"))
            foreign = saved_as_another(meta, name)
            if foreign:  # a copied file: not this cell's, set aside like a damaged one
                raise ValueError(foreign)
        except Exception as err:
            quarantine(path, error_line(err), log)
            continue
        if not checkpoint_mismatch(meta, name, fingerprint):
            found[name] = data
    return found


def make_job(cell: Cell, out: Path, device: str | torch.device, *, threads: int | None = None,
             progress: bool = False, fingerprint: Fingerprint | None = None, log: Log = stderr_log) -> CellJob:
    device = device.type if isinstance(device, torch.device) else device
    threads = threads or default_threads()
    fingerprint = fingerprint or expected_fingerprint(cell, device, threads)
    return CellJob(cell=cell, device=device, threads=threads,
                   checkpoints=read_checkpoints(Path(out), cell, fingerprint, log), progress=progress,
                   plugins=plugins.loaded())


def run_cell(cell: Cell, out: str | Path, device: str | torch.device = "auto", *, progress: bool = True,
             threads: int | None = None, log: Log = stderr_log) -> dict:
    """Train and evaluate one cell in this process, write `OUT/cells/<cell_id>.json` atomically,
    return its result. Writability of `out` is checked before anything is trained."""
    out = prepare_output(Path(out), log)
    check_paths_free(out, [cell])
    return store_outcome(out, compute_in_process(make_job(cell, out, device, threads=threads, progress=progress, log=log)))


def cell_state(out: Path, cell: Cell, fingerprint: Fingerprint, *, keep_stale: bool = False,
               retry_failed: bool = False, log: Log = stderr_log) -> tuple[dict | None, list[str]]:
    """(stored result still valid, or None; why it must be recomputed: [] when missing or valid).

    A stored result is recomputed when it is damaged (moved aside), stale (its fingerprint differs
    from `fingerprint`, unless `keep_stale`), failed for a reason outside the cell (its `outside`:
    the environment, the machine's memory, a plugin; never cached) or failed (with `retry_failed`).
    """
    result = read_cell(out, cell, log)
    if result is None:
        return None, []
    if result.outside:
        return None, [f"failed for a reason outside the cell: {result.outside}"]
    if retry_failed and result.failed:
        return None, ["failed before (--retry-failed)"]
    reasons = stale_reasons(result.fingerprint, fingerprint)
    if reasons and not keep_stale:
        return None, reasons
    return result, []


def ensure_cell(cell: Cell, out: str | Path, device: str | torch.device = "auto", *, progress: bool = True,
                threads: int | None = None, keep_stale: bool = False, log: Log = stderr_log,
                poll: float = 0.5, wait_s: float = 6 * 3600) -> tuple[CellResult, bool]:
    """The cell's result, from its file when it finished before with a matching fingerprint, else by
    running it: (result, reused). While another live process holds the cell's lock, waits for it
    (at most `wait_s` seconds, then a one-line ValueError naming the lock file)."""
    out = prepare_output(Path(out), log)
    threads = threads or default_threads()
    fingerprint = expected_fingerprint(cell, device, threads)
    deadline = time.monotonic() + wait_s
    while True:
        result, reasons = cell_state(out, cell, fingerprint, keep_stale=keep_stale, log=log)
        if result is not None:
            return result, True
        check_paths_free(out, [cell])  # before its lock and its training: a directory in a file's place is one line
        lock = claim_cell(out, cell)
        if isinstance(lock, Path):
            break
        if time.monotonic() > deadline:
            raise ValueError(f"cell {cell.title} is still held by pid {lock.get('pid')} on {lock.get('host')} after "
                             f"{wait_s:g} s; if that run is gone, delete {lock_path(out, cell)}")
        time.sleep(poll)  # another process is computing it
    try:
        result, _ = cell_state(out, cell, fingerprint, keep_stale=keep_stale, log=log)
        if result is not None:  # finished by another process while we waited
            return result, True
        if reasons:
            log(f"lenbench: recomputing stale cell {cell.title}: {'; '.join(reasons)}")
        job = make_job(cell, out, device, threads=threads, progress=progress, fingerprint=fingerprint, log=log)
        return store_outcome(out, compute_in_process(job)), False
    finally:
        release_cell(lock)


# --- a whole suite ------------------------------------------------------------------------------


@dataclasses.dataclass
class SuiteRun:
    """What one `run_suite` call did.

    Attributes:
        computed: the results of the cells computed now (in completion order).
        done: cells whose valid, current results were reused.
        stale: reason → number of stored cells recomputed for it.
        busy: (cell title, lock holder) of cells another live run is computing (skipped here).
    """

    computed: list[CellResult] = dataclasses.field(default_factory=list)
    done: int = 0
    stale: dict[str, int] = dataclasses.field(default_factory=dict)
    busy: list[tuple[str, dict]] = dataclasses.field(default_factory=list)
    #: Titles of reused cells that had failed (kept: a failure of the cell itself recurs; `--retry-failed`).
    failed_before: list[str] = dataclasses.field(default_factory=list)

    @property
    def failed(self) -> list[CellResult]:
        """The computed cells that failed."""
        return [r for r in self.computed if r.failed]


def pending_cells(suite: Suite, out: str | Path, *, retry_failed: bool = False, keep_stale: bool = False,
                  device: str = "auto", threads: int | None = None, log: Log = stderr_log,
                  stale: dict[str, int] | None = None, failed_before: list[str] | None = None) -> list[Cell]:
    """Cells without a valid, current result (or with a failed one, when `retry_failed`).

    `stale`, when given, is filled with reason → count of stored results found stale;
    `failed_before` with the titles of the failed results kept.
    """
    threads = threads or default_threads()
    todo = []
    for cell in suite.cells():
        result, reasons = cell_state(Path(out), cell, expected_fingerprint(cell, device, threads),
                                     keep_stale=keep_stale, retry_failed=retry_failed, log=log)
        if result is None:
            todo.append(cell)
            if stale is not None and reasons:
                key = "; ".join(reasons)
                stale[key] = stale.get(key, 0) + 1
        elif result.failed and failed_before is not None:
            failed_before.append(result.title or cell.title)
    return todo


def check_eval_lengths(suite: Suite) -> None:
    """Every task entry can be sampled at every length the suite trains, fine-tunes or evaluates it at
    (e.g. recall's keys are distinct, so 16× of 8 pairs needs 128 keys); checked before any cell runs,
    so a bad entry is one line now instead of a failed cell per encoding and seed.

    Raises:
        ValueError: one line naming the entry, the length and the task's own fix.
    """
    for spec in suite.tasks:
        try:
            task = build_task(spec.name, **spec.params)
        except Exception:  # a task that cannot be built (e.g. an unreadable lm corpus) fails its own cells
            continue
        tuned = {v.finetune_ratio for v in suite.variants if v.finetune_steps}
        for train_len in spec.train_len:
            for ratio in sorted({*spec.eval_spec(suite.eval).at(train_len).ratios, *tuned}):
                length = max(1, round(ratio * train_len))
                try:
                    task.seq_len(length)
                except ValueError as err:
                    raise ValueError(f"suite {suite.name!r}, task {spec.key!r} at train_len {train_len}: the run "
                                     f"needs length {length} ({ratio:g}x) and {err}") from None


def check_paths_free(out: Path, cells: list) -> None:
    """Refuse, in one line, a directory where a file of one of `cells` will be written: its result,
    any checkpoint it trains (base model and fine-tunes) or its lock. The write would fail after
    training (or, for the lock, before it with a traceback); nothing has run when this refuses."""
    for cell in cells:
        paths = [(cell_path(out, cell), "cell result"), (lock_path(out, cell), "lock"),
                 *((checkpoint_path(out, name), "checkpoint") for name in checkpoint_names(cell))]
        for path, what in paths:
            if path.is_dir():
                raise ValueError(f"{path} is a directory where lenbench writes the {what} file of cell "
                                 f"{cell.cell_id}; move it aside and rerun")


def run_suite(
    suite: Suite, out: str | Path, *, device: str = "auto", executor: str = "serial", workers: int | None = None,
    threads: int | None = None, retry_failed: bool = False, keep_stale: bool = False, progress: bool = True,
    log: Log = stderr_log, only: Collection[str] | None = None, staging: Staging | None = None,
    **executor_options: Any,
) -> SuiteRun:
    """Run every unfinished or stale cell of `suite` into `out`; return what ran (`SuiteRun`).

    Before anything runs: every cell must fit the memory available and the time limit
    (`lenbench.run.estimate.check_suite_fits`), `out` must be writable (one-line ValueErrors otherwise), damaged cell files
    and checkpoints are moved aside (`*.corrupt`) and recomputed, and temporary files of a killed
    run are removed. Each cell is claimed with a lock file; cells another live run holds are
    skipped (`SuiteRun.busy`). One line per reason says how many stale cells are recomputed.

    Args:
        executor: where cells run: "serial" (default, in this process), "auto" (the command line's
            default: one process per core for CPU cells, else serial;
            `lenbench.run.executors.base.plan_execution`), "process" (a pool of `workers` processes) or "ray"
            (see `lenbench.run.executors.base`); `workers` > 1 with "serial" means "process".
        workers: processes of the process executor (default: one per usable core, see
            `plan_execution`).
        threads: intra-op threads per cell (default 1, `default_threads`); part of every row's
            provenance and of the fingerprint, so serial, process and Ray runs give
            bit-identical rows.
        only: cell ids to run (default: every cell of the suite), e.g. the cells a `pytest -k`
            selected.
        keep_stale: keep results whose fingerprint no longer matches (default: recompute them).
        log: where one-line notices go (default: stderr).
        staging: a staging publication (`lenbench.run.staging.open_staging`) the run resumes from
            (its cells seed `out`) and copies each finished cell into, committing it to git when
            asked, so a run that outlasts this machine continues on another of the same kind.
        executor_options: passed to the executor (e.g. Ray's `address`).
    """
    device_type = resolve_device(device).type  # a one-line error now rather than one per cell
    plugins.refresh()
    check_eval_lengths(suite)  # a file plugin edited since it was loaded runs (and is hashed) as it is now
    memory_budget(torch.device(device_type))  # a bad LENBENCH_MEMORY_BUDGET_GB is one line now, not a failed cell each
    check_suite_fits(suite, device_type)  # memory and time of every cell, before anything is allocated
    out = prepare_output(Path(out), log)
    threads = threads or default_threads()
    run = SuiteRun()
    if staging is not None:
        seed(staging, out, [cell.cell_id for cell in suite.cells()], log)
    todo = pending_cells(suite, out, retry_failed=retry_failed, keep_stale=keep_stale, device=device,
                         threads=threads, log=log, stale=run.stale, failed_before=run.failed_before)
    pending = {cell.cell_id for cell in todo}  # of the whole suite: what `only` leaves out is not thereby valid
    total = len(suite.cells())
    if only is not None:
        only = set(only)
        todo = [cell for cell in todo if cell.cell_id in only]
        total = len(only)
    check_paths_free(out, todo)  # before anything trains: a directory in a result file's place is one line
    plan = plan_execution(executor, workers, device_type, pending=len(todo), available_memory=available_bytes(
        torch.device(device_type)))
    executor, workers = plan.executor, plan.workers
    if executor != "serial":  # a pool: the longest cells first, so the last to start are short ones
        todo = longest_first(todo)
    cls = get_executor(executor)
    if todo and plan.why:
        log(f"lenbench: {len(todo)} cell(s) on {executor}" + (f" × {workers}" if executor == "process" else "")
            + f", {threads} thread(s) each ({plan.why})")
    for reason, count in run.stale.items():
        log(f"lenbench: recomputing {count} stale cell(s): {reason}")
    committer = Committer(staging, log) if staging is not None else None
    if staging is not None:  # cells this directory had already finished, valid here (`cell_state`), join it
        for cell in suite.cells():
            if (cell.cell_id not in pending and cell_path(out, cell).is_file()
                    and stage_cell(staging, out, cell.cell_id, outside=None)):  # failed outside a cell: never valid
                committer.pending += 1
    held: dict[str, Path] = {}

    def jobs() -> Iterator[CellJob]:
        for cell in todo:
            lock = claim_cell(out, cell)
            if not isinstance(lock, Path):
                run.busy.append((cell.title, lock))
                continue
            held[cell.cell_id] = lock
            fingerprint = expected_fingerprint(cell, device, threads)
            result, _ = cell_state(out, cell, fingerprint, keep_stale=keep_stale, retry_failed=False, log=log)
            if result is not None and not (retry_failed and result.failed):
                release_cell(held.pop(cell.cell_id))  # another run finished it meanwhile
                continue
            yield make_job(cell, out, device, threads=threads, progress=progress and executor == "serial",
                           fingerprint=fingerprint, log=log)

    bar = tqdm(total=total, initial=total - len(todo), desc=f"suite {suite.name}", unit="cell",
               disable=not progress, dynamic_ncols=True)
    try:
        with cls(workers=workers, suite=suite, **executor_options) as runner:
            for outcome in runner.run(jobs()):
                run.computed.append(store_outcome(out, outcome))
                if staging is not None and stage_cell(staging, out, outcome.cell_id, outside=outcome.result.outside):
                    committer.maybe()
                lock = held.pop(outcome.cell_id, None)
                if lock is not None:
                    release_cell(lock)
                for name, why in outcome.notes.get("rejected_checkpoints", {}).items():
                    log(f"lenbench: checkpoint {name} of {outcome.result.title} was not usable ({why}); retrained")
                bar.set_postfix_str(outcome.result.title or outcome.cell_id)
                bar.update()
    finally:
        for lock in held.values():
            release_cell(lock)
        bar.close()
        if committer is not None:
            committer.final()
    run.done = total - len(run.computed) - len(run.busy)
    for title, holder in run.busy:
        log(f"lenbench: skipped {title}: another run (pid {holder.get('pid')} on {holder.get('host')}) is computing it")
    return run
