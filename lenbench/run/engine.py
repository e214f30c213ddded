"""The engine: run suite cells (train once, evaluate at every length and variant), never lose a result.

Layout of a results directory:

    OUT/cells/<cell_id>.json        one file per finished cell (status ok or failed), written atomically
    OUT/checkpoints/<train_id>.pt   trained weights + their metadata in one file, cached so evaluation
                                    variants never retrain
    OUT/locks/<cell_id>.lock        a cell being computed by a live run (pid and host inside)
    OUT/**/<name>.corrupt           a damaged cell file or checkpoint, moved aside and recomputed

Two halves: `compute_cell` runs one cell from a `CellJob` and writes nothing (executors call it,
in this process, in a process pool or on a Ray worker); the driver (`run_cell`, `ensure_cell`,
`run_suite`) hands out jobs with the cached checkpoints and alone writes what comes back. A rerun
skips every cell whose file is valid and whose fingerprint (`lenbench.run.fingerprint`: the source
it depends on, torch version, device, dtype, threads, task data) still matches; stale cells are
recomputed and the run says why. A run killed at any moment resumes without losing or duplicating
rows; a second run on the same directory skips the cells the first one has claimed (lock files).
`pytest bench`, `lenbench run` and every executor share this one engine.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as dt
import functools
import io
import json
import math
import os
import pickle
import re
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

import lenbench
from lenbench.atomic import atomic_write_bytes, atomic_write_json, check_writable
from lenbench.baselines import baseline_rows
from lenbench.device import resolve_device
from lenbench.encodings.rope_scaling import scaling_for
from lenbench.evaluate import METRICS, evaluate_depth, evaluate_length, evaluate_lm_context, task_metrics
from lenbench.run.executors.base import CellJob, CellOutcome, get_executor, plan_execution
from lenbench.run.fingerprint import (
    Fingerprint,
    cell_fingerprint,
    data_fingerprint,
    python_version,
    stale_reasons,
)
from lenbench.run.memory import available_bytes, fit_batch, memory_budget
from lenbench.model import ModelConfig, Transformer
from lenbench.numerics import machine_facts
from lenbench.config import Cell, Suite, VariantSpec, digest
from lenbench.tasks import Task, build_task
from lenbench.train import TrainStats, train_model

SCHEMA_VERSION = 2  # 2: rows carry sample_scores; baseline rows; exact match primary
BASE_VARIANT = "none"
CHECKPOINT_FORMAT = 1


# --- result files -------------------------------------------------------------------------------


def cell_path(out: Path, cell: Cell) -> Path:
    return Path(out) / "cells" / f"{cell.cell_id}.json"


def load_cell_results(out: str | Path) -> list[dict]:
    """Every cell result in a results directory (temporary files of a killed run are ignored).

    Raises:
        ValueError: one line naming a damaged cell file (`lenbench run` moves it aside and recomputes it).
    """
    results = []
    for p in sorted((Path(out) / "cells").glob("*.json")):
        try:
            results.append(json.loads(p.read_text()))
        except (ValueError, UnicodeDecodeError) as err:
            raise ValueError(f"cell file {p} is damaged ({_reason(err)}); rerun `lenbench run` on {out} to "
                             "move it aside and recompute it") from None
    return results


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
    """(state_dict, meta) of a checkpoint file's bytes.

    Raises:
        ValueError: not a lenbench checkpoint; one line (torch's several-paragraph refusal of a
            file holding pickled objects becomes "not a weights-only file …").
    """
    try:
        obj = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        found = re.search(r"GLOBAL (\S+)", text)
        if found:
            raise ValueError(f"not a weights-only file: it holds pickled objects such as {found.group(1)}, which are "
                             "never loaded") from None
        advice = ("Weights only load failed", "Check the documentation", "Please file an issue", "(1)", "(2)")
        lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith(advice)]
        raise ValueError(f"unreadable checkpoint ({lines[0] if lines else 'UnpicklingError'})") from None
    if not isinstance(obj, dict) or obj.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"not a lenbench checkpoint of format {CHECKPOINT_FORMAT}")
    return obj["state_dict"], obj["meta"]


def checkpoint_matches(meta: dict, fingerprint: Fingerprint) -> bool:
    """Whether a checkpoint's metadata was made by the code and environment of `fingerprint`."""
    stored = meta.get("fingerprint") if isinstance(meta, dict) else None
    return isinstance(stored, dict) and stored.get("code_fingerprint") == fingerprint.code \
        and stored.get("data", "") == fingerprint.data


class _CheckpointCache:
    """Checkpoints of one job: those handed in (bytes) and those trained now (returned as bytes).

    A checkpoint handed in that does not load, does not fit the model or was made by other code
    (`fingerprint`) is ignored and retrained; `rejected` says which and why.
    """

    def __init__(self, given: dict[str, bytes], device: torch.device) -> None:
        self.given = given
        self.device = device
        self.made: dict[str, bytes] = {}
        self.rejected: dict[str, str] = {}
        self.fingerprint: Fingerprint | None = None

    def load_or_train(self, model: Transformer, name: str, train) -> dict:
        """Load `model`'s weights from checkpoint `name` when given and valid (returns its meta); else
        run `train()` (returns TrainStats), keep the checkpoint to hand back, and return its meta."""
        if name in self.given:
            initial = {k: v.clone() for k, v in model.state_dict().items()}
            try:
                state, meta = load_checkpoint_bytes(self.given[name], self.device)
                if self.fingerprint is not None and not checkpoint_matches(meta, self.fingerprint):
                    raise ValueError("made by other code or environment (fingerprint differs)")
                model.load_state_dict(state)
                return meta
            except Exception as err:  # a damaged or mismatched checkpoint is retrained, never fatal
                self.rejected[name] = _reason(err)
                model.load_state_dict(initial)  # a partial load must not change the retrained model
        stats: TrainStats = train()
        meta = {"train_seconds": stats.seconds, "final_loss": stats.final_loss,
                "fingerprint": self.fingerprint.to_json() if self.fingerprint else None}
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
    """The intra-op thread count a cell gets unless told otherwise: one.

    The suites' models are small (2 layers × 64 wide in quick): a second thread on the same cell
    speeds a training step up far less than twice (and on a loaded machine OpenMP's spinning
    threads slowed one 13×), while one cell per core uses every core (`executors.plan_execution`).
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
    """Train and evaluate one cell; writes nothing (see `lenbench.run.executors.base`).

    Never raises for a failure inside the cell: a diverged loss, an unrepresentable length or any
    other exception is recorded (whole cell, or the one length / variant it concerns) with its reason.
    """
    cell = job.cell
    with _intra_op_threads(job.threads):
        device = resolve_device(job.device)
        cache = _CheckpointCache(job.checkpoints, device)
        result = _evaluate_cell(cell, cache, device, job.threads, job.progress)
    notes = {"rejected_checkpoints": cache.rejected} if cache.rejected else {}
    return CellOutcome(cell_id=cell.cell_id, result=result, checkpoints=cache.made, notes=notes)


def _evaluate_cell(cell: Cell, cache: _CheckpointCache, device: torch.device, threads: int, progress: bool) -> dict:
    provenance = {"lenbench_version": lenbench.__version__, "git_sha": git_sha(), "torch_version": torch.__version__,
                  "device": device.type, "dtype": "float32", "threads": threads, "python_version": python_version(),
                  **machine_facts(), "code_fingerprint": "", "data_fingerprint": ""}
    base = {"schema_version": SCHEMA_VERSION, "cell_id": cell.cell_id, "suite": cell.suite, "task": cell.task.name,
            "encoding": cell.encoding.key, "train_len": cell.train_len, "seed": cell.seed, **provenance}
    rows: list[dict] = []
    result: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "cell_id": cell.cell_id, "train_id": cell.train_id,
                              "title": cell.title, "config": cell.config(), "status": "ok", "error": "",
                              "provenance": provenance, "rows": rows}
    start = time.perf_counter()
    train_seconds = float("nan")
    try:
        budget = memory_budget(device, cell.eval.memory_budget_gb)  # before the model is allocated
        result["memory"] = {"budget_bytes": budget, "batch": {}}
        task = build_task(cell.task.name, **cell.task.params)
        result["task_fingerprint"] = task.fingerprint()
        fingerprint = cell_fingerprint(cell, device.type, threads, data_fingerprint(result["task_fingerprint"]))
        cache.fingerprint = fingerprint
        result["fingerprint"] = fingerprint.to_json()
        provenance.update(code_fingerprint=fingerprint.code, data_fingerprint=fingerprint.data)
        base.update(code_fingerprint=fingerprint.code, data_fingerprint=fingerprint.data)
        task.check_train_len(cell.train_len)  # e.g. an lm corpus too short: one line, nothing trained
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
                    row_base = {**base, "variant": key, "eval_len": eval_len, "ratio": float(ratio), "bucket": ""}
                    try:
                        if variant is not None:
                            factor = variant.finetune_ratio if variant.finetune_steps else ratio
                            net.pos_enc.set_scaling(scaling_for(variant, factor, train_tokens))
                        tokens = task.seq_len(eval_len)
                        wanted = max(1, cell.eval.tokens_per_batch // tokens)
                        batch = fit_batch(net, tokens, min(wanted, cell.eval.samples), budget)
                        if batch < min(wanted, cell.eval.samples):
                            result["memory"]["batch"][f"{key}@{eval_len}"] = batch  # shrunk to fit the budget
                        values, n, scores = evaluate_length(net, task, eval_len, samples=cell.eval.samples,
                                                            tokens_per_batch=batch * tokens, seed=cell.seed,
                                                            device=device)
                        rows += [{**row_base, "metric": m, "value": values[m], "n_samples": n,
                                  "higher_is_better": METRICS[m], "status": "ok", "error": "",
                                  "sample_scores": scores[m]} for m in metrics]
                        rows += protocol_rows(net, task, cell, eval_len, ratio, row_base, device,
                                              tokens_per_batch=batch * tokens)
                    except Exception as err:  # one length fails (e.g. past a learned table); the rest go on
                        rows += [{**row_base, "metric": m, "value": None, "n_samples": 0,
                                  "higher_is_better": METRICS[m], "status": "failed", "error": _reason(err)}
                                 for m in metrics]
            finally:
                if variant is not None:
                    model.pos_enc.set_scaling(trained_scaling)
        # Chance and trivial baselines on the same evaluation samples (identical in every cell of
        # a task and seed; results.normalize keeps one copy).
        rows += baseline_rows(task, cell.train_len, cell.eval.ratios, samples=cell.eval.samples,
                              tokens_per_batch=cell.eval.tokens_per_batch, seed=cell.seed, base=base)
        nothing = every_measurement_failed(rows, cell.encoding.key)
        if nothing:
            result.update(status="failed", error=nothing)
    except Exception as err:
        result.update(status="failed", error=_reason(err), traceback=traceback.format_exc(limit=8))
        if "fingerprint" not in result:  # e.g. the task could not be built: no data fingerprint
            result["fingerprint"] = cell_fingerprint(cell, device.type, threads, "").to_json()
            provenance["code_fingerprint"] = result["fingerprint"]["code_fingerprint"]
    timestamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    for row in rows:
        row.update(timestamp=timestamp, train_seconds=train_seconds)
    result.update(seconds=time.perf_counter() - start, train_seconds=train_seconds, timestamp=timestamp)
    return result


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
    """The rows of one length beyond the whole-length metrics (README "Results", `bucket` column):

    - `lm`: per-position nll buckets ("pos:a-b") at every ratio, and at ratios > 1 the
      `window_perplexity` (same targets, context cut to the training length) and `context_gain`
      = window_perplexity / perplexity, which tell "uses the longer context" from "ignores it"
      (`evaluate_lm_context`);
    - tasks with a `needle_depth` (passkey): every metric per depth bucket ("depth:a-b", `evaluate_depth`).

    A failure here fails only these rows (status "failed" with the reason), never the length's own.
    """
    kw = {"samples": cell.eval.samples, "tokens_per_batch": tokens_per_batch or cell.eval.tokens_per_batch,
          "seed": cell.seed, "device": device}
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


# --- the driver: the only code that writes a results directory ----------------------------------
# (lenbench.run.fingerprint hashes engine.py only above this marker: the driver never changes a result)


def compute_in_process(job: CellJob) -> CellOutcome:
    """`compute_cell` in this process as the executors run it (`lenbench.run.executors.base.compute_cell`:
    freed memory kept for reuse first)."""
    from lenbench.run.executors.base import compute_cell as run_here

    return run_here(job)


Log = Callable[[str], None]


def _stderr(message: str) -> None:
    tqdm.write(message, file=sys.stderr)


def quarantine(path: Path, why: str, log: Log) -> Path:
    """Move a damaged file aside as `<name>.corrupt` (replacing an older one) and say so in one line."""
    aside = path.with_name(path.name + ".corrupt")
    os.replace(path, aside)
    log(f"lenbench: {path} is damaged ({why}); moved it aside to {aside.name} and will recompute it")
    return aside


def read_cell(out: Path, cell: Cell, log: Log = _stderr) -> dict | None:
    """The cell's stored result, or None when it has none; a truncated or invalid file is moved
    aside (`quarantine`) and counts as none."""
    path = cell_path(out, cell)
    if not path.is_file():
        return None
    try:
        result = json.loads(path.read_text())
        if not isinstance(result, dict) or result.get("cell_id") != cell.cell_id:
            raise ValueError(f"not the result of cell {cell.cell_id}")
        if result.get("status") not in ("ok", "failed") or not isinstance(result.get("rows"), list):
            raise ValueError("no status or rows")
    except (ValueError, UnicodeDecodeError) as err:
        quarantine(path, _reason(err), log)
        return None
    return result


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
                     log: Log = _stderr) -> dict[str, bytes]:
    """The cached checkpoint files of `cell` in `out` (name → bytes) that are valid for `fingerprint`.

    A checkpoint that does not load (truncated, old format) is moved aside (`quarantine`); one made
    by other code or another environment is left out (it is retrained and overwritten).
    """
    found = {}
    for name in checkpoint_names(cell):
        path = checkpoint_path(out, name)
        if not path.is_file():
            continue
        data = path.read_bytes()
        try:
            _, meta = load_checkpoint_bytes(data, torch.device("cpu"))
        except Exception as err:
            quarantine(path, _reason(err), log)
            continue
        if fingerprint is None or checkpoint_matches(meta, fingerprint):
            found[name] = data
    return found


def store_outcome(out: Path, outcome: CellOutcome) -> dict:
    """Write an outcome's new checkpoints, then its cell file (each atomically); return the result."""
    for name, data in outcome.checkpoints.items():
        atomic_write_bytes(checkpoint_path(out, name), data)
    atomic_write_json(Path(out) / "cells" / f"{outcome.cell_id}.json", outcome.result)
    return outcome.result


def make_job(cell: Cell, out: Path, device: str | torch.device, *, threads: int | None = None,
             progress: bool = False, fingerprint: Fingerprint | None = None, log: Log = _stderr) -> CellJob:
    device = device.type if isinstance(device, torch.device) else device
    threads = threads or default_threads()
    fingerprint = fingerprint or expected_fingerprint(cell, device, threads)
    return CellJob(cell=cell, device=device, threads=threads,
                   checkpoints=read_checkpoints(Path(out), cell, fingerprint, log), progress=progress)


def prepare_output(out: Path, log: Log = _stderr) -> Path:
    """Check up front that `out` (and its cells/, checkpoints/, locks/) can be written, then remove
    temporary files a killed run left behind, unless another live run is using the directory."""
    out = Path(out)
    for directory in (out, out / "cells", out / "checkpoints", out / "locks"):
        check_writable(directory)
    if not any(holder_alive(h) for h in map(read_lock, (out / "locks").glob("*.lock"))):
        leftovers = [*(out / "cells").glob(".*.tmp"), *(out / "checkpoints").glob(".*.tmp")]
        for tmp in leftovers:
            tmp.unlink(missing_ok=True)
        if leftovers:
            log(f"lenbench: removed {len(leftovers)} temporary file(s) left by a killed run in {out}")
    return out


def run_cell(cell: Cell, out: str | Path, device: str | torch.device = "auto", *, progress: bool = True,
             threads: int | None = None, log: Log = _stderr) -> dict:
    """Train and evaluate one cell in this process, write `OUT/cells/<cell_id>.json` atomically,
    return its result. Writability of `out` is checked before anything is trained."""
    out = prepare_output(Path(out), log)
    return store_outcome(out, compute_in_process(make_job(cell, out, device, threads=threads, progress=progress, log=log)))


def cell_state(out: Path, cell: Cell, fingerprint: Fingerprint, *, keep_stale: bool = False,
               retry_failed: bool = False, log: Log = _stderr) -> tuple[dict | None, list[str]]:
    """(stored result still valid, or None; why it must be recomputed: [] when missing or valid).

    A stored result is recomputed when it is damaged (moved aside), stale (its fingerprint differs
    from `fingerprint`, unless `keep_stale`) or failed (with `retry_failed`).
    """
    result = read_cell(out, cell, log)
    if result is None:
        return None, []
    if retry_failed and result["status"] == "failed":
        return None, ["failed before (--retry-failed)"]
    reasons = stale_reasons(result.get("fingerprint"), fingerprint)
    if reasons and not keep_stale:
        return None, reasons
    return result, []


def ensure_cell(cell: Cell, out: str | Path, device: str | torch.device = "auto", *, progress: bool = True,
                threads: int | None = None, keep_stale: bool = False, log: Log = _stderr,
                poll: float = 0.5, wait_s: float = 6 * 3600) -> tuple[dict, bool]:
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
        lock.unlink(missing_ok=True)


def _reason(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".splitlines()[0]


# --- locks: one live process computes a cell ----------------------------------------------------


def lock_path(out: Path, cell: Cell) -> Path:
    return Path(out) / "locks" / f"{cell.cell_id}.lock"


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
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_cell(out: Path, cell: Cell) -> Path | dict:
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


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


# --- a whole suite ------------------------------------------------------------------------------


class SuiteRun(list):
    """The results of the cells `run_suite` computed now (a list, as before), plus what it skipped.

    Attributes:
        done: cells whose valid, current results were reused.
        stale: reason → number of stored cells recomputed for it.
        busy: (cell title, lock holder) of cells another live run is computing (skipped here).
    """

    def __init__(self) -> None:
        super().__init__()
        self.done = 0
        self.stale: dict[str, int] = {}
        self.busy: list[tuple[str, dict]] = []


def pending_cells(suite: Suite, out: str | Path, *, retry_failed: bool = False, keep_stale: bool = False,
                  device: str = "auto", threads: int | None = None, log: Log = _stderr,
                  stale: dict[str, int] | None = None) -> list[Cell]:
    """Cells without a valid, current result (or with a failed one, when `retry_failed`).

    `stale`, when given, is filled with reason → count of stored results found stale.
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
    return todo


def run_suite(
    suite: Suite, out: str | Path, *, device: str = "auto", executor: str = "serial", workers: int | None = None,
    threads: int | None = None, retry_failed: bool = False, keep_stale: bool = False, progress: bool = True,
    log: Log = _stderr, only: Collection[str] | None = None, **executor_options: Any,
) -> SuiteRun:
    """Run every unfinished or stale cell of `suite` into `out`; return the results of the cells run now.

    Before anything runs: `out` must be writable (one-line ValueError otherwise), damaged cell files
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
        executor_options: passed to the executor (e.g. Ray's `address`).
    """
    device_type = resolve_device(device).type  # a one-line error now rather than one per cell
    out = prepare_output(Path(out), log)
    threads = threads or default_threads()
    run = SuiteRun()
    todo = pending_cells(suite, out, retry_failed=retry_failed, keep_stale=keep_stale, device=device,
                         threads=threads, log=log, stale=run.stale)
    total = len(suite.cells())
    if only is not None:
        only = set(only)
        todo = [cell for cell in todo if cell.cell_id in only]
        total = len(only)
    plan = plan_execution(executor, workers, device_type, pending=len(todo), available_memory=available_bytes(
        torch.device(device_type)))
    executor, workers = plan.executor, plan.workers
    cls = get_executor(executor)
    if todo and plan.why:
        log(f"lenbench: {len(todo)} cell(s) on {executor}" + (f" × {workers}" if executor == "process" else "")
            + f", {threads} thread(s) each ({plan.why})")
    for reason, count in run.stale.items():
        log(f"lenbench: recomputing {count} stale cell(s): {reason}")
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
            if result is not None and not (retry_failed and result["status"] == "failed"):
                held.pop(cell.cell_id).unlink(missing_ok=True)  # another run finished it meanwhile
                continue
            yield make_job(cell, out, device, threads=threads, progress=progress and executor == "serial",
                           fingerprint=fingerprint, log=log)

    bar = tqdm(total=total, initial=total - len(todo), desc=f"suite {suite.name}", unit="cell",
               disable=not progress, dynamic_ncols=True)
    try:
        with cls(workers=workers, suite=suite, **executor_options) as runner:
            for outcome in runner.run(jobs()):
                run.append(store_outcome(out, outcome))
                lock = held.pop(outcome.cell_id, None)
                if lock is not None:
                    lock.unlink(missing_ok=True)
                for name, why in outcome.notes.get("rejected_checkpoints", {}).items():
                    log(f"lenbench: checkpoint {name} of {outcome.result.get('title')} was not usable ({why}); retrained")
                bar.set_postfix_str(outcome.result.get("title", outcome.cell_id))
                bar.update()
    finally:
        for lock in held.values():
            lock.unlink(missing_ok=True)
        bar.close()
    run.done = total - len(run) - len(run.busy)
    for title, holder in run.busy:
        log(f"lenbench: skipped {title}: another run (pid {holder.get('pid')} on {holder.get('host')}) is computing it")
    return run
