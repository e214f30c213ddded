"""`mqar`: multi-query associative recall as Zoology defines it (Arora et al. 2023, "Zoology:
Measuring and Improving Recall in Efficient Language Models"), registered under its own name so
that `recall`'s defaults, and with them the meaning of the published boards' `recall` cells, stay
as they are."""

from __future__ import annotations

from lenbench.tasks.base import register_task
from lenbench.tasks.recall import AssociativeRecallTask


@register_task("mqar")
class MQARTask(AssociativeRecallTask):
    """``length`` key–value pairs, distinct keys and distinct values, then every key once; predict each value.

    `recall` (`AssociativeRecallTask`, whose layout and parameters this is) with Zoology's defaults:
    ``queries="all", distinct_values=True, feed_answers=False``, ``num_keys = num_values = 128``. A
    sample of ``n`` pairs (``length_unit = "items"``) draws its keys without replacement from the
    ``num_keys`` pool and its values without replacement from the ``num_values`` pool (so ``n <=
    min(num_keys, num_values)``: 128 pairs is 16x a training length of 8), then asks every one of its
    keys once, in a uniformly random order. Keys are tokens ``0 … num_keys-1``, value symbol ``v`` is
    token ``num_keys + v``, the query marker is ``Q = num_keys + num_values``; ``vocab_size = num_keys
    + num_values + 1`` (257 with the defaults).

    No answer is ever an input: the inputs are ``k_1 v_1 … k_n v_n Q q_1 … q_n`` (``seq_len(n) = 3n +
    1`` tokens) and the target at query ``q_j`` is its value ``a_j``. The ``n`` answers are scored (never
    the queried keys, which are random), each predicted at its query; exact match needs all ``n``
    right. With the answers fed in, a model could narrow each later answer down to the values not yet
    given (worth ``H_n / n`` token accuracy under teacher forcing, 0.34 at 8 pairs).

    Trivial baselines: ``chance``, a uniform guess over the ``num_values`` answer symbols, is
    ``1 / num_values`` (1/128). ``repeat-previous`` repeats the query key it just read, never a value:
    0. ``most-frequent`` (the most frequent value read so far: `recall`'s shortcut when values repeat)
    has nothing to count here: every value of a sample occurs once, so it names the lowest value of the
    sample, the answer of exactly one of its ``n`` queries, i.e. ``1 / n`` token accuracy, the score of a
    uniform guess among the ``n`` values read, which is ``1 / num_values`` when a sample holds the whole
    pool (``n = num_values``) and above it at shorter lengths (1/8 at 8 pairs); its exact match is 0
    for ``n > 1``.

    Differences from Zoology's generator (``zoology/data/multiquery_ar.py``): there the keys and values
    come from the two halves of an 8192-token vocabulary and the queries sit at power-law gaps among
    random filler tokens after the pairs, with no marker; here the queries follow a marker ``Q`` back to
    back, so the length of a sample is set by its pairs alone.

    Worked example (``num_keys=16, num_values=4``: values 16…19 and ``Q = 20``; pairs 5→1, 2→3, 9→0;
    queries 9, 5, 2). ``S`` is the sequence with its answers written after their queries (`sequence`);
    the sample feeds the queries only and predicts each answer at its query::

        S         = 5 17 2 19 9 16 20 9 16 5 17 2 19
        inputs    = 5 17 2 19 9 16 20 9  5  2
        targets   = 17 2 19 9 16 20 9 16 17 19
        loss_mask = .  . .  . .  .  . x  x  x

    >>> import torch
    >>> task = MQARTask(num_keys=16, num_values=4)
    >>> task.sequence(keys=[5, 2, 9], values=[1, 3, 0], query=[9, 5, 2])
    [5, 17, 2, 19, 9, 16, 20, 9, 16, 5, 17, 2, 19]
    >>> task.seq_len(3), task.vocab_size, task.chance
    (10, 21, 0.25)
    >>> batch = task.sample(2, 3, torch.Generator().manual_seed(0))
    >>> tuple(batch.inputs.shape), batch.loss_mask.sum(dim=1).tolist()
    ((2, 10), [3, 3])
    >>> bool((batch.inputs[:, 7:] < 16).all())  # the queries are keys: no answer is an input
    True
    >>> MQARTask().vocab_size, MQARTask().chance, MQARTask().seq_len(8)
    (257, 0.0078125, 25)
    """

    description = "multi-query associative recall (Zoology): key-value pairs with distinct values, then every key; predict its value"
    chance = 1 / 128

    def __init__(self, num_keys: int = 128, num_values: int = 128, queries: int | str = "all",
                 distinct_values: bool = True, feed_answers: bool = False) -> None:
        super().__init__(num_keys=num_keys, num_values=num_values, queries=queries,
                         distinct_values=distinct_values, feed_answers=feed_answers)
