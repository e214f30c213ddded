"""ALiBi: attention with linear biases (Press et al. 2022)."""

from __future__ import annotations

import math

import torch

from lenbench.encodings.base import ClosedFormBias, EncodingDims, PositionalEncoding, register_encoding


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Per-head slopes of Press et al. 2022, §3 and their reference code.

    For n a power of two the slopes are the geometric sequence starting at 2^(-8/n) with that
    ratio: 8 heads → 1/2, 1/4, …, 1/256. Otherwise take the n' = 2^floor(log2 n) slopes of n', then
    every other slope of 2n' until there are n.

    Returns:
        float64 tensor (n_heads,).
    """
    if n_heads < 1:
        raise ValueError(f"ALiBi needs at least one head, got {n_heads}")

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        slopes = power_of_two(n_heads)
    else:
        closest = 2 ** math.floor(math.log2(n_heads))
        slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_score(score: torch.Tensor, h: torch.Tensor, rel: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    """score − m_h · |k_pos − q_pos| (the closed form fused kernels evaluate per score)."""
    return score - slopes[h] * rel.abs()


@register_encoding("alibi")
class ALiBi(PositionalEncoding):
    """Attention with Linear Biases (Press et al. 2022, "Train Short, Test Long", eq. in §3).

    bias[h, i, j] = −m_h · (i − j) for a causal model (keys j ≤ i); −m_h · |i − j| when
    bidirectional (the symmetric form). Positions come from `q_pos` / `k_pos`.
    """

    description = "per-head linear distance penalty, geometric slopes; no parameters"
    paper = "Press et al. 2022, Train Short, Test Long: Attention with Linear Biases"
    kernel_family = "bias"  # held to the fused-attention target (lenbench.benchmark.plans)
    relative_only = True

    def __init__(self, dims: EncodingDims):
        super().__init__(dims)
        self.register_buffer("slopes", alibi_slopes(dims.n_heads).float(), persistent=False)  # (H,)

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        rel = (q_pos[:, :, None] - k_pos[:, None, :]).abs()  # (B, Tq, Tk); causal mask hides j > i
        slopes = self.slopes.to(torch.float64 if q_pos.dtype == torch.float64 else torch.float32)
        return -slopes[None, :, None, None] * rel[:, None].to(slopes.dtype)  # (B, H, Tq, Tk)

    def closed_form_bias(self) -> ClosedFormBias:
        return ClosedFormBias("alibi", alibi_score, (self.slopes.float(),))  # slopes (H,)

    def kernel_comparisons(self) -> tuple[str, ...]:
        return ("flex_gather",)  # the same score modifier gathering positions, even contiguous ones
