"""Per-layer NoPE/RoPE hybrids: Llama 4's iRoPE and Cohere's RNoPE-SWA."""

from __future__ import annotations

from typing import Literal

import torch

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding, shared_rows
from lenbench.encodings.params import int_param, number_param
from lenbench.encodings.rope import RoPE

#: The local attention of the RoPE layers: a sliding window (RNoPE-SWA) or fixed chunks (iRoPE).
LOCAL = ("sliding", "chunked")


@register_encoding("hybrid")
class NoPERoPEHybrid(PositionalEncoding):
    """NoPE global layers interleaved with RoPE local layers: Llama 4's iRoPE (Meta 2025,
    meta-llama/llama-models, models/llama4/model.py) and RNoPE-SWA (Yang et al. 2025, "Rope to Nope
    and Back Again: A New Hybrid Attention Strategy", arXiv 2501.18795, §4).

    Layer ℓ (0-based) is a NoPE layer when

        (ℓ + 1) % interval == 0          (Llama 4's `is_nope_layer`, `nope_layer_interval`)

    A NoPE layer attends causally to every earlier key with no position information at all. Every
    other layer rotates q and k as `rope` does and attends locally, to the keys j ≤ i with

        sliding:  pos_i − pos_j < window                    (RNoPE-SWA: a sliding window)
        chunked:  ⌊pos_i / window⌋ = ⌊pos_j / window⌋        (iRoPE: Llama 4's
                                                              `create_chunked_attention_mask`)

    The window mask enters as the layer's bias (−inf on the keys it removes, `layer_bias`), the
    rotation as the layer's rotation (`layer_rotate`); `rotate` alone (no layer) is the RoPE layers'.

    Deviations: Llama 4's QK-norm on its RoPE layers and its inference-time attention temperature on
    NoPE layers (`attn_temperature_tuning`) are not included; nor are its MoE and GQA. Defaults are
    scaled to this benchmark's 2-layer models and short training lengths (below).

    Length behaviour: evaluated past the training length exactly as trained. The RoPE layers never
    see a distance ≥ window (sliding) or a position inside a chunk ≥ window (chunked; the chunk's own
    positions are absolute, so later chunks rotate by unseen angles), and the NoPE layers carry no
    positions: what grows past the training length is the number of keys a NoPE layer attends to.

    Args:
        dims: model geometry.
        interval: every `interval`-th layer is NoPE (Llama 4 Scout and RNoPE-SWA use 4); by default
            min(4, n_layers), so a model with fewer than 4 layers still has one NoPE layer (with 2
            layers: layer 0 RoPE-local, layer 1 NoPE-global).
        window: the sliding window or chunk size in tokens; by default half the training length
            (`dims.train_len` // 2, at least 1; `max_len` // 2 when the training length is unknown),
            so the local layers never see the whole training sequence, as 8192-token chunks never
            cover Llama 4's training context and 4k windows never cover RNoPE-SWA's 8k.
        local: "sliding" (RNoPE-SWA, the default) or "chunked" (iRoPE).
        theta: the RoPE layers' base θ (10000).
    """

    description = "NoPE global-attention layers every `interval` layers, the others RoPE with local attention"
    paper = "Yang et al. 2025, Rope to Nope and Back Again: A New Hybrid Attention Strategy; Meta 2025, Llama 4 (iRoPE)"
    length_behaviour = ("evaluated as trained: RoPE layers see only distances < window, NoPE layers no positions "
                        "but more keys")
    causal_only = True
    layer_dependent = True
    rotates_per_layer = True

    def __init__(self, dims: EncodingDims, *, interval: int | None = None, window: int | None = None,
                 local: Literal["sliding", "chunked"] = "sliding", theta: float = 10000.0):
        super().__init__(dims)
        self.interval = min(4, dims.n_layers) if interval is None else int_param(self.name, "interval", interval)
        if window is None:
            window = max(1, (dims.train_len if dims.train_len is not None else dims.max_len) // 2)
        self.window = int_param(self.name, "window", window)
        if local not in LOCAL:
            raise ValueError(f"encoding {self.name!r}: local = {local!r} is out of range (valid: 'sliding' or 'chunked')")
        self.local = local
        self.rope = RoPE(dims, theta=number_param(self.name, "theta", theta))  # the RoPE layers' rotation

    def square_planes(self) -> tuple[float, float]:
        """(2H + 3, 2H): the local layers' sliding-window or chunk mask, shared by the batch, and
        the scores on SDPA's math path under it (measured 3 planes shared,
        tests/run/test_eval_memory_measured.py)."""
        h = self.dims.n_heads
        return 2.0 * h + 3, 2.0 * h

    def is_nope(self, layer: int) -> bool:
        """Whether layer `layer` is a NoPE global layer: (layer + 1) % interval == 0."""
        return (layer + 1) % self.interval == 0

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.rope.rotate(q, k, pos)  # (B, H, T, Dh): the RoPE layers' rotation

    def layer_rotate(self, q, k, pos, layer):
        return (q, k) if self.is_nope(layer) else self.rope.rotate(q, k, pos)  # (B, H, T, Dh) each

    def local_keys(self, pos: torch.Tensor) -> torch.Tensor:
        """(B, T, T) bool: key j is inside query i's window or chunk (the causal mask is applied apart)."""
        qp, kp = pos[:, :, None], pos[:, None, :]  # (B, T, 1), (B, 1, T)
        if self.local == "sliding":
            return qp - kp < self.window  # (B, T, T)
        return torch.div(qp, self.window, rounding_mode="floor") == torch.div(kp, self.window, rounding_mode="floor")

    def layer_bias(self, x, q, k, pos, layer):
        """None (no bias) in a NoPE layer; else 0 inside the window, −inf outside: (B|1, 1, T, T)."""
        if self.is_nope(layer):
            return None
        allowed = self.local_keys(shared_rows(pos))[:, None]  # (B|1, 1, T, T)
        zero = torch.zeros((), dtype=q.dtype, device=q.device)
        return torch.where(allowed, zero, torch.tensor(float("-inf"), dtype=q.dtype, device=q.device))

    def extra_repr(self) -> str:
        return f"name={self.name!r}, interval={self.interval}, window={self.window}, local={self.local!r}"
