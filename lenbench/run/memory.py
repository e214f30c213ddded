"""Evaluation memory: estimate a forward pass's peak before allocating it, and size batches to a budget.

Evaluating at long lengths grows memory with T² (the additive bias and mask, the attention scores
of SDPA's math path) on top of the batch's activations and logits, so `eval.tokens_per_batch`
alone cannot keep an 8192-token ALiBi evaluation from being OOM-killed. The engine asks
`fit_batch` for the largest batch (≤ the one `tokens_per_batch` gives) whose estimated peak fits
the budget, and when not even one sequence fits, fails that length with `MemoryBudgetExceeded`
(one line: the estimate, the budget and the fix) instead of allocating.

The budget (bytes) is, first match wins: the suite's `eval.memory_budget_gb` (> 0), the
environment variable `LENBENCH_MEMORY_BUDGET_GB`, else `SAFE_FRACTION` of the memory available
now (`torch.cuda.mem_get_info` on CUDA; `MemAvailable` of /proc/meminfo, or the free physical
pages, on the CPU; no limit where neither is known). It is taken before the model is built, so
the estimate counts the model's parameters (the `learned` table included).

The estimate is deliberately conservative (it assumes SDPA's math path materialises the (B, H, T, T)
scores whenever a mask is present); shrinking a batch changes only how the evaluation samples are
split, never which samples are drawn (they come from one generator in order).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from lenbench.encodings.base import PositionalEncoding

ENV_VAR = "LENBENCH_MEMORY_BUDGET_GB"
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
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_budget(device: torch.device, configured_gb: float = 0.0) -> int | None:
    """The evaluation memory budget in bytes (see the module docstring), None for no limit."""
    if configured_gb and configured_gb > 0:
        return int(configured_gb * GIB)
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
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
    """Peak-memory estimate of `model` (a `lenbench.model.Transformer`) on sequences of `tokens`.

    Terms (float32, T = tokens, D = d_model, H = heads, V = vocabulary):
        parameters + buffers                                  (learned tables included)
        shared mask: (2H + 3)·T²·4   bias (1, H, T, T), causal mask, their sum, int64 distances
        per sequence: T·D·4·(6 + 2·ff_mult)   residual, LN, q/k/v, attention output, MLP hidden
                      2·H·T²·4                scores and softmax when a mask is present
                      3·H·T²·4                per-layer bias of a content-dependent encoding (CoPE)
                      3·T·V·4                 logits, their float copy, log-softmax
    """
    cfg = model.cfg
    enc = model.pos_enc
    T, D, H, V = tokens, cfg.d_model, cfg.n_heads, cfg.vocab_size
    params = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    has_bias = type(enc).bias is not PositionalEncoding.bias
    content = bool(getattr(enc, "content_dependent", False))
    masked = has_bias or content
    fixed = params + ((2 * H + 3) * T * T * F32 if masked else 0)
    per_seq = T * D * F32 * (6 + 2 * cfg.ff_mult) + 3 * T * V * F32
    if masked:
        per_seq += 2 * H * T * T * F32
    if content:
        per_seq += 3 * H * T * T * F32
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
