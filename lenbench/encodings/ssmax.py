"""SSMax: Scalable-Softmax, logits scaled by s · log n (Nakanishi 2025)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lenbench.encodings.base import EncodingDims, PositionalEncoding, build_encoding, register_encoding
from lenbench.encodings.params import number_param


def check_base(wrapper: str, base: str, base_params) -> None:
    """One-line errors for a wrapper's `base` / `base_params` (shared by ssmax and dape)."""
    if base == wrapper:
        raise ValueError(f"encoding {wrapper!r} cannot wrap itself")
    if base_params is not None and not isinstance(base_params, dict):
        raise ValueError(f"encoding {wrapper!r}: base_params = {base_params!r} is out of range (valid: a mapping of "
                         f"the {base!r} encoding's parameters)")


def refuse_layer_hooks(wrapper: str, inner: PositionalEncoding) -> None:
    """Wrappers forward the position hooks only: a base that uses the layer hooks cannot be wrapped."""
    if inner.layer_dependent or inner.replaces_softmax:
        raise ValueError(f"encoding {wrapper!r} cannot wrap {inner.name!r}: it replaces the attention itself "
                         f"(layer_bias / attend hooks); choose a position, rotary or bias encoding")


@register_encoding("ssmax")
class ScalableSoftmax(PositionalEncoding):
    """Scalable-Softmax (Nakanishi 2025, "Scalable-Softmax Is Superior for Attention", eq. 3–4):
    softmax over n keys replaced by

        SSMax(z)_j = n^(s·z_j) / Σ_j' n^(s·z_j') = softmax((s · log n) · z)_j

    with z the usual logits q·k/√Dh (+ the wrapped encoding's bias) and s learnable per head and
    per layer, so that the largest attention weight does not fade as n grows. n is the number of
    keys the query attends to: i + 1 for query i under the causal mask, and, with a padding mask,
    the count of keys it allows. The scaling multiplies the query (as the paper's implementation)
    and every finite entry of the additive mask (the bias), so the wrapped encoding's logits are
    scaled as a whole; forbidden keys stay −inf for any sign of s.

    It wraps another encoding (`base`, "nope" by default: the paper's own models use RoPE, which is
    `base: rope`, the `ssmax+rope` entry of the suites): that encoding's positions / embed /
    rotate / bias / attention_bias hooks are used unchanged, and SSMax replaces the softmax.
    With `learnable: false` s is a fixed constant: that is log-n scaling (Chiang & Cholak 2022's
    logits · log n for s = 1; s = 1 / log L equals plain softmax at n = L).

    Causal only here (n = i + 1, the paper's decoder setting).

    Length behaviour: evaluated past the training length exactly as trained (no inference-time
    variant), n counting the keys each query attends to. n grows with the length, so past the
    training length the logits are scaled by factors s · log n larger than any seen in training:
    attention sharpens with n instead of fading; the wrapped encoding extrapolates as it does alone.

    Args:
        dims: model geometry; one s per head and layer.
        base: registered name of the wrapped encoding ("nope").
        base_params: keyword parameters of the wrapped encoding.
        s: the initial (or, with `learnable: false`, fixed) scale (0.43, the value of the
            paper's Fig. 1); any finite number > 0.
        learnable: learn s per head and layer (True, the paper's SSMax) or keep it fixed.
    """

    description = "softmax over n keys with logits scaled by s·log n (s learned per head); wraps an encoding"
    paper = "Nakanishi 2025, Scalable-Softmax Is Superior for Attention"
    length_behaviour = "evaluated as trained, n = keys attended: past train_len s·log n exceeds its training values, attention sharpens"
    causal_only = True
    replaces_softmax = True

    def __init__(self, dims: EncodingDims, *, base: str = "nope", base_params: dict | None = None,
                 s: float = 0.43, learnable: bool = True):
        super().__init__(dims)
        check_base(self.name, base, base_params)
        s = number_param(self.name, "s", s)
        if not isinstance(learnable, bool):
            raise ValueError(f"encoding {self.name!r}: learnable = {learnable!r} is out of range (valid: true or false)")
        self.base_name = base
        self.base_enc = build_encoding(base, dims, **(base_params or {}))
        refuse_layer_hooks(self.name, self.base_enc)
        self.content_dependent = self.base_enc.content_dependent  # instance attribute: the model reads it
        self.learnable = learnable
        init = torch.full((dims.n_layers, dims.n_heads), s)  # (L, H)
        if learnable:
            self.s = nn.Parameter(init)
        else:
            self.register_buffer("s", init, persistent=False)

    # --- the wrapped encoding's hooks ------------------------------------------------------------

    def positions(self, pos: torch.Tensor) -> torch.Tensor:
        return self.base_enc.positions(pos)

    def embed(self, h: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.base_enc.embed(h, pos)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.base_enc.rotate(q, k, pos)

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        return self.base_enc.bias(q_pos, k_pos)

    def attention_bias(self, q, k, q_pos, k_pos) -> torch.Tensor | None:
        return self.base_enc.attention_bias(q, k, q_pos, k_pos)

    # --- the softmax it replaces -----------------------------------------------------------------

    def log_n(self, Tq: int, Tk: int, mask: torch.Tensor | None, device, dtype) -> torch.Tensor:
        """log of the number of keys each query attends to: (B|1, H|1, Tq, 1)."""
        if mask is None:
            n = torch.arange(Tk - Tq + 1, Tk + 1, device=device, dtype=dtype)  # (Tq,): causal, i + 1
            return n.log()[None, None, :, None]  # (1, 1, Tq, 1)
        return torch.isfinite(mask).sum(-1, keepdim=True).clamp(min=1).to(dtype).log()  # (B|1, H|1, Tq, 1)

    def scale(self, Tq: int, Tk: int, mask: torch.Tensor | None, layer: int, dtype) -> torch.Tensor:
        """λ = s_h · log n_i per head and query: (B|1, H, Tq, 1)."""
        s = self.s[layer].to(dtype)[None, :, None, None]  # (1, H, 1, 1)
        return s * self.log_n(Tq, Tk, mask, s.device, dtype)  # (B|1, H, Tq, 1)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               dropout_p: float, layer: int) -> torch.Tensor:
        lam = self.scale(q.shape[-2], k.shape[-2], mask, layer, q.dtype)  # (B|1, H, Tq, 1)
        if mask is not None:
            mask = torch.where(torch.isfinite(mask), mask * lam, mask)  # (B|1, H, Tq, Tk): bias scaled, −inf kept
        causal = mask is None and self.dims.causal
        return F.scaled_dot_product_attention(q * lam, k, v, attn_mask=mask, is_causal=causal,
                                              dropout_p=dropout_p)  # (B, H, Tq, Dh)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, base={self.base_name!r}, learnable={self.learnable}"

