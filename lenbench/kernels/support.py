"""What this machine can build: torch.compile, flex_attention and bf16 support checks, and the
lazily compiled wrappers every fused kernel is made with (`lazy_compile`, `compiled_hook`).

Each check returns (ok, reason): a benchmark that cannot run here is skipped with the reason.
"""

from __future__ import annotations

import functools
import os
import shutil
import weakref
from collections.abc import Callable

import torch

from lenbench.encodings import PositionalEncoding

try:  # torch >= 2.5
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
except ImportError:  # pragma: no cover - older torch
    BlockMask = create_block_mask = flex_attention = None  # type: ignore[assignment]


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


def lazy_compile(fn: Callable, options: dict | None = None) -> Callable:
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

