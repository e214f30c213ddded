"""Fused forward kernels of the positional encodings, next to their eager references.

Each encoding family has a readable eager reference (the code in `lenbench.encodings`) and one
or more fused implementations that `bench/test_kernels.py` times and `tests/` hold equal to it:

| kind      | encodings                       | eager reference                          | fused                                                   |
| --------- | ------------------------------- | ---------------------------------------- | ------------------------------------------------------- |
| rotary    | rope, xpos (randomized → inner) | `apply_rotary` on q, then on k           | one `torch.compile`d function rotating q and k together |
|           |                                 | `rotary_hf`: transformers' rotate_half   | (C++/OpenMP on the CPU, Triton on CUDA / XPU)           |
| bias      | alibi, t5, kerple, sandwich,    | bias from the hook + SDPA (`attention_   | `cached`: the folded bias materialised once per length; |
|           | fire, and any other `bias` hook | eager`)                                  | `flex`: `flex_attention` with a score modifier built    |
|           |                                 |                                          | from the position tensors and a causal block mask;      |
|           |                                 |                                          | `toeplitz` (alibi, t5, kerple, sandwich, contiguous     |
|           |                                 |                                          | positions): SDPA reading a per-distance table through   |
|           |                                 |                                          | strided mask views, one call per block of queries;      |
|           |                                 |                                          | `cached_blocks` (the others): the materialised mask,    |
|           |                                 |                                          | read by causal query blocks                             |
| absolute  | sinusoidal, learned             | `enc.embed`                              | `torch.compile(enc.embed)`                              |
| content   | cope                            | `enc.attention_bias` + SDPA              | the same function compiled                              |

An encoding without a hook of its own (nope) has nothing to fuse.

Positions are explicit (B, T) integer tensors everywhere. The flex score modifiers read them in
one of two forms, chosen once per position pattern by `prepare_flex`: when every row is a
contiguous run `offset_b + 0 … T−1` (the default, and any left-padded or offset batch) the
relative position is computed from the indices (`kv − q + (k_off[b] − q_off[b])`, no gathers);
otherwise the modifier gathers `k_pos[b, kv] − q_pos[b, q]`.

This module holds the library ops only (and `time_fn`, a device-synchronised timer). What the
benchmarks time and how they report it (the suite's `kernels:` settings, bytes moved, the copy
floor, the quick suite's training step, the performance targets) lives with them in
`bench/kernel_plans.py`.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import statistics
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
import torch.nn.functional as F

from lenbench.device import synchronize
from lenbench.encodings import PositionalEncoding
from lenbench.encodings.base import shared_rows
from lenbench.encodings.rope import apply_rotary

try:  # torch >= 2.5
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
except ImportError:  # pragma: no cover - older torch
    BlockMask = create_block_mask = flex_attention = None  # type: ignore[assignment]

Kind = Literal["rotary", "bias", "absolute", "content", "none"]

# --------------------------------------------------------------------------------------------
# What each encoding offers
# --------------------------------------------------------------------------------------------


def _overrides(enc: PositionalEncoding, hook: str) -> bool:
    return getattr(type(enc), hook) is not getattr(PositionalEncoding, hook)


def base_encoding(enc: PositionalEncoding) -> PositionalEncoding:
    """The encoding whose hooks do the work: a wrapper's `inner` (randomized), else `enc`."""
    inner = getattr(enc, "inner", None)
    return base_encoding(inner) if isinstance(inner, PositionalEncoding) else enc


def kernel_kind(enc: PositionalEncoding) -> Kind:
    """Which forward kernel an encoding has: the hook it overrides (after unwrapping wrappers)."""
    enc = base_encoding(enc)
    if enc.content_dependent:
        return "content"
    if _overrides(enc, "rotate"):
        return "rotary"
    if _overrides(enc, "bias"):
        return "bias"
    if _overrides(enc, "embed"):
        return "absolute"
    return "none"


# Relative-only bias encodings whose flex score modifier has a closed form or a per-distance
# table; any other bias encoding (FIRE, new ones) gets the generic `dense` modifier.
FLEX_FLAVOURS: dict[str, str] = {"alibi": "alibi", "t5": "table", "sandwich": "table", "kerple": "kerple"}


def implementations(enc: PositionalEncoding) -> list[str]:
    """The implementations `bench/test_kernels.py` times for `enc`, eager reference first.

    rotary: eager, fused (+ hf, transformers' rotate_half formulation, for RoPE's default half
    layout with full rotation); bias: eager, cached, flex (+ flex_gather for ALiBi: the same
    modifier always gathering positions; + toeplitz for the relative-only biases,
    `TOEPLITZ_ENCODINGS`, else cached_blocks: the materialised mask read by causal query blocks);
    absolute and content: eager, compiled; none: [].
    """
    kind = kernel_kind(enc)
    base = base_encoding(enc)
    if kind == "rotary":
        hf = base.name == "rope" and getattr(base, "layout", "") == "half" and getattr(base, "partial", 0) == 1.0
        return ["eager", "hf", "fused"] if hf else ["eager", "fused"]
    if kind == "bias":
        impls = ["eager", "cached", "flex", "flex_gather"] if base.name == "alibi" else ["eager", "cached", "flex"]
        return impls + ["toeplitz"] if base.name in TOEPLITZ_ENCODINGS else impls + ["cached_blocks"]
    if kind in ("absolute", "content"):
        return ["eager", "compiled"]
    return []


def nothing_to_fuse_reason(enc: PositionalEncoding) -> str:
    return (f"encoding {enc.name!r} overrides no embed/rotate/bias hook: nothing to fuse (its attention is "
            f"the unbiased causal SDPA timed by test_attention_baseline)")


# --------------------------------------------------------------------------------------------
# Compilation support
# --------------------------------------------------------------------------------------------


@functools.cache
def compile_support(device_type: str) -> tuple[bool, str]:
    """(ok, reason): whether torch.compile (inductor) can build kernels for `device_type` here.

    Cheap: checks the backend prerequisites (a C++ compiler on the CPU, Triton on CUDA / XPU)
    without compiling anything.
    """
    if device_type == "cpu":
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler

            get_cpp_compiler()
        except Exception as err:  # noqa: BLE001 - any failure means no C++ toolchain
            return False, f"torch.compile on the CPU needs a C++ compiler: {err}"
        return True, ""
    if device_type in ("cuda", "xpu"):
        try:
            import triton  # noqa: F401
        except ImportError:
            return False, f"torch.compile on {device_type} needs Triton, which is not installed"
        # Triton builds its launcher with the host C compiler on first use: without one every
        # compiled kernel would fail instead of being skipped.
        if not (os.environ.get("CC") or any(shutil.which(cc) for cc in ("cc", "gcc", "clang"))):
            return False, f"torch.compile on {device_type} needs a C compiler for Triton's launcher (cc, gcc or clang; or set CC)"
        return True, ""
    return False, f"torch.compile (inductor) is not set up for device {device_type!r} in lenbench"


def flex_support(device_type: str) -> tuple[bool, str]:
    """(ok, reason): whether flex_attention can run compiled on `device_type`.

    flex_attention has no fused eager mode: without torch.compile it runs an unfused reference
    (fine for tests, meaningless to time). CPU (C++ template) and CUDA / XPU (Triton) compile it.
    """
    if flex_attention is None:
        return False, f"torch {torch.__version__} has no torch.nn.attention.flex_attention (needs >= 2.5)"
    ok, reason = compile_support(device_type)
    if not ok:
        return False, f"flex_attention needs torch.compile: {reason}"
    return True, ""


@functools.cache
def bf16_support(device_type: str) -> tuple[bool, str]:
    """(ok, reason): whether bf16 matmul / attention kernels are native on this device."""
    if device_type == "cpu":
        ok = bool(getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)())
        return ok, "" if ok else "this CPU has no native bf16 (avx512_bf16 / AMX); bf16 would be emulated"
    if device_type == "cuda":
        ok = torch.cuda.is_bf16_supported()
        return ok, "" if ok else "this GPU does not support bf16"
    if device_type == "xpu":
        return True, ""
    return False, f"bf16 kernels are not benchmarked on {device_type!r}"


def _compiled(fn: Callable, options: dict | None = None) -> Callable:
    """`torch.compile(fn, dynamic=True, options=options)`, built on first use (importing this
    module compiles nothing).

    Dynamic shapes: one compilation serves every sequence length and batch size; a new dtype or
    a new branch (layout, flavour) compiles once more. `options`: inductor settings for this
    function only (`torch.compile`'s `options`).
    """
    compiled = None

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        nonlocal compiled
        if compiled is None:
            compiled = torch.compile(fn, dynamic=True, options=options)
        return compiled(*args, **kwargs)

    wrapper.eager = fn  # type: ignore[attr-defined]
    return wrapper


_HOOKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compiled_hook(enc: PositionalEncoding, hook: str) -> Callable:
    """`torch.compile(getattr(enc, hook), dynamic=True)`, cached per encoding instance and hook."""
    per_enc = _HOOKS.setdefault(enc, {})
    if hook not in per_enc:
        per_enc[hook] = torch.compile(getattr(enc, hook), dynamic=True)
    return per_enc[hook]


# --------------------------------------------------------------------------------------------
# Rotary
# --------------------------------------------------------------------------------------------


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
    """transformers' full-width tables (B, T, Dh) from per-pair tables (B, 1, T, Dh/2).

    transformers' rotary embedding builds `emb = cat((freqs, freqs), -1)` and returns
    `emb.cos()`, `emb.sin()` of the full head dimension; this is the same from lenbench's tables.
    """
    return torch.cat((cos, cos), -1)[:, 0], torch.cat((sin, sin), -1)[:, 0]  # (B, T, Dh) each


def rotary_hf(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' `apply_rotary_pos_emb` (Llama, GPT-NeoX layout), verbatim: the common eager
    rotate_half formulation that fused kernels are compared with.

    Args:
        q, k: (B, H, T, Dh).
        cos, sin: (B, T, Dh) full-width tables (`hf_tables`).
    """
    cos = cos.unsqueeze(unsqueeze_dim)  # (B, 1, T, Dh)
    sin = sin.unsqueeze(unsqueeze_dim)  # (B, 1, T, Dh)
    q_embed = (q * cos) + (hf_rotate_half(q) * sin)  # (B, H, T, Dh)
    k_embed = (k * cos) + (hf_rotate_half(k) * sin)  # (B, H, T, Dh)
    return q_embed, k_embed


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
_rotary_qk_compiled = _compiled(_rotary_qk, ROTARY_COMPILE_OPTIONS)


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
    """Tables of a known rotary encoding (rope, xpos) at positions (B, T); None for others
    (their fused path is then `compiled_hook(enc, "rotate")`).

    Rows with the same positions share one (1, 1, T, R/2) table broadcast over the batch, as in
    the model (`PositionalEncoding.position_tables`): per-row tables would add B copies of the
    same values to the bytes the kernel reads (6 % of a fused xPos's traffic at B = 8).
    """
    enc = base_encoding(enc)
    pos = shared_rows(pos)  # (1|B, T)
    if enc.name == "rope":
        cos, sin = enc.cos_sin(pos, dtype)  # (B, 1, T, R/2) each
        return RotaryInputs(cos, sin, enc.layout)
    if enc.name == "xpos":
        cos, sin, scale = enc.cos_sin_scale(pos, dtype)  # (B, 1, T, d/2) each
        return RotaryInputs((cos * scale).to(dtype), (sin * scale).to(dtype), enc.layout,
                            (cos / scale).to(dtype), (sin / scale).to(dtype))
    return None


# --------------------------------------------------------------------------------------------
# Additive-bias attention
# --------------------------------------------------------------------------------------------


def causal_additive_mask(T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(1, 1, T, T): 0 where key j ≤ query i, −inf after it (the model's causal mask)."""
    allowed = torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)
    zero = torch.zeros((), dtype=dtype, device=device)
    return torch.where(allowed, zero, torch.tensor(float("-inf"), dtype=dtype, device=device))[None, None]


def folded_bias(enc: PositionalEncoding, pos: torch.Tensor, dtype: torch.dtype, causal: bool = True) -> torch.Tensor:
    """The bias of `enc` at positions (B, T) with the causal mask folded in: (B|1, H, T, T)."""
    p = shared_rows(pos)  # (B|1, T)
    bias = enc.bias(p, p).to(dtype)  # (B|1, H, T, T)
    return bias + causal_additive_mask(pos.shape[1], pos.device, dtype) if causal else bias  # (B|1, H, T, T)


def attention_eager(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enc: PositionalEncoding, pos: torch.Tensor, causal: bool = True
) -> torch.Tensor:
    """Eager reference, as the model runs it: bias from the hook (one per position pattern),
    causal mask folded in, SDPA with the materialised mask.

    Args:
        q, k, v: (B, H, T, Dh); pos: (B, T) positions.

    Returns:
        (B, H, T, Dh).
    """
    return F.scaled_dot_product_attention(q, k, v, attn_mask=folded_bias(enc, pos, q.dtype, causal))


def attention_cached(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SDPA with a bias materialised once per length (`folded_bias`) and reused: (B, H, T, Dh)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def attention_unbiased(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """The baseline: causal SDPA without any bias (what `nope` runs): (B, H, T, Dh)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def flex_block_size(device: torch.device) -> int:
    """Sparse block size of the causal block mask: 64 measured faster on the CPU, 128 on GPUs."""
    return 64 if device.type == "cpu" else 128


@functools.lru_cache(maxsize=8)
def causal_block_mask(T: int, device: str, block_size: int) -> BlockMask:
    """The causal BlockMask over sequence indices (key j ≤ query i), cached per (T, device)."""

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    return create_block_mask(causal, B=None, H=None, Q_LEN=T, KV_LEN=T, device=device, BLOCK_SIZE=block_size)


def row_offsets(pos: torch.Tensor) -> torch.Tensor | None:
    """(B,) offsets when every row of (B, T) is `offset_b + 0 … T−1`, else None."""
    off = pos[:, :1]  # (B, 1)
    steps = torch.arange(pos.shape[1], device=pos.device, dtype=pos.dtype)  # (T,)
    return off[:, 0] if bool((pos == off + steps).all()) else None


def relative_table(enc: PositionalEncoding, lo: int, hi: int, device: torch.device) -> torch.Tensor:
    """(H, hi − lo + 1): the bias of a relative-only encoding at each k_pos − q_pos in lo … hi,
    read off the encoding's own `bias` hook (query at −lo, keys at 0 … hi − lo)."""
    q_pos = torch.full((1, 1), -lo, device=device, dtype=torch.long)  # (1, 1)
    k_pos = torch.arange(hi - lo + 1, device=device)[None]  # (1, R)
    return enc.bias(q_pos, k_pos)[0, :, 0, :]  # (H, R)


@dataclass
class FlexPlan:
    """Everything a flex call needs for one position pattern, built once by `prepare_flex`.

    Attributes:
        flavour: "alibi" (closed form), "table" (per-distance lookup), "kerple_log" /
            "kerple_power" (closed forms), "dense" or "dense_shared" (read the materialised bias,
            (B, H, T, T) or (1, H, T, T)).
        affine: True when positions are contiguous runs (index arithmetic), False for gathers.
        args: the score modifier's tensors after `affine`: (pa, pb, *params), where for affine
            positions pa = pb = (max(B, 2),) relative offsets k_off − q_off − shift, for gathers
            pa = q_pos (B, T), pb = k_pos − shift (B, T); shift = lo for the table, else 0.
            params: slopes (H,) | table (H, R) | r1, r2 (H,) | bias.
        block_mask: causal BlockMask, or None for bidirectional attention.
        extra_bytes: bias bytes a dense flavour reads.
    """

    flavour: str
    affine: bool
    args: tuple
    block_mask: Any
    extra_bytes: int = field(default=0)


def prepare_flex(
    enc: PositionalEncoding, pos: torch.Tensor, dtype: torch.dtype, *, causal: bool = True, gather: bool = False
) -> FlexPlan:
    """Build the flex score modifier's inputs for `enc` at positions `pos` (B, T).

    ALiBi and KERPLE use their closed forms; T5 and Sandwich a per-distance table (bucketing /
    the cosine sum run once per distance, not per score); any other bias encoding the dense
    bias. `gather=True` forces the position-gathering form even for contiguous positions.
    """
    enc = base_encoding(enc)
    device = pos.device
    T = pos.shape[1]
    flavour = FLEX_FLAVOURS.get(enc.name, "dense")
    block_mask = causal_block_mask(T, str(device), flex_block_size(device)) if causal else None
    if flavour == "dense":
        bias = folded_bias(enc, pos, torch.float32, causal=False).detach()  # (B|1, H, T, T)
        flavour = "dense_shared" if bias.shape[0] == 1 else "dense"
        return FlexPlan(flavour, True, (bias,), block_mask, bias.numel() * bias.element_size())
    shift = 0
    if flavour == "alibi":
        params = (enc.slopes.float(),)  # (H,)
    elif flavour == "kerple":
        flavour = f"kerple_{enc.form}"
        params = (enc.r1.detach().float(), enc.r2.detach().float())  # (H,) each
    else:  # table
        rel = pos[:, None, :] - pos[:, :, None]  # (B, T, T): k_pos − q_pos
        lo, hi = (int(v) for v in torch.aminmax(rel))
        params = (relative_table(enc, lo, hi, device).detach().float(),)  # (H, R)
        shift = lo
    off = None if gather else row_offsets(pos)
    if off is not None:
        # (max(B, 2),): q and k share positions here. At least two entries: with a batch of one,
        # a size-1 offset tensor gets specialised away and inductor's CPU template then fails
        # ("All the buffers in the score and mask subgraph should be in ... input_buffers").
        rel_off = torch.full((max(off.shape[0], 2),), -shift, dtype=torch.int64, device=device)
        return FlexPlan(flavour, True, (rel_off, rel_off, *params), block_mask)
    return FlexPlan(flavour, False, (pos.to(torch.int64), (pos - shift).to(torch.int64), *params), block_mask)


def _rel(affine: bool, pa, pb, b, q_idx, kv_idx):
    """k_pos − q_pos − shift inside a score modifier (see `FlexPlan.args`)."""
    if affine:
        return kv_idx - q_idx + pa[b]
    return pb[b, kv_idx] - pa[b, q_idx]


def _flex_alibi(q, k, v, block_mask, affine: bool, pa, pb, slopes):
    def score_mod(score, b, h, q_idx, kv_idx):  # −m_h · |i − j|
        return score - slopes[h] * _rel(affine, pa, pb, b, q_idx, kv_idx).abs()

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def _flex_table(q, k, v, block_mask, affine: bool, pa, pb, table):
    def score_mod(score, b, h, q_idx, kv_idx):  # table[h, (j − i) − lo]
        return score + table[h, _rel(affine, pa, pb, b, q_idx, kv_idx)]

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def _flex_kerple_log(q, k, v, block_mask, affine: bool, pa, pb, r1, r2):
    def score_mod(score, b, h, q_idx, kv_idx):  # −r1_h · log(1 + r2_h · |i − j|)
        return score - r1[h] * torch.log1p(r2[h] * _rel(affine, pa, pb, b, q_idx, kv_idx).abs())

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def _flex_kerple_power(q, k, v, block_mask, affine: bool, pa, pb, r1, r2):
    def score_mod(score, b, h, q_idx, kv_idx):  # −r1_h · |i − j|^r2_h (0 at distance 0)
        d = _rel(affine, pa, pb, b, q_idx, kv_idx).abs().to(torch.float32)
        return score - r1[h] * torch.where(d > 0, d.clamp(min=1.0).pow(r2[h]), 0.0)

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def _flex_dense_shared(q, k, v, block_mask, bias):
    def score_mod(score, b, h, q_idx, kv_idx):  # one (1, H, T, T) bias for the batch
        return score + bias[0, h, q_idx, kv_idx]

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def _flex_dense(q, k, v, block_mask, bias):
    def score_mod(score, b, h, q_idx, kv_idx):  # (B, H, T, T) bias
        return score + bias[b, h, q_idx, kv_idx]

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


# One function (one compile cache) per flavour, so that no flavour can push another past
# dynamo's recompile limit (which would silently fall back to the unfused eager flex).
_FLEX_EAGER = {"alibi": _flex_alibi, "table": _flex_table, "kerple_log": _flex_kerple_log,
               "kerple_power": _flex_kerple_power, "dense_shared": _flex_dense_shared, "dense": _flex_dense}
_FLEX_COMPILED = {name: _compiled(fn) for name, fn in _FLEX_EAGER.items()}


def attention_flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: FlexPlan, *, compiled: bool = True) -> torch.Tensor:
    """Fused attention with the bias as a flex_attention score modifier: (B, H, T, Dh).

    Args:
        q, k, v: (B, H, T, Dh).
        plan: from `prepare_flex` (once per position pattern and length).
        compiled: False runs flex_attention's unfused eager reference (for tests; slow).
    """
    args = plan.args if plan.flavour.startswith("dense") else (plan.affine, *plan.args)
    if not compiled:
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
            return _FLEX_EAGER[plan.flavour](q, k, v, plan.block_mask, *args)
    if q.device.type == "cpu":
        _patch_inductor_flex_cpu_names()
    return _FLEX_COMPILED[plan.flavour](q, k, v, plan.block_mask, *args)


_PATCHED = False


def _patch_inductor_flex_cpu_names() -> None:
    """Work around a torch inductor bug in CPU flex_attention (seen in torch 2.13).

    The C++ template renames its two block-size symbols by plain substring replacement, so a
    kernel with more than ten size arguments turns e.g. `ks15` into `cur_kvSplitSize5` when the
    block size is `ks1`, and the C++ compile fails ("'cur_kvSplitSize5' was not declared").
    Score modifiers that index tensors with computed indices (position gathers, the T5 table)
    hit it. This swaps the two `str.replace` calls for whole-word `re.sub` calls in that one
    method; nothing is patched when the installed torch does not contain the buggy code.
    """
    global _PATCHED
    if _PATCHED:
        return
    _PATCHED = True
    try:
        import inspect
        import re
        import textwrap

        import torch._inductor.lowering  # noqa: F401 - imports the template module without an import cycle
        from torch._inductor.codegen import cpp_flex_attention_template as mod

        cls = mod.CppFlexAttentionTemplate
        src = textwrap.dedent(inspect.getsource(cls.modification))
        pattern = re.compile(r'output_code\.replace\(\s*(kernel_group\.args\.sizevars\[var_\w+_symbol\]),\s*("cur_\w+SplitSize"),?\s*\)')
        if len(pattern.findall(src)) != 2:
            return
        fixed = pattern.sub(r're.sub(r"\\b" + re.escape(\1) + r"\\b", \2, output_code)', src)
        namespace = dict(vars(mod))
        namespace["re"] = re
        exec(compile(fixed, mod.__file__, "exec"), namespace)  # noqa: S102 - torch's own method, fixed
        cls.modification = namespace["modification"]
    except Exception:  # noqa: BLE001 - a torch without this code path needs no fix
        return


def attention_cached_blocks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                            block: int | None = None) -> torch.Tensor:
    """`attention_cached` for a causal mask, skipping the masked half: one SDPA call per block of
    `block` queries over the keys up to its last query, the mask a view of the materialised one.

    SDPA cannot skip −inf blocks of an explicit mask, so `attention_cached` computes (and reads the
    mask for) all T² scores; this computes and reads ≈ T²/2. For any bias (FIRE, gathered positions).

    Args:
        q, k, v: (B, H, T, Dh); mask: (B|1, H, T, T) from `folded_bias(..., causal=True)`.
        block: queries per call (default `toeplitz_block(T)`).

    Returns:
        (B, H, T, Dh).
    """
    T = q.shape[2]
    block = block or toeplitz_block(T)
    outs = [F.scaled_dot_product_attention(q[:, :, s:s + block], k[:, :, :s + block], v[:, :, :s + block],
                                           attn_mask=mask[:, :, s:s + block, :s + block])  # (B, H, block, Dh)
            for s in range(0, T, block)]
    return torch.cat(outs, 2)  # (B, H, T, Dh)


# Toeplitz bias: a relative-only bias at contiguous positions depends on j − i alone, so the
# folded (T, T) mask is one diagonal table per head; SDPA reads it through a strided view.

TOEPLITZ_ENCODINGS: tuple[str, ...] = tuple(FLEX_FLAVOURS)  # relative-only: the bias is a function of k_pos − q_pos


def toeplitz_block(T: int) -> int:
    """Query rows per SDPA call of `attention_toeplitz`: 256 from T = 1024 on, else 128 (measured on
    the CPU, one thread, 8 heads of 64: smaller blocks waste less of the diagonal block but run the
    flash kernel at a lower rate and cost one call each)."""
    return 256 if T >= 1024 else 128


@dataclass
class ToeplitzPlan:
    """The diagonals of a relative-only bias for one length, built once by `prepare_toeplitz`.

    Attributes:
        diagonals: (H, 2T − 1): column n holds the bias at k − q = n − (T − 1) (the causal mask
            folded in: −inf for n > T − 1 when `causal`), in the attention dtype.
        causal: whether keys after the query are masked.
        block: query rows per SDPA call.
    """

    diagonals: torch.Tensor
    causal: bool
    block: int

    @property
    def T(self) -> int:
        return (self.diagonals.shape[1] + 1) // 2


def prepare_toeplitz(enc: PositionalEncoding, pos: torch.Tensor, dtype: torch.dtype, *, causal: bool = True,
                     block: int | None = None) -> ToeplitzPlan:
    """The diagonal table of `enc`'s bias at positions `pos` (B, T), read off its own `bias` hook.

    Valid only for a relative-only bias (`TOEPLITZ_ENCODINGS`) and rows that are contiguous runs
    `offset_b + 0 … T−1` (then k_pos − q_pos = j − i in every row); anything else raises.
    """
    enc = base_encoding(enc)
    if enc.name not in TOEPLITZ_ENCODINGS:
        raise ValueError(f"toeplitz attention needs a relative-only bias ({', '.join(TOEPLITZ_ENCODINGS)}), got "
                         f"{enc.name!r}: use prepare_flex or folded_bias for it")
    if row_offsets(pos) is None:
        raise ValueError("toeplitz attention needs contiguous position rows (offset_b + 0 … T−1); these positions "
                         "skip or repeat: use prepare_flex (it gathers positions) or folded_bias")
    T = pos.shape[1]
    table = relative_table(enc, -(T - 1), T - 1, pos.device).detach().to(dtype)  # (H, 2T−1): k − q = −(T−1) … T−1
    if causal:
        table[:, T:] = float("-inf")  # keys after the query
    return ToeplitzPlan(table.contiguous(), causal, block or toeplitz_block(T))


def attention_toeplitz(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: ToeplitzPlan) -> torch.Tensor:
    """Attention with a Toeplitz bias as SDPA masks that are strided views of `plan.diagonals`.

    mask[i, j] = d[j − i + T − 1] needs a row stride of −1, which tensors cannot have; with the
    queries reversed (row a ↔ i = T − 1 − a) it is d[a + j]: row and column stride 1, a view of
    the (H, 2T − 1) table, nothing materialised. Causal: one SDPA call per block of `plan.block`
    reversed query rows, over the keys 0 … its last query only (the flash kernel cannot skip
    blocks for a mask), so only the diagonal block computes masked scores; bidirectional: one call.

    Args:
        q, k, v: (B, H, T, Dh) (v may have its own head dim Dv); plan: from `prepare_toeplitz` at this T.

    Returns:
        (B, H, T, Dv).
    """
    B, H, T, _ = q.shape
    if T != plan.T:
        raise ValueError(f"attention_toeplitz: the plan was built for T={plan.T}, the queries have T={T}: "
                         f"prepare_toeplitz once per length")
    d = plan.diagonals  # (H, 2T−1)
    q_rev = q.flip(2)  # (B, H, T, Dh): row a is query T − 1 − a
    block = T if not plan.causal else plan.block
    outs = []
    for s in range(0, T, block):
        e = min(s + block, T)
        n_keys = T - s if plan.causal else T  # keys 0 … (T − 1 − s), the block's last query
        mask = d.as_strided((1, H, e - s, n_keys), (0, d.stride(0), 1, 1), d.storage_offset() + s)  # d[s + a + j]
        outs.append(F.scaled_dot_product_attention(q_rev[:, :, s:e], k[:, :, :n_keys], v[:, :, :n_keys],
                                                   attn_mask=mask))  # (B, H, e − s, Dv)
    return torch.cat(outs, 2).flip(2)  # (B, H, T, Dv)


# --------------------------------------------------------------------------------------------
# Content-dependent bias (CoPE): eager vs compiled
# --------------------------------------------------------------------------------------------


def attention_content(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enc: PositionalEncoding,
                      pos: torch.Tensor) -> torch.Tensor:
    """Attention with a bias that reads q and k (`attention_bias`), causal: (B, H, T, Dh)."""
    bias = enc.attention_bias(q, k, pos, pos).to(q.dtype)  # (B, H, T, T)
    mask = bias + causal_additive_mask(q.shape[2], q.device, q.dtype)  # (B, H, T, T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, Dh)


_content_compiled = _compiled(attention_content)


def attention_content_compiled(q, k, v, enc, pos):
    """`attention_content` through torch.compile (bias and mask fused into fewer passes)."""
    return _content_compiled(q, k, v, enc, pos)


# --------------------------------------------------------------------------------------------
# A device-synchronised timer (also `lenbench.flops`)
# --------------------------------------------------------------------------------------------


#: On an accelerator a timed round lasts at least this long: a round ends with one synchronise,
#: and a launch plus a synchronise (~10–30 µs) would otherwise outweigh a µs-scale kernel.
MIN_ROUND_SECONDS = 1e-3
#: At most this many calls of a function per timed round.
MAX_CALLS_PER_ROUND = 1000


def calls_per_round(fn: Callable[[], Any], device: torch.device, min_seconds: float = MIN_ROUND_SECONDS) -> int:
    """How many back-to-back calls of `fn` one timed round makes before it synchronises.

    1 on the CPU: every call is timed alone, as the benchmarks always have. On an accelerator,
    enough calls that a round lasts about `min_seconds` (at most `MAX_CALLS_PER_ROUND`): calls are
    queued asynchronously, so N calls and one synchronise time the kernels, not the launch and
    synchronise latency. Measured from two rounds of `fn` (which must be warm: compiled, autotuned).
    """
    if device.type == "cpu":
        return 1
    calls = 1
    for _ in range(2):  # one call includes the synchronise latency; a second round at the first guess corrects it
        seconds = call_seconds(fn, device, calls)[1]
        calls = max(1, min(MAX_CALLS_PER_ROUND, math.ceil(min_seconds / max(seconds, 1e-9))))
    return calls


def call_seconds(fn: Callable[[], Any], device: torch.device, calls: int = 1) -> tuple[Any, float]:
    """`calls` back-to-back calls of `fn`, then `device` synchronised: the last result and the
    seconds per call."""
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    synchronize(device)
    return out, (time.perf_counter() - start) / calls


def synced_every(fn: Callable[[], Any], device: torch.device) -> tuple[Callable[[], Any], int]:
    """(target, calls) for a timer that times `calls` calls per round (pytest-benchmark's
    `iterations`): `target` calls `fn` and synchronises `device` on every `calls`-th call, so each
    round ends with the device done. `calls` is `calls_per_round` (1 on the CPU: every call is
    synchronised, as before). `fn` must be warm."""
    calls = calls_per_round(fn, device)
    count = 0

    def target():
        nonlocal count
        out = fn()
        count += 1
        if count % calls == 0:
            synchronize(device)
        return out

    return target, calls


def time_fn(fn: Callable[[], Any], device: torch.device, *, rounds: int = 10, warmup: int = 2,
            stat: Literal["median", "min"] = "median") -> float:
    """Seconds per call of `fn` (`statistics.median` or min over `rounds`): each round makes
    `calls_per_round` calls (1 on the CPU) and synchronises `device` once at its end
    (`bench/gpu_check.py` and the benchmarks' fallbacks time with it)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    calls = calls_per_round(fn, device)
    times = [call_seconds(fn, device, calls)[1] for _ in range(rounds)]
    return min(times) if stat == "min" else statistics.median(times)


__all__ = [
    "FlexPlan", "RotaryInputs", "attention_cached", "attention_cached_blocks", "attention_content", "attention_content_compiled",
    "attention_eager", "attention_flex", "attention_toeplitz", "attention_unbiased", "base_encoding", "bf16_support",
    "causal_additive_mask", "causal_block_mask", "compile_support", "compiled_hook", "flex_support", "folded_bias",
    "hf_rotate_half", "hf_tables", "implementations", "kernel_kind", "prepare_flex", "prepare_toeplitz", "relative_table", "rotary_eager",
    "rotary_fused", "rotary_hf", "rotary_inputs", "row_offsets", "time_fn", "call_seconds", "calls_per_round", "synced_every", "toeplitz_block", "ToeplitzPlan",
]

