"""The task interface: a small class whose `sample(batch_size, length, generator)` takes the length.

A task produces decoder-only training examples: `inputs` (B, T) token ids, `targets` (B, T) the
token to predict at each position (the next token), and `loss_mask` (B, T) marking the positions
whose predictions are trained and scored (for transduction tasks: the output part only).

`length` is in the task's own unit (items, digits or tokens, see `length_unit`); the number of
tokens a sample of that length occupies is `seq_len(length)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from lenbench.registry import Registry, check_keywords
from lenbench.tasks.params import Param


@dataclass
class Batch:
    """One batch of examples.

    Attributes:
        inputs: (B, T) long token ids fed to the model.
        targets: (B, T) long token ids the model should predict at each position.
        loss_mask: (B, T) bool, True where the prediction is trained and scored.
        feeds_answers: each scored position's target is the next position's input (the answer
            written out token by token, as in ``x SEP y_1 … y_n``): teacher forcing feeds the true
            answer there, and generation (`lenbench.tasks.decoding.generate`) feeds the model's own
            prediction. False where no answer is ever an input (a single answer token, or
            multi-query recall whose answers are predicted at their queries).
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    loss_mask: torch.Tensor
    feeds_answers: bool = False

    def __post_init__(self) -> None:
        assert self.inputs.shape == self.targets.shape == self.loss_mask.shape, (
            f"inputs {tuple(self.inputs.shape)}, targets {tuple(self.targets.shape)} and "
            f"loss_mask {tuple(self.loss_mask.shape)} must have one shape"
        )
        assert self.loss_mask.dtype == torch.bool, "loss_mask must be bool"

    def to(self, device: torch.device | str) -> Batch:
        """The batch on `device`. To CUDA the copies go through pinned host memory and are queued
        (`non_blocking`): the host goes on (e.g. samples the next batch) while the device is
        busy, where a copy from pageable memory would first wait for the device to finish."""
        device = torch.device(device)
        tensors = (self.inputs, self.targets, self.loss_mask)
        if device.type == "cuda" and self.inputs.device.type == "cpu":
            return Batch(*(t.pin_memory().to(device, non_blocking=True) for t in tensors), self.feeds_answers)
        return Batch(*(t.to(device) for t in tensors), self.feeds_answers)

    @property
    def fed_back(self) -> torch.Tensor:
        """(B, T) bool: True where the input is the answer token scored at the position before (the
        positions generation overwrites with the model's own prediction); all False unless
        `feeds_answers`."""
        fed = torch.zeros_like(self.loss_mask)  # (B, T)
        if self.feeds_answers:
            fed[:, 1:] = self.loss_mask[:, :-1]
        return fed


class Task:
    """Base class of every task.

    Class attributes:
        name: registry name.
        description: one line.
        length_unit: what `length` counts ("items", "digits", "tokens").
        kind: "sequence" (scored by token accuracy and exact match) or "lm" (NLL and perplexity).
        chance: chance-level token accuracy (None where not meaningful), drawn on plots.
        eval_scope_without_length: the evaluation generator's scope leaves out the length, so every
            length scores the same held-out data (`lenbench.tasks.eval_data.eval_generator`).
        paper: the paper whose design the task follows, "Authors Year, Title" (docs/protocol.md's
            task table cites it).
        solvable_past_training: False for a negative control, whose answers past the training
            length cannot be learned from its training data (`count`): a score above its floor
            there is a leak in the evaluation, not extrapolation.
        PARAMS: every keyword parameter of the constructor → its type and range
            (`lenbench.tasks.params`); the constructor validates each through `param`, and a suite's
            `params:` are checked against it at load. None (a plugin that declares nothing): only
            the names are checked at load.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    length_unit: ClassVar[str] = "tokens"
    kind: ClassVar[str] = "sequence"
    chance: ClassVar[float | None] = None
    eval_scope_without_length: ClassVar[bool] = False
    solvable_past_training: ClassVar[bool] = True
    PARAMS: ClassVar[dict[str, Param] | None] = None

    def param(self, name: str, value):
        """`value` of constructor parameter `name`, checked against its declaration in `PARAMS`
        (one-line ValueError)."""
        return type(self).PARAMS[name].check(self.name, name, value)

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def seq_len(self, length: int) -> int:
        """Number of tokens in a sample of `length` (sizes position tables)."""
        raise NotImplementedError

    @property
    def min_length(self) -> int:
        """The shortest `length` (task units) `sample` accepts; `length_sampling: uniform` training
        draws each batch's length from it up to train_len. 1 unless a task needs more (passkey:
        2·digits + 1)."""
        return 1

    def check_train_len(self, length: int) -> None:
        """Raise a one-line ValueError when the task cannot train and evaluate at `length` (task
        units) at all, before anything is trained; the engine calls it once per cell. Synthetic
        tasks accept every length `seq_len` accepts; `lm` checks that its corpus is long enough.

        Args:
            length: the cell's training length.
        """
        self.seq_len(length)

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        """Draw `batch_size` examples of `length` using only `generator` for randomness.

        Args:
            batch_size: number of examples B.
            length: size in `length_unit`.
            generator: the only source of randomness (determinism).
            split: "train", "val" or "eval". Synthetic tasks draw from the same distribution for
                all three (training, validation and evaluation are seeded apart); `lm` reads
                held-out text for "val" (bytes no evaluation scores) and "eval", and for "eval"
                scores only the last tokens of each window.
        """
        raise NotImplementedError

    def heuristics(self) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
        """The task's own trivial predictors, scored beside the models as baseline rows
        (``baseline:<name>``, `lenbench.baselines`) on the same examples, generating their answers
        as the models do: each maps inputs (B, T) to predictions (B, T) and reads no later position.
        The board's floor is the best baseline, so a shortcut a task allows (the most frequent value
        of the context, the length itself) is a floor no entry is ranked under. None by default;
        the chance and repeat-previous baselines apply to every sequence task without it."""
        return {}

    def fingerprint(self) -> dict:
        """Identity of the task's data beyond its parameters (e.g. a corpus sha256); recorded in results."""
        return {}

    def extra_metrics(self, ratio: float) -> list[str]:
        """The whole-length metrics (no bucket) `extra_measurements` adds at evaluation `ratio`
        (evaluation / training length), beyond `lenbench.evaluate.task_metrics`; the run records
        them as failed, with the reason, when `extra_measurements` raises. None by default; `lm`:
        window_perplexity and context_gain at ratios > 1."""
        return []

    def extra_measurements(self, model, length: int, train_len: int, ratio: float, *, samples: int,
                           tokens_per_batch: int, seed: int, device: torch.device) -> list[dict]:
        """The task's own measurements of one evaluation length beyond the whole-length metrics
        (docs/board.md, "Results rows", `bucket` column): the run calls it once per length and
        variant, on the same evaluation examples as `lenbench.evaluate.evaluate_length`, and turns each entry
        into a row. None by default; `lm`: per-position nll buckets and its `extra_metrics`;
        `passkey`: every metric per needle-depth bucket.

        Args:
            model: the trained (or fine-tuned) model, in eval mode.
            length: the evaluation length (task units).
            train_len: the cell's training length (task units).
            ratio: length / train_len as the suite gives it.
            samples, tokens_per_batch, seed, device: as for `evaluate_length`.

        Returns:
            one dict per row, in row order: {"metric", "value", "n_samples"} and, for a bucketed
            measurement, "bucket" (e.g. "pos:0-31", "depth:0.0-0.2").
        """
        return []


TASKS: Registry[type[Task]] = Registry("task", entry_point_group="lenbench.tasks")


def register_task(name: str):
    """Class decorator: register a task under `name` and set its `name` attribute."""
    return TASKS.register(name, set_name=True)


def build_task(name: str, **params) -> Task:
    """Instantiate the task `name`; unknown names and parameters give one-line errors."""
    cls = TASKS.get(name)
    check_keywords(f"task {name!r}", cls.__init__, params)
    return cls(**params)
