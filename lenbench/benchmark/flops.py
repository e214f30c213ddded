"""Analytic FLOPs of a training step of `lenbench.model.Transformer`, the machine's matmul rate,
and model FLOPs utilisation (MFU).

MFU = (FLOPs the model needs per step / step seconds) / (the device's measured dense-matmul rate),
as in Chowdhery et al. 2022 (PaLM), appendix B: only the model's matrix multiplications count —
LayerNorm, GELU, softmax, the loss, the optimiser and any recomputation are overhead the fast
path should hide, not work that raises the number.

Counted per layer (forward; one multiply-add = 2 FLOPs; B batch, T tokens, D = d_model,
F = ff_mult·D, V vocabulary):

    qkv projection        2·B·T·D·3D
    scores q·kᵀ           2·B·T·T·D      (all heads: H·Dh = D; the full T×T square, causal or not,
    probabilities · v     2·B·T·T·D       as PaLM and torch.utils.flop_counter count it)
    output projection     2·B·T·D·D
    MLP                   2·B·T·D·F · 2
plus the LM head 2·B·T·D·V once. The token embedding is a lookup (0 FLOPs). Positional
encodings' own work (a rotation, a bias, FIRE's MLP …) is not model FLOPs: it is what the
training-step benchmark's ratio to `nope` measures.

Backward = 2 × forward: each matmul y = x·W needs dx = dy·Wᵀ and dW = xᵀ·dy (and attention's
two products need dq, dk and dp, dv). Training step = 3 × forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lenbench.device import synchronize


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one training step, by part (forward) and in total.

    Attributes:
        forward: forward FLOPs (sum of `parts`).
        parts: forward FLOPs per kind of matmul, summed over layers: qkv, scores, values, out,
            mlp, head.
    """

    forward: int
    parts: dict

    @property
    def backward(self) -> int:
        return 2 * self.forward

    @property
    def total(self) -> int:
        """Forward + backward FLOPs of one training step."""
        return self.forward + self.backward


def transformer_flops(*, batch: int, seq_len: int, d_model: int, n_layers: int, ff_mult: int, vocab_size: int) -> StepFlops:
    """Matmul FLOPs of one training step of the pre-LN decoder (see the module docstring).

    Args:
        batch: sequences per step (B).
        seq_len: tokens per sequence (T).
        d_model, n_layers, ff_mult, vocab_size: the model's geometry (`ModelConfig`).
    """
    tokens = batch * seq_len  # B·T
    D, F = d_model, ff_mult * d_model
    per_layer = {
        "qkv": 2 * tokens * D * 3 * D,
        "scores": 2 * batch * seq_len * seq_len * D,
        "values": 2 * batch * seq_len * seq_len * D,
        "out": 2 * tokens * D * D,
        "mlp": 2 * 2 * tokens * D * F,
    }
    parts = {k: n_layers * v for k, v in per_layer.items()}
    parts["head"] = 2 * tokens * D * vocab_size
    return StepFlops(forward=sum(parts.values()), parts=parts)


def model_step_flops(model, batch: int, seq_len: int) -> StepFlops:
    """`transformer_flops` of a `lenbench.model.Transformer` at (batch, seq_len) tokens."""
    cfg = model.cfg
    return transformer_flops(batch=batch, seq_len=seq_len, d_model=cfg.d_model, n_layers=cfg.n_layers,
                             ff_mult=cfg.ff_mult, vocab_size=cfg.vocab_size)


def matmul_rate(device: torch.device, dtype: torch.dtype = torch.float32, n: int | None = None, rounds: int = 5) -> float:
    """The device's dense matmul rate in FLOP/s: fastest of `rounds` (n×n)·(n×n) products.

    The fastest round is the machine's capability (other load only slows rounds down).
    Default n: 2048 on the CPU (large enough to reach the BLAS peak, 0.1–0.2 s per product on one
    core), 8192 on an accelerator (a 2048² product is a fraction of a millisecond on a large GPU,
    two waves of tiles: below its peak).
    """
    from lenbench.benchmark.timing import time_fn

    n = n or (2048 if device.type == "cpu" else 8192)
    a = torch.randn(n, n, device=device).to(dtype)  # (n, n)
    b = torch.randn(n, n, device=device).to(dtype)  # (n, n)
    out = torch.empty(n, n, device=device, dtype=dtype)  # (n, n)
    seconds = time_fn(lambda: torch.mm(a, b, out=out), device, rounds=rounds, warmup=2, stat="min")
    synchronize(device)
    return 2 * n**3 / seconds


def mfu(flops: float, seconds: float, peak_flops_per_s: float) -> float:
    """Model FLOPs utilisation: achieved FLOP/s over the peak (0 … 1)."""
    return flops / seconds / peak_flops_per_s if seconds > 0 and peak_flops_per_s > 0 else float("nan")


__all__ = ["StepFlops", "matmul_rate", "mfu", "model_step_flops", "transformer_flops"]
