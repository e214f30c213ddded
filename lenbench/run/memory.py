"""Evaluation memory: estimate a forward pass's peak before allocating it, and size batches to a budget.

Evaluating at long lengths grows memory with T² (the additive bias and mask, the attention scores
of SDPA's math path) on top of the batch's activations and logits, so `eval.tokens_per_batch`
alone cannot keep an 8192-token ALiBi evaluation from being OOM-killed. The engine asks
`fit_batch` for the largest batch (≤ the one `tokens_per_batch` gives) whose estimated peak fits
the budget, and when not even one sequence fits, fails that length with `MemoryBudgetExceeded`
(one line: the estimate, the budget and the fix) instead of allocating.

The budget (bytes) is, first match wins: the suite's `eval.memory_budget_gb` (> 0), the
environment variable `LENBENCH_MEMORY_BUDGET_GB`, else `SAFE_FRACTION` of the memory available
now (`torch.cuda.mem_get_info` on CUDA; on the CPU the least of `MemAvailable` of /proc/meminfo (or
the free physical pages) and what this process's memory cgroup has left, `cgroup_free_bytes`; no
limit where none is known). It is taken before the model is built, so the estimate counts the
model's parameters (the `learned` table included).

A container's /proc/meminfo shows the host's memory, so under a 2.5 GB cgroup on a 24 GB machine
the budget would be 12 GB and an evaluation the estimate lets through is OOM-killed (exit 137, no
result written). The cgroup's limit is read from ``/sys/fs/cgroup`` (`CGROUP_ROOT`, or the
directory `LENBENCH_CGROUP_ROOT` names): v2's ``memory.max`` and ``memory.current``, v1's
``memory/memory.limit_in_bytes`` and ``memory.usage_in_bytes``, in this process's cgroup (from
/proc/self/cgroup) and every cgroup above it, the least left counting. "max" (v2) and v1's
near-2**63 value mean no limit. Usage counts the working set, as the kernel's OOM decision and the
kubelet do: the page cache it may drop (``inactive_file`` of ``memory.stat``) is not used memory.

The (T, T) planes an encoding's attention holds are its own declaration
(`PositionalEncoding.square_planes`: an MLP over pairs, a replaced softmax, a decay bias), held at
or above the measured peak for every registered encoding by tests/run/test_eval_memory_measured.py.
The estimate is deliberately conservative (by default it assumes SDPA's math path materialises the
(B, H, T, T) scores whenever a mask is present); shrinking a batch changes only how the evaluation samples are
split, never which samples are drawn (they come from one generator in order).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

ENV_VAR = "LENBENCH_MEMORY_BUDGET_GB"
CGROUP_ENV = "LENBENCH_CGROUP_ROOT"
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: A cgroup v1 limit at or past this is "no limit" (v1 writes the largest page-aligned int64).
NO_LIMIT = 2**60
#: (directory under the cgroup root, limit file, usage file, reclaimable cache in memory.stat) per layout.
CGROUP_LAYOUTS = (("", "memory.max", "memory.current", "inactive_file"),
                  ("memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"))
SAFE_FRACTION = 0.5
GIB = 2**30
F32 = 4


class MemoryBudgetExceeded(ValueError):
    """Not even one sequence of the requested length fits the evaluation memory budget."""


def available_bytes(device: torch.device) -> int | None:
    """Memory available for new allocations on `device` now, or None when unknown."""
    if device.type in ("cuda", "xpu"):
        backend = getattr(torch, device.type)
        if not hasattr(backend, "mem_get_info"):
            return None
        free = int(backend.mem_get_info(device)[0])
        # What this process's caching allocator holds without using it is free for its tensors too
        # (the driver counts it as used: after a few cells the budget would shrink for nothing).
        return free + int(backend.memory_reserved(device) - backend.memory_allocated(device))
    if device.type != "cpu":
        return None
    known = [n for n in (host_available_bytes(), cgroup_free_bytes()) if n is not None]
    return min(known) if known else None


def host_available_bytes() -> int | None:
    """`MemAvailable` of /proc/meminfo, else the free physical pages; None when neither is known."""
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def cgroup_free_bytes(root: str | Path | None = None, self_cgroup: str | None = None) -> int | None:
    """Bytes this process's memory cgroups have left (limit − working set, the least over its cgroup
    and those above it, v2 and v1); None where no limit is set or none can be read (module docstring).

    Args:
        root: the cgroup mount (default: env `LENBENCH_CGROUP_ROOT`, else `CGROUP_ROOT`).
        self_cgroup: the text of /proc/self/cgroup (default: read it; "" where it cannot be).
    """
    root = Path(root if root is not None else os.environ.get(CGROUP_ENV, "").strip() or CGROUP_ROOT)
    if self_cgroup is None:
        try:
            self_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            self_cgroup = ""
    own = {"": "/", "memory": "/"}  # layout → this process's cgroup path ("0::/x" v2, "4:memory:/x" v1)
    for line in self_cgroup.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            own[""] = path or "/"
        elif "memory" in controllers.split(","):
            own["memory"] = path or "/"
    left = []
    for sub, limit_file, usage_file, cache_key in CGROUP_LAYOUTS:
        base = root / sub if sub else root
        parts = [p for p in own[sub].split("/") if p and p not in (".", "..")]
        for depth in range(len(parts), -1, -1):  # this process's cgroup, then each one above it
            here = base.joinpath(*parts[:depth])
            limit = _cgroup_number(here / limit_file)
            if limit is None:
                continue
            usage = _cgroup_number(here / usage_file) or 0
            left.append(max(0, limit - max(0, usage - _cgroup_stat(here / "memory.stat", cache_key))))
    return min(left) if left else None


def _cgroup_number(path: Path) -> int | None:
    """The integer in a cgroup file; None for "max", v1's no-limit value, or an unreadable file."""
    try:
        value = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value < NO_LIMIT else None


def _cgroup_stat(path: Path, key: str) -> int:
    """One counter of a cgroup's memory.stat (0 when absent)."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def budget_source(configured_gb: float = 0.0) -> str:
    """Where the evaluation memory budget comes from: "suite" (`configured_gb`, the suite's
    eval.memory_budget_gb), "environment" (`ENV_VAR`) or "measured" (this machine's free memory, so
    a length over it fails for the machine, not for the cell)."""
    if configured_gb and configured_gb > 0:
        return "suite"
    return "environment" if os.environ.get(ENV_VAR, "").strip() else "measured"


def memory_budget(device: torch.device, configured_gb: float = 0.0) -> int | None:
    """The evaluation memory budget in bytes (see the module docstring), None for no limit."""
    source = budget_source(configured_gb)
    if source == "suite":
        return int(configured_gb * GIB)
    if source == "environment":
        env = os.environ[ENV_VAR].strip()
        try:
            gb = float(env)
        except ValueError:
            gb = -1.0
        if not gb > 0:
            raise ValueError(f"{ENV_VAR}={env!r} is not a positive number of GiB; set e.g. {ENV_VAR}=8 or unset it")
        return int(gb * GIB)
    free = available_bytes(device)
    return None if free is None else int(free * SAFE_FRACTION)


@dataclass(frozen=True)
class EvalMemory:
    """Estimated bytes of one evaluation forward pass at T tokens: `fixed` + B × `per_sequence`.

    Attributes:
        fixed: parameters and buffers, plus the (1, H, T, T) bias / mask shared by the batch.
        per_sequence: activations, attention scores and logits of one sequence.
    """

    fixed: int
    per_sequence: int

    def peak(self, batch: int) -> int:
        return self.fixed + batch * self.per_sequence


def estimate(model: torch.nn.Module, tokens: int) -> EvalMemory:
    """Peak-memory estimate of `model` (a `lenbench.model.Transformer`) on sequences of `tokens`
    (`eval_memory`, with the model's own parameters and buffers, the `learned` table included, and
    the (T, T) planes its encoding declares, `PositionalEncoding.square_planes`)."""
    cfg = model.cfg
    params = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    shared, per_sequence = model.pos_enc.square_planes()
    return eval_memory(params, tokens, d_model=cfg.d_model, vocab=cfg.vocab_size, ff_mult=cfg.ff_mult,
                       shared_planes=shared, sequence_planes=per_sequence)


def eval_memory(param_bytes: int, tokens: int, *, d_model: int, vocab: int, ff_mult: int,
                shared_planes: float, sequence_planes: float) -> EvalMemory:
    """Peak-memory estimate of one evaluation forward on sequences of `tokens`.

    Terms (float32, T = tokens, D = d_model, V = vocabulary):
        parameters + buffers                                  `param_bytes`
        shared (T, T) planes: shared_planes·T²·4              the encoding's bias, mask … (`square_planes`)
        per sequence: T·D·4·(6 + 2·ff_mult)   residual, LN, q/k/v, attention output, MLP hidden
                      sequence_planes·T²·4    the encoding's scores, softmax, pair features …
                      3·T·V·4                 logits, their float copy, log-softmax
    """
    T, D, V = tokens, d_model, vocab
    fixed = param_bytes + int(shared_planes * T * T * F32)
    per_seq = T * D * F32 * (6 + 2 * ff_mult) + 3 * T * V * F32 + int(sequence_planes * T * T * F32)
    return EvalMemory(fixed=fixed, per_sequence=per_seq)


def fit_batch(model: torch.nn.Module, tokens: int, wanted: int, budget: int | None) -> int:
    """The largest batch ≤ `wanted` whose estimated peak fits `budget` bytes (None: `wanted`).

    Raises:
        MemoryBudgetExceeded: when not even one sequence of `tokens` fits.
    """
    if budget is None:
        return wanted
    est = estimate(model, tokens)
    fits = (budget - est.fixed) // est.per_sequence
    if fits < 1:
        raise MemoryBudgetExceeded(
            f"evaluating {tokens} tokens needs ~{est.peak(1) / GIB:.3g} GiB for one sequence, over the evaluation "
            f"memory budget of {budget / GIB:.3g} GiB; raise eval.memory_budget_gb (or {ENV_VAR}) or drop this length")
    return int(min(wanted, fits))
