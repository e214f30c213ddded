"""`sort`: write a random string sorted ascending after a separator (Delétang et al. 2023, "Neural
Networks and the Chomsky Hierarchy", sort)."""

from __future__ import annotations

import torch

from lenbench.tasks._common import ItemTransductionTask
from lenbench.tasks.base import register_task


@register_task("sort")
class SortTask(ItemTransductionTask):
    """Sort ``length`` items drawn uniformly (with repeats) from ``vocab`` symbols, ascending.

    Layout: items ``0 … vocab-1``, separator ``SEP = vocab`` (``vocab_size = vocab + 1``). ``length``
    counts items; ``seq_len(n) = 2n``; the loss covers the ``n`` sorted items; chance ``1 / vocab``.

    Worked example (``vocab=8`` so ``SEP = 8``, length 4, items 3 1 4 1)::

        S         = 3 1 4 1 8 1 1 3 4
        inputs    = 3 1 4 1 8 1 1 3
        targets   = 1 4 1 8 1 1 3 4
        loss_mask = . . . . x x x x

    >>> task = SortTask(vocab=8)
    >>> task.sequence([3, 1, 4, 1])
    [3, 1, 4, 1, 8, 1, 1, 3, 4]
    >>> task.seq_len(4)
    8
    """

    description = "write a random string of items sorted ascending after a separator"
    paper = "Delétang et al. 2023, Neural Networks and the Chomsky Hierarchy"

    def transform(self, items: torch.Tensor) -> torch.Tensor:
        return torch.sort(items, dim=1).values  # (B, n)
