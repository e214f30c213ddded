"""xPos: rotary embeddings with an exponential distance decay (Sun et al. 2022)."""

from __future__ import annotations

from typing import Literal

import torch

from lenbench.encodings.base import EncodingDims, PairRotation, PositionalEncoding, register_encoding
from lenbench.encodings.params import number_param, one_of
from lenbench.encodings.rope import rotary_tables, rotate_qk
from lenbench.encodings.rope_types import default_inv_freq

#: γ_s of the paper's code (positions): the decay ζ_i applies once per 512 positions, at training length 1024.
PAPER_SCALE_BASE = 512.0


def xpos_scale_base(scale_base: float | None, scale_base_fraction: float | None, train_len: int | None) -> float:
    """γ_s (positions) of an xPos encoding.

    Args:
        scale_base: the γ_s given, or None for `PAPER_SCALE_BASE`.
        scale_base_fraction: None, or γ_s = scale_base_fraction × `train_len`: the length-relative
            scale base (0.5 is the paper's 512 at its training length 1024). Ignored, for
            `scale_base`, when `train_len` is unknown.
        train_len: the training length in tokens, or None when unknown (a suite's load-time probe).
    """
    if scale_base_fraction is not None and train_len is not None:
        return scale_base_fraction * train_len
    return PAPER_SCALE_BASE if scale_base is None else scale_base


def xpos_zeta(head_dim: int, gamma: float) -> torch.Tensor:
    """Per-pair decay bases ζ_i = (i / (d/2) + γ) / (1 + γ), i = 0 … d/2 − 1 (Sun et al.
    2022; the paper's code writes it as (2i + γ·d) / ((1 + γ)·d)).

    Every ζ_i lies in [γ / (1 + γ), 1): the fastest-rotating pair (i = 0) decays fastest.

    Returns:
        float64 tensor (head_dim/2,).
    """
    i = torch.arange(head_dim // 2, dtype=torch.float64)  # (d/2,)
    return (i / (head_dim / 2) + gamma) / (1.0 + gamma)


@register_encoding("xpos")
class XPos(PositionalEncoding):
    """Extrapolatable position embedding (Sun et al. 2022, "A Length-Extrapolatable Transformer").

    RoPE whose rotated query at position m is scaled by ζ_i^(m/γ_s) and rotated key at position n
    by ζ_i^(−n/γ_s), per channel pair i, so the score carries the paper's decay factor:
    q_m · k_n = Σ_i Re[q_i conj(k_i) e^{i(m−n)θ_i}] · ζ_i^((m−n)/γ_s), with ζ_i^((m−n)/γ_s) ≤ 1
    for m ≥ n: attention decays exponentially with distance while the rotation keeps it relative.
    γ_s is `scale_base` (512 in the paper's code, whose models train at length 1024).

    Keys after the query would get ζ^(negative) > 1, an exponential *growth*, so xPos is defined
    for causal attention only.

    Numerics: only m − n matters, so the exponents use positions centred per row (minus the row's
    midpoint (min + max) // 2), as the paper's reference code does; the scale factors then stay
    within ζ_min^(±T/(2·γ_s)) instead of growing with the absolute position. The product is
    unchanged. (At T = 4096 and the defaults that is at most e^±5; far longer sequences in half
    precision would eventually overflow, as in the original.)

    Args:
        dims: model geometry (the head dimension must be even; `dims.train_len`: the training
            length in tokens, for `scale_base_fraction`).
        gamma: γ of ζ_i = (i/(d/2) + γ)/(1 + γ); 0.4 in the paper.
        scale_base: γ_s, the distance over which the decay ζ_i applies once; None: 512, the
            paper's, whatever the training length.
        scale_base_fraction: instead of `scale_base`, γ_s = scale_base_fraction × the training
            length in tokens. The paper ties γ_s to its training length (512 at 1024 tokens,
            i.e. 0.5); at the absolute 512, a model trained on far fewer tokens meets only a
            fraction of one decay step ζ_i in training. When the training length is unknown (a
            suite's load-time probe), γ_s = `scale_base`.
        theta: rotary base θ of θ_i = θ^(−2i/d) (10000 as in RoPE).
        layout: "half" (pair i with i + d/2, like `rope`'s default) or "interleaved" (pair 2i with
            2i + 1, the paper's code); ζ_i follows the pair's frequency index in both.
    """

    description = "RoPE times a per-pair exponential decay ζ^((m−n)/scale_base); causal only"
    paper = "Sun et al. 2022, A Length-Extrapolatable Transformer"
    causal_only = True

    def __init__(
        self,
        dims: EncodingDims,
        *,
        gamma: float = 0.4,
        scale_base: float | None = None,
        scale_base_fraction: float | None = None,
        theta: float = 10000.0,
        layout: Literal["half", "interleaved"] = "half",
    ):
        super().__init__(dims)
        if layout not in ("half", "interleaved"):
            raise ValueError(f"xpos layout must be 'half' or 'interleaved', got {layout!r}")
        if dims.head_dim % 2:
            raise ValueError(f"xpos needs an even head dimension, got head_dim={dims.head_dim}")
        self.gamma = number_param(self.name, "gamma", gamma)
        absolute = None if scale_base is None else number_param(self.name, "scale_base", scale_base)
        fraction = (None if scale_base_fraction is None
                    else number_param(self.name, "scale_base_fraction", scale_base_fraction))
        one_of(self.name, "the decay's scale base", scale_base=scale_base, scale_base_fraction=scale_base_fraction)
        self.scale_base = xpos_scale_base(absolute, fraction, dims.train_len)
        self.theta = number_param(self.name, "theta", theta)
        self.layout = layout

    def cos_sin_scale(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """(cos, sin, scale) tables (B, 1, T, d/2) for positions (B, T); keys use 1 / scale."""
        work = torch.float64 if dtype == torch.float64 else torch.float32
        p = pos.to(work)  # (B, T)
        centre = torch.div(pos.amin(-1) + pos.amax(-1), 2, rounding_mode="floor").to(work)  # (B,)
        rel = p - centre[:, None]  # (B, T), centred: only differences reach the scores
        inv_freq = default_inv_freq(self.dims.head_dim, self.theta).to(pos.device, work)  # (d/2,)
        log_zeta = xpos_zeta(self.dims.head_dim, self.gamma).log().to(pos.device, work)  # (d/2,)
        angle = p[:, None, :, None] * inv_freq  # (B, 1, T, d/2)
        scale = torch.exp(rel[:, None, :, None] / self.scale_base * log_zeta)  # (B, 1, T, d/2)
        return angle.cos(), angle.sin(), scale

    def tables(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """`rotary_tables` for queries (cos, sin times ζ-scale) and keys (divided by it), each
        (B|1, 1, T, d); cached (`position_tables`)."""

        def compute(p: torch.Tensor) -> tuple[torch.Tensor, ...]:
            cos, sin, scale = self.cos_sin_scale(p, dtype)  # 3 × (B|1, 1, T, d/2)
            q_tabs = rotary_tables((cos * scale).to(dtype), (sin * scale).to(dtype), self.layout)  # 2 × (B|1, 1, T, d)
            k_tabs = rotary_tables((cos / scale).to(dtype), (sin / scale).to(dtype), self.layout)  # 2 × (B|1, 1, T, d)
            return (*q_tabs, *k_tabs)

        key = (dtype, self.gamma, self.scale_base, self.theta, self.layout)
        return self.position_tables(pos, key, compute)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q_cos, q_sin, k_cos, k_sin = self.tables(pos, q.dtype)  # 4 × (B|1, 1, T, d)
        return rotate_qk(q, k, (q_cos, q_sin), (k_cos, k_sin), self.layout)  # (B, H, T, Dh) each

    def pair_rotation(self, pos: torch.Tensor, dtype: torch.dtype) -> PairRotation:
        cos, sin, scale = self.cos_sin_scale(pos, dtype)  # (B, 1, T, d/2) each; keys use 1 / scale
        return PairRotation((cos * scale).to(dtype), (sin * scale).to(dtype), self.layout,
                            (cos / scale).to(dtype), (sin / scale).to(dtype))
