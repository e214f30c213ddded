"""Helpers shared by the task modules: argument checks and the decoder-only shift.

Every synthetic task builds the whole token sequence ``S`` of shape (B, N) whose answer is its last
``answer_len`` tokens, then feeds ``inputs = S[:, :-1]`` and predicts ``targets = S[:, 1:]``; the
loss mask is True exactly on the targets that are answer tokens (the last ``answer_len`` columns),
and each answer token but the last is the next position's input (`Batch.feeds_answers`).
"""

from __future__ import annotations

import torch

from lenbench.tasks.base import Batch, Task
from lenbench.tasks.params import Param

#: "val": held-out samples at the training length that training validates on (`lenbench.train`).
SPLITS = ("train", "val", "eval")


def check_length(task: Task | str, length: int, minimum: int = 1, fix: str = "") -> int:
    """Return `length` as an int, or raise a one-line ValueError naming the task, the length and the fix."""
    name = task if isinstance(task, str) else task.name
    unit = "tokens" if isinstance(task, str) else task.length_unit
    if isinstance(length, bool) or not isinstance(length, int):
        raise ValueError(f"task {name!r}: length must be an int, got {length!r} ({type(length).__name__})")
    if length < minimum:
        fix = fix or f"pass a length of at least {minimum} {unit}"
        raise ValueError(f"task {name!r}: length {length} is too short (minimum {minimum} {unit}); {fix}")
    return length


def check_sample_args(task: Task, batch_size: int, split: str) -> None:
    """Validate `batch_size` and `split` (one-line ValueErrors)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"task {task.name!r}: batch_size must be an int >= 1, got {batch_size!r}")
    if split not in SPLITS:
        raise ValueError(f"task {task.name!r}: unknown split {split!r} (known: {', '.join(SPLITS)})")


def to_batch(seq: torch.Tensor, answer_len: int) -> Batch:
    """Shift a full sequence into a decoder-only Batch scoring its last `answer_len` tokens.

    Args:
        seq: (B, N) long, the whole example (prompt followed by the answer).
        answer_len: number of answer tokens at the end of `seq`.

    Returns:
        Batch with inputs/targets/loss_mask of shape (B, N - 1).
    """
    seq = seq.long()
    inputs = seq[:, :-1].contiguous()  # (B, N-1)
    targets = seq[:, 1:].contiguous()  # (B, N-1)
    loss_mask = torch.zeros_like(targets, dtype=torch.bool)  # (B, N-1)
    loss_mask[:, targets.shape[1] - answer_len :] = True
    return Batch(inputs, targets, loss_mask, feeds_answers=True)


class ItemTransductionTask(Task):
    """Shared layout of `copy`, `reverse` and `sort`: ``x_1 … x_n SEP f(x)_1 … f(x)_n``.

    Token ids: items ``0 … vocab-1``, ``SEP = vocab``; ``vocab_size = vocab + 1``. ``length`` counts
    items ``n``; a sample holds ``2n + 1`` tokens, so ``seq_len(n) = 2n``. The loss covers the ``n``
    output tokens; chance is ``1 / vocab``. Subclasses define `transform`.
    """

    length_unit = "items"
    chance = 1 / 8
    PARAMS = {"vocab": Param(int, low=2)}

    def __init__(self, vocab: int = 8) -> None:
        self.vocab = self.param("vocab", vocab)
        self.sep = self.vocab
        self.chance = 1.0 / self.vocab

    @property
    def vocab_size(self) -> int:
        return self.vocab + 1

    def seq_len(self, length: int) -> int:
        return 2 * check_length(self, length)

    def transform(self, items: torch.Tensor) -> torch.Tensor:
        """Map input items (B, n) to the output items (B, n)."""
        raise NotImplementedError

    def heuristics(self) -> dict:
        """"The most frequent item read so far" (`most_frequent_so_far`), and "copy the input": the
        i-th answer item is the i-th input item (for `copy` that is the task itself, so it keeps
        only the first)."""
        return {"most-frequent": lambda inputs: most_frequent_so_far(inputs, range(self.vocab)),
                "copy-input": self.copy_input}

    def copy_input(self, inputs: torch.Tensor) -> torch.Tensor:
        """At each position t after the separator (at n), the input item t − n; before it, item 0.

        Args:
            inputs: (B, T) long, ``x_1 … x_n SEP …``.

        Returns:
            (B, T) long predictions.
        """
        T = inputs.shape[1]
        is_sep = inputs == self.sep  # (B, T)
        n = torch.where(is_sep.any(1), is_sep.int().argmax(1), T)  # (B,): the separator's position
        t = torch.arange(T, device=inputs.device)  # (T,)
        source = (t.unsqueeze(0) - n.unsqueeze(1)).clamp(min=0)  # (B, T): t − n, read before t
        return torch.where(t.unsqueeze(0) >= n.unsqueeze(1), inputs.gather(1, source), torch.zeros_like(inputs))

    def sequence(self, items: list[int]) -> list[int]:
        """The full token sequence (prompt and answer) of one example with these `items`."""
        if any(not 0 <= i < self.vocab for i in items):
            raise ValueError(f"task {self.name!r}: items must lie in 0..{self.vocab - 1}, got {items}")
        out = self.transform(torch.tensor([items], dtype=torch.long))[0].tolist()
        return [*items, self.sep, *out]

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        n = check_length(self, length)
        check_sample_args(self, batch_size, split)
        items = torch.randint(0, self.vocab, (batch_size, n), generator=generator)  # (B, n)
        sep = torch.full((batch_size, 1), self.sep, dtype=torch.long)  # (B, 1)
        seq = torch.cat([items, sep, self.transform(items)], dim=1)  # (B, 2n+1)
        return to_batch(seq, n)


def most_frequent_so_far(inputs: torch.Tensor, tokens: range) -> torch.Tensor:
    """The trivial predictor "the most frequent answer symbol read so far": at each position, the
    token of `tokens` that occurs most often in ``inputs[:, :t + 1]`` (ties: the lowest id; none
    read yet: ``tokens[0]``).

    Args:
        inputs: (B, T) long token ids.
        tokens: the answer symbols (a contiguous id range).

    Returns:
        (B, T) long predictions.
    """
    within = (inputs >= tokens.start) & (inputs < tokens.stop)  # (B, T)
    onehot = torch.nn.functional.one_hot((inputs - tokens.start).clamp(0, len(tokens) - 1), len(tokens))  # (B, T, R)
    counts = (onehot * within.unsqueeze(-1)).cumsum(dim=1)  # (B, T, R) running counts
    return tokens.start + counts.argmax(dim=-1)  # (B, T): argmax takes the first (lowest id) of ties
