"""`passkey`: retrieve a number hidden in filler (Mohtashami & Jaggi 2023, "Landmark Attention",
§4.2; used by Chen et al. 2023, "Extending Context Window of Large Language Models via Positional
Interpolation", §3.3)."""

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
from lenbench.tasks.passkey_depth import evaluate_depth


@register_task("passkey")
class PasskeyTask(Task):
    """A ``digits``-digit passkey at a uniformly random depth in repeated filler; recall it at the end.

    The papers hide "The pass key is 12345. Remember it." among repeated filler sentences ("The grass
    is green. The sky is blue. …") and ask "What is the pass key?". Here the filler is a token-level
    pattern of ``filler_period`` tokens repeated cyclically (one continuous stream that the needle
    interrupts).

    Layout: digits ``0 … 9``, filler ``10 … 9+filler_period``, ``KEY = 10 + filler_period`` (opens the
    needle), ``QUERY = 11 + filler_period`` (asks for the passkey); ``vocab_size = 12 + filler_period``
    (17 with the defaults). A sample is ``filler[:p] KEY d_1 … d_D filler[p:] QUERY d_1 … d_D`` with
    ``length + 1`` tokens, so ``seq_len(length) = length`` (``length_unit = "tokens"``: the model sees
    exactly ``length`` tokens). The filler holds ``length - 2·digits - 1`` tokens, the depth ``p`` is
    uniform over ``0 … that``, so the minimum length is ``2·digits + 1``. Every digit is uniform over
    0–9 (leading zeros allowed). The loss covers the ``digits`` answer tokens; chance ``1/10``.

    Worked example (``digits=3, filler_period=3``: filler 10 11 12, ``KEY = 13``, ``QUERY = 14``;
    length 12, passkey 407 at depth 2)::

        S         = 10 11 13 4 0 7 12 10 11 14 4 0 7
        inputs    = 10 11 13 4 0 7 12 10 11 14 4 0
        targets   = 11 13 4 0 7 12 10 11 14 4 0 7
        loss_mask =  .  . . . .  .  .  .  . x x x

    >>> task = PasskeyTask(digits=3, filler_period=3)
    >>> task.sequence(12, passkey=[4, 0, 7], depth=2)
    [10, 11, 13, 4, 0, 7, 12, 10, 11, 14, 4, 0, 7]
    >>> task.seq_len(12), task.vocab_size, task.chance
    (12, 15, 0.1)
    """

    description = "retrieve a passkey hidden at a random depth in repeated filler"
    paper = "Mohtashami & Jaggi 2023, Landmark Attention"
    length_unit = "tokens"
    chance = 0.1
    PARAMS = {"digits": Param(int, low=1), "filler_period": Param(int, low=1)}

    def __init__(self, digits: int = 5, filler_period: int = 5) -> None:
        self.digits = self.param("digits", digits)
        self.filler_period = self.param("filler_period", filler_period)
        self.key_token = 10 + self.filler_period
        self.query_token = 11 + self.filler_period

    @property
    def vocab_size(self) -> int:
        return 12 + self.filler_period

    @property
    def min_length(self) -> int:
        return 2 * self.digits + 1

    def _check(self, length: int) -> int:
        minimum = self.min_length
        return check_length(
            self,
            length,
            minimum,
            fix=f"pass length >= {minimum} tokens (2·digits + 1 for the needle and the query) or fewer digits",
        )

    def heuristics(self) -> dict:
        """"The most frequent digit read so far": the passkey's own digits are the only digits in the context."""
        return {"most-frequent": lambda inputs: most_frequent_so_far(inputs, range(10))}

    def seq_len(self, length: int) -> int:
        return self._check(length)

    def sequence(self, length: int, passkey: list[int], depth: int) -> list[int]:
        """Full token sequence (``length + 1`` tokens) with `passkey` (digits) after `depth` filler tokens."""
        n_filler = self._check(length) - 2 * self.digits - 1
        if len(passkey) != self.digits or not 0 <= depth <= n_filler:
            raise ValueError(f"task {self.name!r}: need {self.digits} digits and 0 <= depth <= {n_filler}")
        filler = [10 + i % self.filler_period for i in range(n_filler)]
        return [*filler[:depth], self.key_token, *passkey, *filler[depth:], self.query_token, *passkey]

    def needle_depth(self, inputs: torch.Tensor) -> torch.Tensor:
        """Depth of each example's needle: filler tokens before it / all filler tokens, in [0, 1].

        Args:
            inputs: (B, length) the `inputs` of a batch of this task.

        Returns:
            (B,) float64; 0 when the filler is empty.
        """
        n_filler = self._check(inputs.shape[1]) - 2 * self.digits - 1
        before = (inputs == self.key_token).long().argmax(dim=1)  # (B,) index of KEY = filler tokens before it
        return before.double() / max(1, n_filler)  # (B,)

    def extra_measurements(self, model, length: int, train_len: int, ratio: float, **kw) -> list[dict]:
        """Every metric per needle-depth bucket ("depth:a-b", `lenbench.tasks.passkey_depth.evaluate_depth`)."""
        res = evaluate_depth(model, self, length, **kw)
        return [{"bucket": label, "metric": m, "value": v, "n_samples": n}
                for label, values, n in res["buckets"] for m, v in values.items()]

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        length = self._check(length)
        check_sample_args(self, batch_size, split)
        B, D, N = batch_size, self.digits, length + 1
        n_filler = N - 2 * (D + 1)
        passkey = torch.randint(0, 10, (B, D), generator=generator)  # (B, D)
        depth = torch.randint(0, n_filler + 1, (B, 1), generator=generator)  # (B, 1)
        t = torch.arange(N).unsqueeze(0)  # (1, N)
        filler_idx = torch.where(t < depth, t, t - (D + 1))  # (B, N), index into the filler stream
        seq = 10 + filler_idx.remainder(self.filler_period)  # (B, N)
        needle = torch.cat([torch.full((B, 1), self.key_token), passkey], dim=1)  # (B, D+1)
        offset = t - depth  # (B, N)
        in_needle = (offset >= 0) & (offset <= D)  # (B, N)
        seq = torch.where(in_needle, needle.gather(1, offset.clamp(0, D)), seq)  # (B, N)
        query = torch.cat([torch.full((B, 1), self.query_token), passkey], dim=1)  # (B, D+1)
        seq[:, N - (D + 1) :] = query
        return to_batch(seq, D)
