"""The kernel cases: what `bench/test_kernels.py` and the A/B speed gate time, built without pytest.

A case is one (encoding, implementation, length T, dtype), listed by `kernel_cases` from the suite's
`kernels:` settings; `build` returns its ready call on fixed random inputs, the eager reference on
the same inputs, the shape, the bytes it must move and the references a benchmark divides by.
`ready` applies the skip rules (no fused form, a policy skip, no compiler or dtype support) and raises
`CaseSkipped` with the reason; pytest turns it into a skip, the speed gate into a skipped case.

The speed gate (`lenbench.benchmark.speed_gate`) imports this module from each checkout it times,
so its names are the contract between a checkout and the gate of a later one: `kernel_cases`,
`case_id`, `ready`.

Shapes (fixed across T, so one dynamic-shape compilation serves every length): rotary
(B=8, H=8, T, Dh=64), absolute (8, T, 512), attention (B=1, 8, T, 64); layer and attend kinds
also read the layer input x (1, T, 512).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import torch

from lenbench import kernels as K
from lenbench.benchmark import plans as P
from lenbench.config import KernelSpec
from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding
from lenbench.encodings.base import shared_rows

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
HEADS, HEAD_DIM = 8, 64
ROTARY_BATCH, ATTENTION_BATCH = 8, 1
#: Kinds whose kernel is a whole attention (timed against unbiased causal SDPA, grouped as "attention").
ATTENTION_KINDS = ("bias", "content", "layer", "attend")
#: Implementations that compile on their first call.
COMPILED_IMPLS = ("fused", "compiled", "flex", "flex_gather")


class CaseSkipped(Exception):
    """A case that is not timed here; the message is the reason."""


@dataclass
class Built:
    """One case ready to call.

    fn: the timed call; eager: the eager reference on the same inputs; shape: the input shape recorded;
    bytes_moved: the bytes the kernel must read and write; info: extra_info entries of the case;
    refs: other references on the same inputs a benchmark divides by (e.g. "hf").
    """

    fn: Callable[[], Any]
    eager: Callable[[], Any]
    shape: tuple
    bytes_moved: int
    info: dict = field(default_factory=dict)
    refs: dict = field(default_factory=dict)


@cache
def encoding_instance(name: str, device: str, max_len: int):
    """One instance per (encoding, device, longest length) for the process, built from seed 0
    whichever caller asks first (compiled hooks are cached per instance)."""
    torch.manual_seed(0)
    dims = EncodingDims(d_model=HEADS * HEAD_DIM, n_heads=HEADS, max_len=max_len, causal=True)
    return build_encoding(name, dims).to(device).train()  # train: randomized draws positions


def kernel_cases(s: KernelSpec) -> list[tuple[str, str, int, str]]:
    """(encoding, impl, T, dtype) in run order: eager before the implementations compared to it."""
    cases = []
    for name in ENCODINGS.names():
        if s.encodings and name not in s.encodings:
            continue
        impls = K.implementations(encoding_instance(name, "cpu", max(s.lengths))) or ["none"]
        for T in s.lengths:
            for dt in s.dtypes:
                cases += [(name, impl, T, dt) for impl in impls]
    return cases


def case_id(case: tuple[str, str, int, str]) -> str:
    """`rope-fused-T1024-fp32`: the case's pytest id (`test_kernel[<id>]`)."""
    name, impl, T, dt = case
    return f"{name}-{impl}-T{T}-{dt}"


def torch_dtype(dt: str, device: torch.device) -> torch.dtype:
    """The torch dtype of `dt` ("fp32", "bf16"); `CaseSkipped` where the device has no native bf16."""
    if dt == "bf16":
        ok, reason = K.bf16_support(device.type)
        if not ok:
            raise CaseSkipped(reason)
    return DTYPES[dt]


def inputs(shape, dtype, device, n: int, seed: int = 0) -> list[torch.Tensor]:
    """`n` standard-normal tensors of `shape` from a fixed CPU generator (the same on every device)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(shape, generator=gen).to(device, dtype) for _ in range(n)]


def positions(enc, B: int, T: int, device) -> torch.Tensor:
    """The encoding's positions of a (B, T) batch; randomized encodings draw the same ones every time."""
    pos = torch.arange(T, device=device).expand(B, T)  # (B, T)
    torch.manual_seed(T)  # randomized draws positions: the same ones for every implementation
    return enc.positions(pos)  # (B, T)


def ready(case: tuple[str, str, int, str], device: torch.device, spec: KernelSpec) -> tuple[Any, str, Built]:
    """(encoding instance, kernel kind, `Built`) of one case after its skip rules.

    Raises:
        CaseSkipped: the encoding has nothing to fuse, the implementation is not timed on this device
            by default (`plans.timing_skip`), the compiler or dtype is unsupported, or a CPU length past
            `spec.content_max_t` for kinds that materialise (B, H, T, T) tensors.
    """
    name, impl, T, dt = case
    enc = encoding_instance(name, str(device), max(spec.lengths))
    if impl == "none":
        raise CaseSkipped(K.nothing_to_fuse_reason(enc))
    dtype = torch_dtype(dt, device)
    if why := P.timing_skip(impl, device.type, encoding=enc):
        raise CaseSkipped(why)
    if impl in COMPILED_IMPLS:
        ok, reason = K.flex_support(device.type) if impl.startswith("flex") else K.compile_support(device.type)
        if not ok:
            raise CaseSkipped(reason)
    kind = K.kernel_kind(enc)
    return enc, kind, build(enc, kind, impl, T, dtype, device, spec)


def build(enc, kind: str, impl: str, T: int, dtype: torch.dtype, device: torch.device, s: KernelSpec) -> Built:
    """The `Built` case of encoding instance `enc` of kernel kind `kind` (`lenbench.kernels.kernel_kind`)."""
    builder = {"rotary": _rotary, "bias": _bias, "absolute": _absolute, "content": _content, "layer": _layer,
               "attend": _layer}[kind]
    return builder(enc, impl, T, dtype, device, s)


def _rotary(enc, impl, T, dtype, device, s: KernelSpec) -> Built:
    B = ROTARY_BATCH
    q, k = inputs((B, HEADS, T, HEAD_DIM), dtype, device, 2)
    pos = positions(enc, B, T, device)
    tables = K.rotary_inputs(enc, pos, dtype)
    if tables is None:  # an unknown rotary encoding: its own hook, eager vs compiled
        eager = lambda: enc.rotate(q, k, pos)  # noqa: E731
        fns = {"eager": eager, "fused": lambda: K.compiled_hook(enc, "rotate")(q, k, pos)}
    else:
        eager = lambda: tables.eager(q, k)  # noqa: E731
        cos_full, sin_full = K.hf_tables(tables.cos, tables.sin)
        fns = {"eager": eager, "fused": lambda: tables.fused(q, k), "hf": lambda: K.rotary_hf(q, k, cos_full, sin_full)}
    refs = {"hf": fns["hf"]} if "hf" in fns else {}
    return Built(fns[impl], eager, q.shape, P.rotary_bytes(q, k), {}, refs)


def _bias(enc, impl, T, dtype, device, s: KernelSpec) -> Built:
    B = ATTENTION_BATCH
    q, k, v = inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    pos = positions(enc, B, T, device)
    eager = lambda: K.attention_eager(q, k, v, enc, pos)  # noqa: E731
    if impl == "eager":
        p = shared_rows(pos)
        bias = torch.empty(p.shape[0], HEADS, T, T, dtype=dtype, device="meta")
        # the timed call builds its mask by blocks of query rows past K.BIAS_BLOCK_BYTES (FIRE's hook at T = 4096 would
        # hold 4 GB of intermediates in one call): record the rows per hook call (T: one call)
        info = {"bias_query_rows": K.bias_query_rows(p.shape[0], enc.dims.n_heads, T, dtype)}
        return Built(eager, eager, q.shape, P.attention_bytes(q, k, v, bias=bias), info)
    if impl == "cached":
        mask = K.folded_bias(enc, pos, dtype)  # (B|1, H, T, T), built once for this length
        return Built(lambda: K.attention_cached(q, k, v, mask), eager, q.shape, P.attention_bytes(q, k, v, bias=mask))
    if impl == "cached_blocks":
        mask = K.folded_bias(enc, pos, dtype)  # (B|1, H, T, T), built once for this length
        read = P.attention_bytes(q, k, v) + P.nbytes(mask) // 2  # the causal half of the mask
        return Built(lambda: K.attention_cached_blocks(q, k, v, mask), eager, q.shape, read)
    if impl == "toeplitz":
        tplan = K.prepare_toeplitz(enc, pos, dtype)  # (H, 2T−1) diagonals, once per length
        bytes_moved = P.attention_bytes(q, k, v) + P.nbytes(tplan.diagonals)
        return Built(lambda: K.attention_toeplitz(q, k, v, tplan), eager, q.shape, bytes_moved)
    plan = K.prepare_flex(enc, pos, dtype, gather=impl == "flex_gather")  # once per position pattern
    return Built(lambda: K.attention_flex(q, k, v, plan), eager, q.shape, P.attention_bytes(q, k, v) + plan.extra_bytes)


def _absolute(enc, impl, T, dtype, device, s: KernelSpec) -> Built:
    B = ROTARY_BATCH
    (h,) = inputs((B, T, HEADS * HEAD_DIM), dtype, device, 1)
    pos = positions(enc, B, T, device)
    eager = lambda: enc.embed(h, pos)  # noqa: E731
    fn = eager if impl == "eager" else (lambda: K.compiled_hook(enc, "embed")(h, pos))
    table_rows = h if hasattr(K.base_encoding(enc), "table") else None  # learned: one table row read per token
    return Built(fn, eager, h.shape, 2 * P.nbytes(h) + P.nbytes(table_rows))


def _content(enc, impl, T, dtype, device, s: KernelSpec) -> Built:
    if device.type == "cpu" and T > s.content_max_t:
        raise CaseSkipped(f"{enc.name}: content-dependent attention materialises several (B, H, T, T) tensors; "
                          f"CPU runs stop at T={s.content_max_t} (kernels.content_max_t or LENBENCH_CONTENT_MAX_T "
                          "raises it)")
    B = ATTENTION_BATCH
    q, k, v = inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    pos = positions(enc, B, T, device)
    enc = P.in_dtype(enc, dtype)  # a per-dtype copy: the session's instance stays as built
    eager = lambda: K.attention_content(q, k, v, enc, pos)  # noqa: E731
    fn = eager if impl == "eager" else (lambda: K.attention_content_compiled(q, k, v, enc, pos))
    bias = torch.empty(B, HEADS, T, T, dtype=dtype, device="meta")
    return Built(fn, eager, q.shape, P.attention_bytes(q, k, v, bias=bias))


def _layer(enc, impl, T, dtype, device, s: KernelSpec) -> Built:
    """layer (FoX, DAPE) and attend (stick-breaking, SSMax): one layer's attention after its
    projections, from the layer input x and q, k, v (`lenbench.kernels.layer`)."""
    if device.type == "cpu" and T > s.content_max_t:
        raise CaseSkipped(f"{enc.name}: its eager attention materialises (B, H, T, T) tensors; CPU runs stop at "
                          f"T={s.content_max_t} (kernels.content_max_t or LENBENCH_CONTENT_MAX_T raises it)")
    B = ATTENTION_BATCH
    q, k, v = inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    (x,) = inputs((B, T, HEADS * HEAD_DIM), dtype, device, 1, seed=1)
    pos = positions(enc, B, T, device)
    enc = P.in_dtype(enc, dtype)  # a per-dtype copy (FoX's gates, DAPE's MLPs read x / the logits in dtype)
    mask = K.layer_mask(enc, pos, dtype)  # (B|1, H|1, T, T) or None: built once per forward in the model
    eager = lambda: K.attention_layer(x, q, k, v, enc, pos, mask)  # noqa: E731
    fns = {"eager": eager, "compiled": lambda: K.attention_layer_compiled(x, q, k, v, enc, pos, mask),
           "flex": lambda: K.attention_score_vector(x, q, k, v, enc, pos)}
    # bytes: q, k, v, out, x, plus the bias read where one is materialised (the layer bias; a wrapped bias's mask)
    if K.kernel_kind(enc) == "layer":
        materialised = None if impl == "flex" else torch.empty(B, HEADS, T, T, dtype=dtype, device="meta")
    else:
        materialised = mask
    return Built(fns[impl], eager, q.shape, P.attention_bytes(q, k, v, bias=materialised) + P.nbytes(x))
