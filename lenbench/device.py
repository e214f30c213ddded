"""Device selection: `auto` picks the available accelerator (CUDA, XPU, MPS), else the CPU."""

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
