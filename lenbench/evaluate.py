"""Evaluation of a trained model at one length: the metrics of docs/DESIGN.md's results schema.

A task's own measurements (lm's context, passkey's depth) are its `Task.extra_measurements`,
in its task modules; the evaluation examples are `lenbench.tasks.eval_data`'s."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from lenbench import metrics
from lenbench.metrics import (  # noqa: F401 (the registry's facts, re-exported for the evaluation's callers)
    METRICS,
    PRIMARY_METRIC,
    decode_samples,
    encode_samples,
    metric_transform,
)
from lenbench.results.labels import depth_bucket, parse_bucket, position_bucket  # noqa: F401 (re-exported)
from lenbench.tasks.base import Batch, Task
from lenbench.tasks.decoding import Decoded, HeldDraws, NonFiniteLogits, finite_logits, generate  # noqa: F401 (re-exported)
from lenbench.tasks.eval_data import eval_batches, eval_generator  # noqa: F401 (re-exported)

if TYPE_CHECKING:  # annotations only: the evaluation runs any model it is given
    from lenbench.model import Transformer

# Every metric's facts (direction, the sums it is built from, the task kinds it is recorded for, its
# value from those sums, the stored form of per-sample scores) live in `lenbench.metrics`; this
# module computes the sums with the model.


def task_metrics(task: Task) -> list[str]:
    """Metrics recorded for a task, primary first (`lenbench.metrics.task_metrics` of its kind)."""
    return metrics.task_metrics(task.kind)


def sample_sums(pred_hit: torch.Tensor, nll: torch.Tensor | None, mask: torch.Tensor,
                teacher_forced_hit: torch.Tensor | None = None) -> dict[str, tuple[list, list]]:
    """Per-sample (numerators, denominators) of each metric from one batch.

    Args:
        pred_hit: (B, T) bool, the generated prediction equals the target.
        nll: (B, T) float negative log-likelihood per position, or None (no nll metrics).
        mask: (B, T) bool, scored positions.
        teacher_forced_hit: (B, T) bool, the teacher-forced prediction equals the target; None:
            `pred_hit` (a batch that feeds no answer back, or a predictor that reads no answer).
    """
    teacher_forced_hit = pred_hit if teacher_forced_hit is None else teacher_forced_hit
    scored = mask.sum(1).double()  # (B,)
    correct = (pred_hit & mask).sum(1).double()  # (B,)
    forced = (teacher_forced_hit & mask).sum(1).double()  # (B,)
    exact = (pred_hit | ~mask).all(dim=1).double()  # (B,): unscored positions count as hits
    ones = torch.ones_like(exact)  # (B,)
    sums = {"tokens": (correct, scored), "examples": (exact, ones),
            "teacher_forced_tokens": (forced, scored)}  # lenbench.metrics.SUMS
    if nll is not None:
        nll_sum = torch.where(mask, nll.double(), 0.0).sum(1)  # (B,)
        sums["nll"] = (nll_sum, scored)
    return {m.name: (sums[m.sums][0].tolist(), sums[m.sums][1].tolist()) for m in metrics.registered() if m.sums in sums}


def decoded_sums(decoded: Decoded, batch: Batch, nll: torch.Tensor | None = None) -> dict[str, tuple[list, list]]:
    """`sample_sums` of a decoded batch: its generated and teacher-forced predictions against the targets."""
    return sample_sums(decoded.generated == batch.targets, nll, batch.loss_mask, decoded.teacher_forced == batch.targets)


@torch.no_grad()
def evaluate_length(
    model: Transformer, task: Task, length: int, *, samples: int, tokens_per_batch: int, seed: int,
    device: torch.device,
) -> tuple[dict[str, float], int, dict[str, str]]:
    """Score `model` on `samples` fresh examples of `length` (task units): the answers it
    generates greedily (`lenbench.tasks.decoding.generate`) and, for nll and the teacher-forced
    diagnostic, one forward with the true inputs.

    Returns:
        ({metric: value}, n_samples, {metric: sample_scores}) for the metrics of
        `task_metrics(task)`; sample_scores is the compact per-sample string of `encode_samples`
        (one entry per evaluation sample, generator order), from which the value is
        `metric_transform(metric, sum(num) / sum(den))`.

    Raises:
        NonFiniteLogits: a forward gave NaN or infinite logits (the cell fails this length).
    """
    model.eval()
    num: dict[str, list] = {m: [] for m in METRICS}
    den: dict[str, list] = {m: [] for m in METRICS}
    for batch in eval_batches(task, length, samples=samples, tokens_per_batch=tokens_per_batch, seed=seed):
        batch = batch.to(device)
        forward = HeldDraws(lambda x: finite_logits(model(x), length), device)  # one draw per batch
        logits = forward(batch.inputs).float()  # (B, T, V)
        nll = F.cross_entropy(logits.transpose(1, 2), batch.targets, reduction="none")  # (B, T)
        decoded = generate(forward.predict, batch, teacher_forced=logits.argmax(-1))
        for metric, (n, d) in decoded_sums(decoded, batch, nll).items():
            num[metric] += n
            den[metric] += d
    values = {m: metric_transform(m, math.fsum(num[m]) / math.fsum(den[m])) for m in task_metrics(task)}
    return values, len(num["exact_match"]), {m: encode_samples(num[m], den[m]) for m in task_metrics(task)}
