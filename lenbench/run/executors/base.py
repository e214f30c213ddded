"""Executors: where cells run. The driver hands an executor jobs; it hands back outcomes.

An executor only *runs* cells: it never writes the results directory. Every job carries what a
cell needs (its config, device, thread count and the cached checkpoints it may reuse, as bytes),
and every outcome carries what it made (the cell result and any newly trained checkpoints, as
bytes), so workers need no shared filesystem. The driver (`lenbench.run.driver.run_suite`) alone
writes results, atomically, whichever executor ran the cells.

Adding an executor is one module in this package: a class, its registry line, and the names it
registers declared at module level, so that looking an executor up imports its module alone:

    >>> EXECUTOR_NAMES = ("mine",)
    >>> @EXECUTORS.register("mine", set_name=True)
    ... class MyExecutor(Executor):
    ...     def run(self, jobs):
    ...         for job in jobs:
    ...             yield compute_cell(job)

Jobs and outcomes (`CellJob`, `CellOutcome`) are defined with the compute path in
`lenbench.run.cell`. This module holds the interface, the registry (`get_executor`, with
did-you-mean), the workers' entry point `compute_cell` and `plan_execution`; it imports neither
torch nor the executors themselves. Executors shipped, each imported on first use
(`executor_modules`): ``serial`` (in this process) and ``process`` (a local process pool,
`--workers N`) in `lenbench.run.executors.local`, ``ray`` (a Ray cluster) in
`lenbench.run.executors.ray`.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from lenbench.registry import Registry, module_declarations

if TYPE_CHECKING:
    from lenbench.run.cell import CellJob, CellOutcome


def compute_cell(job: CellJob) -> CellOutcome:
    """Run one job in this process: the workers' entry point (picklable by reference, so spawned
    processes and Ray workers import it; it imports `lenbench.run.cell`, torch and the model
    only when called, so choosing an executor stays light).

    Every executor computes its cells through here, so each such process first keeps freed
    memory for reuse (`lenbench.device.keep_freed_memory`: no page faults per training step;
    same numbers).
    """
    from lenbench import device
    from lenbench.run import cell

    device.keep_freed_memory()
    return cell.compute_cell(job)


class Executor:
    """Runs jobs, yielding an outcome as each finishes (in any order).

    Subclasses implement `run`; `close` cancels whatever is still outstanding (Ctrl-C, errors).
    Used as a context manager by the driver, which constructs it with the worker count, the suite
    and the run's executor options (e.g. Ray's `address`); this default takes and ignores them.
    """

    name: ClassVar[str] = ""

    def __init__(self, workers: int | None = None, suite=None, **options) -> None:
        self.workers = workers
        self.suite = suite

    def run(self, jobs: Iterable[CellJob]) -> Iterator[CellOutcome]:
        raise NotImplementedError

    def close(self) -> None:
        """Cancel outstanding work and release resources (idempotent)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


EXECUTORS: Registry[type[Executor]] = Registry("executor")


@functools.cache
def executor_modules() -> dict[str, str]:
    """Executor name → the module of this package that registers it, from each module's own
    ``EXECUTOR_NAMES = (...)`` declaration, read from its source without importing it (Ray is an
    optional dependency and slow to import): a new executor is one new module here."""
    found: dict[str, str] = {}
    for path, value in module_declarations(Path(__file__).resolve().parent, "EXECUTOR_NAMES"):
        found.update(dict.fromkeys(ast.literal_eval(value), f"{__package__}.{path.stem}"))
    return found


def get_executor(name: str) -> type[Executor]:
    """The executor class `name` (importing the module that declares it on first use)."""
    modules = executor_modules()
    if name not in EXECUTORS and name in modules:
        importlib.import_module(modules[name])
        if name not in EXECUTORS:
            raise ValueError(f"{modules[name]} declares executor {name!r} in EXECUTOR_NAMES but registers no such executor")
    if name not in EXECUTORS:
        # The registry's own error lists the executors not imported yet too.
        known = sorted({*EXECUTORS.names(), *modules})
        from lenbench.registry import UnknownNameError, did_you_mean

        raise UnknownNameError(f"unknown executor {name!r}{did_you_mean(name, known)} (known: {', '.join(known)})")
    return EXECUTORS.get(name)


#: Peak resident memory of one process-executor worker on the quick suite (measured: 8.2 GB for
#: two workers and the driver); `plan_execution` starts no more workers than fit in memory.
WORKER_MEMORY_BYTES = 4 * 2**30


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class ExecutionPlan:
    """Which executor runs a suite's cells, with how many workers (and why, for the log line)."""

    executor: str
    workers: int
    why: str = ""


def plan_execution(executor: str = "auto", workers: int | None = None, device_type: str = "cpu",
                   pending: int | None = None, available_memory: int | None = None) -> ExecutionPlan:
    """Resolve `executor="auto"` and the default worker count.

    auto: on the CPU with more than one usable core, the process executor with one worker per
    core (at most one per pending cell, and no more than `WORKER_MEMORY_BYTES` each of the
    available memory); otherwise serial. The suites' models are small: one intra-op thread per
    cell (the default, `lenbench.run.cell.default_threads`) and one cell per core use the cores far
    better than several threads on one cell, and the rows do not depend on the machine's core
    count. An accelerator runs cells one after another (serial) unless `workers` > 1 asks for
    processes sharing it (the quick suite's models leave a GPU mostly idle; see the GPU check
    in docs/kernels.md).

    Explicit choices are kept: `workers` > 1 means "process" with auto or "serial", and
    the process executor without `workers` gets the same per-core default as auto.

    Args:
        executor: "auto", "serial", "process", "ray" or another registered executor.
        workers: worker processes of the process executor (None: the default above).
        device_type: "cpu", "cuda", … (the resolved device of the cells).
        pending: cells to run (caps the workers), None when unknown.
        available_memory: bytes available now (caps the workers), None when unknown.
    """
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    why = ""
    if executor == "auto":
        if workers is not None and workers > 1:  # asked for: on an accelerator the workers share the device
            executor, why = "process", f"auto: {workers} processes as asked (--workers) on {device_type}"
        else:
            parallel = workers is None and device_type == "cpu" and usable_cores() > 1
            executor = "process" if parallel else "serial"
            why = ("auto: CPU cells, one process per core" if parallel else
                   f"auto: {'one core' if device_type == 'cpu' else device_type + ' cells'}, one after another")
    elif executor == "serial" and workers is not None and workers > 1:
        executor = "process"
    if executor != "process":
        return ExecutionPlan(executor, workers or 1, why)
    if workers is None:
        workers = usable_cores()
        if available_memory is not None:
            workers = min(workers, max(1, available_memory // WORKER_MEMORY_BYTES))
        if pending is not None:
            workers = min(workers, max(1, pending))
    return ExecutionPlan(executor, workers, why)
