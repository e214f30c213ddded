"""How long a suite takes: measured seconds per cell where a run exists, else a per-step cost model.

`lenbench list suites` prints one estimate per preset, saying which kind it is:

- **measured**: the suite's results directory (``runs/<name>/cells/*.json``) holds finished cells:
  their mean wall time (``seconds``: training + evaluation, as the engine recorded it) times the
  number of cells of the suite.
- **model**: otherwise, a cost model fitted to the published quick run on the 2-core CPU machine
  this repository is developed on (72 cells, torch 2.13 CPU, one thread per cell); its start-up
  `RUN_OVERHEAD_S` refitted on measured smoke runs::

      seconds(suite) = RUN_OVERHEAD_S + Σ_cells CELL_OVERHEAD_S + STEP_OVERHEAD_S × training steps
                       + flops(cell) / CPU_FLOPS

  where ``flops`` counts the matrix multiplications of a pre-LN decoder (per token: 2 × the weights
  of the projections, MLP and output head forward; attention 4 × T × d_model per layer), × 3 for a
  training step (forward + backward), over every training step (``batch_size`` sequences of
  ``task.seq_len(train_len)`` tokens; fine-tune steps of variants at their ratio) and every
  evaluation (``samples`` sequences per ratio, once per evaluated variant). It is an order of
  magnitude for a CPU, not a promise, and says nothing of GPUs (where the model is run-time bound
  by kernel launches at these sizes).

Both are the cells; `command_seconds` adds what the commands do beyond them: the cells shared out over
the default executor's processes (`wall_seconds`, at `PARALLEL_EFFICIENCY`), the report (`REPORT_S`:
`lenbench run`) and `pytest bench`'s kernel benchmarks (`kernel_seconds`: the main command), each
refitted on the reference machine's measured runs (the constants' comments).

Before any cell runs, `check_suite_fits` refuses, in one line with the numbers, a suite with a cell
that cannot fit (`lenbench run`, `pytest bench` and `lenbench calibrate` exit 2 through the driver),
instead of letting it grow for minutes into a `MemoryError`, `std::bad_alloc` or the OOM killer:

- **training memory** (`cell_size`): parameters × `TRAIN_BYTES_PER_PARAM` (weight, gradient and
  AdamW's two moments, float32), counted from the model's geometry and the encoding built on the
  meta device (no memory: a `learned` table's size is known without allocating it), plus the
  activations kept for the backward pass of one batch at the longest training (or fine-tune) length:
  per layer and sequence T·D·4·(`ACTIVATION_WIDTHS` + 2·ff_mult) plus the (T, T) planes the
  encoding's attention holds per sequence (`PositionalEncoding.square_planes`: 2H for an additive
  bias, more for CoPE, DAPE, stick-breaking …), per batch its shared planes (the (1, H, T, T) bias and
  mask) and 3·T·V·4 of logits per sequence. Measured on the reference CPU (torch 2.13, d_model 256, 6 layers, one AdamW
  step): RoPE at 2048 tokens keeps 292 MB per sequence, 23.2 floats per token, layer and unit of
  width (the estimate: 15 + 2·4 = 23); ALiBi at 512 tokens 58 MB, no (T, T) scores per sequence
  (SDPA's fused CPU and CUDA kernels take the additive mask without materialising them). More than the memory
  available when the run starts (`lenbench.run.memory.available_bytes`: free accelerator memory, or
  `MemAvailable` within what the memory cgroup has left): refused. Training is not batched down
  like evaluation, so it must fit whole; the evaluation budget (`eval.memory_budget_gb`, half the
  memory available by default) is the evaluation's own.
- **per-sample scores**: every evaluation sample keeps a numerator and a denominator per metric
  while its length is evaluated (`SAMPLE_BYTES` each) and a compact string per row: samples ×
  metrics × (`SAMPLE_BYTES` + `SAMPLE_TEXT_BYTES` × lengths × variants). Not batchable, so more than
  the memory available: refused (``samples: 1000000000``).
- **time**: the cost model above (the reference CPU; attention's T² included), over
  `MAX_CELL_HOURS` per cell (env ``LENBENCH_MAX_CELL_HOURS``; 0 lifts it): refused, naming the part
  that dominates (``ratios: [1, 1000000]`` with nope is years). The longest cell of the presets,
  ``paper``'s lm at 512 tokens, models at about 262 h; the bound is 720 h (30 days), so it is a sanity
  bound, not a forecast: on a GPU cells run many times faster than the model says.

An evaluation length where not even one sequence fits the budget is not refused here: the run fails
that length's rows in one line (`MemoryBudgetExceeded`) and goes on, as it always did; its time
still counts above.
"""

from __future__ import annotations

import functools
import json
import math
import os
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
CELL_OVERHEAD_S = 0.5  # every cell's model construction and evaluation set-up
# The whole commands, refitted (issue #41) on the same 2-core machine's measured runs: the quick main
# command (docs/measurements/main-command.json: 609 s wall, its cells 490 s of it on two processes) and
# the smoke suite (`lenbench run` 28-30 s wall with 3 s of cells by the model above, `pytest bench` 90-106 s),
# both before `lenbench run` wrote a report.
# A run's start-up: imports, the fingerprints' import closure, the worker processes' own imports (smoke).
RUN_OVERHEAD_S = 27.0
# Two worker processes on the two cores do 1.38x the work of one, not 2x (quick: 639 s of cells by the
# model above in 490 - 27 s of wall): shared caches and memory bandwidth, the driver's own work.
PARALLEL_EFFICIENCY = 0.69
# The report (tables, figures, page) that `lenbench run` and `pytest bench` write at the end: the smoke
# board's took 9.3 s of CPU (user + sys; a loaded machine's wall is no measure); a fixed cost here.
REPORT_S = 9.0
# `pytest bench`'s kernel phase beyond the cells, fitted on smoke (2 kernel cases, about 60 s beyond its
# cells and report) and quick (16 cases, 110 s): collection, the copy floor and matmul rate, compiles,
# training steps and MFU, then per (encoding, length, dtype) of the suite's `kernels:` its implementations.
KERNELS_BASE_S = 53.0
KERNELS_PER_CASE_S = 3.6


def _model_flops_per_token(cell: Cell, vocab: int, tokens: int) -> float:
    """Forward FLOPs per token at sequence length `tokens` (matmuls only)."""
    m = cell.model
    d = m.d_model
    weights = m.n_layers * (4 * d * d + 2 * m.ff_mult * d * d) + d * vocab  # qkvo, MLP, output head
    return 2.0 * weights + 4.0 * m.n_layers * tokens * d  # + QK^T and AV per layer


def _task(cell: Cell):
    """The cell's task, built without its data where it can be (seq_len / vocab only), else None."""
    from lenbench.tasks import TASKS

    task_cls = TASKS.get(cell.task.name)
    task = task_cls.__new__(task_cls)  # seq_len / vocab without loading data (the lm corpus)
    try:
        task.__init__(**cell.task.params)
    except Exception:  # noqa: BLE001 - a task that cannot be built here still gets a rough estimate
        pass
    return task


def _seq(task, n: int) -> int:
    try:
        return int(task.seq_len(n))
    except Exception:  # noqa: BLE001
        return n


def _vocab(task) -> int:
    try:
        return int(task.vocab_size)
    except Exception:  # noqa: BLE001
        return 256


def _evaluated_variants(cell: Cell) -> tuple:
    from lenbench.encodings import ENCODINGS

    return cell.variants if ENCODINGS.get(cell.encoding.name).variant_descriptions() else ()


def cell_flops_parts(cell: Cell) -> list[tuple[str, float]]:
    """(what, FLOPs) of each part of a cell: training (forward + backward), each fine-tune, and
    each evaluation length (forward, once per evaluated variant)."""
    task = _task(cell)
    vocab = _vocab(task)
    t = _seq(task, cell.train_len)
    b = cell.train.batch_size
    parts = [(f"training {cell.train.steps} steps of {b} x {t} tokens",
              3.0 * cell.train.steps * b * t * _model_flops_per_token(cell, vocab, t))]
    variants = _evaluated_variants(cell)
    for v in variants:
        if v.finetune_steps:
            tf = _seq(task, int(cell.train_len * v.finetune_ratio))
            parts.append((f"fine-tuning {v.key} at {tf} tokens",
                          3.0 * v.finetune_steps * b * tf * _model_flops_per_token(cell, vocab, tf)))
    for ratio in cell.eval.ratios:
        te = _seq(task, int(round(cell.train_len * ratio)))
        parts.append((f"evaluating {cell.eval.samples} samples of {te} tokens ({ratio:g}x)",
                      (1 + len(variants)) * cell.eval.samples * te * _model_flops_per_token(cell, vocab, te)))
    return parts


def cell_flops(cell: Cell) -> float:
    """Training (forward + backward) and evaluation (forward) FLOPs of one cell."""
    return sum(flops for _, flops in cell_flops_parts(cell))


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
    the cells shared out at `PARALLEL_EFFICIENCY`."""
    workers = max(1, min(workers, cells))
    if workers == 1:
        return serial
    return min(serial, RUN_OVERHEAD_S + max(0.0, serial - RUN_OVERHEAD_S) / (workers * PARALLEL_EFFICIENCY))


def kernel_seconds(suite: Suite) -> float:
    """`pytest bench`'s kernel benchmarks of `suite` (its `kernels:` section) on the reference CPU:
    `KERNELS_BASE_S` plus `KERNELS_PER_CASE_S` per (encoding, length, dtype); 0 when disabled."""
    k = suite.kernels
    if not k.enabled:
        return 0.0
    if k.encodings:
        encodings = len(k.encodings)
    else:
        from lenbench.encodings import ENCODINGS

        encodings = len(ENCODINGS.names())
    return KERNELS_BASE_S + KERNELS_PER_CASE_S * encodings * len(k.lengths) * len(k.dtypes)


@dataclass(frozen=True)
class Commands:
    """What `lenbench list suites` prints of a suite, in seconds on the reference CPU.

    Attributes:
        cells_serial: the cells one after another, with the run's start-up (`estimate_suite`).
        cells_wall: the cells on `workers` processes (`wall_seconds`), with the start-up.
        run: `lenbench run`: the cells' wall and the report (`REPORT_S`).
        main: `pytest bench`: `run` and the kernel benchmarks (`kernel_seconds`).
    """

    cells_serial: float
    cells_wall: float
    run: float
    main: float


def command_seconds(suite: Suite, est: Estimate, workers: int) -> Commands:
    """The estimate of each command of `suite` from its cells' estimate `est` on `workers` processes."""
    wall = wall_seconds(est.seconds, len(suite.cells()), workers)
    return Commands(est.seconds, wall, wall + REPORT_S, wall + REPORT_S + kernel_seconds(suite))


def format_seconds(seconds: float) -> str:
    """`42 s`, `7 min`, `3.2 h`, `4.1 d`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


# --- will a cell fit: memory and time, before anything is allocated -------------------------------

#: Bytes per parameter while training: the float32 weight, its gradient and AdamW's two moments.
TRAIN_BYTES_PER_PARAM = 16
#: Activations a training step keeps per token and layer, in units of d_model floats, beside the
#: MLP's 2·ff_mult (module docstring: fitted to a measured RoPE step).
ACTIVATION_WIDTHS = 15
#: Bytes per evaluation sample and metric while a length is evaluated: a Python float numerator and
#: denominator with their list slots (`lenbench.evaluate.evaluate_length`).
SAMPLE_BYTES = 64
#: Bytes per evaluation sample and metric of each row's compact `sample_scores` string.
SAMPLE_TEXT_BYTES = 16
#: Longest a cell may take on the cost model's reference CPU (module docstring), unless env
#: `MAX_CELL_HOURS_ENV` says otherwise (0: no limit).
MAX_CELL_HOURS = 720.0
MAX_CELL_HOURS_ENV = "LENBENCH_MAX_CELL_HOURS"
GIB = 2**30


@dataclass(frozen=True)
class CellSize:
    """What one cell needs (module docstring): bytes of training, of its per-sample scores, and the
    cost model's seconds, with the parts that decide them (for the error line)."""

    params: int
    train_bytes: int
    train_what: str
    sample_bytes: int
    seconds: float
    slowest: str


def _layer_params(d: int, ff: int) -> int:
    """Parameters of one block (`lenbench.model.Block`): qkv and out projections, the MLP, two LayerNorms."""
    return 4 * d * d + 2 * ff * d * d + ff * d + d + 4 * d


@functools.lru_cache(maxsize=256)
def _encoding_facts(name: str, params_json: str, d: int, heads: int, layers: int, max_len: int,
                    train_len: int) -> tuple[int, float, float]:
    """(parameters and buffers, shared and per-sequence (T, T) planes: `square_planes`) of an encoding
    built on the meta device: its tables are sized without memory. When it cannot be built here, a
    conservative guess: no parameters, an additive bias's planes."""
    import torch

    from lenbench.encodings import EncodingDims, build_encoding
    from lenbench.encodings.base import additive_bias_planes

    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            enc = build_encoding(name, EncodingDims(d_model=d, n_heads=heads, max_len=max_len, causal=True,
                                                    train_len=train_len, n_layers=layers), **json.loads(params_json))
    except Exception:  # noqa: BLE001 - the cell reports its own error when it builds the encoding
        return 0, *additive_bias_planes(heads)
    shared, per_sequence = enc.square_planes()
    return sum(t.numel() for t in (*enc.parameters(), *enc.buffers())), shared, per_sequence


def cell_size(cell: Cell, budget: int | None = None) -> CellSize:
    """The memory and time `cell` needs (module docstring). The model's own parameters are counted
    first: past `budget` (bytes) the encoding is not even built on the meta device (its per-layer
    modules for ten million layers would take minutes to describe)."""
    from lenbench.metrics import METRICS

    task = _task(cell)
    m = cell.model
    vocab = _vocab(task)
    d, heads, ff, layers = m.d_model, m.n_heads, m.ff_mult, m.n_layers
    lengths = [cell.train_len, *(int(cell.train_len * v.finetune_ratio) for v in _evaluated_variants(cell)
                                  if v.finetune_steps)]
    train_tokens = max(_seq(task, n) for n in lengths)
    eval_tokens = max(_seq(task, max(1, round(r * cell.train_len))) for r in cell.eval.ratios)
    params = layers * _layer_params(d, ff) + 2 * vocab * d + 2 * d
    extra, shared, per_sequence = 0, 2.0 * heads + 3, 2.0 * heads
    if budget is None or params * TRAIN_BYTES_PER_PARAM <= budget:
        extra, shared, per_sequence = _encoding_facts(cell.encoding.name, json.dumps(cell.encoding.params, sort_keys=True),
                                                 d, heads, layers, max(train_tokens, eval_tokens),
                                                 _seq(task, cell.train_len))
    params += extra
    T, B, F32 = train_tokens, cell.train.batch_size, 4
    per_layer = T * d * F32 * (ACTIVATION_WIDTHS + 2 * ff) + int(per_sequence * T * T * F32)
    activations = B * (layers * per_layer + 3 * T * vocab * F32) + int(shared * T * T * F32)
    rows = len(cell.eval.ratios) * (1 + len(_evaluated_variants(cell)))
    samples = cell.eval.samples * len(METRICS) * (SAMPLE_BYTES + SAMPLE_TEXT_BYTES * rows)
    parts = cell_flops_parts(cell)
    slowest = max(parts, key=lambda p: p[1])[0]
    return CellSize(params=params, train_bytes=params * TRAIN_BYTES_PER_PARAM + activations,
                    train_what=f"{B} sequences of {T} tokens", sample_bytes=samples,
                    seconds=cell_seconds_model(cell), slowest=slowest)


def max_cell_seconds() -> float | None:
    """The time limit per cell in seconds (`MAX_CELL_HOURS`, or env `MAX_CELL_HOURS_ENV`); None: no limit."""
    text = os.environ.get(MAX_CELL_HOURS_ENV, "").strip()
    hours = MAX_CELL_HOURS
    if text:
        try:
            hours = float(text)
        except ValueError:
            hours = -1.0
        if not 0 <= hours < math.inf:
            raise ValueError(f"{MAX_CELL_HOURS_ENV}={text!r} is not a number of hours >= 0; set e.g. "
                             f"{MAX_CELL_HOURS_ENV}=2000, or 0 for no limit, or unset it")
    return hours * 3600 if hours > 0 else None


def check_suite_fits(suite: Suite, device: str = "cpu", available: int | None = -1) -> None:
    """Refuse, in one line with the numbers, a suite with a cell that cannot fit the memory available
    or the time limit (module docstring); nothing is allocated. Cells that differ only in their seed
    are sized once.

    Args:
        suite: the suite to run.
        device: the device type its cells run on.
        available: bytes available (default -1: `available_bytes` of `device` now; None: unknown,
            no memory check).

    Raises:
        ValueError: e.g. "suite 'x', cell copy-nope-L16-s0: training needs ~6.36e+04 GiB (4.97e+11
            parameters x 16 B with gradients and AdamW state, and the activations of 32 sequences of
            32 tokens), more than the 22.4 GiB of memory available; ...".
    """
    import torch

    from lenbench.run.memory import available_bytes

    budget = available_bytes(torch.device(device)) if available == -1 else available
    limit = max_cell_seconds()
    seen: set[str] = set()
    for cell in suite.cells():
        key = json.dumps({k: v for k, v in cell.config().items() if k != "seed"}, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        size = cell_size(cell, budget)
        where = f"suite {suite.name!r}, cell {cell.title}"
        budget_words = (f"more than the {budget / GIB:.3g} GiB of memory available (free {device} memory, within the "
                        "memory cgroup's limit)") if budget is not None else ""
        if budget is not None and size.train_bytes > budget:
            raise ValueError(f"{where}: training needs ~{size.train_bytes / GIB:.3g} GiB ({size.params:.3g} parameters "
                             f"x {TRAIN_BYTES_PER_PARAM} B with gradients and AdamW state, and the activations of "
                             f"{size.train_what}), {budget_words}; shrink model (n_layers, d_model), the task's "
                             "vocabulary, train.batch_size or train_len")
        if budget is not None and size.sample_bytes > budget:
            raise ValueError(f"{where}: the per-sample scores of {cell.eval.samples} evaluation samples need "
                             f"~{size.sample_bytes / GIB:.3g} GiB, {budget_words}; lower eval.samples")
        if limit is not None and size.seconds > limit:
            raise ValueError(f"{where}: needs ~{format_seconds(size.seconds)} of compute on the reference CPU "
                             f"(lenbench/run/estimate.py), most of it {size.slowest}, over the limit of "
                             f"{limit / 3600:g} h per cell; lower eval.ratios, eval.samples or train.steps "
                             f"(or set {MAX_CELL_HOURS_ENV}, 0 for no limit)")
