"""KERPLE: kernelized relative positional embedding (Chi et al. 2022)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from lenbench.encodings.base import ClosedFormBias, EncodingDims, PositionalEncoding, register_encoding

EPS = 1e-2  # the lower bound of every KERPLE parameter, as in the paper's code


def _softplus_inverse(y: torch.Tensor) -> torch.Tensor:
    """x with softplus(x) = y, for y > 0."""
    return y + torch.log(-torch.expm1(-y))


def kerple_log_score(score: torch.Tensor, h: torch.Tensor, rel: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor) -> torch.Tensor:
    """score − r1_h · log(1 + r2_h · |k_pos − q_pos|) (the closed form fused kernels evaluate per score)."""
    return score - r1[h] * torch.log1p(r2[h] * rel.abs())


def kerple_power_score(score: torch.Tensor, h: torch.Tensor, rel: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor) -> torch.Tensor:
    """score − r1_h · |k_pos − q_pos|^r2_h, 0 at distance 0 (the closed form fused kernels evaluate per score)."""
    d = rel.abs().to(torch.float32)
    return score - r1[h] * torch.where(d > 0, d.clamp(min=1.0).pow(r2[h]), 0.0)


@register_encoding("kerple")
class Kerple(PositionalEncoding):
    """Kernelized relative positional bias (Chi et al. 2022, "KERPLE: Kernelized Relative Positional
    Embedding for Length Extrapolation"; the two shift-invariant conditionally positive definite
    kernels it evaluates, KERPLE-log and KERPLE-power):

        log:    bias[h, m, n] = −r1_h · log(1 + r2_h · |m − n|)     r1, r2 > 0
        power:  bias[h, m, n] = −r1_h · |m − n|^r2_h                r1 > 0, 0 < r2 ≤ 2

    with one learnable (r1, r2) per head. The paper's code keeps the parameters feasible by
    clamping them in place (`.data.clamp(min=1e-2)`, and `max=2` for the power) on every forward;
    here they are reparametrised instead, so no optimiser step can leave the feasible set:
    r = 0.01 + softplus(raw), and for the power exponent r2 = 0.01 + 1.99 · sigmoid(raw) ∈
    (0.01, 2). Initial values follow the paper's code, drawn per head with torch's global RNG:
    log r1 ~ U(0, 2), r2 ~ U(0, 1); power r1 ~ U(0, 1), r2 ~ U(0, 2) (each kept inside the bounds).

    The bias depends on |m − n|, so it serves causal and bidirectional models alike.

    Args:
        dims: model geometry.
        form: "log" (the paper's best, KERPLE-log) or "power" (KERPLE-power).
    """

    description = "learned per-head kernel bias −r1·log(1 + r2·|m−n|) (or −r1·|m−n|^r2)"
    paper = "Chi et al. 2022, KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation"
    kernel_family = "bias"  # held to the fused-attention target (lenbench.benchmark.plans)
    relative_only = True

    def __init__(self, dims: EncodingDims, *, form: Literal["log", "power"] = "log"):
        super().__init__(dims)
        if form not in ("log", "power"):
            raise ValueError(f"kerple form must be 'log' or 'power', got {form!r}")
        self.form = form
        H = dims.n_heads
        lo, hi = 2 * EPS, 2.0 - EPS  # strictly inside the bounds, so the inverse maps are finite
        if form == "log":
            r1 = (torch.rand(H) * 2.0).clamp(lo)  # (H,)
            r2 = torch.rand(H).clamp(lo)  # (H,)
            raw2 = _softplus_inverse(r2 - EPS)
        else:
            r1 = torch.rand(H).clamp(lo)  # (H,)
            r2 = (torch.rand(H) * 2.0).clamp(lo, hi)  # (H,)
            raw2 = torch.logit((r2 - EPS) / (2.0 - EPS))
        self.raw_r1 = nn.Parameter(_softplus_inverse(r1 - EPS))  # (H,)
        self.raw_r2 = nn.Parameter(raw2)  # (H,)

    @property
    def r1(self) -> torch.Tensor:
        """The scale r1 > 0.01 per head, (H,)."""
        return EPS + F.softplus(self.raw_r1)

    @property
    def r2(self) -> torch.Tensor:
        """r2 per head, (H,): > 0.01 for "log"; in (0.01, 2) for "power"."""
        if self.form == "log":
            return EPS + F.softplus(self.raw_r2)
        return EPS + (2.0 - EPS) * torch.sigmoid(self.raw_r2)

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        r1, r2 = self.r1[None, :, None, None], self.r2[None, :, None, None]  # (1, H, 1, 1)
        dist = (q_pos[:, :, None] - k_pos[:, None, :]).abs()[:, None].to(r1.dtype)  # (B, 1, Tq, Tk)
        if self.form == "log":
            return -r1 * torch.log1p(r2 * dist)  # (B, H, Tq, Tk)
        # |m − n|^r2 with a finite gradient at distance 0 (d/dr2 of 0^r2 would be 0 · log 0 = nan).
        powered = dist.clamp(min=1.0).pow(r2)  # (B, H, Tq, Tk); distances are integers, so ≥ 1 or 0
        return -r1 * torch.where(dist > 0, powered, torch.zeros_like(powered))  # (B, H, Tq, Tk)

    def closed_form_bias(self) -> ClosedFormBias:
        score = kerple_log_score if self.form == "log" else kerple_power_score
        return ClosedFormBias(f"kerple_{self.form}", score, (self.r1.detach().float(), self.r2.detach().float()))  # (H,) each

    def extra_repr(self) -> str:
        return f"name={self.name!r}, form={self.form!r}"

