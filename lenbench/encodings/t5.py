"""T5 relative position bias (Raffel et al. 2020)."""

from __future__ import annotations

import math

import torch
from torch import nn

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding
from lenbench.encodings.params import int_param


def t5_bucket(rel: torch.Tensor, *, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """Bucket ids for relative positions `rel = k_pos − q_pos` (Raffel et al. 2020, §2.1).

    Half of the buckets are exact distances 0 … n/2−1; the rest grow logarithmically up to
    `max_distance`, beyond which everything shares the last bucket. Bidirectional bucketing
    spends half of `num_buckets` on keys after the query (rel > 0), offset by num_buckets/2.

    Example (causal, 32 buckets, max_distance 128): distance 3 → 3, 16 → 16, 32 → 21, 64 → 26,
    ≥ 128 → 31; keys after the query (rel > 0) → 0.

    Args:
        rel: integer tensor of relative positions (key minus query), any shape.
        bidirectional: whether keys after the query get buckets of their own.
        num_buckets: total number of buckets.
        max_distance: distance at which the logarithmic buckets saturate.
    """
    n = num_buckets
    ret = torch.zeros_like(rel)
    if bidirectional:
        n //= 2
        ret = ret + (rel > 0).to(rel.dtype) * n
        dist = rel.abs()
    else:
        dist = (-rel).clamp(min=0)
    max_exact = n // 2
    if max_exact < 1 or max_distance <= max_exact:
        raise ValueError(f"T5 buckets need num_buckets >= {4 if bidirectional else 2} and max_distance > {max_exact}")
    is_small = dist < max_exact
    log_ratio = torch.log(dist.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (n - max_exact)).to(rel.dtype)
    large = large.clamp(max=n - 1)
    return ret + torch.where(is_small, dist, large)


#: T5's max_distance when the training length is unknown (Raffel et al. 2020).
PAPER_MAX_DISTANCE = 128


def default_max_distance(train_len: int | None, *, num_buckets: int = 32, bidirectional: bool = False) -> int:
    """T5's default max_distance for a model trained on `train_len` tokens: `train_len`, raised to
    one past the exact buckets (num_buckets/2, or num_buckets/4 bidirectional) when shorter;
    `PAPER_MAX_DISTANCE` when the training length is unknown (None)."""
    if train_len is None:
        return PAPER_MAX_DISTANCE
    max_exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    return max(int(train_len), max_exact + 1)


@register_encoding("t5")
class T5Bias(PositionalEncoding):
    """Bucketed, learned relative position bias of T5 (Raffel et al. 2020, "Exploring the Limits of
    Transfer Learning with a Unified Text-to-Text Transformer", §2.1).

    Each head learns one scalar per bucket; bias[h, i, j] = table[bucket(j − i), h]. The bucketing
    is causal or bidirectional with the model unless `bidirectional` is given.

    Args:
        dims: model geometry.
        num_buckets: number of relative-position buckets (32 in T5).
        max_distance: distance where buckets saturate. None (default) derives it from the
            training length: `default_max_distance(dims.train_len, …)` = the training length in
            tokens, so every bucket covers distances seen in training and longer distances share
            the last, trained bucket (a constant above the trained distances, such as T5's 128 at
            the quick suite's lengths, leaves the top buckets untrained). 128 when the training
            length is unknown; pass `max_distance: 128` for the paper's constant.
        bidirectional: bucketing mode; defaults to `not dims.causal`.
    """

    description = "learned scalar bias per head and log-spaced relative-distance bucket"
    paper = "Raffel et al. 2020, Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer"
    kernel_family = "bias"  # held to the fused-attention target (lenbench.benchmark.plans)
    relative_only = True  # table[bucket(k_pos − q_pos), h]

    def __init__(
        self, dims: EncodingDims, *, num_buckets: int = 32, max_distance: int | None = None,
        bidirectional: bool | None = None,
    ):
        super().__init__(dims)
        int_param(self.name, "num_buckets", num_buckets, low=2)
        if max_distance is not None:
            int_param(self.name, "max_distance", max_distance)
        if bidirectional is not None and not isinstance(bidirectional, bool):
            raise ValueError(f"encoding {self.name!r}: bidirectional = {bidirectional!r} is out of range (valid: "
                             "true, false or null)")
        self.num_buckets = num_buckets
        self.bidirectional = (not dims.causal) if bidirectional is None else bidirectional
        if max_distance is None:
            max_distance = default_max_distance(dims.train_len, num_buckets=num_buckets, bidirectional=self.bidirectional)
        self.max_distance = max_distance
        t5_bucket(torch.zeros(1, dtype=torch.long), bidirectional=self.bidirectional,
                  num_buckets=num_buckets, max_distance=max_distance)  # validates the parameters
        self.table = nn.Embedding(num_buckets, dims.n_heads)  # (NB, H)
        nn.init.normal_(self.table.weight, std=0.02)

    def distance_table(self, lo: int, hi: int, device: torch.device | None = None) -> torch.Tensor:
        """The bias of every relative position `rel = k_pos − q_pos` in lo … hi: (H, hi − lo + 1).

        Bucketing runs once per distance (at most 2T − 1 values) instead of once per (query, key)
        pair; `bias` then gathers from this table.
        """
        rel = torch.arange(lo, hi + 1, device=device)  # (R,)
        buckets = t5_bucket(rel, bidirectional=self.bidirectional, num_buckets=self.num_buckets,
                            max_distance=self.max_distance)  # (R,)
        return self.table(buckets).T  # (R, H) -> (H, R)

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        rel = k_pos[:, None, :] - q_pos[:, :, None]  # (B, Tq, Tk)
        lo, hi = (int(v) for v in torch.aminmax(rel))  # one small reduction (and sync) per forward
        per_distance = self.distance_table(lo, hi, rel.device)  # (H, R)
        B, Tq, Tk = rel.shape
        out = per_distance.index_select(1, (rel - lo).flatten())  # (H, B·Tq·Tk)
        return out.view(-1, B, Tq, Tk).transpose(0, 1)  # (H, B, Tq, Tk) -> (B, H, Tq, Tk)
