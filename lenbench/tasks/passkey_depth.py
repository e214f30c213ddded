"""`passkey`'s depth measurement: accuracy by needle depth.

A tidy row's `bucket` here is "depth:<lo>-<hi>": examples whose needle depth (filler tokens
before the needle / all filler tokens) lies in [lo, hi) (the last bucket includes 1.00);
`lenbench.results.labels.parse_bucket` reads a label back. Bucketed rows are not leaderboard rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from lenbench import metrics
from lenbench.results.labels import depth_bucket
from lenbench.tasks.base import Task
from lenbench.tasks.decoding import HeldDraws, finite_logits, generate
from lenbench.tasks.eval_data import eval_batches_on

if TYPE_CHECKING:  # annotations only: the measurement runs any model it is given
    from lenbench.model import Transformer

#: Needle-depth buckets per passkey evaluation length.
DEPTH_BUCKETS = 5


@torch.no_grad()
def evaluate_depth(
    model: Transformer, task: Task, length: int, *, samples: int, tokens_per_batch: int, seed: int,
    device: torch.device, buckets: int = DEPTH_BUCKETS,
) -> dict:
    """Accuracy by needle depth (of the generated passkey, `lenbench.tasks.decoding.generate`): the examples of `lenbench.evaluate.evaluate_length(length)` grouped by the depth of
    their needle (`task.needle_depth`, a fraction in [0, 1]) into `buckets` equal-width buckets —
    the needle-in-a-haystack table (depth × length) of Mohtashami & Jaggi 2023 / Kamradt 2023.

    The buckets partition the examples, so the count-weighted mean of a bucketed metric is the
    whole-length metric.

    Returns:
        {"overall": {metric: value}, "n_samples", "buckets": [(label, {metric: value}, n), …]}
        with the metrics of `metrics.task_metrics(task.kind)`; empty buckets are left out.
    """
    model.eval()
    sums = torch.zeros(buckets, 4, dtype=torch.float64)  # per bucket: tokens correct, scored, exact, teacher-forced correct
    counts = torch.zeros(buckets, dtype=torch.float64)
    for batch in eval_batches_on(task, length, samples, tokens_per_batch, seed, device):
        forward = HeldDraws(lambda x: finite_logits(model(x), length), device)  # one draw per batch
        decoded = generate(forward.predict, batch)
        mask = batch.loss_mask  # (B, T)
        hit = (decoded.generated == batch.targets) | ~mask  # (B, T)
        forced = (decoded.teacher_forced == batch.targets) & mask  # (B, T)
        depth = task.needle_depth(batch.inputs).cpu()  # (B,) in [0, 1]
        which = (depth * buckets).long().clamp(max=buckets - 1)  # (B,)
        per_example = torch.stack([(hit & mask).sum(1), mask.sum(1), hit.all(1), forced.sum(1)],
                                  dim=1).double().cpu()  # (B, 4)
        sums.index_add_(0, which, per_example)
        counts.index_add_(0, which, torch.ones(len(which), dtype=torch.float64))

    def values(row: torch.Tensor, n: float) -> dict[str, float]:
        ratio = {"tokens": float(row[0] / row[1]), "examples": float(row[2] / n),
                 "teacher_forced_tokens": float(row[3] / row[1])}  # by lenbench.metrics.SUMS
        return {m: metrics.get_metric(m).value(ratio[metrics.get_metric(m).sums]) for m in metrics.task_metrics(task.kind)}

    table = [(depth_bucket(i / buckets, (i + 1) / buckets), values(sums[i], float(counts[i])), int(counts[i]))
             for i in range(buckets) if counts[i] > 0]
    return {"overall": values(sums.sum(0), float(counts.sum())), "n_samples": int(counts.sum()), "buckets": table}
