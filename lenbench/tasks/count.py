"""`count`: how many tokens precede the marker, answered as one count symbol. The negative control
of the board: learnable at the training length, unsolvable past it by construction, so an entry
that "extrapolates" on it reveals a leak in the evaluation, not a property of its encoding.

Why it cannot extrapolate: the answer to a sample of ``n`` items is the symbol of ``n``. Training
samples lengths up to the training length ``L``, so the count symbols above ``L`` never occur as
a target in training (nor as an input anywhere); their output embeddings keep their random
initialisation, and a model that scores above chance on them at ``n > L`` was handed the answer.
The design follows the counting tasks of the length-generalisation literature (e.g. Delétang et
al. 2023, "Neural Networks and the Chomsky Hierarchy"; Zhou et al. 2024, "What Algorithms can
Transformers Learn?"), with the count read out as one symbol instead of digits, which is what
makes an unseen length unanswerable.
"""

from __future__ import annotations

import torch

from lenbench.tasks._common import check_length, check_positive, check_sample_args, to_batch
from lenbench.tasks.base import Batch, Task, register_task


@register_task("count")
class CountTask(Task):
    """``length`` random symbols, a marker, then the count ``length`` as one symbol.

    Layout: item symbols ``0 … symbols-1``, marker ``MARK = symbols``, count symbols ``symbols + 1 +
    c`` for ``c = 0 … max_count``; ``vocab_size = symbols + max_count + 2`` (262 with the
    defaults). A sample is ``x_1 … x_n MARK c_n`` (``n + 2`` tokens), so ``seq_len(n) = n + 1``
    (``length_unit = "items"``). Only the count symbol is scored; chance ``1 / (max_count + 1)``
    (the best trivial predictor at the training length, the most frequent count, scores about
    ``1 / L`` under uniform length sampling).

    Worked example (``symbols=4``: marker 4, count ``c`` is token ``5 + c``; three items 2 0 3)::

        S         = 2 0 3 4 8
        inputs    = 2 0 3 4
        targets   = 0 3 4 8
        loss_mask = . . . x

    >>> task = CountTask(symbols=4, max_count=16)
    >>> task.sequence([2, 0, 3])
    [2, 0, 3, 4, 8]
    >>> task.seq_len(3), task.vocab_size
    (4, 22)
    """

    description = "count the items before the marker (negative control: unsolvable past training)"
    length_unit = "items"
    solvable_past_training = False

    def __init__(self, symbols: int = 4, max_count: int = 256) -> None:
        self.symbols = check_positive(self.name, "symbols", symbols)
        self.max_count = check_positive(self.name, "max_count", max_count)
        self.mark = self.symbols
        self.chance = 1.0 / (self.max_count + 1)

    @property
    def vocab_size(self) -> int:
        return self.symbols + self.max_count + 2

    def _check(self, length: int) -> int:
        n = check_length(self, length)
        if n > self.max_count:
            raise ValueError(f"task {self.name!r}: length {n} exceeds max_count={self.max_count} (the count is one "
                             f"symbol); pass max_count >= {n} or a length <= {self.max_count}")
        return n

    def seq_len(self, length: int) -> int:
        return self._check(length) + 1

    def count_token(self, count: int) -> int:
        """The token of count symbol `count`."""
        return self.symbols + 1 + count

    def sequence(self, items: list[int]) -> list[int]:
        """Full token sequence of one example with these `items`."""
        if not items or any(not 0 <= x < self.symbols for x in items):
            raise ValueError(f"task {self.name!r}: items must be a non-empty list of symbols 0 … {self.symbols - 1}")
        self._check(len(items))
        return [*items, self.mark, self.count_token(len(items))]

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        n = self._check(length)
        check_sample_args(self, batch_size, split)
        items = torch.randint(0, self.symbols, (batch_size, n), generator=generator)  # (B, n)
        mark = torch.full((batch_size, 1), self.mark, dtype=torch.long)  # (B, 1)
        answer = torch.full((batch_size, 1), self.count_token(n), dtype=torch.long)  # (B, 1)
        return to_batch(torch.cat([items, mark, answer], dim=1), 1)  # (B, n+2) → (B, n+1)
