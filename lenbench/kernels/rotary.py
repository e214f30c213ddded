"""Rotary kernels: the eager reference, transformers' rotate_half formulation and one compiled
function rotating q and k together (C++/OpenMP on the CPU, Triton on CUDA / XPU).

An encoding gets the fused path by declaring its rotation (`PositionalEncoding.pair_rotation`:
rope, xpos, randomized → its inner); any other rotary encoding's fused path is its own `rotate`
compiled (`lenbench.kernels.support.compiled_hook`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lenbench.encodings import PositionalEncoding
from lenbench.encodings.base import shared_rows
from lenbench.encodings.rope import apply_rotary
from lenbench.kernels.dispatch import base_encoding
from lenbench.kernels.support import lazy_compile


def rotary_eager(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "half",
    cos_k: torch.Tensor | None = None, sin_k: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager reference: `lenbench.encodings.rope.apply_rotary` on q, then on k.

    Args:
        q, k: (B, H, T, Dh) queries and keys.
        cos, sin: (B|1, 1, T, R/2) tables of q (and of k unless `cos_k`, `sin_k` are given: xPos
            scales q and k differently).
        layout: "half" or "interleaved".
    """
    cos_k, sin_k = (cos, sin) if cos_k is None else (cos_k, sin_k)
    return apply_rotary(q, cos, sin, layout), apply_rotary(k, cos_k, sin_k, layout)  # (B, H, T, Dh) each


def hf_rotate_half(x: torch.Tensor) -> torch.Tensor:
    """transformers' `rotate_half`: (x1, x2) → (−x2, x1) over the halves of the last dimension."""
    x1 = x[..., : x.shape[-1] // 2]  # (..., D/2)
    x2 = x[..., x.shape[-1] // 2 :]  # (..., D/2)
    return torch.cat((-x2, x1), dim=-1)  # (..., D)


def hf_tables(cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' full-width tables (B, T, R) from per-pair tables (B, 1, T, R/2).

    transformers' rotary embedding builds `emb = cat((freqs, freqs), -1)` and returns
    `emb.cos()`, `emb.sin()` of the full head dimension; this is the same from lenbench's tables.
    """
    return torch.cat((cos, cos), -1)[:, 0], torch.cat((sin, sin), -1)[:, 0]  # (B, T, R) each


def rotary_hf(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' `apply_rotary_pos_emb` (Llama, GPT-NeoX layout): the common eager rotate_half
    formulation that fused kernels are compared with, with its partial-rotary split (GPT-NeoX's
    `rotary_pct`, Phi's `partial_rotary_factor`; p-RoPE's kept pairs) when the tables are narrower
    than the head: the first R channels rotate, the rest pass through.

    Args:
        q, k: (B, H, T, Dh).
        cos, sin: (B, T, R) full-width tables (`hf_tables`), R ≤ Dh.
    """
    cos = cos.unsqueeze(unsqueeze_dim)  # (B, 1, T, R)
    sin = sin.unsqueeze(unsqueeze_dim)  # (B, 1, T, R)
    r = cos.shape[-1]
    q_rot, q_pass = q[..., :r], q[..., r:]  # (B, H, T, R), (B, H, T, Dh − R)
    k_rot, k_pass = k[..., :r], k[..., r:]
    q_embed = (q_rot * cos) + (hf_rotate_half(q_rot) * sin)  # (B, H, T, R)
    k_embed = (k_rot * cos) + (hf_rotate_half(k_rot) * sin)  # (B, H, T, R)
    return torch.cat((q_embed, q_pass), dim=-1), torch.cat((k_embed, k_pass), dim=-1)  # (B, H, T, Dh) each


def _rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """One rotation written for the compiler: the pair axis is an explicit size-2 dimension, its
    two channels x1, x2 are read with `unbind` and the rotated pair (x1·cos − x2·sin,
    x2·cos + x1·sin) is written back in place of the pair (half layout: one `cat` of the two
    rotated halves and the unrotated channels; interleaved: a `stack` over the pair axis), so
    inductor emits one loop that reads each element of `x` and of the (B|1, 1, T, R/2) tables
    once and materialises nothing else. (A sign folded into a stacked (−sin, sin) table, as
    before, rebuilt a table 2× the size of sin on every call; a stack followed by a cat with the
    unrotated channels materialised the rotated part.)

    Same products and sums as `apply_rotary`: a − b·c equals a + (−b)·c bit for bit.

    Args:
        x: (B, H, T, Dh); cos, sin: (B|1, 1, T, R/2).
    """
    r = 2 * cos.shape[-1]
    x_rot = x[..., :r]  # (B, H, T, R)
    axis = -2 if layout == "half" else -1  # half: [x1; x2] blocks of R/2; interleaved: [x0, x1] per pair
    x1, x2 = x_rot.unflatten(-1, (2, r // 2) if layout == "half" else (r // 2, 2)).unbind(axis)  # (B, H, T, R/2) each
    y1, y2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin  # (B, H, T, R/2) each
    rest = [x[..., r:]] if r < x.shape[-1] else []  # (B, H, T, Dh − R): passed through
    if layout == "half":  # one cat of pointwise parts: one loop, nothing materialised in between
        return torch.cat([y1, y2, *rest], dim=-1)  # (B, H, T, Dh)
    out = torch.stack((y1, y2), dim=-1).flatten(-2)  # (B, H, T, R)
    return torch.cat((out, *rest), dim=-1) if rest else out  # (B, H, T, Dh)


def _rotary_qk(q, k, cos, sin, cos_k, sin_k, layout: str):
    return _rotate_pairs(q, cos, sin, layout), _rotate_pairs(k, cos_k, sin_k, layout)  # (B, H, T, Dh) each


# q and k in one loop: inductor fuses two loops only when they read a common buffer (RoPE's shared
# tables) unless told to fuse aggressively; xPos's q and k read different tables, and two passes
# (one per tensor) measured slower than one that streams q, k and both outputs together.
ROTARY_COMPILE_OPTIONS = {"aggressive_fusion": True, "score_fusion_memory_threshold": 0}
_rotary_qk_compiled = lazy_compile(_rotary_qk, ROTARY_COMPILE_OPTIONS)


def rotary_fused(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "half",
    cos_k: torch.Tensor | None = None, sin_k: torch.Tensor | None = None, *, compiled: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused rotary apply on q and k: one `torch.compile`d function (one kernel for both).

    Arguments as `rotary_eager`; equal to it within rounding. `compiled=False` runs the same code
    eagerly (what the compiler sees; used by the fast tests).
    """
    cos_k, sin_k = (cos, sin) if cos_k is None else (cos_k, sin_k)
    fn = _rotary_qk_compiled if compiled else _rotary_qk
    return fn(q, k, cos, sin, cos_k, sin_k, layout)


@dataclass
class RotaryInputs:
    """The tables a rotary encoding's apply needs for one position pattern (computed once)."""

    cos: torch.Tensor  # (B|1, 1, T, R/2), q's table
    sin: torch.Tensor
    layout: str
    cos_k: torch.Tensor | None = None  # k's tables when they differ (xPos)
    sin_k: torch.Tensor | None = None

    def eager(self, q, k):
        return rotary_eager(q, k, self.cos, self.sin, self.layout, self.cos_k, self.sin_k)

    def fused(self, q, k, compiled: bool = True):
        return rotary_fused(q, k, self.cos, self.sin, self.layout, self.cos_k, self.sin_k, compiled=compiled)


def rotary_inputs(enc: PositionalEncoding, pos: torch.Tensor, dtype: torch.dtype) -> RotaryInputs | None:
    """Tables of a rotary encoding that declares its rotation (`pair_rotation`: rope, xpos) at
    positions (B, T); None for the others (their fused path is then `compiled_hook(enc, "rotate")`).

    Rows with the same positions share one (1, 1, T, R/2) table broadcast over the batch, as in
    the model (`PositionalEncoding.position_tables`): per-row tables would add B copies of the
    same values to the bytes the kernel reads (6 % of a fused xPos's traffic at B = 8).
    """
    enc = base_encoding(enc)
    pos = shared_rows(pos)  # (1|B, T)
    rot = enc.pair_rotation(pos, dtype)  # cos, sin (B|1, 1, T, R/2) each; the keys' when they differ
    if rot is None:
        return None
    return RotaryInputs(rot.cos, rot.sin, rot.layout, rot.cos_k, rot.sin_k)

