"""The local executors: ``serial`` (one cell after another in this process) and ``process`` (a
pool of spawned processes on this machine, `--workers N`).

Both run each job through `lenbench.run.executors.base.compute_cell`, the workers' entry point
(a module-level function, so spawned workers import it by name); neither writes anything.
"""

from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from lenbench.run.executors.base import EXECUTORS, Executor, compute_cell
from lenbench.run.executors.parent_watch import watch_parent

if TYPE_CHECKING:
    from lenbench.run.cell import CellJob, CellOutcome


#: The executors this module registers (read by `lenbench.run.executors.base.executor_modules`).
EXECUTOR_NAMES = ("serial", "process")


@EXECUTORS.register("serial", set_name=True)
class SerialExecutor(Executor):
    """One cell after another in this process."""

    def __init__(self, **_: Any) -> None:
        pass

    def run(self, jobs: Iterable[CellJob]) -> Iterator[CellOutcome]:
        for job in jobs:
            yield compute_cell(job)


@EXECUTORS.register("process", set_name=True)
class ProcessExecutor(Executor):
    """A local pool of `workers` spawned processes; each cell keeps its job's thread count.

    The workers die with this process even when it is SIGKILLed (`lenbench.run.executors.parent_watch`): on
    Linux by the kernel's parent-death signal, which follows the thread that started them (the
    one iterating `run`, which starts them all while submitting), and everywhere by a watchdog
    thread on multiprocessing's parent sentinel. With them goes multiprocessing's resource
    tracker (it exits when the last process holding its pipe does).
    """

    def __init__(self, workers: int = 2, **_: Any) -> None:
        if workers < 1:
            raise ValueError(f"--workers must be at least 1, got {workers}")
        self.workers = workers
        self._pool: futures.ProcessPoolExecutor | None = None

    def run(self, jobs: Iterable[CellJob]) -> Iterator[CellOutcome]:
        ctx = multiprocessing.get_context("spawn")
        self._pool = futures.ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=watch_parent,
                                                 initargs=(os.getpid(),))
        pending = {self._pool.submit(compute_cell, job) for job in jobs}
        for done in futures.as_completed(pending):
            yield done.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
