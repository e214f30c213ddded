"""A transformers-style `rope_scaling` dict resolved into RoPE frequencies, and a suite variant's factor modes.

The rope types themselves (the frequency and attention-scale math of PI, NTK, dynamic, YaRN,
Llama 3, LongRoPE) are `lenbench.encodings.rope_types`'s registry `ROPE_TYPES`; this module reads
it by name.

Dicts copied from a transformers config work unchanged through the rope encoding, which fills
what transformers reads from the rest of the config (`complete_scaling`): the training length as
`original_max_position_embeddings`, `partial_rotary_factor` as the encoding's `partial`.
`rope_parameters` checks a dict's parameters against its type and returns (inv_freq, attention_factor).

Factor modes (the end of this module): how a suite's inference-time variant
(`lenbench.config.schema.VariantSpec`) chooses the `factor` at each evaluation length —
pinned by the suite, the evaluation ratio (an oracle), the fine-tuning ratio; a length-adaptive
type (dynamic) must be pinned, as it is deployed — and the scaling dict it hands the rope
encoding (`scaling_for`). The torch-free facts they read (`LENGTH_ADAPTIVE`, `pinned_factor`)
are `lenbench.rope_factors`'s, so the suite's data can read them without torch.
"""

from __future__ import annotations

import inspect

import torch

from lenbench.encodings.rope_types import ROPE_TYPES
from lenbench.registry import check_keywords
from lenbench.rope_factors import LENGTH_ADAPTIVE, RopeVariant, pinned_factor

_HINTS = {
    "factor": "the length extension ratio, e.g. 4 to run at 4x the training length",
    "original_max_position_embeddings": "the length the model was trained at",
}


def complete_scaling(
    scaling: dict | None, *, train_len: int | None, max_len: int | None = None
) -> tuple[dict | None, float | None]:
    """A `rope_scaling` / `rope_parameters` dict copied from a transformers config, completed with
    what transformers reads from the rest of the model config: (scaling, partial_rotary_factor).

    - `original_max_position_embeddings`, where the rope_type takes it and the dict lacks it, is
      the training length `train_len` (tokens): transformers reads `config.max_position_embeddings`,
      the length the model was trained at (e.g. Qwen2's `{"type": "dynamic", "factor": 2.0}`).
    - `longrope` without `factor` and `max_position_embeddings` (Phi-3's dict) gets
      `max_position_embeddings = max_len`, the longest length the model is built for.
    - `partial_rotary_factor` inside the dict is taken out and returned (None when absent), for
      the rope encoding's `partial`.

    Nothing is filled when `train_len` / `max_len` is None. Unknown names are left for
    `rope_parameters` to report.
    """
    if not scaling:
        return None, None
    out = dict(scaling)
    partial = out.pop("partial_rotary_factor", None)
    rope_type = out.get("rope_type", out.get("type", "default"))
    if rope_type in ROPE_TYPES:
        accepted = inspect.signature(ROPE_TYPES.get(rope_type)).parameters
        if train_len is not None and "original_max_position_embeddings" in accepted:
            if out.get("original_max_position_embeddings") is None:
                out["original_max_position_embeddings"] = int(train_len)
        if (rope_type == "longrope" and max_len is not None and out.get("factor") is None
                and out.get("max_position_embeddings") is None and out.get("attention_factor") is None):
            out["max_position_embeddings"] = int(max_len)
    return out, (None if partial is None else float(partial))


#: rope types whose frequencies depend on the current sequence length; the others ignore `seq_len`.
SEQ_LEN_TYPES = frozenset({"dynamic", "longrope"})


def uses_seq_len(scaling: dict | None) -> bool:
    """Whether `rope_parameters(scaling, …)` reads `seq_len` (dynamic NTK, LongRoPE). The other
    types give the same frequencies at every length, so a caller need not compute the length
    (reading it from device positions is a host sync on an accelerator)."""
    if not scaling:
        return False
    return (scaling.get("rope_type") or scaling.get("type") or "default") in SEQ_LEN_TYPES


def rope_parameters(scaling: dict | None, dim: int, base: float, seq_len: int | None) -> tuple[torch.Tensor, float]:
    """Resolve a transformers-style `rope_scaling` dict into (inv_freq (dim/2,), attention_factor).

    Args:
        scaling: None or {"rope_type": name, **params}; "type" is accepted as an alias of
            "rope_type" as in transformers. A "theta" key (or transformers' "rope_theta") overrides
            the base. A parameter set to None takes its default, as in transformers.
        dim: the rotated dimension (even).
        base: RoPE base θ.
        seq_len: the current sequence length (used by `dynamic` and `longrope`).
    """
    params = {k: v for k, v in (scaling or {}).items() if v is not None}
    rope_type = params.pop("rope_type", params.pop("type", "default"))
    if "theta" in params and "rope_theta" in params and params["theta"] != params["rope_theta"]:
        raise ValueError(
            f"rope scaling sets both theta={params['theta']} and rope_theta={params['rope_theta']}; keep one"
        )
    base = float(params.pop("theta", params.pop("rope_theta", base)))
    fn = ROPE_TYPES.get(rope_type)
    check_keywords(f"rope_type {rope_type!r}", fn, params, skip=("dim", "base", "seq_len"))
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind == p.KEYWORD_ONLY and p.default is p.empty and name not in params:
            hint = f" ({_HINTS[name]})" if name in _HINTS else ""
            raise ValueError(f"rope_type {rope_type!r} needs parameter {name!r}{hint}; add it to the scaling dict")
    return fn(dim=dim, base=base, seq_len=seq_len, **params)


# --- factor modes of a suite variant --------------------------------------------------------------


def factor_mode(variant: RopeVariant) -> str:
    """How a suite variant's `factor` is chosen: "pinned", "oracle", "fine-tuned" or "none".

    - "pinned": the suite gives `factor` (or yarn's max_position_embeddings with
      original_max_position_embeddings), used at every evaluation length, the way models are
      deployed; key "<rope_type>@<factor>", e.g. "yarn@4", "dynamic@2".
    - "oracle": static types without a pinned factor get factor = the evaluation ratio at each
      length, an oracle that knows the target length; key "<rope_type>", e.g. "yarn".
    - "fine-tuned": with `finetune_steps` > 0 and no pinned factor, factor = `finetune_ratio`
      for fine-tuning and every evaluation; key "finetune-<rope_type>-x<ratio>".
    - "none": the type takes no factor (`default`).

    Length-adaptive types (`LENGTH_ADAPTIVE`: dynamic) have no unpinned mode (see there).

    Args:
        variant: a suite variant (`rope_type`, `params`, `finetune_steps`).

    Raises:
        ValueError: a length-adaptive type without a pinned factor (one line, with the fix).
    """
    if "factor" not in inspect.signature(ROPE_TYPES.get(variant.rope_type)).parameters:
        return "none"
    if pinned_factor(variant) is not None:
        return "pinned"
    if variant.rope_type in LENGTH_ADAPTIVE:
        raise ValueError(
            f"rope_type {variant.rope_type!r} needs a pinned factor, as it is deployed (e.g. {{rope_type: "
            f"{variant.rope_type}, factor: 2}}): its base already grows with the sequence length, so the evaluation "
            f"ratio would scale twice, and factor 1 is oracle ntk again (base * (L/L0)^(d/(d-2)) at every length)"
        )
    return "fine-tuned" if variant.finetune_steps else "oracle"


def factor_at(variant: RopeVariant, ratio: float) -> float | None:
    """The `factor` to add to the scaling dict at evaluation (or fine-tuning) ratio `ratio`;
    None when the dict needs none added (pinned in params, derived, or no factor).

    Args:
        variant: a suite variant (`factor_mode`).
        ratio: the evaluation length over the training length (or the fine-tuning ratio).
    """
    if factor_mode(variant) in ("oracle", "fine-tuned"):
        return max(1.0, float(ratio))
    return None


def scaling_for(variant: RopeVariant, factor: float, train_tokens: int) -> dict:
    """The transformers-style rope_scaling dict of a variant at evaluation (or fine-tuning) ratio `factor`.

    `factor` follows the variant's factor mode (`factor_mode`): the ratio only in the oracle and
    fine-tuned modes, the suite's value when pinned (always, for dynamic).
    `original_max_position_embeddings` defaults to the number of tokens at the training length,
    where the rope_type takes it.

    Args:
        variant: a suite variant (`rope_type`, `params`, `finetune_steps`).
        factor: the evaluation (or fine-tuning) ratio.
        train_tokens: the number of tokens at the training length.
    """
    accepted = inspect.signature(ROPE_TYPES.get(variant.rope_type)).parameters
    defaults = {"factor": factor_at(variant, factor), "original_max_position_embeddings": train_tokens}
    return {"rope_type": variant.rope_type, **{k: v for k, v in defaults.items() if k in accepted and v is not None},
            **variant.params}
