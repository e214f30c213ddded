"""The engine: run suite cells (train once, evaluate at every length and variant), never lose a result.

Layout of a results directory:

    OUT/cells/<cell_id>.json        one file per finished cell (status ok or failed), written atomically
    OUT/checkpoints/<train_id>.pt   trained weights, cached so evaluation variants never retrain

A rerun skips every cell whose file exists, so a run killed at any moment resumes without losing
or duplicating rows. `pytest bench`, `lenbench run` and any other executor call `run_cell`.
"""

from __future__ import annotations

import concurrent.futures as futures
import copy
import dataclasses
import datetime as dt
import functools
import inspect
import json
import math
import multiprocessing
import os
import subprocess
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

import lenbench
from lenbench.atomic import atomic_path, atomic_write_json
from lenbench.device import resolve_device
from lenbench.encodings.rope_scaling import ROPE_TYPES
from lenbench.evaluate import METRICS, evaluate_depth, evaluate_length, evaluate_lm_context, task_metrics
from lenbench.model import ModelConfig, Transformer
from lenbench.suite import Cell, Suite, VariantSpec, digest
from lenbench.tasks import Task, build_task
from lenbench.train import TrainStats, train_model

SCHEMA_VERSION = 1
BASE_VARIANT = "none"


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
                       max_len=task.seq_len(math.ceil(longest * cell.train_len)), train_len=task.seq_len(cell.train_len))


def scaling_for(variant: VariantSpec, factor: float, train_tokens: int) -> dict:
    """The transformers-style rope_scaling dict of a variant at evaluation (or fine-tuning) ratio `factor`.

    `factor` follows the variant's factor mode (`VariantSpec.factor_mode`): the ratio only in the
    oracle and fine-tuned modes, 1 for length-adaptive types (dynamic), the suite's value when
    pinned. `original_max_position_embeddings` defaults to the number of tokens at the training
    length, where the rope_type takes it.
    """
    accepted = inspect.signature(ROPE_TYPES.get(variant.rope_type)).parameters
    defaults = {"factor": variant.factor_at(factor), "original_max_position_embeddings": train_tokens}
    return {"rope_type": variant.rope_type, **{k: v for k, v in defaults.items() if k in accepted and v is not None},
            **variant.params}


def _checkpoint(out: Path, name: str) -> Path:
    return Path(out) / "checkpoints" / f"{name}.pt"


def _load_or_train(model: Transformer, ckpt: Path, device: torch.device, train) -> TrainStats | None:
    """Load `model`'s weights from `ckpt` when cached (returns None); else run `train()` and
    save the weights atomically (returns its stats)."""
    if ckpt.exists():
        model.load_state_dict(torch.load(ckpt, map_location=device, weights_only=True))
        return None
    stats = train()
    with atomic_path(ckpt) as tmp:
        torch.save(model.state_dict(), tmp)
    return stats


def _trained_model(cell: Cell, task: Task, out: Path, device: torch.device, progress: bool) -> tuple[Transformer, float]:
    """Train the cell's model, or load it from the checkpoint cache; returns (model, train_seconds)."""
    torch.manual_seed(cell.seed)
    model = Transformer(model_config(cell, task)).to(device)
    ckpt = _checkpoint(out, cell.train_id)
    meta = ckpt.with_suffix(".json")
    stats = _load_or_train(model, ckpt, device, lambda: train_model(
        model, task, cell.train_len, cell.train, seed=cell.seed, device=device, desc=cell.title, progress=progress))
    if stats is None:
        seconds = json.loads(meta.read_text()).get("train_seconds", math.nan) if meta.exists() else math.nan
        return model.eval(), float(seconds)
    atomic_write_json(meta, {"train_seconds": stats.seconds, "final_loss": stats.final_loss,
                             "config": cell.training_config()})
    return model, stats.seconds


def _finetuned_model(cell, task, variant, base: Transformer, out, device, progress) -> Transformer:
    """Continue training a copy of `base` at finetune_ratio × train_len with the variant's scaling."""
    torch.manual_seed(cell.seed)
    model = copy.deepcopy(base)
    model.pos_enc.set_scaling(scaling_for(variant, variant.finetune_ratio, task.seq_len(cell.train_len)))
    ckpt = _checkpoint(out, f"{cell.train_id}-ft-{digest(dataclasses.asdict(variant))}")
    length = max(1, round(variant.finetune_ratio * cell.train_len))
    _load_or_train(model, ckpt, device, lambda: train_model(
        model, task, length, cell.train, seed=cell.seed + 1, device=device, steps=variant.finetune_steps,
        lr=variant.finetune_lr, desc=f"{cell.title} {variant.key}", progress=progress))
    return model.eval()


def run_cell(cell: Cell, out: str | Path, device: str | torch.device = "auto", *, progress: bool = True) -> dict:
    """Train and evaluate one cell, write `OUT/cells/<cell_id>.json` atomically, return its result.

    Never raises for a failure inside the cell: a diverged loss, an unrepresentable length or any
    other exception is recorded (whole cell, or the one length / variant it concerns) with its reason.
    """
    out = Path(out)
    device = device if isinstance(device, torch.device) else resolve_device(device)
    provenance = {"lenbench_version": lenbench.__version__, "git_sha": git_sha(), "torch_version": torch.__version__,
                  "device": device.type, "dtype": "float32"}
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
        model, train_seconds = _trained_model(cell, task, out, device, progress)
        train_tokens = task.seq_len(cell.train_len)
        trained_scaling = getattr(model.pos_enc, "scaling", None)  # a scaling the model was trained with
        variants: list[tuple[str, VariantSpec | None]] = [(BASE_VARIANT, None)]
        if hasattr(model.pos_enc, "set_scaling"):
            variants += [(v.key, v) for v in cell.variants]
        for key, variant in variants:
            try:
                net = model
                if variant is not None and variant.finetune_steps:
                    net = _finetuned_model(cell, task, variant, model, out, device, progress)
                for ratio in cell.eval.ratios:
                    eval_len = max(1, round(ratio * cell.train_len))
                    row_base = {**base, "variant": key, "eval_len": eval_len, "ratio": float(ratio), "bucket": ""}
                    try:
                        if variant is not None:
                            factor = variant.finetune_ratio if variant.finetune_steps else ratio
                            net.pos_enc.set_scaling(scaling_for(variant, factor, train_tokens))
                        values, n = evaluate_length(net, task, eval_len, samples=cell.eval.samples,
                                                    tokens_per_batch=cell.eval.tokens_per_batch, seed=cell.seed,
                                                    device=device)
                        rows += [{**row_base, "metric": m, "value": values[m], "n_samples": n,
                                  "higher_is_better": METRICS[m], "status": "ok", "error": ""} for m in metrics]
                        rows += protocol_rows(net, task, cell, eval_len, ratio, row_base, device)
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
    atomic_write_json(cell_path(out, cell), result)
    return result


def protocol_rows(net: Transformer, task: Task, cell: Cell, eval_len: int, ratio: float, row_base: dict,
                  device: torch.device) -> list[dict]:
    """The rows of one length beyond the whole-length metrics (README "Results", `bucket` column):

    - `lm`: per-position nll buckets ("pos:a-b") at every ratio, and at ratios > 1 the
      `window_perplexity` (same targets, context cut to the training length) and `context_gain`
      = window_perplexity / perplexity, which tell "uses the longer context" from "ignores it"
      (`evaluate_lm_context`);
    - tasks with a `needle_depth` (passkey): every metric per depth bucket ("depth:a-b", `evaluate_depth`).

    A failure here fails only these rows (status "failed" with the reason), never the length's own.
    """
    kw = {"samples": cell.eval.samples, "tokens_per_batch": cell.eval.tokens_per_batch, "seed": cell.seed, "device": device}
    ok = {"status": "ok", "error": ""}
    whole = ["window_perplexity", "context_gain"] if task.kind == "lm" and ratio > 1 else []
    try:
        if task.kind == "lm":
            res = evaluate_lm_context(net, task, eval_len, task.seq_len(cell.train_len), **kw)
            rows = [{**row_base, "metric": m, "value": res[m], "n_samples": res["n_samples"],
                     "higher_is_better": METRICS[m], **ok} for m in whole]
            return rows + [{**row_base, "bucket": label, "metric": "nll", "value": value, "n_samples": res["n_samples"],
                            "higher_is_better": METRICS["nll"], **ok} for label, value, _ in res["positions"]]
        if hasattr(task, "needle_depth"):
            res = evaluate_depth(net, task, eval_len, **kw)
            return [{**row_base, "bucket": label, "metric": m, "value": v, "n_samples": n,
                     "higher_is_better": METRICS[m], **ok} for label, values, n in res["buckets"] for m, v in values.items()]
    except Exception as err:  # the length's own rows stand; these are recorded as failed
        return [{**row_base, "metric": m, "value": None, "n_samples": 0, "higher_is_better": METRICS[m],
                 "status": "failed", "error": _reason(err)} for m in whole]
    return []


def ensure_cell(cell: Cell, out: str | Path, device: str | torch.device = "auto", *, progress: bool = True) -> tuple[dict, bool]:
    """The cell's result, from its file when it finished before, else by running it: (result, reused)."""
    path = cell_path(Path(out), cell)
    if path.exists():
        return json.loads(path.read_text()), True
    return run_cell(cell, out, device, progress=progress), False


def _reason(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".splitlines()[0]


# --- a whole suite ------------------------------------------------------------------------------


def _worker_init(threads: int) -> None:
    torch.set_num_threads(threads)


def _run_in_worker(cell: Cell, out: str, device: str) -> dict:
    return run_cell(cell, out, device, progress=False)


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
    suite: Suite, out: str | Path, *, device: str = "auto", workers: int = 1, retry_failed: bool = False,
    progress: bool = True,
) -> list[dict]:
    """Run every unfinished cell of `suite` into `out`; return the results of the cells run now.

    With `workers` > 1 cells run in parallel processes, each with its share of the CPU threads.
    """
    resolve_device(device)  # a one-line error now rather than one per cell
    out = Path(out)
    todo = pending_cells(suite, out, retry_failed=retry_failed)
    total = len(suite.cells())
    bar = tqdm(total=total, initial=total - len(todo), desc=f"suite {suite.name}", unit="cell",
               disable=not progress, dynamic_ncols=True)
    results = []
    if workers <= 1:
        for cell in todo:
            bar.set_postfix_str(cell.title)
            results.append(run_cell(cell, out, device, progress=progress))
            bar.update()
    else:
        threads = max(1, (os.cpu_count() or 1) // workers)
        ctx = multiprocessing.get_context("spawn")
        with futures.ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init, initargs=(threads,)) as pool:
            jobs = {pool.submit(_run_in_worker, cell, str(out), device): cell for cell in todo}
            for job in futures.as_completed(jobs):
                results.append(job.result())
                bar.set_postfix_str(jobs[job].title)
                bar.update()
    bar.close()
    return results
