"""FIRE: functional interpolation for relative positions (Li et al. 2023)."""

from __future__ import annotations

import torch
from torch import nn

from lenbench.encodings.base import (
    EncodingDims,
    PositionalEncoding,
    int_param,
    number_param,
    register_encoding,
    shared_rows,
)

#: FIRE's threshold when the training length is unknown (the paper's initial value).
PAPER_THRESHOLD = 512.0


def default_threshold(train_len: int | None) -> float:
    """FIRE's default threshold L for a model trained on `train_len` tokens: train_len / 4
    (at least 1), or `PAPER_THRESHOLD` when the training length is unknown (None)."""
    return PAPER_THRESHOLD if train_len is None else max(1.0, train_len / 4)


@register_encoding("fire")
class Fire(PositionalEncoding):
    """Functional Interpolation for Relative Positions (Li et al. 2023, "Functional Interpolation
    for Relative Positions Improves Long Context Transformers": the FIRE bias with its log
    transform and learned threshold):

        bias[h, i, j] = f_θ( ψ(i − j) / ψ(max(L, i)) )_h,     ψ(x) = log(c·x + 1),   j ≤ i

    with i the *query* position and j the key position. f_θ is a small MLP (1 → `hidden` → H,
    ReLU) giving one bias per head; c and the threshold L are learned (used as |c| and |L| so that
    ψ stays defined). For queries before the threshold (i < L) the normaliser is the constant
    ψ(L), so the bias depends on i − j alone, like any relative bias; past it the normaliser is the
    query's own ψ(i), which maps every query's whole context onto [0, 1] ("progressive
    interpolation") so longer contexts reuse the inputs f_θ was trained on. A small ε = 1e-6 is
    added to the normaliser, as in the paper's code.

    FIRE is defined for causal attention (keys j ≤ i); keys after the query (masked by the model)
    get the bias of distance 0.

    Args:
        dims: model geometry.
        hidden: width of the MLP's hidden layer (32 in the paper).
        c: initial value of the learned log-transform scale c.
        threshold: initial value of the learned threshold L, in positions. None (default) derives
            it from the training length: `default_threshold(dims.train_len)` = a quarter of the
            training length in tokens, so the progressive interpolation engages inside the trained
            range and is learned (a constant above the training length, such as the paper's 512
            at the quick suite's lengths, never engages). 512.0 when the training length is
            unknown; pass `threshold: 512` for the paper's constant.
    """

    description = "learned MLP of the log-distance normalised by the query position (progressive interpolation)"
    paper = "Li et al. 2023, Functional Interpolation for Relative Positions Improves Long Context Transformers"
    causal_only = True

    def __init__(self, dims: EncodingDims, *, hidden: int = 32, c: float = 1.0, threshold: float | None = None):
        super().__init__(dims)
        threshold = default_threshold(dims.train_len) if threshold is None else threshold
        int_param(self.name, "hidden", hidden)
        number_param(self.name, "c", c)
        number_param(self.name, "threshold", threshold)
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, dims.n_heads))
        self.c = nn.Parameter(torch.tensor(float(c)))
        self.threshold = nn.Parameter(torch.tensor(float(threshold)))
        self.eps = 1e-6

    def psi(self, x: torch.Tensor) -> torch.Tensor:
        """ψ(x) = log(|c|·x + 1), elementwise."""
        return torch.log1p(self.c.abs() * x)

    def normalized_distance(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """The MLP's input ψ(i − j) / ψ(max(L, i)), (B, Tq, Tk), in the parameters' dtype."""
        dtype = self.c.dtype
        rel = (q_pos[:, :, None] - k_pos[:, None, :]).clamp(min=0).to(dtype)  # (B, Tq, Tk), i − j ≥ 0
        norm = torch.maximum(q_pos.to(dtype), self.threshold.abs())  # (B, Tq): max(L, i), query position i
        return self.psi(rel) / (self.psi(norm) + self.eps)[:, :, None]  # (B, Tq, Tk)

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        q_one, k_one = shared_rows(q_pos), shared_rows(k_pos)  # (1|B, Tq), (1|B, Tk)
        if q_one.shape[0] == k_one.shape[0] == 1:  # the bias is evaluated once and broadcast over the batch
            q_pos, k_pos = q_one, k_one  # (1, Tq), (1, Tk)
        x = self.normalized_distance(q_pos, k_pos)  # (B|1, Tq, Tk)
        return self.mlp(x[..., None]).permute(0, 3, 1, 2)  # (B|1, Tq, Tk, H) -> (B|1, H, Tq, Tk)

    def extra_repr(self) -> str:
        return f"name={self.name!r}"
