"""RoPE inverse frequencies and attention factor for each `rope_type`.

Each variant is a function `(dim, base, seq_len, **params) -> (inv_freq, attention_factor)`
registered under Hugging Face transformers' `rope_type` name, so a `rope_scaling` dictionary
from a transformers config maps one to one onto lenbench's `scaling` parameter of `rope`.

`inv_freq` is a float64 tensor of shape (dim/2,); `attention_factor` scales cos and sin (and so
each attention logit by its square), as transformers does.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from lenbench.registry import Registry, check_keywords

RopeInit = Callable[..., tuple[torch.Tensor, float]]
ROPE_TYPES: Registry[RopeInit] = Registry("rope_type")


def default_inv_freq(dim: int, base: float) -> torch.Tensor:
    """θ_i = base^(−2i/dim), i = 0 … dim/2 − 1 (Su et al. 2021, eq. 15). float64 (dim/2,)."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


@ROPE_TYPES.register("default")
def _default(dim: int, base: float, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """Plain RoPE: θ_i = base^(−2i/dim), attention factor 1."""
    return default_inv_freq(dim, base), 1.0


def rope_parameters(scaling: dict | None, dim: int, base: float, seq_len: int | None) -> tuple[torch.Tensor, float]:
    """Resolve a transformers-style `rope_scaling` dict into (inv_freq (dim/2,), attention_factor).

    Args:
        scaling: None or {"rope_type": name, **params}; "type" is accepted as an alias of
            "rope_type" as in transformers. A "theta" key overrides the base.
        dim: the rotated dimension (even).
        base: RoPE base θ.
        seq_len: the current sequence length (used by `dynamic`).
    """
    params = dict(scaling or {})
    rope_type = params.pop("rope_type", params.pop("type", "default"))
    base = float(params.pop("theta", base))
    fn = ROPE_TYPES.get(rope_type)
    check_keywords(f"rope_type {rope_type!r}", fn, params, skip=("dim", "base", "seq_len"))
    return fn(dim=dim, base=base, seq_len=seq_len, **params)
