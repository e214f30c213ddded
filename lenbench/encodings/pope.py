"""PoPE: polar coordinate positional embeddings (Gopalakrishnan, Csordás et al. 2025)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding
from lenbench.encodings.params import number_param


@register_encoding("pope")
class PoPE(PositionalEncoding):
    """PoPE (Gopalakrishnan, Csordás, Schmidhuber, Mozer 2025, "Decoupling the 'What' and 'Where'
    With Polar Coordinate Positional Embeddings", arXiv 2509.10534, §3): every one of the Dh
    query/key channels c becomes a complex number whose magnitude is the content and whose phase is
    the position alone,

        q̃_tc = softplus(q_tc) · e^{i t θ_c},      k̃_sc = softplus(k_sc) · e^{i (s θ_c + δ_c)}
        θ_c  = θ^(−c/Dh),  c = 0 … Dh − 1          (Dh frequencies: one per channel, not Dh/2 pairs)
        a_ts = Re[Σ_c q̃_tc · conj(k̃_sc)] = Σ_c softplus(q_tc) softplus(k_sc) cos((t − s) θ_c − δ_c)
        logits_ts = a_ts / √Dh

    so the content sets only the magnitudes (softplus ≥ 0, no phase from content) and the score
    depends on the positions only through t − s. δ_c ∈ [−2π, 0] is a learnable phase bias per head
    and frequency (clamped to that interval in the forward pass), initialised to 0.

    Computed in the real form: q and k (B, H, T, Dh) become (B, H, T, 2Dh), the halves
    [m · cos φ, m · sin φ]; the queries' magnitudes carry a factor √2 so that the model's softmax
    scale 1/√(2Dh) over the doubled dimension is the paper's 1/√Dh. Values are untouched.

    Deviations: one δ per head and frequency, shared by the layers (lenbench shares one encoding
    instance across layers; the paper's δ belongs to each attention layer). Reference code: none from
    the authors could be found; the third-party PoPE-pytorch (lucidrains, `PoPE_pytorch/pope.py`
    `apply_pope_to_qk`, `PoPE.__init__`) computes the same: frequencies θ^(−c/Dh), softplus
    magnitudes, δ of shape (heads, Dh) added to the keys' phase, clamped to [−2π, 0], zeros by default.

    Length behaviour: evaluated past the training length exactly as trained (no inference-time
    variant). The phases are RoPE's angles, so the fast channels meet no new angles and the slow
    ones unseen ones, but a channel can no longer rotate its content into a phase that cancels the
    positional one; the paper reports zero-shot extrapolation without interpolation.

    Args:
        dims: model geometry.
        theta: the base θ of θ_c = θ^(−c/Dh) (10000, the paper's and RoPE's).
        learnable_bias: learn the phase bias δ (True, the paper's); False keeps δ = 0.
    """

    description = "query/key magnitudes from content (softplus), phases from position only; scores depend on t − s"
    paper = "Gopalakrishnan et al. 2025, Decoupling the What and Where With Polar Coordinate Positional Embeddings"
    length_behaviour = "evaluated as trained: phases are RoPE's angles of t − s alone; magnitudes carry no position"

    def __init__(self, dims: EncodingDims, *, theta: float = 10000.0, learnable_bias: bool = True):
        super().__init__(dims)
        self.theta = number_param(self.name, "theta", theta)
        if not isinstance(learnable_bias, bool):
            raise ValueError(f"encoding {self.name!r}: learnable_bias = {learnable_bias!r} is out of range "
                             "(valid: true or false)")
        self.learnable_bias = learnable_bias
        bias = torch.zeros(dims.n_heads, dims.head_dim)  # (H, Dh) δ, in [−2π, 0]
        self.delta = nn.Parameter(bias) if learnable_bias else None

    def square_planes(self) -> tuple[float, float]:
        """(2H + 3, 3H): the scores of the magnitude and phase channels with their bias (measured
        ~2.4H per sequence, tests/run/test_eval_memory_measured.py)."""
        h = self.dims.n_heads
        return 2.0 * h + 3, 3.0 * h

    def inv_freq(self) -> torch.Tensor:
        """θ_c = θ^(−c/Dh), c = 0 … Dh − 1: float64 (Dh,)."""
        dh = self.dims.head_dim
        return self.theta ** -(torch.arange(dh, dtype=torch.float64) / dh)

    def phase_bias(self) -> torch.Tensor | None:
        """δ clamped to [−2π, 0]: (H, Dh), or None when not learned."""
        return None if self.delta is None else self.delta.clamp(-2 * math.pi, 0.0)

    def angles(self, pos: torch.Tensor, work: torch.dtype) -> torch.Tensor:
        """t · θ_c: (B, 1, T, Dh) in `work`."""
        return pos.to(work)[:, None, :, None] * self.inv_freq().to(pos.device, work)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q, k (B, H, T, Dh) → (B, H, T, 2Dh): [m cos φ, m sin φ], m = softplus, φ the position's phase."""
        dtype = q.dtype
        work = torch.float64 if dtype == torch.float64 else torch.float32

        def tables(p):
            angle = self.angles(p, work)  # (B|1, 1, T, Dh)
            return angle, angle.cos().to(dtype), angle.sin().to(dtype)

        angle, cos, sin = self.position_tables(pos, ("pope", dtype, self.theta), tables)
        mq = F.softplus(q) * math.sqrt(2.0)  # (B, H, T, Dh): √2 · 1/√(2Dh) = the paper's 1/√Dh
        mk = F.softplus(k)  # (B, H, T, Dh)
        delta = self.phase_bias()
        if delta is None:
            cos_k, sin_k = cos, sin
        else:
            angle_k = angle + delta.to(work)[None, :, None, :]  # (B|1, H, T, Dh): s θ_c + δ_hc
            cos_k, sin_k = angle_k.cos().to(dtype), angle_k.sin().to(dtype)
        return torch.cat((mq * cos, mq * sin), dim=-1), torch.cat((mk * cos_k, mk * sin_k), dim=-1)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, theta={self.theta:g}, learnable_bias={self.learnable_bias}"
