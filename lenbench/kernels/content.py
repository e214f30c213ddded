"""Content-dependent bias (CoPE): attention with a bias that reads q and k, eager vs compiled.

An encoding with `content_dependent = True` gets these; its `attention_bias` hook is the eager
reference, and the fused path is the same function through torch.compile.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lenbench.encodings import PositionalEncoding
from lenbench.kernels.bias import causal_additive_mask
from lenbench.kernels.support import lazy_compile


def attention_content(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enc: PositionalEncoding,
                      pos: torch.Tensor) -> torch.Tensor:
    """Attention with a bias that reads q and k (`attention_bias`), causal: (B, H, T, Dh)."""
    bias = enc.attention_bias(q, k, pos, pos).to(q.dtype)  # (B, H, T, T)
    mask = bias + causal_additive_mask(q.shape[2], q.device, q.dtype)  # (B, H, T, T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, Dh)


_content_compiled = lazy_compile(attention_content)


def attention_content_compiled(q, k, v, enc, pos):
    """`attention_content` through torch.compile (bias and mask fused into fewer passes)."""
    return _content_compiled(q, k, v, enc, pos)

