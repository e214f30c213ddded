"""`count`: how many items are among the fillers before the marker, answered as one count symbol.
The negative control of the board: learnable at the training length, unsolvable past it by
construction, so an entry that "extrapolates" on it reveals a leak in the evaluation, not a
property of its encoding.

Why it cannot extrapolate: a sample of length ``l`` holds ``n`` items, ``n`` drawn uniformly from
the last ``spread`` counts up to ``l`` (``l - spread + 1 … l``), the rest fillers, and its answer is
the symbol of ``n``. Training samples lengths up to the training length ``L``, so the count symbols
above ``L`` never occur in training; from ``l >= L + spread`` every answer is such a symbol, whose
output embedding keeps its random initialisation, and a model that scores above the floor there
was handed the answer. At every length the constant "the most frequent count" scores ``1 /
spread`` (the floor), so a model above it at the training length counts. The design follows the
counting tasks of the length-generalisation literature (Delétang et al. 2023, "Neural Networks and
the Chomsky Hierarchy"; Zhou et al. 2024, "What Algorithms can Transformers Learn?"), with the
count read out as one symbol instead of digits, which is what makes an unseen count unanswerable.
"""

from __future__ import annotations

import torch

from lenbench.tasks._common import check_length, check_sample_args, to_batch
from lenbench.tasks.base import Batch, Task, register_task
from lenbench.tasks.params import Param


@register_task("count")
class CountTask(Task):
    """``length`` positions holding ``n`` random items and ``length - n`` fillers, a marker, then ``n``
    as one symbol.

    Layout: item symbols ``0 … symbols-1``, filler ``F = symbols``, marker ``MARK = symbols + 1``,
    count symbols ``symbols + 2 + c`` for ``c = 0 … max_count``; ``vocab_size = symbols + max_count +
    3`` (263 with the defaults). ``n`` is uniform on ``max(1, length - spread + 1) … length`` and the
    fillers sit at uniformly random positions. A sample is ``x_1 … x_length MARK c_n`` (``length +
    2`` tokens), so ``seq_len(length) = length + 1`` (``length_unit = "items"``: positions). Only the
    count symbol is scored; the floor (the most frequent count) is ``1 / spread`` wherever ``length
    >= spread``, chance ``1 / (max_count + 1)``.

    Worked example (``symbols=4``: filler 4, marker 5, count ``c`` is token ``6 + c``; length 4 with
    items 2 0 3 and one filler)::

        S         = 2 4 0 3 5 9
        inputs    = 2 4 0 3 5
        targets   = 4 0 3 5 9
        loss_mask = . . . . x

    >>> task = CountTask(symbols=4, max_count=16)
    >>> task.sequence([2, None, 0, 3])
    [2, 4, 0, 3, 5, 9]
    >>> task.seq_len(4), task.vocab_size
    (5, 23)
    """

    description = "count the items among fillers (negative control: unsolvable past training)"
    paper = "Delétang et al. 2023, Neural Networks and the Chomsky Hierarchy"
    length_unit = "items"
    solvable_past_training = False
    PARAMS = {"symbols": Param(int, low=1), "max_count": Param(int, low=1), "spread": Param(int, low=1)}

    def __init__(self, symbols: int = 4, max_count: int = 256, spread: int = 2) -> None:
        self.symbols = self.param("symbols", symbols)
        self.max_count = self.param("max_count", max_count)
        self.spread = self.param("spread", spread)
        self.filler = self.symbols
        self.mark = self.symbols + 1
        self.chance = 1.0 / (self.max_count + 1)

    @property
    def vocab_size(self) -> int:
        return self.symbols + self.max_count + 3

    def _check(self, length: int) -> int:
        n = check_length(self, length)
        if n > self.max_count:
            raise ValueError(f"task {self.name!r}: length {n} exceeds max_count={self.max_count} (the count is one "
                             f"symbol); pass max_count >= {n} or a length <= {self.max_count}")
        return n

    def seq_len(self, length: int) -> int:
        return self._check(length) + 1

    def heuristics(self) -> dict:
        """"The length": the count symbol of the number of positions read before the marker, the
        most frequent count (the floor, ``1 / spread``) at every length; past the training length
        it names count symbols training never showed, so a model above it there was handed them."""
        def the_length(inputs: torch.Tensor) -> torch.Tensor:
            t = torch.arange(inputs.shape[1], device=inputs.device).clamp(max=self.max_count)  # (T,)
            return (self.symbols + 2 + t).expand_as(inputs)  # (B, T): at the marker, t = length
        return {"the-length": the_length}

    def count_token(self, count: int) -> int:
        """The token of count symbol `count`."""
        return self.symbols + 2 + count

    def sequence(self, slots: list[int | None]) -> list[int]:
        """Full token sequence of one example: `slots` holds an item symbol or None (a filler) per position."""
        if not slots or any(x is not None and not 0 <= x < self.symbols for x in slots):
            raise ValueError(f"task {self.name!r}: slots must be a non-empty list of symbols 0 … "
                             f"{self.symbols - 1} or None (a filler)")
        self._check(len(slots))
        n = sum(x is not None for x in slots)
        return [self.filler if x is None else x for x in slots] + [self.mark, self.count_token(n)]

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        ell = self._check(length)
        check_sample_args(self, batch_size, split)
        B, low = batch_size, max(1, ell - self.spread + 1)
        n = torch.randint(low, ell + 1, (B, 1), generator=generator)  # (B, 1) items per sample
        rank = torch.rand(B, ell, generator=generator).argsort(dim=1).argsort(dim=1)  # (B, ell) a random order
        is_item = rank < n  # (B, ell): exactly n item positions, uniformly placed
        items = torch.randint(0, self.symbols, (B, ell), generator=generator)  # (B, ell)
        slots = torch.where(is_item, items, torch.full_like(items, self.filler))  # (B, ell)
        mark = torch.full((B, 1), self.mark, dtype=torch.long)  # (B, 1)
        answer = self.symbols + 2 + n  # (B, 1) the count symbol
        return to_batch(torch.cat([slots, mark, answer], dim=1), 1)  # (B, ell+2) → (B, ell+1)
