"""Attention with an additive positional bias: the eager reference and the fused paths.

| implementation  | what it runs                                                              |
| --------------- | ------------------------------------------------------------------------- |
| `eager`         | the bias from the hook + SDPA with the materialised mask (as the model;   |
|                 | a bias over `BIAS_BLOCK_BYTES` built by blocks of query rows)             |
| `cached`        | the folded bias materialised once per length, reused                      |
| `flex`          | `flex_attention` with a score modifier and a causal block mask            |
| `toeplitz`      | relative-only biases at contiguous positions: SDPA reading a per-distance |
|                 | table through strided mask views, one call per block of queries           |
| `cached_blocks` | any other bias: the materialised mask, read by causal query blocks        |

The flex score modifier is chosen by what the encoding declares (`lenbench.encodings.base`):
its `closed_form_bias` (ALiBi, KERPLE), else a per-distance table of a `relative_only` bias (T5,
Sandwich), else the dense bias (FIRE and any new bias encoding). Positions are explicit (B, T)
integer tensors; the modifiers read them in one of two forms, chosen once per position pattern by
`prepare_flex`: when every row is a contiguous run `offset_b + 0 … T−1` (the default, and any
left-padded or offset batch) the relative position is computed from the indices
(`kv − q + (k_off[b] − q_off[b])`, no gathers); otherwise the modifier gathers
`k_pos[b, kv] − q_pos[b, q]`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from lenbench.encodings import PositionalEncoding
from lenbench.encodings.base import shared_rows
from lenbench.kernels._inductor_patch import patch_inductor_flex_cpu_names
from lenbench.kernels.dispatch import base_encoding
from lenbench.kernels.support import BlockMask, create_block_mask, flex_attention, lazy_compile


def causal_additive_mask(T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(1, 1, T, T): 0 where key j ≤ query i, −inf after it (the model's causal mask)."""
    allowed = torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)
    zero = torch.zeros((), dtype=dtype, device=device)
    return torch.where(allowed, zero, torch.tensor(float("-inf"), dtype=dtype, device=device))[None, None]


#: Bytes of the bias one `enc.bias` call of `folded_bias` builds at most (a block of query rows).
#: A hook's intermediates scale with its output: FIRE's MLP keeps two (rows, T, hidden = 32)
#: tensors, 8× its 8-head bias, 4.2 GB at T = 4096 in one call; at 64 MiB a block they stay
#: near 0.5 GB whatever T. The whole bias up to 64 MiB (T ≤ 1024 at 8 heads, fp32) is one call.
BIAS_BLOCK_BYTES = 64 << 20


def bias_query_rows(rows: int, heads: int, T: int, dtype: torch.dtype, block_bytes: int = BIAS_BLOCK_BYTES) -> int:
    """Query rows per `enc.bias` call in `folded_bias`: T when the whole (rows, heads, T, T) bias
    fits in `block_bytes`, else the most rows whose (rows, heads, ·, T) block does (at least one).

    Args:
        rows: position rows of the bias (1 when they are shared, else B); heads: H.
        dtype: the bias's dtype; its bytes count as at least float32's (hooks compute in float32).
    """
    per_row = rows * heads * T * max(4, torch.empty((), dtype=dtype).element_size())  # bytes of one query row
    return max(1, min(T, block_bytes // per_row))


def _causal_rows(start: int, stop: int, T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(1, 1, stop − start, T): rows start … stop − 1 of `causal_additive_mask(T)`."""
    i = torch.arange(start, stop, device=device)[:, None]  # (rows, 1) query indices
    j = torch.arange(T, device=device)[None, :]  # (1, T) key indices
    zero = torch.zeros((), dtype=dtype, device=device)
    return torch.where(j <= i, zero, torch.tensor(float("-inf"), dtype=dtype, device=device))[None, None]


def folded_bias(enc: PositionalEncoding, pos: torch.Tensor, dtype: torch.dtype, causal: bool = True, *,
                block_bytes: int = BIAS_BLOCK_BYTES) -> torch.Tensor:
    """The bias of `enc` at positions (B, T) with the causal mask folded in: (B|1, H, T, T).

    Built by blocks of query rows (`bias_query_rows`: one `enc.bias(p[:, rows], p)` call each,
    written into the result) when the whole bias exceeds `block_bytes`, so the hook's
    intermediates are bounded by the block, not by T²; every element is the hook's own at its
    (query, key) position pair, as one call would give (`tests/kernels` hold the two equal in
    float64). A result that needs gradients (trainable bias parameters under autograd) is
    concatenated from its blocks instead.

    Args:
        pos: (B, T) positions; dtype: the result's dtype.
        causal: fold in −inf for keys after the query.
        block_bytes: bias bytes per hook call (default `BIAS_BLOCK_BYTES`).

    Returns:
        (B|1, H, T, T).
    """
    p = shared_rows(pos)  # (B|1, T)
    T = p.shape[1]
    step = bias_query_rows(p.shape[0], enc.dims.n_heads, T, dtype, block_bytes)
    if step >= T:  # one call
        bias = enc.bias(p, p).to(dtype)  # (B|1, H, T, T)
        return bias + causal_additive_mask(T, pos.device, dtype) if causal else bias  # (B|1, H, T, T)
    probe = enc.bias(p[:, :1], p)  # (B|1, H, 1, T): the result's leading dims, and whether it needs gradients
    # out= records no gradients: a result that needs them is concatenated from its blocks instead. Otherwise the
    # result is allocated before any block, so the blocks' freed intermediates never sit below it in the heap.
    out = None if probe.requires_grad else torch.empty(*probe.shape[:2], T, T, dtype=dtype, device=pos.device)
    del probe
    blocks = []
    for s in range(0, T, step):
        e = min(s + step, T)
        block = enc.bias(p[:, s:e], p).to(dtype)  # (B|1, H, e − s, T)
        mask = _causal_rows(s, e, T, pos.device, dtype) if causal else None  # (1, 1, e − s, T)
        if out is None:
            blocks.append(block if mask is None else block + mask)
        elif mask is None:
            out[:, :, s:e] = block
        else:
            torch.add(block, mask, out=out[:, :, s:e])  # (B|1, H, e − s, T)
        del block
    return torch.cat(blocks, 2) if out is None else out  # (B|1, H, T, T)


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


def relative_range(pos: torch.Tensor) -> tuple[int, int]:
    """(lo, hi): the least and greatest k_pos − q_pos over every row's (query, key) pairs, from
    each row's extremes (no (B, T, T) tensor of differences)."""
    mn, mx = pos.amin(1), pos.amax(1)  # (B,) each
    return int((mn - mx).min()), int((mx - mn).max())


def relative_table(enc: PositionalEncoding, lo: int, hi: int, device: torch.device) -> torch.Tensor:
    """(H, hi − lo + 1): the bias of a relative-only encoding at each k_pos − q_pos in lo … hi, its
    `relative_bias` (by default read off its own `bias` hook: query at −lo, keys at 0 … hi − lo)."""
    return enc.relative_bias(torch.arange(lo, hi + 1, device=device))  # (H, R)


@dataclass
class FlexPlan:
    """Everything a flex call needs for one position pattern, built once by `prepare_flex`.

    Attributes:
        flavour: a closed form's name (`ClosedFormBias.name`: "alibi", "kerple_log",
            "kerple_power", …), "table" (per-distance lookup), "dense" or "dense_shared" (read
            the materialised bias, (B, H, T, T) or (1, H, T, T)).
        affine: True when positions are contiguous runs (index arithmetic), False for gathers.
        args: the score modifier's tensors after `affine`: (pa, pb, *params), where for affine
            positions pa = pb = (max(B, 2),) relative offsets k_off − q_off − shift, for gathers
            pa = q_pos (B, T), pb = k_pos − shift (B, T); shift = lo for the table, else 0.
            params: the closed form's `params` (e.g. slopes (H,); r1, r2 (H,)) | table (H, R) | bias.
        block_mask: causal BlockMask, or None for bidirectional attention.
        extra_bytes: bias bytes a dense flavour reads.
        score: the closed form's `score` function (None for the other flavours).
    """

    flavour: str
    affine: bool
    args: tuple
    block_mask: Any
    extra_bytes: int = field(default=0)
    score: Callable | None = None


def prepare_flex(
    enc: PositionalEncoding, pos: torch.Tensor, dtype: torch.dtype, *, causal: bool = True, gather: bool = False
) -> FlexPlan:
    """Build the flex score modifier's inputs for `enc` at positions `pos` (B, T).

    By declaration: a `closed_form_bias` (ALiBi, KERPLE) is evaluated per score; any other
    `relative_only` bias (T5, Sandwich) is read from a per-distance table (bucketing / the cosine
    sum run once per distance, not per score); any other bias encoding reads the dense bias.
    `gather=True` forces the position-gathering form even for contiguous positions.
    """
    enc = base_encoding(enc)
    device = pos.device
    T = pos.shape[1]
    closed = enc.closed_form_bias()
    if closed is not None and not enc.relative_only:
        raise ValueError(f"encoding {enc.name!r} declares a closed_form_bias but not relative_only = True; "
                         f"a closed form of (head, k_pos − q_pos) is relative-only: declare both")
    block_mask = causal_block_mask(T, str(device), flex_block_size(device)) if causal else None
    if closed is None and not enc.relative_only:
        bias = folded_bias(enc, pos, torch.float32, causal=False).detach()  # (B|1, H, T, T)
        flavour = "dense_shared" if bias.shape[0] == 1 else "dense"
        return FlexPlan(flavour, True, (bias,), block_mask, bias.numel() * bias.element_size())
    shift = 0
    if closed is not None:
        flavour, params = closed.name, tuple(closed.params)  # (H,) each
    else:
        flavour = "table"
        lo, hi = relative_range(pos)
        params = (relative_table(enc, lo, hi, device).detach().float(),)  # (H, R)
        shift = lo
    score = None if closed is None else closed.score
    off = None if gather else row_offsets(pos)
    if off is not None:
        # (max(B, 2),): q and k share positions here. At least two entries: with a batch of one,
        # a size-1 offset tensor gets specialised away and inductor's CPU template then fails
        # ("All the buffers in the score and mask subgraph should be in ... input_buffers").
        rel_off = torch.full((max(off.shape[0], 2),), -shift, dtype=torch.int64, device=device)
        return FlexPlan(flavour, True, (rel_off, rel_off, *params), block_mask, score=score)
    return FlexPlan(flavour, False, (pos.to(torch.int64), (pos - shift).to(torch.int64), *params), block_mask,
                    score=score)


def _rel(affine: bool, pa, pb, b, q_idx, kv_idx):
    """k_pos − q_pos − shift inside a score modifier (see `FlexPlan.args`)."""
    if affine:
        return kv_idx - q_idx + pa[b]
    return pb[b, kv_idx] - pa[b, q_idx]


def _closed_form_kernel(form: Callable) -> Callable:
    """The flex kernel of one closed form: `form(score, h, rel, *params)` as the score modifier."""

    def flex_closed(q, k, v, block_mask, affine: bool, pa, pb, *params):
        def score_mod(score, b, h, q_idx, kv_idx):  # form(score, h, k_pos − q_pos, *params)
            return form(score, h, _rel(affine, pa, pb, b, q_idx, kv_idx), *params)

        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)

    return flex_closed


def _flex_table(q, k, v, block_mask, affine: bool, pa, pb, table):
    def score_mod(score, b, h, q_idx, kv_idx):  # table[h, (j − i) − lo]
        return score + table[h, _rel(affine, pa, pb, b, q_idx, kv_idx)]

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def _flex_dense_shared(q, k, v, block_mask, bias):
    def score_mod(score, b, h, q_idx, kv_idx):  # one (1, H, T, T) bias for the batch
        return score + bias[0, h, q_idx, kv_idx]

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def _flex_dense(q, k, v, block_mask, bias):
    def score_mod(score, b, h, q_idx, kv_idx):  # (B, H, T, T) bias
        return score + bias[b, h, q_idx, kv_idx]

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


# One function (one compile cache) per flavour and per closed form, so that no flavour can push
# another past dynamo's recompile limit (which would silently fall back to the unfused eager flex).
_FLEX_EAGER = {"table": _flex_table, "dense_shared": _flex_dense_shared, "dense": _flex_dense}
_FLEX_COMPILED = {name: lazy_compile(fn) for name, fn in _FLEX_EAGER.items()}
_CLOSED_EAGER: dict[Callable, Callable] = {}  # closed form's score -> its flex kernel
_CLOSED_COMPILED: dict[Callable, Callable] = {}


def _flex_kernel(plan: FlexPlan, compiled: bool) -> Callable:
    if plan.score is None:
        return (_FLEX_COMPILED if compiled else _FLEX_EAGER)[plan.flavour]
    if plan.score not in _CLOSED_EAGER:
        _CLOSED_EAGER[plan.score] = _closed_form_kernel(plan.score)
        _CLOSED_COMPILED[plan.score] = lazy_compile(_CLOSED_EAGER[plan.score])
    return (_CLOSED_COMPILED if compiled else _CLOSED_EAGER)[plan.score]


def attention_flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: FlexPlan, *, compiled: bool = True) -> torch.Tensor:
    """Fused attention with the bias as a flex_attention score modifier: (B, H, T, Dh).

    Args:
        q, k, v: (B, H, T, Dh).
        plan: from `prepare_flex` (once per position pattern and length).
        compiled: False runs flex_attention's unfused eager reference (for tests; slow).
    """
    args = plan.args if plan.flavour in ("dense", "dense_shared") else (plan.affine, *plan.args)
    if not compiled:
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
            return _flex_kernel(plan, compiled=False)(q, k, v, plan.block_mask, *args)
    if q.device.type == "cpu":
        patch_inductor_flex_cpu_names()
    return _flex_kernel(plan, compiled=True)(q, k, v, plan.block_mask, *args)


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

    Valid only for a relative-only bias (the encoding declares `relative_only = True`) and rows that
    are contiguous runs `offset_b + 0 … T−1` (then k_pos − q_pos = j − i in every row); anything
    else raises.
    """
    enc = base_encoding(enc)
    if not enc.relative_only:
        raise ValueError(f"toeplitz attention needs a relative-only bias (an encoding declaring relative_only = True), "
                         f"got {enc.name!r}: use prepare_flex or folded_bias for it")
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

