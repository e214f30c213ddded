"""A suite's `kernels:` section: what `bench/test_kernels.py` times (`KernelSpec`, `parse_kernels`).

It decides nothing a cell computes; it sits in the suite file so one preset names both the grid
and the kernel benchmarks that go with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lenbench.config.fields import SuiteError, registered, typed
from lenbench.encodings import ENCODINGS
from lenbench.registry import did_you_mean


@dataclass(frozen=True)
class KernelSpec:
    """What `bench/test_kernels.py` times for this suite (the suite's `kernels:` section).

    Environment variables override these fields one by one (`LENBENCH_KERNEL_LENGTHS`,
    `LENBENCH_KERNEL_DTYPES`, `LENBENCH_KERNEL_SECONDS`, `LENBENCH_KERNEL_ENCODINGS`,
    `LENBENCH_CONTENT_MAX_T`, `LENBENCH_TRAIN_ROUNDS`; see `kernel_settings` in bench/kernel_plans.py):
    environment > suite file > these defaults.

    Args:
        enabled: False skips every kernel benchmark of the suite (with that reason).
        lengths: sequence lengths T of the forward-kernel benchmarks.
        dtypes: "fp32" and / or "bf16" (bf16 is skipped where it is not native).
        seconds: timing budget per benchmark (rounds = seconds / one call, 3 … 50).
        encodings: registered encodings to time (forward kernels and training steps); empty: all.
        content_max_t: longest T of content-dependent (CoPE) kernels on the CPU.
        train_rounds: timed rounds of each training-step and MFU benchmark.
    """

    enabled: bool = True
    lengths: tuple[int, ...] = (256, 512, 1024, 2048, 4096)
    dtypes: tuple[str, ...] = ("fp32", "bf16")
    seconds: float = 0.25
    encodings: tuple[str, ...] = ()
    content_max_t: int = 1024
    train_rounds: int = 20


KERNEL_DTYPES = ("fp32", "bf16")


def parse_kernels(data: Any, source: str = "<suite>") -> KernelSpec:
    """Validate a suite's `kernels:` mapping into a `KernelSpec` (None or absent: the defaults)."""
    data = dict(data or {})
    for key in ("lengths", "dtypes", "encodings"):  # a scalar is shorthand for a one-item list
        if key in data and isinstance(data[key], (int, str)) and not isinstance(data[key], bool):
            data[key] = [data[key]]
    spec = typed(KernelSpec, data, "kernels", source)
    if not spec.lengths or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in spec.lengths):
        raise SuiteError(f"{source}: kernels.lengths must be a non-empty list of positive integers, got {list(spec.lengths)!r}")
    for dt in spec.dtypes:
        if dt not in KERNEL_DTYPES:
            raise SuiteError(f"{source}: kernels.dtypes: unknown dtype {dt!r}{did_you_mean(str(dt), list(KERNEL_DTYPES))} "
                             f"(choose from {', '.join(KERNEL_DTYPES)})")
    if not spec.dtypes:
        raise SuiteError(f"{source}: kernels.dtypes must name at least one of {', '.join(KERNEL_DTYPES)}")
    for i, name in enumerate(spec.encodings):
        registered("encoding", name, ENCODINGS, f"kernels.encodings[{i}]", source)
    for key in ("seconds", "content_max_t", "train_rounds"):
        if getattr(spec, key) <= 0:
            raise SuiteError(f"{source}: kernels.{key} must be positive, got {getattr(spec, key)!r}")
    return spec
