"""`copy`: repeat a random string after a separator (Delétang et al. 2023, "Neural Networks and the
Chomsky Hierarchy", duplicate-string family; Graves et al. 2014 copy task)."""

from __future__ import annotations

import torch

from lenbench.tasks._common import ItemTransductionTask
from lenbench.tasks.base import register_task


@register_task("copy")
class CopyTask(ItemTransductionTask):
    """Copy ``length`` items drawn uniformly from ``vocab`` symbols.

    Layout: items ``0 … vocab-1``, separator ``SEP = vocab`` (``vocab_size = vocab + 1``). ``length``
    counts items; ``seq_len(n) = 2n``; the loss covers the ``n`` copied items; chance ``1 / vocab``.

    Worked example (``vocab=8`` so ``SEP = 8``, length 3, items 3 1 4)::

        S         = 3 1 4 8 3 1 4
        inputs    = 3 1 4 8 3 1
        targets   = 1 4 8 3 1 4
        loss_mask = . . . x x x

    >>> task = CopyTask(vocab=8)
    >>> task.sequence([3, 1, 4])
    [3, 1, 4, 8, 3, 1, 4]
    >>> task.seq_len(3), task.vocab_size, task.chance
    (6, 9, 0.125)
    """

    description = "copy a random string of items after a separator"
    paper = "Delétang et al. 2023, Neural Networks and the Chomsky Hierarchy"

    def heuristics(self) -> dict:
        """"The most frequent item read so far"; copying the input is the task itself."""
        return {"most-frequent": super().heuristics()["most-frequent"]}

    def transform(self, items: torch.Tensor) -> torch.Tensor:
        return items.clone()  # (B, n)
