"""The machine facts a benchmark records beside its timings."""

from __future__ import annotations

import os

import torch

from lenbench.device import device_name


def lenbench_machine_info(dev: torch.device) -> dict:
    """Machine facts recorded in the benchmark JSON (`machine_info["lenbench"]`) and in the GPU
    check's env.json, so timings compare across machines: versions, the device and its runtime,
    threads, and the numeric mode the kernels were timed in."""
    import lenbench
    from lenbench.run.cell import git_sha

    info = {
        "lenbench_version": lenbench.__version__,
        "git_sha": git_sha(),
        "torch_version": torch.__version__,
        "device": dev.type,
        "device_name": device_name(dev),
        "cpu_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "cuda_runtime": torch.version.cuda,
        "xpu_runtime": getattr(torch.version, "xpu", None),
    }
    if dev.type == "cuda":
        info["cudnn"] = torch.backends.cudnn.version()
    from lenbench.numerics import machine_facts

    info.update(machine_facts())  # the numeric mode the kernels were timed in, CPU model and capability
    return info
