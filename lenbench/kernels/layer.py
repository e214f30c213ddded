"""Attention kernels of the encodings that take part in the attention itself: a bias per layer
read from the layer's input (`layer_dependent`: FoX, DAPE → kind "layer") and a replaced softmax
(`replaces_softmax`: stick-breaking, SSMax → kind "attend").

| implementation | what it runs                                                                     |
| -------------- | -------------------------------------------------------------------------------- |
| `eager`        | one layer's attention after its projections, as `lenbench.model.Attention` runs  |
|                | it: `rotate`, `layer_bias` folded into the mask, then `attend` (the encoding's   |
|                | or the model's SDPA); the mask is the one `Transformer.forward` hands a layer    |
|                | (`layer_mask`: static bias and causal mask, built once per forward pass)         |
| `compiled`     | the same function through torch.compile, one compilation per encoding instance   |
|                | and layer (its own code object, so encodings never share dynamo's recompile      |
|                | budget)                                                                          |
| `flex`         | a layer encoding declaring `score_vector` (FoX): flex_attention with the score   |
|                | modifier c[b, h, q] − c[b, h, kv] over the (B, H, T) vector c and a causal block |
|                | mask; no (T, T) tensor                                                           |
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable

import torch

from lenbench.encodings import PositionalEncoding
from lenbench.encodings.attention import attend
from lenbench.encodings.base import shared_rows
from lenbench.kernels._inductor_patch import patch_inductor_flex_cpu_names
from lenbench.kernels.bias import causal_additive_mask, causal_block_mask, flex_block_size
from lenbench.kernels.dispatch import declares_score_vector
from lenbench.kernels.support import flex_attention, lazy_compile


def layer_mask(enc: PositionalEncoding, pos: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    """The additive mask `Transformer.forward` hands every layer (no padding): the static bias
    (`bias` of shared position rows) with the causal mask folded in, the causal mask alone for a
    content- or layer-dependent encoding, else None (attention is then causal by flag).

    Args:
        pos: (B, T) positions (after `positions`).

    Returns:
        (B|1, H|1, T, T) or None.
    """
    T, device = pos.shape[1], pos.device
    static = None
    if not enc.content_dependent:
        rows = shared_rows(pos)  # (1|B, T)
        static = enc.bias(rows, rows)  # (B|1, H, T, T) or None
    mask = None
    if enc.dims.causal and (static is not None or enc.content_dependent or enc.layer_dependent):
        mask = causal_additive_mask(T, device, dtype)  # (1, 1, T, T)
    if static is not None:
        mask = static.to(dtype) if mask is None else static.to(dtype) + mask  # (B|1, H, T, T)
    return mask


def attention_layer(x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enc: PositionalEncoding,
                    pos: torch.Tensor, mask: torch.Tensor | None, layer: int = 0) -> torch.Tensor:
    """Eager reference: one layer's attention after the q/k/v projections, line for line as
    `lenbench.model.Attention.forward` (dropout off).

    Args:
        x: (B, T, D) the layer's input (FoX's gates read it).
        q, k, v: (B, H, T, Dh) the projected queries, keys and values (before `rotate`).
        pos: (B, T) positions; mask: `layer_mask(enc, pos, dtype)`.
        layer: the layer's index.

    Returns:
        (B, H, T, Dh), before the output projection.
    """
    q, k = enc.layer_rotate(q, k, pos, layer) if enc.rotates_per_layer else enc.rotate(q, k, pos)  # (B, H, T, Dh)
    if enc.content_dependent:
        bias = enc.attention_bias(q, k, pos, pos).to(q.dtype)  # (B|1, H, T, T)
        mask = bias if mask is None else bias + mask  # (B|1, H, T, T)
    bias = enc.layer_bias(x, q, k, pos, layer) if enc.layer_dependent else None  # (B|1, H|1, T, T) or None
    if bias is not None:
        mask = bias.to(q.dtype) if mask is None else bias.to(q.dtype) + mask  # (B|1, H, T, T)
    if enc.replaces_softmax:
        return enc.attend(q, k, v, mask, 0.0, layer)  # (B, H, T, Dh)
    return attend(q, k, v, mask, enc.dims.causal and mask is None, 0.0)  # (B, H, T, Dh)


_COMPILED: dict[tuple[int, int], tuple[PositionalEncoding, Callable]] = {}


def _one_layer(enc: PositionalEncoding, layer: int) -> Callable:
    """`attention_layer` with `enc` and `layer` bound, on a code object of its own.

    dynamo keeps its compiled graphs (and its recompile limit) per code object: closures of one
    function would share them, and the encodings and dtypes of a benchmark session would then
    exhaust the limit (which `bench/test_kernels.py` makes an error, not a silent eager fallback).
    """

    def one_layer(x, q, k, v, pos, mask):
        return attention_layer(x, q, k, v, enc, pos, mask, layer)

    code = one_layer.__code__.replace(co_name=f"attention_layer_{type(enc).__name__}_{id(enc):x}_{layer}")
    return types.FunctionType(code, one_layer.__globals__, code.co_name, None, one_layer.__closure__)


def attention_layer_compiled(x, q, k, v, enc: PositionalEncoding, pos, mask, layer: int = 0) -> torch.Tensor:
    """`attention_layer` through torch.compile (built on first use, per encoding instance and layer)."""
    key = (id(enc), layer)
    if key not in _COMPILED or _COMPILED[key][0] is not enc:
        _COMPILED[key] = (enc, lazy_compile(_one_layer(enc, layer)))  # the instance kept alive: its id stays its own
    return _COMPILED[key][1](x, q, k, v, pos, mask)


def _flex_score_vector(q, k, v, c, block_mask):
    def score_mod(score, b, h, q_idx, kv_idx):  # + (c_i − c_j): the difference first, as the eager bias
        return score + (c[b, h, q_idx] - c[b, h, kv_idx]).to(score.dtype)

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


_flex_score_vector_compiled = lazy_compile(_flex_score_vector)


def attention_score_vector(x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           enc: PositionalEncoding, pos: torch.Tensor, layer: int = 0, *,
                           compiled: bool = True) -> torch.Tensor:
    """Fused attention of a layer encoding declaring `score_vector` (FoX): `rotate`, then
    flex_attention adding c[b, h, q] − c[b, h, kv] to each causal score, c = `score_vector(x, layer)`.

    Arguments as `attention_layer` (no mask: causal, no padding). `compiled=False` runs
    flex_attention's unfused eager reference (tests; slow).

    Raises:
        ValueError: one line, for an encoding without the declaration or with bidirectional attention.
    """
    if not declares_score_vector(enc) or not enc.layer_dependent:
        raise ValueError(f"encoding {enc.name!r} declares no score_vector (a layer bias c_i − c_j): "
                         f"use attention_layer for it")
    if not enc.dims.causal:
        raise ValueError(f"encoding {enc.name!r}: the score-vector flex kernel is causal only")
    q, k = enc.rotate(q, k, pos)  # (B, H, T, Dh)
    c = enc.score_vector(x, layer)  # (B, H, T), float32 (float64 stays)
    T, device = q.shape[2], q.device
    block = flex_block_size(device)
    pad = -T % block if compiled and device.type == "cpu" else 0
    if pad:  # see below: padded keys come after every real query (masked), padded queries are dropped
        q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k, v))  # (B, H, T + pad, Dh)
        c = torch.nn.functional.pad(c, (0, pad))  # (B, H, T + pad)
    block_mask = causal_block_mask(T + pad, str(device), block)
    if not compiled:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
            return _flex_score_vector(q, k, v, c, block_mask)  # (B, H, T, Dh)
    if device.type == "cpu":
        patch_inductor_flex_cpu_names()
    # On the CPU (torch 2.13) the compiled flex template gives wrong scores for this modifier when T
    # is not a multiple of the block size (the last, partial block; each of c[q] and c[kv] alone is
    # right): the inputs are padded to whole blocks there.
    return _flex_score_vector_compiled(q, k, v, c, block_mask)[:, :, :T]  # (B, H, T, Dh)
