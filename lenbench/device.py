"""Device selection (`auto` picks the available accelerator: CUDA, XPU, MPS, else the CPU) and the
host process's allocator setting (`keep_freed_memory`)."""

from __future__ import annotations

import torch

DEVICES = ("auto", "cpu", "cuda", "xpu", "mps")


class DeviceError(ValueError):
    """The requested device does not exist on this machine."""


def available(kind: str) -> bool:
    if kind == "cpu":
        return True
    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "xpu":
        return hasattr(torch, "xpu") and torch.xpu.is_available()
    if kind == "mps":
        return torch.backends.mps.is_available()
    return False


def resolve_device(name: str = "auto") -> torch.device:
    """Map a device option to a `torch.device`, with a one-line error when it is unavailable."""
    if name not in DEVICES:
        raise DeviceError(f"unknown device {name!r}; choose one of {', '.join(DEVICES)}")
    if name == "auto":
        return torch.device(next((k for k in ("cuda", "xpu", "mps") if available(k)), "cpu"))
    if not available(name):
        raise DeviceError(f"device {name!r} is not available on this machine (torch {torch.__version__}); "
                          f"use --device cpu or --device auto")
    return torch.device(name)


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels on `device` so wall-clock timings are complete."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "xpu":
        torch.xpu.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def device_name(device: torch.device) -> str:
    """A human-readable accelerator name ("cpu" on the CPU)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "xpu":
        return torch.xpu.get_device_name(device)
    return device.type


#: Blocks below this size stay in glibc's heap when freed (`keep_freed_memory`).
KEEP_FREED_BELOW = 1 << 30


def keep_freed_memory(threshold: int = KEEP_FREED_BELOW) -> bool:
    """Make glibc's malloc keep freed blocks below `threshold` bytes in the heap for reuse
    (mallopt M_MMAP_THRESHOLD and M_TRIM_THRESHOLD), as jemalloc and tcmalloc do.

    By default glibc serves large blocks with a fresh `mmap` and returns freed memory at the top
    of the heap to the OS, so a CPU training step, whose activations are allocated anew on every
    step, page-faults on every step: 500–850 minor faults per quick-suite lm step (about 1.6 µs
    each), and fused RoPE at T = 4096 measured 4.9× a copy of q,k with the default
    allocator, 1.25× with this. Arithmetic is unchanged (same results, bit for bit); a process
    keeps up to `threshold` bytes of freed memory instead of returning it.

    Process-wide and idempotent. The executors call it in every process that computes cells
    (`lenbench.run.executors.base.compute_cell`), and `bench/test_kernels.py` in the benchmark session, so
    the benchmarks time what the cells run. Returns False where it does not apply (not glibc).
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc <malloc.h>
    return bool(mallopt(m_mmap_threshold, threshold)) and bool(mallopt(m_trim_threshold, threshold))
