"""Evaluation of a trained model at one length: the metrics of docs/DESIGN.md's results schema."""

from __future__ import annotations

import math
import zlib
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from lenbench import metrics
from lenbench.labels import depth_bucket, parse_bucket, position_bucket  # noqa: F401 (re-exported)
from lenbench.metrics import (  # noqa: F401 (the registry's facts, re-exported for the evaluation's callers)
    METRICS,
    PRIMARY_METRIC,
    decode_samples,
    encode_samples,
    metric_transform,
)
from lenbench.tasks.base import Task

if TYPE_CHECKING:  # annotations only: the evaluation runs any model it is given
    from lenbench.model import Transformer

# Every metric's facts (direction, the sums it is built from, the task kinds it is recorded for, its
# value from those sums, the stored form of per-sample scores) live in `lenbench.metrics`; this
# module computes the sums with the model.


def task_metrics(task: Task) -> list[str]:
    """Metrics recorded for a task, primary first (`lenbench.metrics.task_metrics` of its kind)."""
    return metrics.task_metrics(task.kind)


def eval_generator(task: Task, length: int, seed: int) -> torch.Generator:
    """The generator of evaluation data: a function of (task, length, seed) only, so every
    encoding and variant is scored on exactly the same examples.

    For `lm` it leaves out the length: the task then scores the same held-out tokens at every
    length, so a change of perplexity with length is the context's effect, not other text's.
    """
    scope = f"eval/{task.name}/{seed}" if task.kind == "lm" else f"eval/{task.name}/{length}/{seed}"
    key = zlib.crc32(scope.encode())
    return torch.Generator().manual_seed(key)


def eval_batches(task: Task, length: int, *, samples: int, tokens_per_batch: int, seed: int):
    """The evaluation batches of (task, length, seed), in generator order: the model and every
    baseline (lenbench.baselines) are scored on exactly these examples."""
    gen = eval_generator(task, length, seed)
    per_batch = max(1, tokens_per_batch // max(1, task.seq_len(length)))
    done = 0
    while done < samples:
        n = min(per_batch, samples - done)
        yield task.sample(n, length, gen, split="eval")
        done += n


def sample_sums(pred_hit: torch.Tensor, nll: torch.Tensor | None, mask: torch.Tensor) -> dict[str, tuple[list, list]]:
    """Per-sample (numerators, denominators) of each metric from one batch.

    Args:
        pred_hit: (B, T) bool, the prediction equals the target.
        nll: (B, T) float negative log-likelihood per position, or None (no nll metrics).
        mask: (B, T) bool, scored positions.
    """
    scored = mask.sum(1).double()  # (B,)
    correct = (pred_hit & mask).sum(1).double()  # (B,)
    exact = (pred_hit | ~mask).all(dim=1).double()  # (B,): unscored positions count as hits
    ones = torch.ones_like(exact)  # (B,)
    sums = {"tokens": (correct, scored), "examples": (exact, ones)}  # lenbench.metrics.SUMS
    if nll is not None:
        nll_sum = torch.where(mask, nll.double(), 0.0).sum(1)  # (B,)
        sums["nll"] = (nll_sum, scored)
    return {m.name: (sums[m.sums][0].tolist(), sums[m.sums][1].tolist()) for m in metrics.registered() if m.sums in sums}


@torch.no_grad()
def evaluate_length(
    model: Transformer, task: Task, length: int, *, samples: int, tokens_per_batch: int, seed: int,
    device: torch.device,
) -> tuple[dict[str, float], int, dict[str, str]]:
    """Score `model` on `samples` fresh examples of `length` (task units).

    Returns:
        ({metric: value}, n_samples, {metric: sample_scores}) for the metrics of
        `task_metrics(task)`; sample_scores is the compact per-sample string of `encode_samples`
        (one entry per evaluation sample, generator order), from which the value is
        `metric_transform(metric, sum(num) / sum(den))`.
    """
    model.eval()
    num: dict[str, list] = {m: [] for m in METRICS}
    den: dict[str, list] = {m: [] for m in METRICS}
    for batch in eval_batches(task, length, samples=samples, tokens_per_batch=tokens_per_batch, seed=seed):
        batch = batch.to(device)
        logits = model(batch.inputs).float()  # (B, T, V)
        nll = F.cross_entropy(logits.transpose(1, 2), batch.targets, reduction="none")  # (B, T)
        for metric, (n, d) in sample_sums(logits.argmax(-1) == batch.targets, nll, batch.loss_mask).items():
            num[metric] += n
            den[metric] += d
    values = {m: metric_transform(m, math.fsum(num[m]) / math.fsum(den[m])) for m in task_metrics(task)}
    return values, len(num["exact_match"]), {m: encode_samples(num[m], den[m]) for m in task_metrics(task)}


# --- bucketed measurements and the lm context window (issue 11) ---------------------------------
#
# A tidy row's `bucket` column is "" for a whole-length measurement, else "<kind>:<lo>-<hi>":
#   "pos:0-31"          lm: targets at positions 0 … 31 (inclusive, 0-based within the evaluation
#                       window), metric nll: the per-position loss curve (Press et al. 2022, fig. 3).
#   "depth:0.20-0.40"   passkey: examples whose needle depth (filler tokens before the needle /
#                       all filler tokens) lies in [0.20, 0.40) (the last bucket includes 1.00).
# Bucketed rows are not leaderboard rows; `parse_bucket` reads a label back.

#: Position buckets per lm evaluation length (fewer when the window is shorter).
POSITION_BUCKETS = 32
#: Needle-depth buckets per passkey evaluation length.
DEPTH_BUCKETS = 5


def _eval_batches(task: Task, length: int, samples: int, tokens_per_batch: int, seed: int, device: torch.device):
    """The batches `evaluate_length` scores at `length` (`eval_batches`), on `device`: the same
    examples (and for `lm` the same target bytes at every length)."""
    for batch in eval_batches(task, length, samples=samples, tokens_per_batch=tokens_per_batch, seed=seed):
        yield batch.to(device)


def window_logits(model: Transformer, inputs: torch.Tensor, columns: torch.Tensor, window: int,
                  tokens_per_batch: int) -> torch.Tensor:
    """Logits at `columns` of `inputs` with each prediction's context cut to the last `window` tokens.

    A target at column t is predicted from inputs[t − window + 1 … t] run as a fresh sequence
    (positions 0 … window − 1), the sliding-window evaluation of Press et al. 2022 (§4, stride 1);
    columns t < window read the prefix inputs[:window], whose context is already within the window.

    Args:
        model: the model.
        inputs: (B, T) token ids.
        columns: (C,) long, the target columns to predict.
        window: context length (the training length in tokens).
        tokens_per_batch: bound of tokens per forward pass.

    Returns:
        (B, C, V) float logits.
    """
    B, T = inputs.shape
    out = torch.empty(B, len(columns), model.cfg.vocab_size, device=inputs.device)  # (B, C, V)
    early = columns < window  # (C,)
    if early.any():
        prefix = model(inputs[:, : min(window, T)]).float()  # (B, W, V)
        out[:, early] = prefix[:, columns[early]]  # (B, Ce, V)
    late = (~early).nonzero().flatten()  # (Cl,)
    if len(late):
        starts = columns[late] - window + 1  # (Cl,)
        ctx = inputs.unfold(1, window, 1)[:, starts]  # (B, Cl, W)
        flat = ctx.reshape(-1, window)  # (B·Cl, W)
        rows = max(1, tokens_per_batch // window)
        last = torch.cat([model(flat[i : i + rows])[:, -1].float() for i in range(0, len(flat), rows)])  # (B·Cl, V)
        out[:, late] = last.view(B, len(late), -1)  # (B, Cl, V)
    return out


# Window perplexity scores every CONTEXT_COLUMN_STRIDE-th target column past the window: each
# such target costs a forward pass of a whole window (stride-1 sliding windows), which made it
# the largest part of evaluating a RoPE cell with its variants; 1 in 4 keeps ~16k targets per
# length at the quick suite's 64 samples of 1024 bytes.
CONTEXT_COLUMN_STRIDE = 4


@torch.no_grad()
def evaluate_lm_context(
    model: Transformer, task: Task, length: int, window: int, *, samples: int, tokens_per_batch: int, seed: int,
    device: torch.device, position_buckets: int = POSITION_BUCKETS, column_stride: int = CONTEXT_COLUMN_STRIDE,
) -> dict:
    """Does the longer context help? Score the examples of `evaluate_length(length)` twice: with the
    full context and with each prediction's context cut to `window` (the training length in
    tokens), and record the loss by position within the full window.

    The same target bytes are scored both ways: the targets of the loss mask in the first
    `window` columns and every `column_stride`-th column after them (the same columns in every
    example), so `context_gain = window_perplexity / perplexity` (both over those targets) is the
    context's effect alone: > 1 when the tokens beyond the training length help, 1 when the model
    ignores them (a local window), < 1 when they hurt. The per-position loss covers every target of the window (not only the
    scored ones) in `position_buckets` equal-width buckets: the loss-by-position curve of Press et
    al. 2022 (ALiBi), Sun et al. 2022 (xPos) and Ding et al. 2024 (LongRoPE).

    Returns:
        {"perplexity", "window_perplexity", "context_gain", "nll", "window_nll", "n_samples",
        "positions": [(label, mean nll, n targets), …] in position order}.
    """
    model.eval()
    nll_full = nll_win = 0.0
    scored = done = 0
    width = position_buckets
    pos_sum = pos_count = None
    for batch in _eval_batches(task, length, samples, tokens_per_batch, seed, device):
        logits = model(batch.inputs).float()  # (B, T, V)
        B, T, V = logits.shape
        per_pos = F.cross_entropy(logits.reshape(-1, V), batch.targets.reshape(-1), reduction="none").view(B, T)  # (B, T)
        if pos_sum is None:
            width = max(1, min(position_buckets, T))
            pos_sum, pos_count = torch.zeros(width, dtype=torch.float64), torch.zeros(width, dtype=torch.float64)
        index = torch.arange(T) * width // T  # (T,): bucket of each position
        pos_sum.index_add_(0, index, per_pos.sum(0).double().cpu())
        pos_count.index_add_(0, index, torch.full((T,), float(B), dtype=torch.float64))
        columns = batch.loss_mask.any(0).nonzero().flatten()  # (C,)
        columns = torch.cat((columns[columns < window], columns[columns >= window][::column_stride]))  # (C',)
        win = window_logits(model, batch.inputs, columns, window, tokens_per_batch)  # (B, C', V)
        m = batch.loss_mask[:, columns]  # (B, C')
        target = batch.targets[:, columns]  # (B, C')
        nll_full += per_pos[:, columns][m].sum().item()
        nll_win += F.cross_entropy(win[m], target[m], reduction="sum").item()
        scored += int(m.sum())
        done += B
    edges = [(i * T + width - 1) // width for i in range(width + 1)] if pos_sum is not None else []  # bucket i: ⌈iT/W⌉ …
    nll, nll_w = nll_full / scored, nll_win / scored
    ppl, ppl_w = math.exp(min(nll, 700.0)), math.exp(min(nll_w, 700.0))
    positions = [(position_bucket(edges[i], edges[i + 1] - 1), float(pos_sum[i] / pos_count[i]), int(pos_count[i]))
                 for i in range(width)] if pos_sum is not None else []
    return {"perplexity": ppl, "window_perplexity": ppl_w, "context_gain": math.exp(min(nll_w - nll, 700.0)),
            "nll": nll, "window_nll": nll_w, "n_samples": done, "positions": positions}


@torch.no_grad()
def evaluate_depth(
    model: Transformer, task: Task, length: int, *, samples: int, tokens_per_batch: int, seed: int,
    device: torch.device, buckets: int = DEPTH_BUCKETS,
) -> dict:
    """Accuracy by needle depth: the examples of `evaluate_length(length)` grouped by the depth of
    their needle (`task.needle_depth`, a fraction in [0, 1]) into `buckets` equal-width buckets —
    the needle-in-a-haystack table (depth × length) of Mohtashami & Jaggi 2023 / Kamradt 2023.

    The buckets partition the examples, so the count-weighted mean of a bucketed metric is the
    whole-length metric.

    Returns:
        {"overall": {metric: value}, "n_samples", "buckets": [(label, {metric: value}, n), …]}
        with the metrics of `task_metrics(task)`; empty buckets are left out.
    """
    model.eval()
    sums = torch.zeros(buckets, 3, dtype=torch.float64)  # per bucket: tokens correct, tokens scored, exact
    counts = torch.zeros(buckets, dtype=torch.float64)
    for batch in _eval_batches(task, length, samples, tokens_per_batch, seed, device):
        logits = model(batch.inputs).float()  # (B, T, V)
        mask = batch.loss_mask  # (B, T)
        hit = (logits.argmax(-1) == batch.targets) | ~mask  # (B, T)
        depth = task.needle_depth(batch.inputs).cpu()  # (B,) in [0, 1]
        which = (depth * buckets).long().clamp(max=buckets - 1)  # (B,)
        per_example = torch.stack([(hit & mask).sum(1), mask.sum(1), hit.all(1)], dim=1).double().cpu()  # (B, 3)
        sums.index_add_(0, which, per_example)
        counts.index_add_(0, which, torch.ones(len(which), dtype=torch.float64))

    def values(row: torch.Tensor, n: float) -> dict[str, float]:
        ratio = {"tokens": float(row[0] / row[1]), "examples": float(row[2] / n)}  # by lenbench.metrics.SUMS
        return {m: metrics.get_metric(m).value(ratio[metrics.get_metric(m).sums]) for m in task_metrics(task)}

    table = [(depth_bucket(i / buckets, (i + 1) / buckets), values(sums[i], float(counts[i])), int(counts[i]))
             for i in range(buckets) if counts[i] > 0]
    return {"overall": values(sums.sum(0), float(counts.sum())), "n_samples": int(counts.sum()), "buckets": table}
