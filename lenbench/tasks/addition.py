"""`addition`: add two numbers written least-significant digit first (Delétang et al. 2023,
"Neural Networks and the Chomsky Hierarchy", binary addition, here in base 10; the reversed order
follows Lee et al. 2023, "Teaching Arithmetic to Small Transformers")."""

from __future__ import annotations

import torch

from lenbench.tasks._common import check_length, check_sample_args, to_batch
from lenbench.tasks.base import Batch, Task, register_task

PLUS = 10
EQUALS = 11


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

    >>> task = AdditionTask()
    >>> task.sequence(472, 953, length=3)
    [2, 7, 4, 10, 3, 5, 9, 11, 5, 2, 4, 1]
    >>> task.seq_len(3), task.vocab_size
    (11, 12)
    """

    description = "add two numbers written least-significant digit first"
    length_unit = "digits"
    chance = 0.1

    def __init__(self) -> None:
        pass

    @property
    def vocab_size(self) -> int:
        return 12

    def seq_len(self, length: int) -> int:
        return 3 * check_length(self, length) + 2

    def sequence(self, a: int, b: int, length: int) -> list[int]:
        """Full token sequence of ``a + b`` with ``length``-digit operands."""
        n = check_length(self, length)
        if not (0 <= a < 10**n and 0 <= b < 10**n):
            raise ValueError(f"task {self.name!r}: operands must have at most {n} digits")

        def digits(x: int, k: int) -> list[int]:
            return [int(c) for c in reversed(str(x).zfill(k))]

        return [*digits(a, n), PLUS, *digits(b, n), EQUALS, *digits(a + b, n + 1)]

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        n = check_length(self, length)
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
        seq = torch.cat([a, plus, b, equals, out], dim=1)  # (B, 3n+3)
        return to_batch(seq, n + 1)
