"""Training one model at a fixed length: AdamW, warm-up + cosine schedule, gradient clipping.

Two implementations of the same step (`TrainStep`), equal within float rounding (tested over 20
steps for every encoding):

- eager (`fast=False`), the readable reference: the loss over `logits[loss_mask]`, per-parameter
  AdamW and gradient-norm loops, the loss read back (`.item()`) after every step;
- fast (the default): the loss as cross-entropy with `ignore_index` (no boolean indexing, hence
  no host sync and no gathered copy of the logits), fused AdamW (one kernel over all parameters,
  `foreach` where fused is unavailable), `foreach` gradient norm and clipping, and no host sync in
  the loop: losses stay on the device and are read every `LOG_EVERY` steps, where NaN / inf is
  checked (still failing the cell with `TrainingDiverged`, naming the first bad step). On an
  accelerator the host then samples the next batch while the device runs this one, and on CUDA
  queues its copy too (`Batch.to`: pinned memory, non-blocking). Not every encoding is free of
  syncs on an accelerator: xPos and Sandwich copy a host-built vector to the device, and
  learned, randomized, T5 and Sandwich read a position range back, once per forward pass (RoPE does
  neither unless its scaling depends on the length).

`torch.compile` of the step is not used: measured on a 2-core CPU it does not pay for its
compilation at the suites' sizes (see docs/kernels.md, "Training speed").
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from lenbench.config import TrainSpec
from lenbench.model import Transformer
from lenbench.results.schema import STOP_BUDGET, STOP_CONVERGED
from lenbench.tasks import Batch, Task


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the cell is recorded as failed with this message."""


#: The plateau schedule (`train.schedule: plateau`): the rate is multiplied by this at each stall of the
#: validation loss, and training stops at the stall after `PLATEAU_ANNEALS` of them.
PLATEAU_FACTOR, PLATEAU_ANNEALS = 0.1, 2


@dataclass
class TrainStats:
    """What a training run did.

    Attributes:
        steps: optimisation steps taken (fewer than the budget when it converged).
        final_loss: the training loss of the last step read.
        seconds: wall seconds of the training loop, validations included.
        stop_reason: `STOP_BUDGET` or `STOP_CONVERGED`.
        best_step: the step whose weights were kept (the best validation; `steps` without one).
        val_loss: the kept weights' validation loss (NaN without validation).
        val_history: one (step, validation loss, learning rate of that step) per validation, in
            order; empty without validation. The curve a reader checks a stop against: where the
            loss flattened, and on the plateau schedule each anneal as a drop of the rate.
    """

    steps: int
    final_loss: float
    seconds: float
    stop_reason: str = STOP_BUDGET
    best_step: int = 0
    val_loss: float = math.nan
    val_history: list[tuple[int, float, float]] = field(default_factory=list)


def masked_loss(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy over the positions where `batch.loss_mask` is True."""
    logits = logits[batch.loss_mask]  # (N, V)
    return F.cross_entropy(logits.float(), batch.targets[batch.loss_mask])


def token_loss(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """`masked_loss` without boolean indexing: positions outside `batch.loss_mask` get the
    target `ignore_index` = −100, and cross-entropy averages over the rest. Same value (the mean
    of the same per-token losses), no host sync, no gathered copy of the logits."""
    targets = batch.targets.masked_fill(~batch.loss_mask, -100)  # (B, T)
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)  # scalar


# Steps between host reads of the loss on the fast path (progress bar and NaN / inf check).
LOG_EVERY = 20


def optimizer_for(model: torch.nn.Module, spec: TrainSpec, lr: float, *, fast: bool = True) -> torch.optim.AdamW:
    """AdamW (betas 0.9, 0.98) with weight decay on ≥ 2-D weights except the encoding's.

    `fast`: the fused implementation (one kernel for every parameter) where this torch has it for
    the model's device, else `foreach` (a few multi-tensor kernels); otherwise the per-parameter
    loop (torch's CPU default).
    """
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "pos_enc" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "pos_enc" not in n)]
    groups = [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    kwargs = {}
    if fast:
        device = next(model.parameters()).device.type
        try:  # torch's own list of devices with a fused AdamW kernel (cpu, cuda, xpu, mps … by version)
            from torch.optim.optimizer import _get_fused_kernels_supported_devices

            fused = device in _get_fused_kernels_supported_devices()
        except ImportError:
            fused = False
        kwargs = {"fused": True} if fused else {"foreach": True}
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), **kwargs)


class TrainStep:
    """One optimisation step: forward, loss, backward, gradient clipping, AdamW, schedule.

    Args:
        model: the model (on its device, in train mode).
        spec: optimiser settings (`grad_clip`, `weight_decay`, `warmup`).
        lr: peak learning rate.
        steps: schedule length (warm-up + cosine decay over `steps`).
        fast: the fast path (see the module docstring) or the eager reference.

    `step(batch)` returns the loss as a 0-d tensor on the device (detached); reading it is the
    caller's choice (a host sync on accelerators).
    """

    def __init__(self, model: Transformer, spec: TrainSpec, lr: float, steps: int, *, fast: bool = True,
                 plateau: bool = False) -> None:
        self.model, self.spec, self.fast = model, spec, fast
        warmup = min(spec.warmup, max(1, steps // 10))
        self.opt = optimizer_for(model, spec, lr, fast=fast)
        #: The plateau schedule's factor: 1 after warm-up, times `PLATEAU_FACTOR` at each stall (`anneal`).
        self.scale = 1.0
        shape = ((lambda s: min(1.0, (s + 1) / warmup) * self.scale) if plateau else
                 (lambda s: lr_factor(s, warmup, steps)))
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, shape)
        self.params = [p for p in model.parameters() if p.requires_grad]
        #: The learning rate the last step used (a host float: reading it costs no sync).
        self.last_lr = float("nan")

    def anneal(self) -> None:
        """The plateau schedule: divide the learning rate by 1 / `PLATEAU_FACTOR` from the next step on."""
        self.scale *= PLATEAU_FACTOR
        for group in self.opt.param_groups:  # the scheduler set this step's rate already
            group["lr"] *= PLATEAU_FACTOR

    def __call__(self, batch: Batch) -> torch.Tensor:
        loss = (token_loss if self.fast else masked_loss)(self.model(batch.inputs), batch)  # scalar
        self.opt.zero_grad(set_to_none=True)
        self.last_lr = self.opt.param_groups[0]["lr"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.spec.grad_clip, foreach=True if self.fast else None)
        self.opt.step()
        self.sched.step()
        return loss.detach()


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Linear warm-up to 1 over `warmup` steps, then cosine decay to 0.1 at `total`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


@torch.no_grad()
def validation_loss(model: Transformer, batch: Batch) -> float:
    """Mean cross-entropy (nats) over `batch`'s scored positions, the model in eval mode; it is put
    back in train mode after."""
    model.eval()
    try:
        return float(masked_loss(model(batch.inputs), batch))
    finally:
        model.train()


class EarlyStopping:
    """Training until convergence: the best validation loss so far, its weights and step, and
    whether `patience` validations in a row have failed to improve on it by more than `min_delta`.

    Args:
        model: the model being trained (its weights are copied at each improvement).
        patience: validations without improvement before stopping (≥ 1).
        min_delta: the improvement (nats) a validation must make to count.
    """

    def __init__(self, model: Transformer, patience: int, min_delta: float) -> None:
        self.model, self.patience, self.min_delta = model, patience, min_delta
        self.best, self.best_step, self.stale = math.inf, 0, 0
        self.best_state: dict[str, torch.Tensor] | None = None

    def update(self, loss: float, step: int) -> bool:
        """Record the validation `loss` after `step` steps; return True when training should stop."""
        if not math.isfinite(loss):
            raise TrainingDiverged(f"validation loss became {loss} after {step} steps; lower train.lr or raise "
                                   "train.warmup")
        if loss < self.best - self.min_delta or self.best_state is None:
            self.best, self.best_step, self.stale = loss, step, 0
            self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            return False
        self.stale += 1
        return self.stale >= self.patience

    def renew(self) -> None:
        """Start a new patience window (the plateau schedule after an anneal); the best so far stays."""
        self.stale = 0

    def restore(self) -> None:
        """Put the best validation's weights back into the model."""
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)


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
    fast: bool = True,
) -> TrainStats:
    """Train `model` in place on `task` at `train_len` (or uniform lengths up to it).

    With `spec.length_sampling == "uniform"` each batch's length is drawn uniformly from
    `task.min_length` … `train_len` (inclusive) with the batch generator, as in the length-
    generalisation literature (Ruoss et al. 2023; Kazemnejad et al. 2023), so every offset up
    to train_len is trained rather than only the one of a fixed length.

    Randomness: batches come from a CPU generator seeded with `seed`; dropout uses the global
    RNG, which the caller seeds. Raises `TrainingDiverged` on a NaN or infinite loss.

    With `spec.patience` > 0 (and no `steps` override: a fine-tune trains its stated steps) training
    validates every `spec.validate_every` steps on `spec.val_samples` held-out samples at `train_len`
    (the task's "val" split, drawn once from a generator of its own, ``crc32("val/<task>/<seed>")``,
    apart from training's and evaluation's, `lenbench.tasks.eval_data.eval_generator`)
    and stops when `EarlyStopping` says so; the best validation's weights are kept. The schedule
    still spans `spec.steps`, the maximum budget, so a run that stops early stops mid-schedule; with
    `spec.schedule == "plateau"` the rate stays at its peak after warm-up and is multiplied by
    `PLATEAU_FACTOR` at each stall, training stopping at the stall after `PLATEAU_ANNEALS` anneals
    (ReduceLROnPlateau's rule, so a run that stops has annealed).

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
        fast: the fast step (default) or the eager reference (`TrainStep`); same losses within
            float rounding.
    """
    validate = spec.patience > 0 and steps is None
    steps = spec.steps if steps is None else steps
    if spec.length_sampling == "uniform" and train_len < task.min_length:
        raise ValueError(f"task {task.name!r}: train_len {train_len} is below the task's minimum length "
                         f"{task.min_length} {task.length_unit}; raise train_len to at least {task.min_length}")
    lr = spec.lr if lr is None else lr
    plateau = validate and spec.schedule == "plateau"
    train_step = TrainStep(model, spec, lr, steps, fast=fast, plateau=plateau)
    anneals = 0
    gen = torch.Generator().manual_seed(seed)
    model.train()
    start = time.perf_counter()
    loss_value = float("nan")
    pending: list[torch.Tensor] = []  # losses (0-d, on the device) since the last read
    every = LOG_EVERY if fast else 1
    stopper = val_batch = None
    if validate:
        val_gen = torch.Generator().manual_seed(zlib.crc32(f"val/{task.name}/{seed}".encode()))
        val_batch = task.sample(spec.val_samples, train_len, val_gen, split="val").to(device)
        stopper = EarlyStopping(model, spec.patience, spec.min_delta)
    stop_reason, taken = STOP_BUDGET, steps
    history: list[tuple[int, float, float]] = []
    bar = tqdm(range(steps), desc=desc, disable=not progress, leave=False, dynamic_ncols=True)
    for step in bar:
        length = train_len
        if spec.length_sampling == "uniform":
            length = int(torch.randint(task.min_length, train_len + 1, (1,), generator=gen))
        batch = task.sample(spec.batch_size, length, gen, split="train").to(device)
        pending.append(train_step(batch))
        if len(pending) == every or step == steps - 1:
            values = torch.stack(pending).tolist()  # the one host sync of the window
            first = step - len(values) + 1
            for i, value in enumerate(values):
                if not math.isfinite(value):
                    raise TrainingDiverged(f"loss became {value} at step {first + i} of {steps} (lr {lr:g}); "
                                           f"lower train.lr or raise train.warmup")
            loss_value = values[-1]
            pending.clear()
            if progress:
                bar.set_postfix(loss=f"{loss_value:.3f}", refresh=False)
        if stopper is not None and ((step + 1) % spec.validate_every == 0 or step == steps - 1):
            val = validation_loss(model, val_batch)
            history.append((step + 1, val, train_step.last_lr))
            if stopper.update(val, step + 1):
                if plateau and anneals < PLATEAU_ANNEALS:  # anneal and go on from these weights
                    train_step.anneal()
                    anneals += 1
                    stopper.renew()
                    continue
                stop_reason, taken = STOP_CONVERGED, step + 1
                break
    bar.close()
    if stopper is not None:
        stopper.restore()
    model.eval()
    return TrainStats(steps=taken, final_loss=loss_value, seconds=time.perf_counter() - start, stop_reason=stop_reason,
                      best_step=stopper.best_step if stopper is not None else taken,
                      val_loss=stopper.best if stopper is not None else math.nan, val_history=history)
