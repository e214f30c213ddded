"""p-RoPE: RoPE with its lowest frequencies removed (Barbero et al. 2025)."""

from __future__ import annotations

from typing import Literal

import torch

from lenbench.encodings.base import EncodingDims, PairRotation, PositionalEncoding, register_encoding
from lenbench.encodings.params import number_param
from lenbench.encodings.rope import rotary_tables, rotate_qk
from lenbench.encodings.rope_types import default_inv_freq


@register_encoding("prope")
class PRoPE(PositionalEncoding):
    """p-RoPE (Barbero et al. 2025, "Round and Round We Go! What makes Rotary Positional Encodings
    useful?", ICLR 2025, §6): RoPE over the full head dimension, θ_i = θ^(−2i/Dh) for
    i = 0 … Dh/2 − 1, of which only the ⌊p · Dh/2⌋ highest frequencies (i < ⌊p · Dh/2⌋) rotate;
    the remaining, lowest-frequency pairs get frequency 0, i.e. are left unrotated (the paper's
    code pads the timescales with ∞). p = 1 is RoPE, p = 0 is NoPE.

    This is not transformers' `partial_rotary_factor` (lenbench's `rope` `partial`): that rotates
    R = partial · Dh channels with θ^(−2i/R), spreading the whole frequency range over fewer
    channels, so it keeps the lowest frequency θ^(−(R−2)/R) ≈ 1/θ; p-RoPE keeps the original
    frequencies of the highest-frequency channels and drops the low ones, whose slowly turning
    pairs the paper finds act as position-independent "semantic" channels that become unreliable
    at long contexts.

    The rotated pairs are laid out as `rope`'s partial rotation: the first 2⌊p · Dh/2⌋ channels
    rotate (paired half/half or interleaved within them), the rest pass through. Which channels
    are unrotated is immaterial for a model that learns its q/k projections.

    Length behaviour: evaluated past the training length exactly as trained (no inference-time
    variant) — the suites' RoPE scaling variants apply to `rope` alone. The kept frequencies
    extrapolate as RoPE's do (unseen angles for the slow kept pairs past the training length); the
    unrotated channels carry no position at all.

    Args:
        dims: model geometry.
        p: the fraction of rotary frequencies kept, in [0, 1] (0.75 by default; the paper
            evaluates 0.25 and 0.75).
        theta: RoPE's base θ (10000).
        layout: "half" or "interleaved", as in `rope`.
    """

    description = "RoPE whose lowest-frequency fraction 1 − p of channel pairs is left unrotated"
    paper = "Barbero et al. 2025, Round and Round We Go! What makes Rotary Positional Encodings useful?"
    length_behaviour = "evaluated as trained: kept pairs meet unseen angles past train_len as RoPE's; unrotated ones carry no position"

    def __init__(self, dims: EncodingDims, *, p: float = 0.75, theta: float = 10000.0,
                 layout: Literal["half", "interleaved"] = "half"):
        super().__init__(dims)
        self.p = number_param(self.name, "p", p, strict=False)
        if self.p > 1:
            raise ValueError(f"encoding {self.name!r}: p = {p!r} is out of range (valid: a number in [0, 1])")
        if layout not in ("half", "interleaved"):
            raise ValueError(f"encoding {self.name!r}: layout = {layout!r} is out of range (valid: 'half' or 'interleaved')")
        if dims.head_dim % 2:
            raise ValueError(f"encoding {self.name!r} needs an even head dimension, got {dims.head_dim}")
        self.theta = number_param(self.name, "theta", theta)
        self.layout = layout
        self.kept = int(self.p * dims.head_dim // 2)  # rotated pairs, as the paper's int(p · head_dim // 2)
        self.rot_dim = 2 * self.kept

    def inv_freq(self) -> torch.Tensor:
        """The kept frequencies θ^(−2i/Dh), i < ⌊p · Dh/2⌋: float64 (kept,)."""
        return default_inv_freq(self.dims.head_dim, self.theta)[: self.kept]

    def cos_sin(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (B, 1, T, kept) of the kept pairs' angles."""
        work = torch.float64 if dtype == torch.float64 else torch.float32
        angle = pos.to(work)[:, None, :, None] * self.inv_freq().to(pos.device, work)  # (B, 1, T, kept)
        return angle.cos().to(dtype), angle.sin().to(dtype)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.kept == 0:
            return q, k  # p = 0: NoPE
        key = ("prope", q.dtype, self.theta, self.layout, self.kept)
        tables = self.position_tables(pos, key, lambda p: rotary_tables(*self.cos_sin(p, q.dtype), self.layout))  # 2 × (B|1, 1, T, R)
        return rotate_qk(q, k, tables, tables, self.layout)  # (B, H, T, Dh) each

    def pair_rotation(self, pos: torch.Tensor, dtype: torch.dtype) -> PairRotation | None:
        """The kept pairs' rotation (R = 2 · kept channels rotate, the rest pass through): the fused
        rotary kernel; None at p = 0 (nothing rotates)."""
        return PairRotation(*self.cos_sin(pos, dtype), self.layout) if self.kept else None  # (B, 1, T, kept) each

    def extra_repr(self) -> str:
        return f"name={self.name!r}, p={self.p:g}, kept_pairs={self.kept}/{self.dims.head_dim // 2}, theta={self.theta:g}"
