"""How long a suite takes: measured seconds per cell where a run exists, else a per-step cost model.

`lenbench list suites` prints one estimate per preset, saying which kind it is:

- **measured**: the suite's results directory (``runs/<name>/cells/*.json``) holds finished cells:
  their mean wall time (``seconds``: training + evaluation, as the engine recorded it) times the
  number of cells of the suite.
- **model**: otherwise, a cost model fitted to the published quick run on the 2-core CPU machine
  this repository is developed on (72 cells, torch 2.13 CPU, one thread per cell)::

      seconds(suite) = RUN_OVERHEAD_S + Σ_cells CELL_OVERHEAD_S + STEP_OVERHEAD_S × training steps
                       + flops(cell) / CPU_FLOPS

  where ``flops`` counts the matrix multiplications of a pre-LN decoder (per token: 2 × the weights
  of the projections, MLP and output head forward; attention 4 × T × d_model per layer), × 3 for a
  training step (forward + backward), over every training step (``batch_size`` sequences of
  ``task.seq_len(train_len)`` tokens; fine-tune steps of variants at their ratio) and every
  evaluation (``samples`` sequences per ratio, once per evaluated variant). It is an order of
  magnitude for a CPU, not a promise, and says nothing of GPUs (where the model is run-time bound
  by kernel launches at these sizes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from lenbench.config import Cell, Suite

# Fitted by least squares on results/cells (the published quick run, 72 cells: `seconds` against
# training steps and FLOPs) on a 2-core x86 CPU, torch 2.13.0 CPU, one intra-op thread per cell (the
# default); the fit's cells took 9.3-68.2 s each, the model gives 10.8-60.5 s (rms error 2.8 s).
# Every quick cell trains 1000-1200 steps, so a per-step overhead cannot be told apart from the
# FLOPs term on these data: the fit puts it at zero and the achieved rate absorbs it.
STEP_OVERHEAD_S = 0.0  # seconds per training step beyond its FLOPs (optimizer, Python, small kernels)
CPU_FLOPS = 6.64e10  # achieved FLOP/s of the matrix multiplications, one thread
# From the smoke suite on the same machine (20 s for 6 cells of 40 steps): the first cell of a
# process pays imports and warm-up, every cell model construction and evaluation set-up.
RUN_OVERHEAD_S = 10.0
CELL_OVERHEAD_S = 0.5


def _model_flops_per_token(cell: Cell, vocab: int, tokens: int) -> float:
    """Forward FLOPs per token at sequence length `tokens` (matmuls only)."""
    m = cell.model
    d = m.d_model
    weights = m.n_layers * (4 * d * d + 2 * m.ff_mult * d * d) + d * vocab  # qkvo, MLP, output head
    return 2.0 * weights + 4.0 * m.n_layers * tokens * d  # + QK^T and AV per layer


def cell_flops(cell: Cell) -> float:
    """Training (forward + backward) and evaluation (forward) FLOPs of one cell."""
    from lenbench.encodings import ENCODINGS
    from lenbench.tasks import TASKS

    task_cls = TASKS.get(cell.task.name)
    task = task_cls.__new__(task_cls)  # seq_len / vocab without loading data (the lm corpus)
    try:
        task.__init__(**cell.task.params)
    except Exception:  # noqa: BLE001 - a task that cannot be built here still gets a rough estimate
        pass

    def seq(n: int) -> int:
        try:
            return int(task.seq_len(n))
        except Exception:  # noqa: BLE001
            return n

    try:
        vocab = int(task.vocab_size)
    except Exception:  # noqa: BLE001
        vocab = 256
    t = seq(cell.train_len)
    b = cell.train.batch_size
    total = 3.0 * cell.train.steps * b * t * _model_flops_per_token(cell, vocab, t)
    scaled = bool(ENCODINGS.get(cell.encoding.name).variant_descriptions())
    variants = cell.variants if scaled else ()
    for v in variants:
        if v.finetune_steps:
            tf = seq(int(cell.train_len * v.finetune_ratio))
            total += 3.0 * v.finetune_steps * b * tf * _model_flops_per_token(cell, vocab, tf)
    for ratio in cell.eval.ratios:
        te = seq(int(round(cell.train_len * ratio)))
        total += (1 + len(variants)) * cell.eval.samples * te * _model_flops_per_token(cell, vocab, te)
    return total


def cell_seconds_model(cell: Cell) -> float:
    """The cost model's seconds for one cell on the reference CPU (module docstring)."""
    steps = cell.train.steps + sum(v.finetune_steps for v in cell.variants)
    return CELL_OVERHEAD_S + STEP_OVERHEAD_S * steps + cell_flops(cell) / CPU_FLOPS


def longest_first(cells: list[Cell]) -> list[Cell]:
    """`cells` by the cost model's seconds, longest first (ties keep their order): the order in which a
    pool of workers finishes soonest (longest-processing-time-first), since the last cells to start are
    then the short ones and no worker is left with a long cell while the others idle. A cell the model
    cannot price (e.g. an unknown plugin task) keeps its place among the cells priced 0."""

    def seconds(cell: Cell) -> float:
        try:
            return cell_seconds_model(cell)
        except Exception:  # noqa: BLE001 - ordering is an optimisation, never a reason to fail a run
            return 0.0

    return sorted(cells, key=seconds, reverse=True)


@dataclass(frozen=True)
class Estimate:
    seconds: float
    kind: str  # "measured" or "model"
    basis: str  # one line: what the number rests on


def measured_seconds(results_dir: Path) -> list[float]:
    """Wall seconds of the finished cells stored in a results directory."""
    from lenbench.run.store import readable_cell_results

    return [float(c.seconds) for c in readable_cell_results(results_dir)
            if not c.failed and isinstance(c.seconds, (int, float)) and math.isfinite(c.seconds)]


def estimate_suite(suite: Suite, results_dir: Path | None = None) -> Estimate:
    """Seconds to run every cell of `suite` serially: measured when `results_dir` holds finished
    cells of it, else the cost model."""
    cells = suite.cells()
    done = measured_seconds(results_dir) if results_dir is not None else []
    if done:
        mean = sum(done) / len(done)
        return Estimate(mean * len(cells), "measured",
                        f"mean {mean:.1f} s over {len(done)} finished cell(s) in {results_dir}")
    return Estimate(RUN_OVERHEAD_S + sum(cell_seconds_model(c) for c in cells), "model",
                    "per-step cost model fitted on a 2-core CPU (lenbench/run/estimate.py)")


def wall_seconds(serial: float, cells: int, workers: int) -> float:
    """Wall time of `cells` cells that take `serial` seconds one after another, on `workers`
    processes (the default executor's; `executors.plan_execution`): the run's fixed start-up once,
    the cells shared out."""
    workers = max(1, min(workers, cells))
    return min(serial, RUN_OVERHEAD_S + max(0.0, serial - RUN_OVERHEAD_S) / workers)


def format_seconds(seconds: float) -> str:
    """`42 s`, `7 min`, `3.2 h`, `4.1 d`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
