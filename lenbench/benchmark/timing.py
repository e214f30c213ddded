"""A device-synchronised timer: seconds per call of a function on a device.

On the CPU every call is timed alone; on an accelerator a timed round makes enough back-to-back
calls to last about `MIN_ROUND_SECONDS` and synchronises once at its end, so the kernels are
timed, not the launch and synchronise latency. `lenbench.benchmark.flops` (matmul rate), the kernel
benchmarks (`bench/test_kernels.py`, `lenbench.benchmark.plans`, the pytest plugin's `timed`
fixture) and `bench/gpu_check.py` time with it.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any, Literal

import torch

from lenbench.device import synchronize

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

