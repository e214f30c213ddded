"""`parity`: the parity of a bit string (Delétang et al. 2023, "Neural Networks and the Chomsky
Hierarchy", parity check; Hahn 2020 on why Transformers struggle with it). A negative control: no
positional encoding is expected to extrapolate it well."""

from __future__ import annotations

import torch

from lenbench.tasks._common import check_length, check_sample_args, to_batch
from lenbench.tasks.base import Batch, Task, register_task

MARK = 2


@register_task("parity")
class ParityTask(Task):
    """``length`` uniform random bits, a marker, then their parity (1 if the number of ones is odd).

    Layout: bits ``0``/``1``, marker ``MARK = 2``; ``vocab_size = 3``. A sample is ``b_1 … b_n MARK p``
    (``n + 2`` tokens), so ``seq_len(n) = n + 1`` (``length_unit = "items"``: bits). Only the parity
    token is scored; chance ``1/2``.

    Worked example (length 4, bits 1 0 1 1 → three ones → parity 1)::

        S         = 1 0 1 1 2 1
        inputs    = 1 0 1 1 2
        targets   = 0 1 1 2 1
        loss_mask = . . . . x

    >>> task = ParityTask()
    >>> task.sequence([1, 0, 1, 1])
    [1, 0, 1, 1, 2, 1]
    >>> task.seq_len(4), task.vocab_size, task.chance
    (5, 3, 0.5)
    """

    description = "parity of a random bit string (negative control)"
    paper = "Delétang et al. 2023, Neural Networks and the Chomsky Hierarchy"
    length_unit = "items"
    chance = 0.5
    PARAMS: dict = {}

    def __init__(self) -> None:
        pass

    @property
    def vocab_size(self) -> int:
        return 3

    def seq_len(self, length: int) -> int:
        return check_length(self, length) + 1

    def sequence(self, bits: list[int]) -> list[int]:
        """Full token sequence of one example with these `bits`."""
        if not bits or any(b not in (0, 1) for b in bits):
            raise ValueError(f"task {self.name!r}: bits must be a non-empty list of 0/1, got {bits}")
        return [*bits, MARK, sum(bits) % 2]

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        n = check_length(self, length)
        check_sample_args(self, batch_size, split)
        bits = torch.randint(0, 2, (batch_size, n), generator=generator)  # (B, n)
        mark = torch.full((batch_size, 1), MARK, dtype=torch.long)  # (B, 1)
        parity = bits.sum(dim=1, keepdim=True) % 2  # (B, 1)
        return to_batch(torch.cat([bits, mark, parity], dim=1), 1)  # (B, n+2) → (B, n+1)
