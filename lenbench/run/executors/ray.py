"""The `ray` executor: every cell is one Ray task, on a laptop or across a cluster of CPUs and GPUs.

    lenbench run --suite paper --executor ray --ray-address auto

Each cell runs as one task (`compute_cell` on a Ray worker) reserving the suite's `resources:`
(`num_cpus`, `num_gpus`, `memory_gb`; see `lenbench.config.resources.ResourceSpec`), so several small models
can share one GPU. A job carries the cached checkpoints it may reuse and an outcome the checkpoints
it trained, as bytes through Ray's object store: workers need no shared filesystem, and the driver
(`lenbench.run.driver.run_suite`) alone writes the results directory, exactly as for a local run.
Outcomes are yielded as tasks finish (`ray.wait`), so a driver killed at any moment loses no
finished cell, and rerunning the same command submits only the unfinished ones.

Faults:
    * a worker process or node lost mid-cell (crash, OOM kill, node failure) → the cell is
      resubmitted, at most `max_retries` times; the attempts and the reasons are recorded in the
      outcome's `notes` and in the cell file's `executor` entry (never in its rows), and the run
      summary lists them. Past `max_retries` the cell is recorded as failed with the reason
      (`lenbench run --retry-failed` reruns it);
    * a cell that raises inside the worker is a failed cell with its reason, as locally
      (`compute_cell` catches it);
    * Ctrl-C or any error in the driver stops every outstanding task: when the executor started
      or joined Ray itself (the CLI, `pytest bench`), by disconnecting the driver, which ends the
      job so that Ray kills the workers running its tasks (a cluster it only joined keeps
      running); inside a Ray session the caller opened, by `ray.cancel` of each task;
    * a SIGKILLed driver runs none of that, and needs not: the local Ray its `ray.init` started
      (gcs_server, raylet, monitors) shares its fate (Ray's own: the kernel's parent-death signal
      on Linux, a reaper process elsewhere), the workers exit with the raylet, and the raylet's
      agents, which Ray would leave for a minute, are ended by lenbench's reaper
      (`lenbench.run.executors.ray_reaper`), all within seconds (`tests/run/test_trust_orphans.py`).
      A cluster it only joined is not its to end and keeps running.

Code on the workers: the tasks get this checkout on their PYTHONPATH, so a local Ray (or a cluster
whose nodes share this path) imports the driver's lenbench; on a multi-machine cluster install
lenbench and its dependencies on every node (`pip install -e ".[ray]"` from the same commit).
Plugins (`lenbench.plugins`): a file plugin travels in each job as its source; a module or
entry-point plugin is imported by name, from the directory the driver imported it from (added to
the workers' PYTHONPATH) — on a multi-machine cluster install it on every node like lenbench.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

try:
    import ray
    import ray.exceptions
except ImportError:  # an optional extra: the error comes when the executor is asked for
    ray = None

from lenbench.config import ResourceSpec
from lenbench.results.cell import FAILED, CellResult
from lenbench.results.labels import error_line
from lenbench.run.cell import CellJob, CellOutcome
from lenbench.run.executors.base import EXECUTORS, Executor, compute_cell
from lenbench.run.executors.ray_reaper import Reaper

#: The checkout whose lenbench the workers import (prepended to their PYTHONPATH).
CHECKOUT = Path(__file__).resolve().parents[3]  # lenbench/run/executors/ray.py → the checkout
#: Driver environment variables with this prefix are passed on to the workers.
FORWARDED_ENV_PREFIX = "LENBENCH_"


class RayExecutorError(ValueError):
    """A one-line setup error of the Ray executor (Ray missing, no cluster at the address)."""


def _lost_errors() -> tuple[type[BaseException], ...]:
    """Ray errors meaning the task's worker or node went away (retry), not that the cell failed."""
    ex = ray.exceptions
    return (ex.WorkerCrashedError, ex.NodeDiedError, ex.LocalRayletDiedError, ex.ObjectLostError,
            ex.OutOfMemoryError)


def run_on_worker(job: CellJob) -> CellOutcome:
    """The Ray task: run one cell and note where it ran (node, process, the resources Ray assigned)."""
    outcome = compute_cell(job)
    ctx = ray.get_runtime_context()
    outcome.notes.update(node_id=ctx.get_node_id(), hostname=socket.gethostname(), pid=os.getpid(),
                         resources=dict(ctx.get_assigned_resources()))
    return outcome


def task_options(resources: ResourceSpec) -> dict[str, Any]:
    """Ray task options reserving `resources` per cell (retries are done by the executor)."""
    options: dict[str, Any] = {"num_cpus": resources.num_cpus, "num_gpus": resources.num_gpus, "max_retries": 0}
    if resources.memory_gb:
        options["memory"] = int(resources.memory_gb * 2**30)
    return options


def worker_env() -> dict[str, str]:
    """Environment of the tasks: this checkout first on PYTHONPATH, then the directories the
    driver's module and entry-point plugins import from (`lenbench.plugins.import_roots`; a file
    plugin travels in the job), and the driver's LENBENCH_* variables."""
    from lenbench.plugins import import_roots

    env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIX)}
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT), *import_roots(), "${PYTHONPATH}"])
    return env


def _check_reachable(address: str) -> None:
    """Fail fast (Ray itself waits minutes) when nothing listens at HOST:PORT."""
    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as err:
        raise RayExecutorError(
            f"no Ray cluster answers at {address} ({err.strerror or err}); start one with `ray start --head` "
            "and pass its address, or omit --ray-address to start a local Ray") from None


@dataclasses.dataclass
class _Pending:
    job: CellJob
    job_ref: Any
    attempt: int = 1
    lost: list[str] = dataclasses.field(default_factory=list)


#: The executors this module registers (read by `lenbench.run.executors.base.executor_modules`).
EXECUTOR_NAMES = ("ray",)


@EXECUTORS.register("ray", set_name=True)
class RayExecutor(Executor):
    """Cells as Ray tasks, yielded as they finish.

    Args:
        address: None starts a local Ray sized to this machine (and shuts it down at the end);
            "auto" joins the cluster started on this machine with `ray start`; "HOST:PORT" (or
            "ray://HOST:10001") joins that cluster. When Ray is already initialised in this
            process (e.g. by a test), that instance is used as it is.
        suite: the suite being run; its `resources:` section sets each task's reservation.
        resources: overrides the suite's resources.
        max_retries: resubmissions of a cell whose worker or node was lost.
        max_in_flight: tasks submitted at once (default: twice the cells the cluster can run at
            once), so the object store holds few jobs' checkpoint bytes at a time.
        task: the function each Ray task runs on a job (default `run_on_worker`); it must return
            that function's `CellOutcome` (a test passes one that first kills its own worker).
    """

    def __init__(self, address: str | None = None, suite=None, resources: ResourceSpec | None = None,
                 max_retries: int = 3, max_in_flight: int | None = None,
                 task: Callable[[CellJob], CellOutcome] = run_on_worker, **_: Any) -> None:
        if ray is None:
            raise RayExecutorError('the ray executor needs Ray: pip install -e ".[ray]"')
        if max_retries < 0:
            raise ValueError(f"max_retries must be at least 0, got {max_retries}")
        self.address = address
        self.resources = resources or getattr(suite, "resources", None) or ResourceSpec()
        self.max_retries = max_retries
        self.max_in_flight = max_in_flight
        self.task = task
        self._initialised_here = False
        self._reaper: Reaper | None = None
        self._pending: dict[Any, _Pending] = {}

    # --- connection ---------------------------------------------------------------------------

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        if self.address is not None:
            _check_reachable(self.address)
        reaper = Reaper() if self.address is None else None  # a Ray we start: its agents end with us
        try:
            with reaper.marking() if reaper else contextlib.nullcontext():
                ray.init(address=self.address, include_dashboard=False if self.address is None else None,
                         log_to_driver=False, configure_logging=False)
        except BaseException as err:
            if reaper:
                reaper.close()  # and with it whatever the failed ray.init had started
            if isinstance(err, ConnectionError):
                raise RayExecutorError(f"cannot join the Ray cluster at {self.address!r}: "
                                       f"{str(err).splitlines()[0]} (start one with `ray start --head`, or omit "
                                       "--ray-address)") from None
            raise
        node = getattr(ray._private.worker, "_global_node", None)
        if reaper and getattr(node, "head", False):  # ray.init started this node (not found one running)
            reaper.watch(node.get_session_dir_path())
        elif reaper:  # it joined a Ray already running here (RAY_ADDRESS, `ray start`): not ours to end
            reaper.close()
            reaper = None
        self._reaper = reaper
        self._initialised_here = True

    def _slots(self) -> int:
        """How many cells the cluster runs at once with the per-cell resources."""
        total = ray.cluster_resources()
        want = {"CPU": self.resources.num_cpus, "GPU": self.resources.num_gpus,
                "memory": self.resources.memory_gb * 2**30}
        fits = [int(total.get(k, 0) // v) for k, v in want.items() if v]
        return max(1, min(fits))

    # --- running ------------------------------------------------------------------------------

    def run(self, jobs: Iterable[CellJob]) -> Iterator[CellOutcome]:
        self._connect()
        self._check_fits()
        task = ray.remote(self.task).options(**task_options(self.resources),
                                                 runtime_env={"env_vars": worker_env()})
        limit = self.max_in_flight or 2 * self._slots()
        todo = iter(jobs)

        def submit(entry: _Pending) -> None:
            self._pending[task.remote(entry.job_ref)] = entry

        def fill() -> None:
            while len(self._pending) < limit:
                job = next(todo, None)
                if job is None:
                    return
                if job.device == "cuda" and not self.resources.num_gpus:
                    raise RayExecutorError(f"--device {job.device} but the suite's resources.num_gpus is 0, so Ray "
                                           "hides the GPUs from every cell; set resources.num_gpus (e.g. 0.25)")
                submit(_Pending(job=job, job_ref=ray.put(job)))

        fill()
        while self._pending:
            [ref], _ = ray.wait(list(self._pending), num_returns=1)
            entry = self._pending.pop(ref)
            try:
                outcome: CellOutcome = ray.get(ref)
            except _lost_errors() as err:
                entry.lost.append(error_line(err))
                if entry.attempt <= self.max_retries:
                    entry.attempt += 1
                    submit(entry)
                    continue
                outcome = self._failed(entry, f"RayWorkerLost: the cell lost its worker {len(entry.lost)} time(s) "
                                              f"(max_retries={self.max_retries}): {entry.lost[-1]}; "
                                              "rerun with --retry-failed")
            except ray.exceptions.RayError as err:  # the task could not run (e.g. lenbench not importable there)
                outcome = self._failed(entry, error_line(getattr(err, "cause", None) or err))
            outcome.notes.update(executor="ray", attempts=entry.attempt, retries=entry.attempt - 1, lost=entry.lost)
            outcome.result.executor = dict(outcome.notes)
            fill()
            yield outcome

    def _check_fits(self) -> None:
        total = ray.cluster_resources()
        for key, want in (("CPU", self.resources.num_cpus), ("GPU", self.resources.num_gpus)):
            if want > total.get(key, 0):
                raise RayExecutorError(
                    f"each cell asks for {want:g} {key} (suite resources) but the Ray cluster has "
                    f"{total.get(key, 0):g}; lower resources.num_{key.lower()}s or add nodes")

    @staticmethod
    def _failed(entry: _Pending, reason: str) -> CellOutcome:
        """A failed cell that never produced a result (same shape as `compute_cell`'s failures)."""
        cell = entry.job.cell
        result = CellResult(rows=[], cell_id=cell.cell_id, train_id=cell.train_id, title=cell.title,
                            config=cell.config(), status=FAILED, error=reason)
        return CellOutcome(cell_id=cell.cell_id, result=result)

    def close(self) -> None:
        """Stop outstanding tasks (their workers are killed) and disconnect a Ray this executor joined.

        When this executor called `ray.init`, disconnecting alone stops everything: the job ends
        and Ray kills the workers leased to it. Cancelling the tasks one by one first is not only
        redundant but unsafe: `ray.cancel` racing a task that is just finishing aborts the driver
        inside Ray ("Tried to complete task that was not pending", ray-project/ray#54846), which
        turned Ctrl-C into a crash. In a Ray session the caller opened, the job outlives us, so
        the tasks are cancelled.
        """
        if ray is None:
            return
        pending, self._pending = list(self._pending), {}
        if self._initialised_here:
            ray.shutdown()
            self._initialised_here = False
            if self._reaper is not None:
                self._reaper.close()
                self._reaper = None
        elif ray.is_initialized():
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # already finished or its worker is gone
                    pass
