"""Training one model at a fixed length: AdamW, warm-up + cosine schedule, gradient clipping."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from lenbench.model import Transformer
from lenbench.suite import TrainSpec
from lenbench.tasks import Batch, Task


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the cell is recorded as failed with this message."""


@dataclass
class TrainStats:
    steps: int
    final_loss: float
    seconds: float


def masked_loss(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy over the positions where `batch.loss_mask` is True."""
    logits = logits[batch.loss_mask]  # (N, V)
    return F.cross_entropy(logits.float(), batch.targets[batch.loss_mask])


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Linear warm-up to 1 over `warmup` steps, then cosine decay to 0.1 at `total`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def train_model(
    model: Transformer,
    task: Task,
    train_len: int,
    spec: TrainSpec,
    *,
    seed: int,
    device: torch.device,
    steps: int | None = None,
    lr: float | None = None,
    desc: str = "train",
    progress: bool = True,
) -> TrainStats:
    """Train `model` in place on `task` at `train_len` (or uniform lengths up to it).

    With `spec.length_sampling == "uniform"` each batch's length is drawn uniformly from
    `task.min_length` … `train_len` (inclusive) with the batch generator, as in the length-
    generalisation literature (Ruoss et al. 2023; Kazemnejad et al. 2023), so every offset up
    to train_len is trained rather than only the one of a fixed length.

    Randomness: batches come from a CPU generator seeded with `seed`; dropout uses the global
    RNG, which the caller seeds. Raises `TrainingDiverged` on a NaN or infinite loss.

    Args:
        model: the model, already on `device`.
        task: the task to sample from.
        train_len: training length in the task's unit.
        spec: optimiser and schedule settings.
        seed: seed of the batch generator.
        device: where the model lives.
        steps, lr: overrides of `spec.steps` and `spec.lr` (fine-tuning).
        desc: progress-bar label.
        progress: show a progress bar with loss and steps/s.
    """
    steps = spec.steps if steps is None else steps
    if spec.length_sampling == "uniform" and train_len < task.min_length:
        raise ValueError(f"task {task.name!r}: train_len {train_len} is below the task's minimum length "
                         f"{task.min_length} {task.length_unit}; raise train_len to at least {task.min_length}")
    lr = spec.lr if lr is None else lr
    warmup = min(spec.warmup, max(1, steps // 10))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "pos_enc" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "pos_enc" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": spec.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, warmup, steps))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    start = time.perf_counter()
    loss_value = float("nan")
    bar = tqdm(range(steps), desc=desc, disable=not progress, leave=False, dynamic_ncols=True)
    for step in bar:
        length = train_len
        if spec.length_sampling == "uniform":
            length = int(torch.randint(task.min_length, train_len + 1, (1,), generator=gen))
        batch = task.sample(spec.batch_size, length, gen, split="train").to(device)
        loss = masked_loss(model(batch.inputs), batch)  # scalar
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            raise TrainingDiverged(f"loss became {loss_value} at step {step} of {steps} (lr {lr:g}); "
                                   f"lower train.lr or raise train.warmup")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
        opt.step()
        sched.step()
        if progress and step % 20 == 0:
            bar.set_postfix(loss=f"{loss_value:.3f}", refresh=False)
    bar.close()
    model.eval()
    return TrainStats(steps=steps, final_loss=loss_value, seconds=time.perf_counter() - start)
