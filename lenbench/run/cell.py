"""The compute path of one cell: train once, evaluate at every length and variant; writes nothing.

`compute_cell` runs one cell from a `CellJob` and returns a `CellOutcome` (the cell result as
stored in ``cells/<cell_id>.json`` and the checkpoints it trained, as bytes). It never touches the
results directory: executors call it in this process, in a process pool or on a Ray worker
(`lenbench.run.executors`), and the driver (`lenbench.run.driver`) alone writes what comes back
through `lenbench.run.store`. Task-specific measurements (lm context, passkey depth buckets)
are task hooks (`Task.extra_measurements`), never branches here.

This whole file is a root of every cell's fingerprint (`lenbench.run.fingerprint.CORE`): editing
it, or any module it imports, reruns every cell. What it does not import (the driver, the store,
the executors) cannot change a result.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as dt
import functools
import math
import subprocess
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

import lenbench
from lenbench.baselines import baseline_rows
from lenbench.config import Cell, VariantSpec
from lenbench.device import resolve_device
from lenbench.encodings.rope_scaling import scaling_for
from lenbench.evaluate import METRICS, evaluate_length, task_metrics
from lenbench.model import ModelConfig, Transformer
from lenbench.numerics import machine_facts
from lenbench.plugins import Plugin, failed_here
from lenbench.plugins import ensure as ensure_plugins
from lenbench.registry import UnknownNameError
from lenbench.results.build import failed_row, measured_row, point
from lenbench.results.cell import CellResult
from lenbench.results.labels import BASE_VARIANT, error_line
from lenbench.results.schema import SCHEMA_VERSION
from lenbench.run.checkpoint import CheckpointCache, finetune_checkpoint_name
from lenbench.run.fingerprint import cell_fingerprint, data_fingerprint, python_version
from lenbench.run.memory import MemoryBudgetExceeded, budget_source, fit_batch, memory_budget
from lenbench.tasks import Task, build_task
from lenbench.train import STOP_BUDGET, train_model

# --- a job and its outcome (what crosses to a worker and back) ----------------------------------


@dataclasses.dataclass(frozen=True)
class CellJob:
    """Everything a worker needs to run one cell; picklable, holds no paths.

    Args:
        cell: the grid cell.
        device: device option ("cpu", "cuda", "auto", …) resolved on the worker.
        threads: intra-op CPU threads for this cell (fixed, so every executor gives the same rows).
        checkpoints: cached checkpoint files the cell may reuse, name → file bytes.
        progress: show training progress bars (serial runs only).
        plugins: the plugins the driver loaded (`lenbench.plugins.loaded()`), loaded in the worker
            before the cell is built (a file plugin travels as its source).
    """

    cell: Cell
    device: str
    threads: int
    checkpoints: dict[str, bytes] = dataclasses.field(default_factory=dict)
    progress: bool = False
    plugins: tuple[Plugin, ...] = ()


@dataclasses.dataclass
class CellOutcome:
    """What one job made: the cell result (as stored in ``cells/<cell_id>.json``) and the
    checkpoints it trained (name → file bytes), which the driver stores for later runs."""

    cell_id: str
    result: CellResult
    checkpoints: dict[str, bytes] = dataclasses.field(default_factory=dict)
    #: Executor bookkeeping shown in the summary (e.g. Ray retries); never part of the rows.
    notes: dict[str, Any] = dataclasses.field(default_factory=dict)


# --- provenance ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def git_sha() -> str:
    """The commit of the lenbench checkout, or "unknown" outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# --- one cell -----------------------------------------------------------------------------------


def model_config(cell: Cell, task: Task) -> ModelConfig:
    """The model `cell` trains on `task` (the cell's own task, built)."""
    return config_model(cell.config(), task)


def config_model(config: dict, task: Task) -> ModelConfig:
    """The model a cell of canonical config `config` (`Cell.config`, a cell file's ``config``) trains on
    `task`: what the report reads back from a finished cell (`lenbench.report.regimes`).

    Positions up to the longest evaluation or fine-tuning ratio times the training length, in tokens.
    """
    longest = max([*config["eval"]["ratios"],
                   *(v["finetune_ratio"] for v in config.get("variants", ()) if v["finetune_steps"])])
    train_len = int(config["train_len"])
    return ModelConfig(vocab_size=task.vocab_size, **config["model"], causal=True, encoding=config["encoding"],
                       encoding_params=dict(config["encoding_params"]),
                       max_len=task.seq_len(math.ceil(longest * train_len)), train_len=task.seq_len(train_len))


def _trained_model(cell: Cell, task: Task, cache: CheckpointCache, device: torch.device,
                   progress: bool) -> tuple[Transformer, dict, dict]:
    """Train the cell's model, or load it from the checkpoint cache; returns (model, what every row
    records of its training: train_seconds, train_steps, stop_reason, the checkpoint's meta)."""
    torch.manual_seed(cell.seed)
    model = Transformer(model_config(cell, task)).to(device)
    meta = cache.load_or_train(model, cell.train_id, lambda: train_model(
        model, task, cell.train_len, cell.train, seed=cell.seed, device=device, desc=cell.title, progress=progress))
    return model.eval(), {  # a checkpoint written before training could stop early trained its whole budget
        "train_seconds": float(meta.get("train_seconds", math.nan)),
        "train_steps": int(meta.get("train_steps", cell.train.steps)),
        "stop_reason": str(meta.get("stop_reason", STOP_BUDGET))}, meta


def training_record(meta: dict) -> dict | None:
    """The cell file's `training` record of a run that validated (its checkpoint's meta): the kept
    step, its validation loss and the whole validation curve as [step, loss, learning rate] lists,
    so a reader can check each stop. None for a run that never validated (nothing to show)."""
    history = meta.get("val_history") or []
    if not history:
        return None
    return {"best_step": int(meta["best_step"]), "val_loss": float(meta["val_loss"]),
            "val_history": [[int(s), float(v), float(r)] for s, v, r in history]}


def _finetuned_model(cell, task, variant, base: Transformer, cache: CheckpointCache, device, progress) -> Transformer:
    """Continue training a copy of `base` at finetune_ratio × train_len with the variant's scaling."""
    torch.manual_seed(cell.seed)
    model = copy.deepcopy(base)
    model.pos_enc.set_scaling(scaling_for(variant, variant.finetune_ratio, task.seq_len(cell.train_len)))
    length = max(1, round(variant.finetune_ratio * cell.train_len))
    cache.load_or_train(model, finetune_checkpoint_name(cell, variant), lambda: train_model(
        model, task, length, cell.train, seed=cell.seed + 1, device=device, steps=variant.finetune_steps,
        lr=variant.finetune_lr, desc=f"{cell.title} {variant.key}", progress=progress))
    return model.eval()


def default_threads() -> int:
    """The intra-op thread count a cell gets unless told otherwise: one.

    The suites' models are small (2 layers × 64 wide in quick): a second thread on the same cell
    speeds a training step up far less than twice (and on a loaded machine OpenMP's spinning
    threads slowed one 13×), while one cell per core uses every core (`lenbench.run.executors.base.plan_execution`).
    Rows depend on the thread count (it is in every row and in the fingerprint): with one thread
    per cell they are the same on every machine, whatever its core count.
    """
    return 1


@contextlib.contextmanager
def _intra_op_threads(threads: int) -> Iterator[None]:
    """Run with exactly `threads` intra-op threads (results depend on it), then restore."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def compute_cell(job: CellJob) -> CellOutcome:
    """Train and evaluate one cell; writes nothing (executors run it through
    `lenbench.run.executors.base.compute_cell`, which first keeps freed memory for reuse).

    Never raises for a failure inside the cell: a diverged loss, an unrepresentable length or any
    other exception is recorded (whole cell, or the one length / variant it concerns) with its reason.
    """
    cell = job.cell
    with _intra_op_threads(job.threads):
        device = resolve_device(job.device)
        cache = CheckpointCache(job.checkpoints, device)
        result = _evaluate_cell(cell, cache, device, job.threads, job.progress, job.plugins)
    notes = {"rejected_checkpoints": cache.rejected} if cache.rejected else {}
    return CellOutcome(cell_id=cell.cell_id, result=result, checkpoints=cache.made, notes=notes)


def _evaluate_cell(cell: Cell, cache: CheckpointCache, device: torch.device, threads: int, progress: bool,
                   plugins: tuple[Plugin, ...] = ()) -> CellResult:
    provenance = {"lenbench_version": lenbench.__version__, "git_sha": git_sha(), "torch_version": torch.__version__,
                  "device": device.type, "dtype": "float32", "threads": threads, "python_version": python_version(),
                  **machine_facts(), "code_fingerprint": "", "data_fingerprint": ""}
    # `task` is the entry's label (TaskSpec.key): two entries of one task with different settings are
    # two boards; `settings` is what the cell trained and evaluated with, per-task overrides included.
    base = {"schema_version": SCHEMA_VERSION, "cell_id": cell.cell_id, "suite": cell.suite, "task": cell.task.key,
            "encoding": cell.encoding.key, "train_len": cell.train_len, "seed": cell.seed, **provenance,
            "settings": cell.settings}
    rows: list[dict] = []
    result = CellResult(rows=rows, cell_id=cell.cell_id, train_id=cell.train_id, title=cell.title,
                        config=cell.config(), provenance=provenance)
    if plugins:
        result.plugins = [{"spec": p.spec, "kind": p.kind, "module": p.module, "path": p.path} for p in plugins]
    start = time.perf_counter()
    trained = {"train_seconds": math.nan}
    try:
        try:  # the environment this cell runs in: a failure here is not the cell's
            ensure_plugins(plugins)  # before any name is looked up: the driver's plugins, here too
            budget = memory_budget(device, cell.eval.memory_budget_gb)  # before the model is allocated
        except Exception as err:
            raise OutsideCell(error_line(err)) from err
        result.memory = {"budget_bytes": budget, "batch": {}}
        budget_measured = budget_source(cell.eval.memory_budget_gb) == "measured"
        task = build_task(cell.task.name, **cell.task.params)
        result.task_fingerprint = task.fingerprint()
        fingerprint = cell_fingerprint(cell, device.type, threads, data_fingerprint(result.task_fingerprint))
        cache.fingerprint = fingerprint
        result.fingerprint = fingerprint.to_json()
        provenance.update(code_fingerprint=fingerprint.code, data_fingerprint=fingerprint.data)
        base.update(code_fingerprint=fingerprint.code, data_fingerprint=fingerprint.data)
        task.check_train_len(cell.train_len)  # e.g. an lm corpus too short: one line, nothing trained
        metrics = task_metrics(task)
        model, trained, meta = _trained_model(cell, task, cache, device, progress)
        result.training = training_record(meta)
        train_tokens = task.seq_len(cell.train_len)
        trained_scaling = getattr(model.pos_enc, "scaling", None)  # a scaling the model was trained with
        variants: list[tuple[str, VariantSpec | None]] = [(BASE_VARIANT, None)]
        if hasattr(model.pos_enc, "set_scaling"):
            variants += [(v.key, v) for v in cell.variants]
        for key, variant in variants:
            try:
                net = model
                if variant is not None and variant.finetune_steps:
                    net = _finetuned_model(cell, task, variant, model, cache, device, progress)
                for ratio in cell.eval.ratios:
                    eval_len = max(1, round(ratio * cell.train_len))
                    row_base = point(base, key, eval_len, ratio)
                    try:
                        if variant is not None:
                            factor = variant.finetune_ratio if variant.finetune_steps else ratio
                            net.pos_enc.set_scaling(scaling_for(variant, factor, train_tokens))
                        tokens = task.seq_len(eval_len)
                        wanted = max(1, cell.eval.tokens_per_batch // tokens)
                        batch = fit_batch(net, tokens, min(wanted, cell.eval.samples), budget)
                        if batch < min(wanted, cell.eval.samples):
                            result.memory["batch"][f"{key}@{eval_len}"] = batch  # shrunk to fit the budget
                        values, n, scores = evaluate_length(net, task, eval_len, samples=cell.eval.samples,
                                                            tokens_per_batch=batch * tokens, seed=cell.seed,
                                                            device=device)
                        rows += [measured_row(row_base, {"metric": m, "value": values[m], "n_samples": n},
                                              METRICS[m], sample_scores=scores[m]) for m in metrics]
                        rows += protocol_rows(net, task, cell, eval_len, ratio, row_base, device,
                                              tokens_per_batch=batch * tokens)
                    except Exception as err:  # one length fails (e.g. past a learned table); the rest go on
                        rows += [failed_row(row_base, m, METRICS[m], error_line(err)) for m in metrics]
                        cause = outside_cause(err, budget_measured)
                        if cause and not result.outside:
                            result.outside = f"{key} at length {eval_len}: {cause}"
            finally:
                if variant is not None:
                    model.pos_enc.set_scaling(trained_scaling)
        # Chance and trivial baselines on the same evaluation samples (identical in every cell of
        # a task and seed; results.normalize keeps one copy).
        rows += baseline_rows(task, cell.train_len, cell.eval.ratios, samples=cell.eval.samples,
                              tokens_per_batch=cell.eval.tokens_per_batch, seed=cell.seed, base=base)
        nothing = every_measurement_failed(rows, cell.encoding.key)
        if nothing:
            result.fail(nothing)
    except Exception as err:
        result.fail(error_line(err), traceback.format_exc(limit=8))
        result.outside = outside_cause(err) or None
        if result.fingerprint is None:  # e.g. the task could not be built: no data fingerprint
            try:
                result.fingerprint = cell_fingerprint(cell, device.type, threads, "").to_json()
                provenance["code_fingerprint"] = result.fingerprint["code_fingerprint"]
            except Exception:  # noqa: BLE001  (e.g. an encoding no plugin here registers: the reason says so)
                pass  # stored as null: the reason is the cell's error
    timestamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    for row in rows:
        row.update(timestamp=timestamp, **trained)
    result.seconds, result.train_seconds, result.timestamp = time.perf_counter() - start, trained["train_seconds"], timestamp
    return result


class OutsideCell(RuntimeError):
    """The environment a cell runs in is not usable (a bad setting, a plugin this worker cannot
    load); its message is the underlying error's one line."""


#: Failures that are the machine's, not the cell's: its memory ran out (the allocator, or the
#: evaluation budget measured from the memory available now), or `OutsideCell`; also an unknown
#: name while a plugin of the job could not be loaded in this worker (`outside_cause`).
OUTSIDE_ERRORS: tuple[type[BaseException], ...] = (OutsideCell, MemoryError, torch.OutOfMemoryError)
#: Allocator messages of an out-of-memory RuntimeError.
OUT_OF_MEMORY = ("can't allocate memory", "out of memory", "std::bad_alloc")


def outside_cause(err: BaseException, budget_measured: bool = False) -> str:
    """The one-line reason when `err` is a failure outside the cell (`OUTSIDE_ERRORS`, an allocator's
    out-of-memory RuntimeError, or the evaluation memory budget when it was measured on this machine
    (`budget_measured`) rather than set by the suite or the environment), else ""."""
    over_measured_budget = budget_measured and isinstance(err, MemoryBudgetExceeded)
    if isinstance(err, UnknownNameError) and failed_here():  # a name of a plugin this worker could not load
        return f"{error_line(err)} (plugin not loaded here)"
    if isinstance(err, OUTSIDE_ERRORS) or over_measured_budget or (
            isinstance(err, RuntimeError) and any(m in str(err) for m in OUT_OF_MEMORY)):
        return error_line(err)
    return ""


def every_measurement_failed(rows: list[dict], label: str) -> str:
    """The reason a cell failed although it ran to the end: every whole-length measurement of its
    own model (encoding `label`, any variant) failed; "" when at least one succeeded (or none exists).

    Args:
        rows: the cell's rows (baseline rows carry other encoding labels and do not count).
        label: the cell's encoding label.
    """
    own = [r for r in rows if r["encoding"] == label and not r.get("bucket")]
    if not own or any(r["status"] != "failed" for r in own):
        return ""
    return f"every measurement failed ({len(own)} of {len(own)}); the first: {own[0]['error']}"


def protocol_rows(net: Transformer, task: Task, cell: Cell, eval_len: int, ratio: float, row_base: dict,
                  device: torch.device, tokens_per_batch: int | None = None) -> list[dict]:
    """The rows of one length beyond the whole-length metrics (docs/board.md, "Results rows", `bucket`
    column): the task's own measurements (`Task.extra_measurements`: `lm`'s per-position nll buckets,
    window perplexity and context gain; passkey's depth buckets), as rows.

    A failure here fails only these rows (the task's `extra_metrics` at `ratio`, status "failed"
    with the reason), never the length's own.
    """
    kw = {"samples": cell.eval.samples, "tokens_per_batch": tokens_per_batch or cell.eval.tokens_per_batch,
          "seed": cell.seed, "device": device}
    try:
        found = task.extra_measurements(net, eval_len, cell.train_len, ratio, **kw)
        return [measured_row(row_base, m, METRICS[m["metric"]]) for m in found]
    except Exception as err:  # the length's own rows stand; these are recorded as failed
        return [failed_row(row_base, m, METRICS[m], error_line(err)) for m in task.extra_metrics(ratio)]

