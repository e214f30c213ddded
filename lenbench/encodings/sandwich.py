"""Sandwich: a parameter-free bias from inner products of sinusoidal positions (Chi et al. 2023)."""

from __future__ import annotations

import torch

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding
from lenbench.encodings.params import int_param, number_param


def sandwich_frequencies(dim: int, base: float = 10000.0) -> torch.Tensor:
    """ω_i = base^(−2i/dim) for i = 1 … dim/2 (the paper's sum starts at i = 1). float64 (dim/2,)."""
    i = torch.arange(1, dim // 2 + 1, dtype=torch.float64)  # (dim/2,)
    return base ** (-2.0 * i / dim)


def sandwich_head_divisors(n_heads: int) -> torch.Tensor:
    """The per-head compression 8h/H, h = 1 … H (head 1 keeps the largest bias). float64 (H,)."""
    return torch.arange(1, n_heads + 1, dtype=torch.float64) * 8.0 / n_heads


@register_encoding("sandwich")
class Sandwich(PositionalEncoding):
    """Sandwich (Chi et al. 2023, "Dissecting Transformer Length Extrapolation via the Lens of
    Receptive Field Analysis", §5): the inner product of two sinusoidal position vectors of width
    d̄ = `dim`, used as an additive attention bias,

        p_m · p_n = Σ_{i=1}^{d̄/2} cos((m − n) · ω_i),   ω_i = 10000^(−2i/d̄),

    with p_m = (sin(m ω_i), cos(m ω_i))_i. The sum depends only on m − n, equals d̄/2 at m = n and
    decreases (on average, logarithmically) with distance, which is what gives Sandwich ALiBi-like
    recency without parameters.

    Head compression, exactly as the Sandwich implementation in NVIDIA NeMo
    (`SandwichRelativePositionEmbedding`, which cites the paper): the constant d̄/2 is subtracted,
    so every bias is ≤ 0 and the diagonal is 0, and head h = 1 … H is divided by 8h/H:

        bias[h, m, n] = (p_m · p_n − d̄/2) / (8h/H)

    so heads get different strengths the way ALiBi's slopes do (for H = 8: 1, 1/2, …, 1/8).

    Args:
        dims: model geometry (the bias does not depend on d_model).
        dim: d̄, the width of the sinusoidal vectors (even); 128 by default.
        base: the wavelength base (10000 as in the paper).
    """

    description = "parameter-free bias (p_m·p_n − d̄/2)/(8h/H) from sinusoidal position vectors"
    paper = "Chi et al. 2023, Dissecting Transformer Length Extrapolation via the Lens of Receptive Field Analysis"
    kernel_family = "bias"  # held to the fused-attention target (lenbench.benchmark.plans)
    relative_only = True  # a function of m − n

    def __init__(self, dims: EncodingDims, *, dim: int = 128, base: float = 10000.0):
        super().__init__(dims)
        if int_param(self.name, "dim", dim, low=2) % 2:
            raise ValueError(f"encoding {self.name!r}: dim = {dim!r} is out of range (valid: an even integer >= 2)")
        self.dim = int(dim)
        self.base = number_param(self.name, "base", base)

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        out = torch.float64 if q_pos.dtype == torch.float64 else torch.float32
        rel = q_pos[:, :, None] - k_pos[:, None, :]  # (B, Tq, Tk), integers
        lo, hi = int(rel.min()), int(rel.max())
        # Every distance once, in float64 on the CPU (exact angles; R ≤ 2·T values): the table of
        # p_m · p_n − d̄/2 at m − n = d, then gathered.
        d = torch.arange(lo, hi + 1, dtype=torch.float64)  # (R,)
        omega = sandwich_frequencies(self.dim, self.base)  # (d̄/2,)
        table = torch.cos(d[:, None] * omega).sum(-1) - self.dim / 2  # (R,)
        divisors = sandwich_head_divisors(self.dims.n_heads).to(rel.device, out)  # (H,)
        centred = table.to(rel.device, out)[rel - lo]  # (B, Tq, Tk)
        return centred[:, None] / divisors[None, :, None, None]  # (B, H, Tq, Tk)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, dim={self.dim}"
