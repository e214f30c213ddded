"""Stick-breaking attention: softmax replaced by a stick-breaking process (Tan et al. 2025)."""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding


def stick_breaking_weights(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """A_ij = β_ij · Π_{k allowed, j<k} (1 − β_ik), β = σ(logits), over the allowed keys of each query.

    In log space: log A_ij = logsigmoid(z_ij) + Σ_{k>j} logsigmoid(−z_ik), the sum over allowed k
    (a reversed cumulative sum, shifted by one key; Tan et al.'s reference, sb_ref.py l. 21–23,
    multiplies by a strictly lower-triangular matrix of ones instead, O(T³), and
    flash-linear-attention's, fla/ops/stickbreaking_attn/naive.py l. 70, subtracts the own term
    from the inclusive sum, which cancels in float32 once the sum is large); disallowed keys get
    A = 0 and contribute no factor.

    Args:
        logits: (B, H, Tq, Tk) z = q·k/√Dh (float32 or float64).
        allowed: (B|1, H|1, Tq, Tk) bool; for causal stick-breaking only keys before (or at) the query.

    Returns:
        (B, H, Tq, Tk) weights in [0, 1] whose row sums are ≤ 1.
    """
    log_beta = F.logsigmoid(logits).masked_fill(~allowed, float("-inf"))  # (B, H, Tq, Tk): log β
    log_keep = F.logsigmoid(-logits).masked_fill(~allowed, 0.0)  # (B, H, Tq, Tk): log(1 − β)
    from_j = log_keep.flip(-1).cumsum(-1).flip(-1)  # (B, H, Tq, Tk): Σ_{k≥j} log(1 − β_ik)
    after = F.pad(from_j[..., 1:], (0, 1))  # (B, H, Tq, Tk): Σ_{k>j}, shifted rather than subtracted (no cancellation)
    return (log_beta + after).exp()  # (B, H, Tq, Tk)


@register_encoding("stickbreaking")
class StickBreaking(PositionalEncoding):
    """Stick-breaking attention (Tan et al. 2025, "Scaling Stick-Breaking Attention: An Efficient
    Implementation and In-depth Study", ICLR 2025, eq. 1–3): instead of a softmax, query i walks
    back from the nearest key and breaks off a fraction β_ij = σ(q_i · k_j / √Dh) of the stick
    still left,

        A_ij = β_ij · Π_{j<k<i} (1 − β_ik)          for j < i (0 otherwise)
        o_i  = Σ_{j<i} A_ij v_j + (1 − Σ_{j<i} A_ij) · v_i

    computed in log space (logsigmoid and a cumulative sum of softplus(−z) = −logsigmoid(−z)),
    with no positional encoding: the order of breaking is the recency bias.

    Two choices follow the authors' code (github.com/shawntan/stickbreaking-attention, commit
    3147a38):
    - the diagonal: a token does **not** attend to itself (j < i strictly) — their kernel's
      default `attend_current=False` (stickbreaking_attention/sb_attn/__init__.py l. 57) and
      their test's reference mask `triu(0)` (tests/test_attn.py l. 11–15);
      `attend_current=True` (their option, mask `triu(1)`) lets the stick reach j = i.
    - the leftover mass 1 − Σ_j A_ij: **given to the current token's value v_i**, as in their
      test (`o = o + rem[..., None] * v`, tests/test_attn.py l. 17 and 64) and the released
      models' `sb_remainder: True` (IBM dolomite-engine's StickbreakingConfig).
      `remainder="drop"` discards it instead (the kernel's raw output).
    With the defaults the first token, which has nothing before it, outputs its own value.
    tests/encodings/test_frontier_authors.py holds the model's layer equal to their
    `stickbreaking` (sb_ref.py, where a checkout is on PYTHONPATH) and to flash-linear-attention's
    `naive_stickbreaking_attn` (where fla-core is installed), in every combination of the two.

    Length behaviour: evaluated past the training length exactly as trained (no inference-time
    variant); there are no positions. At a longer input a query only meets more keys further back,
    whose weights the sticks already broken before them shrink.

    Args:
        dims: model geometry (causal only).
        attend_current: let a token's stick reach its own key (False, the authors' default).
        remainder: "current" (the leftover mass weights v_i, the authors') or "drop".
    """

    description = "replaces softmax: β = σ(q·k/√d) breaks the stick from the nearest key back; rest to v_i"
    paper = "Tan et al. 2025, Scaling Stick-Breaking Attention: An Efficient Implementation and In-depth Study"
    length_behaviour = "evaluated as trained: no positions; farther keys get only what nearer keys left of the stick"
    causal_only = True
    replaces_softmax = True

    def __init__(self, dims: EncodingDims, *, attend_current: bool = False,
                 remainder: Literal["current", "drop"] = "current"):
        super().__init__(dims)
        if not isinstance(attend_current, bool):
            raise ValueError(f"encoding {self.name!r}: attend_current = {attend_current!r} is out of range "
                             "(valid: true or false)")
        if remainder not in ("current", "drop"):
            raise ValueError(f"encoding {self.name!r}: remainder = {remainder!r} is out of range "
                             "(valid: 'current' or 'drop')")
        self.attend_current = attend_current
        self.remainder = remainder

    def square_planes(self) -> tuple[float, float]:
        """(2H + 3, 8H): the log-sigmoid breaks, their reverse cumulative sums and the weights
        (measured ~7.1H per sequence, tests/run/test_eval_memory_measured.py)."""
        h = self.dims.n_heads
        return 2.0 * h + 3, 8.0 * h

    def weights(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The stick-breaking weights A (B, H, Tq, Tk), float32 (float64 for float64 inputs).

        Args:
            q, k: (B, H, Tq|Tk, Dh); queries aligned to the last keys.
            mask: optional additive (B|1, H|1, Tq, Tk) mask; its −inf entries are forbidden keys
                (padding) and its finite entries are added to the logits (0 from the model).
        """
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        z = (q.to(work) @ k.to(work).transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
        Tq, Tk = z.shape[-2:]
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=z.device).tril(Tk - Tq - (0 if self.attend_current else 1))
        if mask is not None:
            finite = torch.isfinite(mask)  # (B|1, H|1, Tq, Tk)
            allowed = allowed & finite
            z = z + torch.where(finite, mask, torch.zeros((), dtype=mask.dtype, device=mask.device)).to(work)
        return stick_breaking_weights(z, allowed)  # (B, H, Tq, Tk)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               dropout_p: float, layer: int) -> torch.Tensor:
        a = self.weights(q, k, mask)  # (B, H, Tq, Tk)
        rem = 1.0 - a.sum(-1, keepdim=True)  # (B, H, Tq, 1): the stick left over
        a = a.to(v.dtype)
        if dropout_p:
            a = F.dropout(a, dropout_p)  # (B, H, Tq, Tk)
        out = a @ v  # (B, H, Tq, Dh)
        if self.remainder == "current":
            out = out + rem.to(v.dtype) * v[..., -q.shape[-2]:, :]  # (B, H, Tq, Dh): the rest on the query's own value
        return out

    def extra_repr(self) -> str:
        return f"name={self.name!r}, attend_current={self.attend_current}, remainder={self.remainder!r}"
