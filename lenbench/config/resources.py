"""A suite's `resources:` section: what one cell reserves on a Ray cluster (`ResourceSpec`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lenbench.config.fields import SuiteError, typed


@dataclass(frozen=True)
class ResourceSpec:
    """What one cell reserves on a cluster (the `ray` executor; local executors ignore it).

    Ray schedules each cell as a task with these resources, so fractional GPUs let several small
    models share one GPU (`num_gpus: 0.25` → four cells per GPU). They never change the rows: the
    intra-op thread count is `--threads` (see `lenbench.run.driver.run_suite`).

    Args:
        num_cpus: logical CPUs reserved per cell (> 0).
        num_gpus: GPUs per cell (≥ 0, fractions allowed).
        memory_gb: memory reserved per cell in GiB (0: no reservation).
    """

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory_gb: float = 0.0


def parse_resources(data: Any, source: str = "<suite>") -> ResourceSpec:
    """Validate a suite's `resources:` mapping into a `ResourceSpec` (None or absent: the defaults)."""
    spec = typed(ResourceSpec, data or {}, "resources", source)
    for key, low, ok in (("num_cpus", "> 0", spec.num_cpus > 0), ("num_gpus", ">= 0", spec.num_gpus >= 0),
                         ("memory_gb", ">= 0", spec.memory_gb >= 0)):
        if not ok:
            raise SuiteError(f"{source}: resources.{key} must be {low}, got {getattr(spec, key)!r}")
    return spec
