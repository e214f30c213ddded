"""`recall`: associative recall (Ba et al. 2016, "Using Fast Weights to Attend to the Recent Past";
Olsson et al. 2022 / Fu et al. 2023 "Hungry Hungry Hippos" as a test of induction-style retrieval)."""

from __future__ import annotations

import torch

from lenbench.tasks._common import check_length, check_positive, check_sample_args, to_batch
from lenbench.tasks.base import Batch, Task, register_task


@register_task("recall")
class AssociativeRecallTask(Task):
    """``length`` key–value pairs with distinct keys, then a query key; predict its value.

    Layout: keys ``0 … num_keys-1``, values ``num_keys … num_keys+num_values-1`` (value symbol ``v`` is
    token ``num_keys + v``), query marker ``Q = num_keys + num_values``; ``vocab_size = num_keys +
    num_values + 1`` (137 with the defaults). A sample is ``k_1 v_1 … k_n v_n Q k_q v_q`` (``2n + 3``
    tokens) so ``seq_len(n) = 2n + 2``. ``length`` counts pairs (``length_unit = "items"``). The keys of
    a sample are drawn without replacement from the ``num_keys`` pool, so ``length <= num_keys``; values
    are uniform and may repeat; the queried pair is uniform. Only the final value token is scored;
    chance ``1 / num_values``.

    Worked example (``num_keys=16, num_values=4`` so values are 16…19 and ``Q = 20``; pairs
    5→1, 2→3, 9→0; query key 2)::

        S         = 5 17 2 19 9 16 20  2 19
        inputs    = 5 17 2 19 9 16 20  2
        targets   = 17 2 19 9 16 20 2 19
        loss_mask = .  . .  . .  . .  x

    >>> task = AssociativeRecallTask(num_keys=16, num_values=4)
    >>> task.sequence(keys=[5, 2, 9], values=[1, 3, 0], query=2)
    [5, 17, 2, 19, 9, 16, 20, 2, 19]
    >>> task.seq_len(3), task.vocab_size, task.chance
    (8, 21, 0.25)
    """

    description = "associative recall: key-value pairs, then a query key; predict its value"
    length_unit = "items"
    chance = 1 / 8

    def __init__(self, num_keys: int = 128, num_values: int = 8) -> None:
        self.num_keys = check_positive(self.name, "num_keys", num_keys)
        self.num_values = check_positive(self.name, "num_values", num_values, minimum=2)
        self.query_token = self.num_keys + self.num_values
        self.chance = 1.0 / self.num_values

    @property
    def vocab_size(self) -> int:
        return self.num_keys + self.num_values + 1

    def _check(self, length: int) -> int:
        n = check_length(self, length)
        if n > self.num_keys:
            raise ValueError(
                f"task {self.name!r}: length {n} exceeds num_keys={self.num_keys} (keys of a sample are "
                f"distinct); pass num_keys >= {n} or a length <= {self.num_keys}"
            )
        return n

    def seq_len(self, length: int) -> int:
        return 2 * self._check(length) + 2

    def sequence(self, keys: list[int], values: list[int], query: int) -> list[int]:
        """Full token sequence of one example: pairs ``keys[i] → values[i]`` (value symbols), query key."""
        if len(set(keys)) != len(keys) or len(keys) != len(values) or query not in keys:
            raise ValueError(
                f"task {self.name!r}: need distinct keys, one value per key and a query among the keys"
            )
        ids = [self.num_keys + v for v in values]
        pairs = [tok for kv in zip(keys, ids, strict=True) for tok in kv]
        return [*pairs, self.query_token, query, ids[keys.index(query)]]

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        n = self._check(length)
        check_sample_args(self, batch_size, split)
        B = batch_size
        keys = torch.rand(B, self.num_keys, generator=generator).argsort(dim=1)[:, :n]  # (B, n) distinct
        values = self.num_keys + torch.randint(0, self.num_values, (B, n), generator=generator)  # (B, n)
        which = torch.randint(0, n, (B, 1), generator=generator)  # (B, 1)
        pairs = torch.stack([keys, values], dim=2).reshape(B, 2 * n)  # (B, 2n)
        query = torch.full((B, 1), self.query_token, dtype=torch.long)  # (B, 1)
        seq = torch.cat([pairs, query, keys.gather(1, which), values.gather(1, which)], dim=1)  # (B, 2n+3)
        return to_batch(seq, 1)
