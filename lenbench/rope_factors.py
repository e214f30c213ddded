"""The suite's RoPE factor facts that need no torch: which types must be pinned, what a suite
variant looks like to the factor modes, and the factor a suite pins. The suite's data
(`lenbench.config.schema`) reads them without building encodings; the factor modes themselves,
which read each rope_type's signature, are `lenbench.encodings.rope_scaling`'s."""

from __future__ import annotations

from typing import Protocol

#: Types whose formula already grows with the current sequence length: a suite must pin their
#: `factor`, as they are deployed (`rope_scaling.factor_mode`). The evaluation ratio would scale twice (dynamic at
#: 16x with factor 16: base x ~288), and factor 1 is oracle `ntk` again: base · (L / L0)^(d/(d−2)),
#: the same frequencies at every length (rows bit-identical wherever seq_len ∝ task length).
LENGTH_ADAPTIVE: frozenset[str] = frozenset({"dynamic"})


class RopeVariant(Protocol):
    """What the factor modes read of a suite variant (`lenbench.config.schema.VariantSpec`)."""

    rope_type: str
    params: dict
    finetune_steps: int


def pinned_factor(variant: RopeVariant) -> float | None:
    """The factor the suite fixes for every length, or None (see `lenbench.encodings.rope_scaling.factor_mode`).

    Args:
        variant: a suite variant; its `params` give `factor`, or (yarn) `max_position_embeddings`
            with `original_max_position_embeddings`, whose ratio is the factor.
    """
    p = variant.params
    if p.get("factor") is not None:
        return float(p["factor"])
    if p.get("max_position_embeddings") and p.get("original_max_position_embeddings") and variant.rope_type == "yarn":
        return p["max_position_embeddings"] / p["original_max_position_embeddings"]
    return None
