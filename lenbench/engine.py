"""The engine: run suite cells (train once, evaluate at every length and variant), never lose a result.

Layout of a results directory:

    OUT/cells/<cell_id>.json        one file per finished cell (status ok or failed), written atomically
    OUT/checkpoints/<train_id>.pt   trained weights + their metadata in one file, cached so evaluation
                                    variants never retrain

Two halves: `compute_cell` runs one cell from a `CellJob` and writes nothing (executors call it,
in this process, in a process pool or on a Ray worker); the driver (`run_cell`, `ensure_cell`,
`run_suite`) hands out jobs with the cached checkpoints and alone writes what comes back. A rerun
skips every cell whose file exists, so a run killed at any moment resumes without losing or
duplicating rows. `pytest bench`, `lenbench run` and every executor share this one engine.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as dt
import functools
import inspect
import json
import math
import io
import subprocess
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

import lenbench
from lenbench.atomic import atomic_write_bytes, atomic_write_json
from lenbench.device import resolve_device
from lenbench.encodings.rope_scaling import ROPE_TYPES
from lenbench.executors import CellJob, CellOutcome, get_executor
from lenbench.evaluate import METRICS, evaluate_length, task_metrics
from lenbench.model import ModelConfig, Transformer
from lenbench.suite import Cell, Suite, VariantSpec, digest
from lenbench.tasks import Task, build_task
from lenbench.train import TrainStats, train_model

SCHEMA_VERSION = 1
BASE_VARIANT = "none"
CHECKPOINT_FORMAT = 1


# --- result files -------------------------------------------------------------------------------


def cell_path(out: Path, cell: Cell) -> Path:
    return Path(out) / "cells" / f"{cell.cell_id}.json"


def load_cell_results(out: str | Path) -> list[dict]:
    """Every cell result in a results directory (temporary files of a killed run are ignored)."""
    return [json.loads(p.read_text()) for p in sorted((Path(out) / "cells").glob("*.json"))]


def load_rows(out: str | Path) -> list[dict]:
    """All metric rows of a results directory, in a stable order."""
    return [row for result in load_cell_results(out) for row in result["rows"]]


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
    longest = max([*cell.eval.ratios, *(v.finetune_ratio for v in cell.variants if v.finetune_steps)])
    return ModelConfig(vocab_size=task.vocab_size, **dataclasses.asdict(cell.model), causal=True,
                       encoding=cell.encoding.name, encoding_params=dict(cell.encoding.params),
                       max_len=task.seq_len(math.ceil(longest * cell.train_len)))


def scaling_for(variant: VariantSpec, factor: float, train_tokens: int) -> dict:
    """The transformers-style rope_scaling dict of a variant at `factor`.

    `factor` and `original_max_position_embeddings` default to the evaluation ratio and the
    number of tokens at the training length, where the rope_type takes them.
    """
    accepted = inspect.signature(ROPE_TYPES.get(variant.rope_type)).parameters
    defaults = {"factor": max(1.0, float(factor)), "original_max_position_embeddings": train_tokens}
    return {"rope_type": variant.rope_type, **{k: v for k, v in defaults.items() if k in accepted}, **variant.params}


def checkpoint_path(out: Path, name: str) -> Path:
    return Path(out) / "checkpoints" / f"{name}.pt"


def finetune_checkpoint_name(cell: Cell, variant: VariantSpec) -> str:
    return f"{cell.train_id}-ft-{digest(dataclasses.asdict(variant))}"


def checkpoint_names(cell: Cell) -> list[str]:
    """Names of every checkpoint a cell trains or reuses: its base model, then each fine-tune."""
    return [cell.train_id, *(finetune_checkpoint_name(cell, v) for v in cell.variants if v.finetune_steps)]


def checkpoint_bytes(state_dict: dict, meta: dict) -> bytes:
    """One checkpoint file: weights and their metadata (train_seconds, final loss, config) together,
    so a kill can never leave one without the other."""
    buf = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, "state_dict": state_dict, "meta": meta}, buf)
    return buf.getvalue()


def load_checkpoint_bytes(data: bytes, device: torch.device) -> tuple[dict, dict]:
    """(state_dict, meta) of a checkpoint file's bytes."""
    obj = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
    if not isinstance(obj, dict) or obj.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"not a lenbench checkpoint of format {CHECKPOINT_FORMAT}")
    return obj["state_dict"], obj["meta"]


class _CheckpointCache:
    """Checkpoints of one job: those handed in (bytes) and those trained now (returned as bytes)."""

    def __init__(self, given: dict[str, bytes], device: torch.device) -> None:
        self.given = given
        self.device = device
        self.made: dict[str, bytes] = {}

    def load_or_train(self, model: Transformer, name: str, train) -> dict:
        """Load `model`'s weights from checkpoint `name` when given (returns its meta); else run
        `train()` (returns TrainStats), keep the checkpoint to hand back, and return its meta."""
        if name in self.given:
            state, meta = load_checkpoint_bytes(self.given[name], self.device)
            model.load_state_dict(state)
            return meta
        stats: TrainStats = train()
        meta = {"train_seconds": stats.seconds, "final_loss": stats.final_loss}
        self.made[name] = checkpoint_bytes(model.state_dict(), meta)
        return meta


def _trained_model(cell: Cell, task: Task, cache: _CheckpointCache, device: torch.device,
                   progress: bool) -> tuple[Transformer, float]:
    """Train the cell's model, or load it from the checkpoint cache; returns (model, train_seconds)."""
    torch.manual_seed(cell.seed)
    model = Transformer(model_config(cell, task)).to(device)
    meta = cache.load_or_train(model, cell.train_id, lambda: train_model(
        model, task, cell.train_len, cell.train, seed=cell.seed, device=device, desc=cell.title, progress=progress))
    return model.eval(), float(meta.get("train_seconds", math.nan))


def _finetuned_model(cell, task, variant, base: Transformer, cache: _CheckpointCache, device, progress) -> Transformer:
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
    """The intra-op thread count a cell gets unless told otherwise: torch's default here."""
    return torch.get_num_threads()


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
    """Train and evaluate one cell; writes nothing (see `lenbench.executors`).

    Never raises for a failure inside the cell: a diverged loss, an unrepresentable length or any
    other exception is recorded (whole cell, or the one length / variant it concerns) with its reason.
    """
    cell = job.cell
    with _intra_op_threads(job.threads):
        device = resolve_device(job.device)
        cache = _CheckpointCache(job.checkpoints, device)
        result = _evaluate_cell(cell, cache, device, job.threads, job.progress)
    return CellOutcome(cell_id=cell.cell_id, result=result, checkpoints=cache.made)


def _evaluate_cell(cell: Cell, cache: _CheckpointCache, device: torch.device, threads: int, progress: bool) -> dict:
    provenance = {"lenbench_version": lenbench.__version__, "git_sha": git_sha(), "torch_version": torch.__version__,
                  "device": device.type, "dtype": "float32", "threads": threads}
    base = {"schema_version": SCHEMA_VERSION, "cell_id": cell.cell_id, "suite": cell.suite, "task": cell.task.name,
            "encoding": cell.encoding.key, "train_len": cell.train_len, "seed": cell.seed, **provenance}
    rows: list[dict] = []
    result: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "cell_id": cell.cell_id, "train_id": cell.train_id,
                              "title": cell.title, "config": cell.config(), "status": "ok", "error": "",
                              "provenance": provenance, "rows": rows}
    start = time.perf_counter()
    train_seconds = float("nan")
    try:
        task = build_task(cell.task.name, **cell.task.params)
        result["task_fingerprint"] = task.fingerprint()
        metrics = task_metrics(task)
        model, train_seconds = _trained_model(cell, task, cache, device, progress)
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
                    row_base = {**base, "variant": key, "eval_len": eval_len, "ratio": float(ratio)}
                    try:
                        if variant is not None:
                            factor = variant.finetune_ratio if variant.finetune_steps else ratio
                            net.pos_enc.set_scaling(scaling_for(variant, factor, train_tokens))
                        values, n = evaluate_length(net, task, eval_len, samples=cell.eval.samples,
                                                    tokens_per_batch=cell.eval.tokens_per_batch, seed=cell.seed,
                                                    device=device)
                        rows += [{**row_base, "metric": m, "value": values[m], "n_samples": n,
                                  "higher_is_better": METRICS[m], "status": "ok", "error": ""} for m in metrics]
                    except Exception as err:  # one length fails (e.g. past a learned table); the rest go on
                        rows += [{**row_base, "metric": m, "value": None, "n_samples": 0,
                                  "higher_is_better": METRICS[m], "status": "failed", "error": _reason(err)}
                                 for m in metrics]
            finally:
                if variant is not None:
                    model.pos_enc.set_scaling(trained_scaling)
    except Exception as err:
        result.update(status="failed", error=_reason(err), traceback=traceback.format_exc(limit=8))
    timestamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    for row in rows:
        row.update(timestamp=timestamp, train_seconds=train_seconds)
    result.update(seconds=time.perf_counter() - start, train_seconds=train_seconds, timestamp=timestamp)
    return result


# --- the driver: the only code that writes a results directory ----------------------------------


def read_checkpoints(out: Path, cell: Cell) -> dict[str, bytes]:
    """The cached checkpoint files of `cell` in `out` (name → bytes)."""
    found = {}
    for name in checkpoint_names(cell):
        path = checkpoint_path(out, name)
        if path.is_file():
            found[name] = path.read_bytes()
    return found


def store_outcome(out: Path, outcome: CellOutcome) -> dict:
    """Write an outcome's new checkpoints, then its cell file (each atomically); return the result."""
    for name, data in outcome.checkpoints.items():
        atomic_write_bytes(checkpoint_path(out, name), data)
    atomic_write_json(Path(out) / "cells" / f"{outcome.cell_id}.json", outcome.result)
    return outcome.result


def make_job(cell: Cell, out: Path, device: str | torch.device, *, threads: int | None = None,
             progress: bool = False) -> CellJob:
    device = device.type if isinstance(device, torch.device) else device
    return CellJob(cell=cell, device=device, threads=threads or default_threads(),
                   checkpoints=read_checkpoints(Path(out), cell), progress=progress)


def run_cell(cell: Cell, out: str | Path, device: str | torch.device = "auto", *, progress: bool = True,
             threads: int | None = None) -> dict:
    """Train and evaluate one cell in this process, write `OUT/cells/<cell_id>.json` atomically,
    return its result."""
    out = Path(out)
    return store_outcome(out, compute_cell(make_job(cell, out, device, threads=threads, progress=progress)))


def ensure_cell(cell: Cell, out: str | Path, device: str | torch.device = "auto", *, progress: bool = True,
                threads: int | None = None) -> tuple[dict, bool]:
    """The cell's result, from its file when it finished before, else by running it: (result, reused)."""
    path = cell_path(Path(out), cell)
    if path.exists():
        return json.loads(path.read_text()), True
    return run_cell(cell, out, device, progress=progress, threads=threads), False


def _reason(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".splitlines()[0]


# --- a whole suite ------------------------------------------------------------------------------


def pending_cells(suite: Suite, out: str | Path, *, retry_failed: bool = False) -> list[Cell]:
    """Cells without a result file (or with a failed one, when `retry_failed`)."""
    todo = []
    for cell in suite.cells():
        path = cell_path(Path(out), cell)
        if path.exists() and not (retry_failed and json.loads(path.read_text())["status"] == "failed"):
            continue
        todo.append(cell)
    return todo


def run_suite(
    suite: Suite, out: str | Path, *, device: str = "auto", executor: str = "serial", workers: int = 1,
    threads: int | None = None, retry_failed: bool = False, progress: bool = True, **executor_options: Any,
) -> list[dict]:
    """Run every unfinished cell of `suite` into `out`; return the results of the cells run now.

    Args:
        executor: where cells run: "serial", "process" (a pool of `workers` processes) or "ray"
            (see `lenbench.executors`); `workers` > 1 with "serial" means "process".
        threads: intra-op threads per cell (default: torch's default in this process); part of
            every row's provenance, so serial, process and Ray runs give bit-identical rows.
        executor_options: passed to the executor (e.g. Ray's `address`).
    """
    resolve_device(device)  # a one-line error now rather than one per cell
    out = Path(out)
    if executor == "serial" and workers > 1:
        executor = "process"
    cls = get_executor(executor)
    todo = pending_cells(suite, out, retry_failed=retry_failed)
    total = len(suite.cells())
    threads = threads or default_threads()
    jobs = (make_job(cell, out, device, threads=threads, progress=progress and executor == "serial")
            for cell in todo)
    bar = tqdm(total=total, initial=total - len(todo), desc=f"suite {suite.name}", unit="cell",
               disable=not progress, dynamic_ncols=True)
    results = []
    with cls(workers=workers, suite=suite, **executor_options) as runner:
        for outcome in runner.run(jobs):
            results.append(store_outcome(out, outcome))
            bar.set_postfix_str(outcome.result.get("title", outcome.cell_id))
            bar.update()
    bar.close()
    return results
