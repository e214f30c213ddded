"""`reverse`: write a random string backwards after a separator (Delétang et al. 2023, "Neural
Networks and the Chomsky Hierarchy", reverse string)."""

from __future__ import annotations

import torch

from lenbench.tasks._common import ItemTransductionTask
from lenbench.tasks.base import register_task


@register_task("reverse")
class ReverseTask(ItemTransductionTask):
    """Reverse ``length`` items drawn uniformly from ``vocab`` symbols.

    Layout: items ``0 … vocab-1``, separator ``SEP = vocab`` (``vocab_size = vocab + 1``). ``length``
    counts items; ``seq_len(n) = 2n``; the loss covers the ``n`` output items; chance ``1 / vocab``.

    Worked example (``vocab=8`` so ``SEP = 8``, length 3, items 3 1 4)::

        S         = 3 1 4 8 4 1 3
        inputs    = 3 1 4 8 4 1
        targets   = 1 4 8 4 1 3
        loss_mask = . . . x x x

    >>> task = ReverseTask(vocab=8)
    >>> task.sequence([3, 1, 4])
    [3, 1, 4, 8, 4, 1, 3]
    >>> task.seq_len(3), task.vocab_size
    (6, 9)
    """

    description = "write a random string of items reversed after a separator"
    paper = "Delétang et al. 2023, Neural Networks and the Chomsky Hierarchy"

    def transform(self, items: torch.Tensor) -> torch.Tensor:
        return items.flip(1)  # (B, n)
