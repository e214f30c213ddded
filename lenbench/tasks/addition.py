"""`addition`: add two numbers written least-significant digit first (Delétang et al. 2023,
"Neural Networks and the Chomsky Hierarchy", binary addition, here in base 10; the reversed order
follows Lee et al. 2023, "Teaching Arithmetic to Small Transformers"; the optional index hints follow
Zhou et al. 2024, "Transformers Can Achieve Length Generalization But Not Robustly")."""

from __future__ import annotations

import torch

from lenbench.tasks._common import (
    check_length,
    check_sample_args,
    most_frequent_so_far,
    to_batch,
)
from lenbench.tasks.base import Batch, Task, register_task
from lenbench.tasks.params import Param

PLUS = 10
EQUALS = 11
#: Token of index hint 0 (with ``index_hints``): hint ``j`` is token ``HINT0 + j``.
HINT0 = 12


@register_task("addition")
class AdditionTask(Task):
    """Add two ``length``-digit numbers; all numbers are written reversed (least-significant first).

    Layout: digits ``0 … 9``, ``+ = 10``, ``= = 11``; ``vocab_size = 12``. A sample is
    ``a_0 … a_{n-1} + b_0 … b_{n-1} = s_0 … s_n`` (``3n + 3`` tokens), so ``seq_len(n) = 3n + 2``
    (``length_unit = "digits"``). Every digit of ``a`` and ``b`` is uniform over 0–9, leading digit
    included, so the operands are uniform over ``0 … 10^n - 1`` and shorter values are zero-padded to
    ``n`` digits; the sum always has ``n + 1`` digits (its top digit, the final carry, may be 0). The
    loss covers the ``n + 1`` sum digits; chance ``1/10``.

    Worked example (length 3: 472 + 953 = 1425, written reversed)::

        S         = 2 7 4 + 3 5 9 = 5 2 4 1
        inputs    = 2 7 4 + 3 5 9 = 5 2 4
        targets   = 7 4 + 3 5 9 = 5 2 4 1
        loss_mask = . . . . . . . x x x x

    (``+`` is token 10 and ``=`` token 11.)

    ``index_hints=H`` (default 0: none) puts an index hint before every digit, as in Zhou et al. 2024:
    digit ``i`` of ``a``, of ``b`` and of the sum all follow hint ``o + i`` (token ``12 + o + i``), so a
    sum digit finds its operand digits by content (the same hint) instead of by their distance, which
    changes with the number of digits. The offset ``o`` is uniform over ``0 … H - n - 1`` per sample,
    so every hint is trained at every length (the paper samples consecutive hints from an ordered set
    the same way); ``vocab_size = 12 + H``, a sample has ``6n + 4`` tokens (``seq_len(n) = 6n + 3``),
    ``n + 1 <= H``, and the answer's hints are inputs, not scored: the loss covers its ``n + 1`` digits.
    With hints from offset 0 (``h_j`` is token ``12 + j``) the example above reads
    ``h0 2 h1 7 h2 4 + h0 3 h1 5 h2 9 = h0 5 h1 2 h2 4 h3 1``.

    >>> task = AdditionTask()
    >>> task.sequence(472, 953, length=3)
    [2, 7, 4, 10, 3, 5, 9, 11, 5, 2, 4, 1]
    >>> task.seq_len(3), task.vocab_size
    (11, 12)
    >>> hinted = AdditionTask(index_hints=8)
    >>> hinted.sequence(472, 953, length=3, offset=1)
    [13, 2, 14, 7, 15, 4, 10, 13, 3, 14, 5, 15, 9, 11, 13, 5, 14, 2, 15, 4, 16, 1]
    >>> hinted.seq_len(3), hinted.vocab_size
    (21, 20)
    """

    description = "add two numbers written least-significant digit first"
    paper = "Delétang et al. 2023, Neural Networks and the Chomsky Hierarchy"
    length_unit = "digits"
    chance = 0.1
    PARAMS = {"index_hints": Param(int, low=0)}

    def __init__(self, index_hints: int = 0) -> None:
        self.index_hints = self.param("index_hints", index_hints)

    @property
    def vocab_size(self) -> int:
        return 12 + self.index_hints

    def _check(self, length: int) -> int:
        n = check_length(self, length)
        if self.index_hints and n + 1 > self.index_hints:
            raise ValueError(
                f"task {self.name!r}: length {n} needs {n + 1} index hints (one per sum digit) but "
                f"index_hints={self.index_hints}; pass index_hints >= {n + 1} or a length <= {self.index_hints - 1}"
            )
        return n

    def heuristics(self) -> dict:
        """"The most frequent digit read so far" (`most_frequent_so_far`)."""
        return {"most-frequent": lambda inputs: most_frequent_so_far(inputs, range(10))}

    def seq_len(self, length: int) -> int:
        n = self._check(length)
        return 6 * n + 3 if self.index_hints else 3 * n + 2

    def sequence(self, a: int, b: int, length: int, offset: int = 0) -> list[int]:
        """Full token sequence of ``a + b`` with ``length``-digit operands (index hints from hint
        ``offset`` on, when the task has them)."""
        n = self._check(length)
        if not (0 <= a < 10**n and 0 <= b < 10**n):
            raise ValueError(f"task {self.name!r}: operands must have at most {n} digits")
        if self.index_hints and not 0 <= offset <= self.index_hints - (n + 1):
            raise ValueError(f"task {self.name!r}: offset must be in 0 … {self.index_hints - (n + 1)} at length {n}")

        def digits(x: int, k: int) -> list[int]:
            out = [int(c) for c in reversed(str(x).zfill(k))]
            if not self.index_hints:
                return out
            return [tok for i, d in enumerate(out) for tok in (HINT0 + offset + i, d)]

        return [*digits(a, n), PLUS, *digits(b, n), EQUALS, *digits(a + b, n + 1)]

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        n = self._check(length)
        check_sample_args(self, batch_size, split)
        B = batch_size
        a = torch.randint(0, 10, (B, n), generator=generator)  # (B, n), least-significant first
        b = torch.randint(0, 10, (B, n), generator=generator)  # (B, n)
        total = a + b  # (B, n), digit-wise sums 0…18
        out = torch.empty(B, n + 1, dtype=torch.long)  # (B, n+1)
        carry = torch.zeros(B, dtype=torch.long)  # (B,)
        for i in range(n):  # ripple carry, least-significant first
            s = total[:, i] + carry  # (B,)
            out[:, i] = s % 10
            carry = s // 10
        out[:, n] = carry
        plus = torch.full((B, 1), PLUS, dtype=torch.long)  # (B, 1)
        equals = torch.full((B, 1), EQUALS, dtype=torch.long)  # (B, 1)
        if not self.index_hints:
            seq = torch.cat([a, plus, b, equals, out], dim=1)  # (B, 3n+3)
            return to_batch(seq, n + 1)
        # index hints: a run of n+1 consecutive hints from a uniform offset, so every hint is trained
        offset = torch.randint(0, self.index_hints - n, (B, 1), generator=generator)  # (B, 1)
        hints = HINT0 + offset + torch.arange(n + 1)  # (B, n+1)

        def hinted(x: torch.Tensor) -> torch.Tensor:  # (B, k) digits -> (B, 2k) hint, digit, …
            k = x.shape[1]
            return torch.stack([hints[:, :k], x], dim=2).reshape(B, 2 * k)

        seq = torch.cat([hinted(a), plus, hinted(b), equals, hinted(out)], dim=1)  # (B, 6n+4)
        batch = to_batch(seq, 2 * (n + 1))
        batch.loss_mask[:, -2 * (n + 1) :: 2] = False  # the answer's hints are given: score its digits only
        return batch
