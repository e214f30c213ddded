"""What each encoding offers: its kernel kind and the implementations the benchmarks time.

Read from what the encoding declares (`lenbench.encodings.base`, "Declare your kernel family"),
never from its name: the hook it overrides gives the kind (`replaces_softmax` → attend and
`layer_dependent` → layer before any other hook: SSMax over RoPE still replaces the softmax);
`relative_only`, `closed_form_bias`, `pair_rotation`, `score_vector` and `kernel_comparisons` give
the paths within the kind. A wrapper (randomized) is read through its `inner` encoding.
"""

from __future__ import annotations

from typing import Literal

from lenbench.encodings import PositionalEncoding
from lenbench.registry import did_you_mean

Kind = Literal["rotary", "bias", "absolute", "content", "layer", "attend", "none"]

#: The extra implementations an encoding may ask for (`kernel_comparisons`), per kind.
COMPARISONS: dict[str, tuple[str, ...]] = {"rotary": ("hf",), "bias": ("flex_gather",)}


def _overrides(enc: PositionalEncoding, hook: str) -> bool:
    return getattr(type(enc), hook) is not getattr(PositionalEncoding, hook)


def base_encoding(enc: PositionalEncoding) -> PositionalEncoding:
    """The encoding whose hooks do the work: a wrapper's `inner` (randomized), else `enc`."""
    inner = getattr(enc, "inner", None)
    return base_encoding(inner) if isinstance(inner, PositionalEncoding) else enc


def kernel_kind(enc: PositionalEncoding) -> Kind:
    """Which forward kernel an encoding has: the hook it overrides (after unwrapping wrappers)."""
    enc = base_encoding(enc)
    if enc.replaces_softmax:  # stick-breaking, SSMax (whatever it wraps): the attention itself
        return "attend"
    if enc.layer_dependent:  # FoX, DAPE: a bias per layer, read from the layer's input
        return "layer"
    if enc.content_dependent:
        return "content"
    if _overrides(enc, "rotate"):
        return "rotary"
    if _overrides(enc, "bias"):
        return "bias"
    if _overrides(enc, "embed"):
        return "absolute"
    return "none"


def declares_score_vector(enc: PositionalEncoding) -> bool:
    """Whether `enc` (after unwrapping) declares its layer bias as c_i − c_j (`score_vector`)."""
    return _overrides(base_encoding(enc), "score_vector")


def comparisons(enc: PositionalEncoding) -> tuple[str, ...]:
    """The extra implementations `enc` declares (`kernel_comparisons`), checked against its kind.

    Raises:
        ValueError: one line, for a name its kind does not offer or whose prerequisite it lacks
            ("hf" needs `pair_rotation`, "flex_gather" a `closed_form_bias`).
    """
    kind, base = kernel_kind(enc), base_encoding(enc)
    offered = COMPARISONS.get(kind, ())
    declared = tuple(base.kernel_comparisons())
    for name in declared:
        if name not in offered:
            choices = ", ".join(offered) or "none"
            raise ValueError(f"encoding {base.name!r} declares kernel comparison {name!r}, which its kind "
                             f"{kind!r} does not offer{did_you_mean(name, list(offered))} (offered: {choices})")
    needs = {"hf": ("pair_rotation", _overrides(base, "pair_rotation")),
             "flex_gather": ("closed_form_bias", base.closed_form_bias() is not None)}
    for name in declared:
        method, ok = needs[name]
        if not ok:
            raise ValueError(f"encoding {base.name!r} declares kernel comparison {name!r} but no {method}(): "
                             f"declare it or drop {name!r}")
    return declared


def implementations(enc: PositionalEncoding) -> list[str]:
    """The implementations `bench/test_kernels.py` times for `enc`, eager reference first.

    rotary: eager, fused (+ hf, transformers' rotate_half formulation, when the encoding declares
    it: RoPE's default half layout with full rotation); bias: eager, cached, flex (+ flex_gather
    where declared: the same closed-form modifier always gathering positions; + toeplitz for a
    `relative_only` bias, else cached_blocks: the materialised mask read by causal query blocks);
    absolute and content: eager, compiled; layer and attend: eager (one layer's attention as the
    model runs it, `lenbench.kernels.layer`), compiled (+ flex for a layer encoding declaring
    `score_vector`: FoX); none: [].
    """
    kind = kernel_kind(enc)
    extra = comparisons(enc)
    if kind == "rotary":
        return ["eager", "hf", "fused"] if "hf" in extra else ["eager", "fused"]
    if kind == "bias":
        impls = ["eager", "cached", "flex", "flex_gather"] if "flex_gather" in extra else ["eager", "cached", "flex"]
        return impls + ["toeplitz"] if base_encoding(enc).relative_only else impls + ["cached_blocks"]
    if kind in ("absolute", "content", "attend"):
        return ["eager", "compiled"]
    if kind == "layer":
        return ["eager", "compiled", "flex"] if declares_score_vector(enc) else ["eager", "compiled"]
    return []


def nothing_to_fuse_reason(enc: PositionalEncoding) -> str:
    return (f"encoding {enc.name!r} overrides no embed/rotate/bias/layer_bias/attend hook: nothing to fuse (its attention is "
            f"the unbiased causal SDPA timed by test_attention_baseline)")
