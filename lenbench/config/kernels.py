"""A suite's `kernels:` section: what `bench/test_kernels.py` times, checked against the encoding
registry (`parse_kernels`; the spec itself, `KernelSpec`, is data in `lenbench.config.schema`).

It decides nothing a cell computes; it sits in the suite file so one preset names both the grid
and the kernel benchmarks that go with it.
"""

from __future__ import annotations

from typing import Any

from lenbench.config.fields import SuiteError, registered, typed
from lenbench.config.schema import KernelSpec
from lenbench.encodings import ENCODINGS
from lenbench.registry import did_you_mean

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
