"""The attention op of every layer whose encoding keeps the softmax: scaled dot-product attention
with an additive mask (the folded biases of the bias encodings and padding).

It sits with the encodings, below the model and the kernels: the model's layers call it, and
`lenbench.kernels.layer` times it as the eager reference of the layer-kind encodings.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, is_causal: bool, dropout_p: float
) -> torch.Tensor:
    """softmax(q·kᵀ/√Dh + mask)·v for (B, H, T, Dh) inputs and an additive (B|1, H|1, T, T) mask.

    Scaled dot-product attention. SDPA's fused kernels (flash on the CPU) give no gradient to
    `attn_mask`, so when the mask carries a learned bias (T5, KERPLE, FIRE: it requires grad)
    SDPA falls back to its math path on the CPU. There the explicit form below is the same
    computation in fewer passes over the (B, H, T, T) scores (queries pre-scaled, the mask added
    in place into the product: no second (B, H, T, T) buffer), measurably faster at the model's
    sizes; everything else goes to SDPA.
    """
    if mask is not None and mask.requires_grad and torch.is_grad_enabled() and q.device.type == "cpu":
        scores = ((q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)).add_(mask)  # (B, H, T, T)
        p = scores.softmax(dim=-1)  # (B, H, T, T)
        if dropout_p:
            p = F.dropout(p, dropout_p)  # (B, H, T, T)
        return p @ v  # (B, H, T, Dh)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, dropout_p=dropout_p)  # (B, H, T, Dh)
