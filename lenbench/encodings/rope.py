"""Rotary position embeddings (Su et al. 2021) with swappable length-extension scaling."""

from __future__ import annotations

from typing import Literal

import torch
from torch.autograd.function import once_differentiable

from lenbench.encodings.base import (
    TABLE_CACHE_SIZE,
    EncodingDims,
    PairRotation,
    PositionalEncoding,
    register_encoding,
)
from lenbench.encodings.params import number_param
from lenbench.encodings.rope_scaling import complete_scaling, rope_parameters, uses_seq_len
from lenbench.encodings.rope_types import ROPE_TYPES


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) → (−x2, x1) over the two halves of the last dimension (GPT-NeoX / Llama layout)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    """(x0, x1, x2, x3, …) → (−x1, x0, −x3, x2, …) over adjacent pairs (GPT-J layout)."""
    x = x.unflatten(-1, (-1, 2))  # (..., D/2, 2)
    return torch.stack((-x[..., 1], x[..., 0]), dim=-1).flatten(-2)  # (..., D)


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: Literal["half", "interleaved"]
) -> torch.Tensor:
    """Eager reference: rotate the first `2·cos.shape[-1]` channels of `x`, pass the rest through.

    Args:
        x: (B, H, T, Dh) queries or keys.
        cos, sin: (B, 1, T, R/2) per rotated pair, already multiplied by the attention factor.
        layout: "half" pairs channel i with i + R/2; "interleaved" pairs 2i with 2i + 1.
    """
    r = 2 * cos.shape[-1]
    x_rot, x_pass = x[..., :r], x[..., r:]  # (B, H, T, R), (B, H, T, Dh − R)
    if layout == "half":
        cos2, sin2 = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)  # (B, 1, T, R)
        out = x_rot * cos2 + rotate_half(x_rot) * sin2  # (B, H, T, R)
    else:
        cos2, sin2 = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)  # (B, 1, T, R)
        out = x_rot * cos2 + rotate_every_two(x_rot) * sin2  # (B, H, T, R)
    return torch.cat((out, x_pass), dim=-1) if x_pass.shape[-1] else out  # (B, H, T, Dh)


def rotary_tables(
    cos: torch.Tensor, sin: torch.Tensor, layout: Literal["half", "interleaved"]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Full-width tables for `apply_rotary_tables`: cos per channel and sin with the sign of
    `rotate_half` / `rotate_every_two` folded in.

    Args:
        cos, sin: (B, 1, T, R/2) per rotated pair.
        layout: "half" or "interleaved", as in `apply_rotary`.

    Returns:
        (cos_full, sin_signed), each (B, 1, T, R): for "half" (cos, cos) and (−sin, sin); for
        "interleaved" (c0, c0, c1, c1, …) and (−s0, s0, −s1, s1, …).
    """
    if layout == "half":
        return torch.cat((cos, cos), -1), torch.cat((-sin, sin), -1)  # (B, 1, T, R) each
    return cos.repeat_interleave(2, -1), torch.stack((-sin, sin), -1).flatten(-2)  # (B, 1, T, R) each


def apply_rotary_tables(
    x: torch.Tensor, cos_full: torch.Tensor, sin_signed: torch.Tensor, layout: Literal["half", "interleaved"]
) -> torch.Tensor:
    """`apply_rotary` with precomputed `rotary_tables`: x·cos + swap(x)·sin_signed, where swap
    exchanges the two channels of each pair (no negation: the sign lives in the table).

    Bit-identical to `apply_rotary` (−a·b and a·(−b) round the same), with fewer passes over `x`;
    the model's training path uses it with tables built once per forward pass.

    Args:
        x: (B, H, T, Dh) queries or keys.
        cos_full, sin_signed: (B|1, 1, T, R) from `rotary_tables`.
        layout: "half" or "interleaved".
    """
    r = cos_full.shape[-1]
    x_rot = x[..., :r]  # (B, H, T, R)
    if layout == "half":
        x1, x2 = x_rot.chunk(2, dim=-1)  # 2 × (B, H, T, R/2)
        swapped = torch.cat((x2, x1), dim=-1)  # (B, H, T, R)
    else:
        swapped = x_rot.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (B, H, T, R): (x1, x0, x3, x2, …)
    out = x_rot * cos_full + swapped * sin_signed  # (B, H, T, R)
    return torch.cat((out, x[..., r:]), dim=-1) if r < x.shape[-1] else out  # (B, H, T, Dh)


def _swap_pairs(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Exchange the two channels of every rotated pair (no sign): the partner of `apply_rotary_tables`."""
    if layout == "half":
        x1, x2 = x.chunk(2, dim=-1)  # 2 × (..., D/2)
        return torch.cat((x2, x1), dim=-1)  # (..., D)
    return x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (..., D)


def _pair_views(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The first and second channel of every rotated pair, as views: (..., R/2) each."""
    if layout == "half":
        return x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return x[..., 0::2], x[..., 1::2]


def _rotate_into(out: torch.Tensor, x: torch.Tensor, cos_full: torch.Tensor, sin_signed: torch.Tensor,
                 layout: str) -> torch.Tensor:
    """out = x·cos_full + swap(x)·sin_signed, written into `out` without temporaries: one
    multiply, then a multiply-add per pair channel (`addcmul_`, which may fuse the multiply and
    the add: equal to `apply_rotary_tables` within one rounding).

    Args:
        out: (..., R) destination, not overlapping `x`.
        x: (..., R) the rotated channels of queries or keys.
        cos_full, sin_signed: (..., R) broadcastable `rotary_tables`.
    """
    torch.mul(x, cos_full, out=out)  # (..., R)
    (out_a, out_b), (x_a, x_b), (sin_a, sin_b) = (_pair_views(t, layout) for t in (out, x, sin_signed))
    out_a.addcmul_(x_b, sin_a)  # (..., R/2)
    out_b.addcmul_(x_a, sin_b)  # (..., R/2)
    return out


class _RotateQK(torch.autograd.Function):
    """q and k rotated together into one buffer, for the model's training path.

    Each of q and k costs three passes (a multiply and two multiply-adds into a preallocated
    (2, B, H, T, Dh) buffer, whose halves are the contiguous rotated q and k) instead of
    autograd's chain of temporaries, and the backward is written out: the swap is its own
    transpose, so dx = g·cos + swap(g·sin_signed) = `_rotate_into(g, cos, swap(sin_signed))`.
    Unrotated channels (partial rotation) are copied. At the quick suite's sizes the
    per-operation overhead and the memory passes are most of RoPE's cost in a training step.
    Equal to `apply_rotary` within float rounding (tested, values and gradients).

    Args (forward): q, k (B, H, T, Dh); cos_q, sin_q, cos_k, sin_k (B|1, 1, T, R) `rotary_tables`
    of the queries and of the keys (the same tensors for RoPE, scaled differently for xPos); layout.
    """

    @staticmethod
    def forward(ctx, q, k, cos_q, sin_q, cos_k, sin_k, layout: str):
        ctx.layout = layout
        ctx.save_for_backward(cos_q, _swap_pairs(sin_q, layout), cos_k, _swap_pairs(sin_k, layout))
        return _rotate_both(q, k, (cos_q, sin_q), (cos_k, sin_k), layout)  # (B, H, T, Dh) each

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_q, grad_k):
        cos_q, sin_q_swapped, cos_k, sin_k_swapped = ctx.saved_tensors
        grads = _rotate_both(grad_q, grad_k, (cos_q, sin_q_swapped), (cos_k, sin_k_swapped), ctx.layout)  # (B, H, T, Dh) each
        return *grads, None, None, None, None, None


def _rotate_both(q: torch.Tensor, k: torch.Tensor, tables_q: tuple[torch.Tensor, torch.Tensor],
                 tables_k: tuple[torch.Tensor, torch.Tensor], layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k (B, H, T, Dh) each rotated by its (cos, sin) tables (B|1, 1, T, R) into the two
    halves of one (2, B, H, T, Dh) buffer; channels past R are copied unrotated. `_RotateQK`'s
    forward, and its backward with the swapped sine tables."""
    r = tables_q[0].shape[-1]
    out = q.new_empty((2, *q.shape))  # (2, B, H, T, Dh): rotated q, rotated k
    for dst, x, (cos, sin) in ((out[0], q, tables_q), (out[1], k, tables_k)):
        _rotate_into(dst[..., :r], x[..., :r], cos, sin, layout)  # (B, H, T, R)
        if r < x.shape[-1]:
            dst[..., r:].copy_(x[..., r:])  # (B, H, T, Dh − R)
    return out[0], out[1]


def rotate_qk(q: torch.Tensor, k: torch.Tensor, tables_q: tuple[torch.Tensor, torch.Tensor],
              tables_k: tuple[torch.Tensor, torch.Tensor], layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q and k (B, H, T, Dh) with their `rotary_tables` (B|1, 1, T, R): `_RotateQK` when q
    and k have the same shape, else `apply_rotary_tables` on each."""
    if q.shape == k.shape:
        return _RotateQK.apply(q, k, *tables_q, *tables_k, layout)  # (B, H, T, Dh) each
    return apply_rotary_tables(q, *tables_q, layout), apply_rotary_tables(k, *tables_k, layout)


@register_encoding("rope")
class RoPE(PositionalEncoding):
    """Rotary position embedding (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary
    Position Embedding", eq. 34): each pair of query/key channels is rotated by the angle
    pos · θ_i, so q_m · k_n depends on positions only through m − n. Values are never rotated.

    Args:
        dims: model geometry.
        theta: the base θ of θ_i = θ^(−2i/R) (10000 in the paper; 500000 in Llama 3).
        layout: "half" (GPT-NeoX / Llama: channel i pairs with i + R/2) or "interleaved"
            (GPT-J / the paper: channel 2i pairs with 2i + 1). The two give identical scores after
            permuting the head dimension by [0, 2, 4, …, 1, 3, 5, …].
        partial: fraction of the head dimension rotated (GPT-NeoX `rotary_pct`); R = partial · Dh
            must be a positive even integer.
        scaling: a transformers-style `rope_scaling` / `rope_parameters` dict, e.g. {"rope_type":
            "yarn", "factor": 4, "original_max_position_embeddings": 128}; swap it on a trained
            model with `set_scaling`. A dict copied from a transformers config works unchanged:
            a missing `original_max_position_embeddings` is the training length
            (`dims.train_len`), a `partial_rotary_factor` inside it sets `partial` (see
            `rope_scaling.complete_scaling`).
    """

    description = "rotates query/key channel pairs by position; scores depend on m − n only"
    paper = "Su et al. 2021, RoFormer: Enhanced Transformer with Rotary Position Embedding"

    def __init__(
        self,
        dims: EncodingDims,
        *,
        theta: float = 10000.0,
        layout: Literal["half", "interleaved"] = "half",
        partial: float = 1.0,
        scaling: dict | None = None,
    ):
        super().__init__(dims)
        if scaling is not None and not isinstance(scaling, dict):
            raise ValueError(f"encoding {self.name!r}: scaling = {scaling!r} is out of range (valid: a rope_scaling "
                             "mapping such as {rope_type: linear, factor: 4}, or null)")
        _, dict_partial = complete_scaling(scaling, train_len=None)
        if dict_partial is not None:
            if partial != 1.0 and partial != dict_partial:
                raise ValueError(f"rope partial={partial} and the scaling dict's partial_rotary_factor={dict_partial} "
                                 f"disagree; keep one")
            partial = dict_partial
        if layout not in ("half", "interleaved"):
            raise ValueError(f"rope layout must be 'half' or 'interleaved', got {layout!r}")
        if isinstance(partial, bool) or not isinstance(partial, (int, float)):
            raise ValueError(f"encoding {self.name!r}: partial = {partial!r} is out of range (valid: a number in "
                             "(0, 1] with partial * head_dim even)")
        rot = dims.head_dim * partial
        if not (0 < partial <= 1) or rot != int(rot) or int(rot) % 2:
            raise ValueError(
                f"rope partial={partial} rotates {rot:g} of head_dim={dims.head_dim} channels; "
                f"the rotated dimension must be a positive even integer (choose partial so that "
                f"partial * head_dim is even)"
            )
        self.theta = number_param(self.name, "theta", theta)
        self.layout = layout
        self.partial = partial
        self.rot_dim = int(rot)
        self.scaling: dict | None = None
        self.set_scaling(scaling)

    @classmethod
    def variant_descriptions(cls) -> dict[str, str]:
        return {name: (fn.__doc__ or "").strip().splitlines()[0] for name, fn in ROPE_TYPES.items()}

    def set_scaling(self, scaling: dict | None) -> None:
        """Swap the length-extension scaling (a transformers `rope_scaling` dict, or None).

        The dict is completed by `complete_scaling` (training length, partial_rotary_factor); a
        partial_rotary_factor other than the model's `partial` is an error, since the rotated
        dimension is fixed when the model is built.
        """
        scaling, dict_partial = complete_scaling(scaling, train_len=self.dims.train_len, max_len=self.dims.max_len)
        if dict_partial is not None and dict_partial != self.partial:
            raise ValueError(f"rope scaling sets partial_rotary_factor={dict_partial} but the model rotates "
                             f"partial={self.partial} of each head; the rotated dimension is fixed when the model is "
                             f"built, so set the encoding's partial instead")
        rope_parameters(scaling, self.rot_dim, self.theta, seq_len=1)  # validates names and parameters now
        self.scaling = dict(scaling) if scaling else None

    def frequencies(self, seq_len: int) -> tuple[torch.Tensor, float]:
        """(inv_freq float64 (R/2,), attention_factor) for a sequence of `seq_len` positions."""
        return rope_parameters(self.scaling, self.rot_dim, self.theta, seq_len)

    def cos_sin(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin tables (B, 1, T, R/2) in `dtype`, scaled by the attention factor.

        The sequence length is read from `pos` only for the scalings that use it
        (`uses_seq_len`: dynamic, longrope), and the frequencies in the working dtype are kept on
        `pos`'s device per (length, scaling): on an accelerator neither a read-back nor a host
        copy then waits for the device on each forward pass.
        """
        seq_len = int(pos.max()) + 1 if pos.numel() and uses_seq_len(self.scaling) else 1
        work = torch.float64 if dtype == torch.float64 else torch.float32
        key = (seq_len, pos.device, work, self.theta, self.rot_dim, repr(self.scaling))
        cache = self.__dict__.setdefault("_frequencies", {})
        if key not in cache:
            if len(cache) >= TABLE_CACHE_SIZE:
                cache.clear()
            inv_freq, factor = self.frequencies(seq_len)
            cache[key] = (inv_freq.to(pos.device, work), factor)  # (R/2,), float
        inv_freq, factor = cache[key]
        angle = pos.to(work)[:, None, :, None] * inv_freq  # (B, 1, T, R/2)
        return (angle.cos() * factor).to(dtype), (angle.sin() * factor).to(dtype)

    def tables(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """`rotary_tables` (B|1, 1, T, R) for `pos`, cached (`position_tables`)."""
        key = (dtype, self.theta, self.layout, self.rot_dim, repr(self.scaling))
        return self.position_tables(pos, key, lambda p: rotary_tables(*self.cos_sin(p, dtype), self.layout))  # (B|1, 1, T, R) each

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tables = self.tables(pos, q.dtype)  # 2 × (B|1, 1, T, R)
        return rotate_qk(q, k, tables, tables, self.layout)  # (B, H, T, Dh) each

    def pair_rotation(self, pos: torch.Tensor, dtype: torch.dtype) -> PairRotation:
        return PairRotation(*self.cos_sin(pos, dtype), self.layout)  # cos, sin (B, 1, T, R/2) each

    def kernel_comparisons(self) -> tuple[str, ...]:
        # transformers' apply_rotary_pos_emb is this rotation only in the half layout over the whole head
        return ("hf",) if self.layout == "half" and self.partial == 1.0 else ()
