"""`recall`: associative recall (Ba et al. 2016, "Using Fast Weights to Attend to the Recent Past";
Olsson et al. 2022 / Fu et al. 2023 "Hungry Hungry Hippos" as a test of induction-style retrieval),
with several queries per sample as in multi-query associative recall (MQAR: Arora et al. 2023,
"Zoology: Measuring and Improving Recall in Efficient Language Models")."""

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


@register_task("recall")
class AssociativeRecallTask(Task):
    """``length`` key–value pairs with distinct keys, then ``queries`` of its keys; predict each one's value.

    Layout: keys ``0 … num_keys-1``, values ``num_keys … num_keys+num_values-1`` (value symbol ``v`` is
    token ``num_keys + v``), query marker ``Q = num_keys + num_values``; ``vocab_size = num_keys +
    num_values + 1`` (137 with the defaults). A sample is ``k_1 v_1 … k_n v_n Q q_1 a_1 … q_m a_m``
    with ``m = min(queries, n)`` distinct queried keys in random order and ``a_j`` the value of ``q_j``
    (``2n + 2m + 1`` tokens), so ``seq_len(n) = 2n + 2m``. ``length`` counts pairs (``length_unit =
    "items"``). The keys of a sample are drawn without replacement from the ``num_keys`` pool, so
    ``length <= num_keys``; values are uniform and may repeat. The ``m`` answer tokens ``a_j`` are
    scored (never the queried keys, which are random); exact match needs all of them right; chance
    ``1 / num_values``.

    ``queries=1`` (the default) is single-query recall: the one queried pair is uniform. ``queries >
    1`` gives several answers per sample, every one a training signal; their number stays ``m`` at
    every evaluation length, so a longer length means more pairs to search, not more answers.

    Multi-query associative recall as Zoology defines it (Arora et al. 2023) is ``queries="all",
    distinct_values=True, feed_answers=False``: every key is queried once, in random order; the
    values of a sample are distinct (so ``num_values >= length``), which puts "name the most
    frequent value" at chance; and no answer is ever an input: each answer is predicted at its
    query's position (the inputs are ``k_1 v_1 … k_n v_n Q q_1 … q_n``, ``2n + 1 + n`` tokens, the
    target at ``q_j`` is ``a_j``), so a model cannot narrow the later answers down to the values
    not yet given, a shortcut worth ``H_n / n`` token accuracy under teacher forcing (0.34 at 8 pairs).

    Worked example (``num_keys=16, num_values=4`` so values are 16…19 and ``Q = 20``; pairs
    5→1, 2→3, 9→0; one query, key 2)::

        S         = 5 17 2 19 9 16 20  2 19
        inputs    = 5 17 2 19 9 16 20  2
        targets   = 17 2 19 9 16 20 2 19
        loss_mask = .  . .  . .  . .  x

    Two queries, keys 9 then 5 (``queries=2``)::

        S         = 5 17 2 19 9 16 20  9 16  5 17
        inputs    = 5 17 2 19 9 16 20  9 16  5
        targets   = 17 2 19 9 16 20 9 16  5 17
        loss_mask = .  . .  . .  . .  x  .  x

    >>> task = AssociativeRecallTask(num_keys=16, num_values=4)
    >>> task.sequence(keys=[5, 2, 9], values=[1, 3, 0], query=2)
    [5, 17, 2, 19, 9, 16, 20, 2, 19]
    >>> task.seq_len(3), task.vocab_size, task.chance
    (8, 21, 0.25)
    >>> mqar = AssociativeRecallTask(num_keys=16, num_values=4, queries=2)
    >>> mqar.sequence(keys=[5, 2, 9], values=[1, 3, 0], query=[9, 5])
    [5, 17, 2, 19, 9, 16, 20, 9, 16, 5, 17]
    >>> mqar.seq_len(3), mqar.seq_len(1)
    (10, 4)
    """

    description = "associative recall: key-value pairs, then query keys; predict their values"
    paper = "Arora et al. 2023, Zoology: Measuring and Improving Recall in Efficient Language Models"
    length_unit = "items"
    chance = 1 / 8
    PARAMS = {"num_keys": Param(int, low=1), "num_values": Param(int, low=2), "queries": Param(int, low=1, choices=("all",)),
              "distinct_values": Param(bool), "feed_answers": Param(bool)}

    def __init__(self, num_keys: int = 128, num_values: int = 8, queries: int | str = 1,
                 distinct_values: bool = False, feed_answers: bool = True) -> None:
        self.num_keys = self.param("num_keys", num_keys)
        self.num_values = self.param("num_values", num_values)
        self.queries = self.param("queries", queries)
        self.distinct_values = self.param("distinct_values", distinct_values)
        self.feed_answers = self.param("feed_answers", feed_answers)
        self.query_token = self.num_keys + self.num_values
        self.chance = 1.0 / self.num_values

    def num_queries(self, pairs: int) -> int:
        """Queries of a sample with `pairs` pairs: every key with ``queries="all"``, else
        ``min(queries, pairs)``."""
        return pairs if self.queries == "all" else min(self.queries, pairs)

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
        if self.distinct_values and n > self.num_values:
            raise ValueError(
                f"task {self.name!r}: length {n} exceeds num_values={self.num_values} (distinct_values: the "
                f"values of a sample are distinct); pass num_values >= {n} or a length <= {self.num_values}"
            )
        return n

    def heuristics(self) -> dict:
        """"The most frequent value read so far": with values drawn with replacement it names the
        value of the queried key more often than chance; with distinct values it is at chance."""
        return {"most-frequent": lambda inputs: most_frequent_so_far(inputs, range(self.num_keys, self.num_keys + self.num_values))}

    def seq_len(self, length: int) -> int:
        n = self._check(length)
        m = self.num_queries(n)
        return 2 * n + 2 * m if self.feed_answers else 2 * n + 1 + m

    def sequence(self, keys: list[int], values: list[int], query: int | list[int]) -> list[int]:
        """Full token sequence of one example: pairs ``keys[i] → values[i]`` (value symbols), then the
        queried key(s) ``query`` (one key, or `num_queries` distinct keys), each followed by its value."""
        asked = [query] if isinstance(query, int) else list(query)
        m = self.num_queries(len(keys))
        if (len(set(keys)) != len(keys) or len(keys) != len(values) or not set(asked) <= set(keys)
                or len(set(asked)) != len(asked) or len(asked) != m
                or (self.distinct_values and len(set(values)) != len(values))):
            raise ValueError(
                f"task {self.name!r}: need distinct keys, one value per key"
                + (" (distinct values)" if self.distinct_values else "") + f" and {m} distinct queries among the keys"
            )
        ids = dict(zip(keys, (self.num_keys + v for v in values), strict=True))
        pairs = [tok for k in keys for tok in (k, ids[k])]
        return [*pairs, self.query_token, *(tok for q in asked for tok in (q, ids[q]))]

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        n = self._check(length)
        check_sample_args(self, batch_size, split)
        B, m = batch_size, self.num_queries(n)
        keys = torch.rand(B, self.num_keys, generator=generator).argsort(dim=1)[:, :n]  # (B, n) distinct
        if self.distinct_values:
            values = torch.rand(B, self.num_values, generator=generator).argsort(dim=1)[:, :n]  # (B, n) distinct
        else:
            values = torch.randint(0, self.num_values, (B, n), generator=generator)  # (B, n)
        values = self.num_keys + values  # value symbols → tokens
        if m == 1:  # one uniform query (the single-query draw, kept so its samples stay as they were)
            which = torch.randint(0, n, (B, 1), generator=generator)  # (B, 1)
        else:  # m distinct pairs in random order
            which = torch.rand(B, n, generator=generator).argsort(dim=1)[:, :m]  # (B, m)
        pairs = torch.stack([keys, values], dim=2).reshape(B, 2 * n)  # (B, 2n)
        query = torch.full((B, 1), self.query_token, dtype=torch.long)  # (B, 1)
        if not self.feed_answers:  # each answer is predicted at its query; no answer is ever an input
            asked, answers = keys.gather(1, which), values.gather(1, which)  # (B, m) each
            inputs = torch.cat([pairs, query, asked], dim=1)  # (B, 2n+1+m)
            targets = torch.cat([inputs[:, 1 : 2 * n + 2], answers], dim=1)  # (B, 2n+1+m)
            loss_mask = torch.zeros_like(targets, dtype=torch.bool)  # (B, 2n+1+m)
            loss_mask[:, 2 * n + 1 :] = True
            return Batch(inputs, targets, loss_mask)
        asked = torch.stack([keys.gather(1, which), values.gather(1, which)], dim=2).reshape(B, 2 * m)  # (B, 2m)
        batch = to_batch(torch.cat([pairs, query, asked], dim=1), 2 * m)  # (B, 2n+2m) each
        batch.loss_mask[:, -2 * m :: 2] = False  # the queried keys are random: score the answers only
        return batch
