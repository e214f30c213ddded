"""RoPE inverse frequencies and attention factor for each `rope_type`: the registry and its math.

Each variant is a function `(dim, base, seq_len, **params) -> (inv_freq, attention_factor)`
registered under Hugging Face transformers' `rope_type` name, so a `rope_scaling` dictionary
from a transformers config maps one to one onto lenbench's `scaling` parameter of `rope`
(resolved by `lenbench.encodings.rope_scaling.rope_parameters`).

`inv_freq` is a float64 tensor of shape (dim/2,); `attention_factor` scales cos and sin (and so
each attention logit by its square), as transformers does.

Where transformers reads the model's `max_position_embeddings` (the length the model was trained
at), the variants here take it as the parameter `original_max_position_embeddings`, since there is
no model config. Variant parameters are keyword-only; those without a default are required.

Differences from transformers: frequencies are computed in float64 (transformers: float32); `ntk`
(static NTK-aware scaling) is an extra type; `longrope` and `yarn` take `max_position_embeddings`
to derive `factor` when it is absent (transformers reads it from the model config); inconsistent parameters
(factor < 1, wrong list lengths, beta_fast < beta_slow, …) are errors rather than logged warnings.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from lenbench.registry import Registry

RopeInit = Callable[..., tuple[torch.Tensor, float]]
ROPE_TYPES: Registry[RopeInit] = Registry("rope_type")


def default_inv_freq(dim: int, base: float) -> torch.Tensor:
    """θ_i = base^(−2i/dim), i = 0 … dim/2 − 1 (Su et al. 2021, eq. 15). float64 (dim/2,)."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


def get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN magnitude scale 0.1 · mscale · ln(scale) + 1, or 1 when scale <= 1 (Peng et al. 2023, sec. 3.4)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _check_factor(rope_type: str, factor: float) -> None:
    if factor < 1:
        raise ValueError(
            f"rope_type {rope_type!r}: factor={factor} is below 1; set factor >= 1 "
            f"(the ratio of the evaluation length to the training length) or use rope_type 'default'"
        )


def _check_length(rope_type: str, length: int) -> None:
    if length <= 0:
        raise ValueError(
            f"rope_type {rope_type!r}: original_max_position_embeddings={length} must be a positive "
            f"length; set it to the length the model was trained at"
        )


def _check_positive(rope_type: str, name: str, value: float | None) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"rope_type {rope_type!r}: {name}={value} must be positive; set {name} > 0 or leave it out")


@ROPE_TYPES.register("default")
def _default(dim: int, base: float, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """Plain RoPE: θ_i = base^(−2i/dim), attention factor 1."""
    return default_inv_freq(dim, base), 1.0


@ROPE_TYPES.register("linear")
def _linear(dim: int, base: float, seq_len: int | None = None, *, factor: float) -> tuple[torch.Tensor, float]:
    """Position interpolation: every frequency divided by the factor (positions squeezed into the trained range).

    θ'_i = θ_i / factor, attention factor 1. Equivalent to rotating by pos / factor.

    Chen et al. 2023, "Extending Context Window of Large Language Models via Positional
    Interpolation"; kaiokendev's SuperHOT blog post (2023). transformers `rope_type="linear"`.

    Args:
        factor: length extension ratio s >= 1.
    """
    _check_factor("linear", factor)
    return default_inv_freq(dim, base) / factor, 1.0  # (dim/2,)


@ROPE_TYPES.register("ntk")
def _ntk(dim: int, base: float, seq_len: int | None = None, *, factor: float) -> tuple[torch.Tensor, float]:
    """NTK-aware static scaling: the base is raised so low frequencies interpolate and high ones extrapolate.

    base' = base · factor^(dim / (dim − 2)), θ'_i = base'^(−2i/dim), attention factor 1.
    The lowest frequency is then divided by exactly `factor`; the highest is unchanged.

    bloc97, "NTK-Aware Scaled RoPE allows LLaMA models to have extended (8k+) context size without
    any fine-tuning and minimal perplexity degradation", r/LocalLLaMA (2023); Peng et al. 2023
    (YaRN), section 3.1. Not a transformers `rope_type` (transformers only has the dynamic form).

    Args:
        factor: length extension ratio s >= 1.
    """
    _check_factor("ntk", factor)
    return default_inv_freq(dim, base * factor ** (dim / (dim - 2))), 1.0  # (dim/2,)


@ROPE_TYPES.register("dynamic")
def _dynamic(
    dim: int, base: float, seq_len: int | None = None, *, factor: float, original_max_position_embeddings: int
) -> tuple[torch.Tensor, float]:
    """Dynamic NTK: NTK-aware base scaling grown with the current length, plain RoPE up to the trained length.

    With L0 = original_max_position_embeddings and L = max(seq_len, L0):
        base' = base · (factor · L / L0 − (factor − 1))^(dim / (dim − 2)),
    so base' = base (plain RoPE) when seq_len <= L0. Attention factor 1. This is transformers'
    `_compute_dynamic_ntk_parameters` (rope_type "dynamic", L0 = `config.max_position_embeddings`,
    seq_len = max(position_ids) + 1 of the forward pass), in float64.

    At factor 1 the scale is L / L0 and the frequencies are static `ntk` with factor L / L0: the
    oracle NTK of the evaluation ratio. A suite therefore pins the factor it is deployed with
    (`factor_mode`). Deployed models also keep the longest frequencies seen until a sequence
    shorter than L0 resets them, and a KV cache keeps keys rotated with earlier frequencies; one
    forward pass over each whole evaluation sequence (what lenbench scores, lengths ascending) is
    the same as a fresh deployment reading that sequence at once.

    emozilla, "Dynamically Scaled RoPE further increases performance of long context LLaMA with
    zero fine-tuning", r/LocalLLaMA (2023); Peng et al. 2023 (YaRN), section 3.3.

    Args:
        factor: scaling factor s >= 1.
        original_max_position_embeddings: the training length L0.
    """
    _check_factor("dynamic", factor)
    _check_length("dynamic", original_max_position_embeddings)
    length = max(seq_len or 0, original_max_position_embeddings)
    scale = factor * length / original_max_position_embeddings - (factor - 1)
    return default_inv_freq(dim, base * scale ** (dim / (dim - 2))), 1.0  # (dim/2,)


@ROPE_TYPES.register("yarn")
def _yarn(
    dim: int,
    base: float,
    seq_len: int | None = None,
    *,
    factor: float | None = None,
    original_max_position_embeddings: int,
    attention_factor: float | None = None,
    beta_fast: float | None = None,
    beta_slow: float | None = None,
    mscale: float | None = None,
    mscale_all_dim: float | None = None,
    truncate: bool = True,
    max_position_embeddings: int | None = None,
) -> tuple[torch.Tensor, float]:
    """YaRN: NTK-by-parts interpolation with a linear ramp, plus an attention temperature.

    Correction dimension for r rotations over L0 = original_max_position_embeddings:
        d(r) = dim · ln(L0 / (2π r)) / (2 ln base);
    low = max(d(beta_fast), 0), high = min(d(beta_slow), dim − 1) (floor / ceil when `truncate`);
    ramp_i = clamp((i − low) / (high − low), 0, 1) for i = 0 … dim/2 − 1;
    θ'_i = θ_i · (1 − ramp_i) + (θ_i / factor) · ramp_i.
    Attention factor: `attention_factor` if given, else get_mscale(factor, mscale) /
    get_mscale(factor, mscale_all_dim) when both are set (DeepSeek), else get_mscale(factor) =
    0.1 · ln(factor) + 1 (1 when factor <= 1).

    Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large Language Models"
    (section 3.2 NTK-by-parts, section 3.4 attention scaling). transformers `rope_type="yarn"`.

    Args:
        factor: length extension ratio s >= 1; when absent it is max_position_embeddings /
            original_max_position_embeddings (a transformers config that gives both, e.g.
            DeepSeek-V3 or Qwen3 yarn dicts).
        original_max_position_embeddings: the training length L0.
        attention_factor: overrides the computed attention factor.
        beta_fast: dimensions turning more than beta_fast times over L0 are kept (the paper's β);
            default 32. 0 or None means the default, as in transformers (`get("beta_fast") or 32`).
        beta_slow: dimensions turning fewer than beta_slow times over L0 are divided by the factor
            (the paper's α); default 1. 0 or None means the default, as in transformers.
        mscale, mscale_all_dim: DeepSeek-V2/V3 form of the attention factor (both must be set).
        truncate: round the correction range to whole dimensions (transformers' default).
        max_position_embeddings: the extended length; only read to derive `factor` when it is absent.
    """
    if factor is None:
        if max_position_embeddings is None:
            raise ValueError(
                "rope_type 'yarn' needs parameter 'factor' (the length extension ratio), or "
                "'max_position_embeddings' with 'original_max_position_embeddings' to derive it; add it to the scaling dict"
            )
        _check_length("yarn", original_max_position_embeddings)
        factor = max_position_embeddings / original_max_position_embeddings
    beta_fast = beta_fast or 32.0  # 0 means the default, as in transformers
    beta_slow = beta_slow or 1.0
    _check_factor("yarn", factor)
    _check_length("yarn", original_max_position_embeddings)
    _check_positive("yarn", "attention_factor", attention_factor)
    if beta_fast < beta_slow:
        raise ValueError(
            f"rope_type 'yarn': beta_fast={beta_fast} is below beta_slow={beta_slow}; "
            f"beta_fast must be >= beta_slow (defaults 32 and 1)"
        )
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = get_mscale(factor)

    def correction_dim(rotations: float) -> float:  # the dimension that turns `rotations` times over L0
        return dim * math.log(original_max_position_embeddings / (2 * math.pi * rotations)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid 0 / 0, as transformers does
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)  # (dim/2,)
    inv_freq = default_inv_freq(dim, base)  # (dim/2,)
    return inv_freq * (1 - ramp) + inv_freq / factor * ramp, float(attention_factor)  # (dim/2,)


@ROPE_TYPES.register("llama3")
def _llama3(
    dim: int,
    base: float,
    seq_len: int | None = None,
    *,
    factor: float = 8.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_position_embeddings: int = 8192,
) -> tuple[torch.Tensor, float]:
    """Llama 3.1 scaling: high frequencies kept, low frequencies divided by the factor, a smooth band between.

    With wavelength λ_i = 2π / θ_i and L0 = original_max_position_embeddings:
        λ_i < L0 / high_freq_factor:  θ'_i = θ_i;
        λ_i > L0 / low_freq_factor:   θ'_i = θ_i / factor;
        otherwise, with s = (L0 / λ_i − low_freq_factor) / (high_freq_factor − low_freq_factor):
                                      θ'_i = (1 − s) · θ_i / factor + s · θ_i.
    Attention factor 1.

    Grattafiori et al. 2024, "The Llama 3 Herd of Models" (Meta's reference `apply_scaling` in
    llama-models). transformers `rope_type="llama3"`; defaults are Llama 3.1's.

    Args:
        factor: divisor of the low frequencies (8 in Llama 3.1).
        low_freq_factor: L0 / low_freq_factor is the wavelength above which frequencies are divided.
        high_freq_factor: L0 / high_freq_factor is the wavelength below which frequencies are kept.
        original_max_position_embeddings: the training length L0 (8192 in Llama 3.1).
    """
    _check_factor("llama3", factor)
    _check_length("llama3", original_max_position_embeddings)
    _check_positive("llama3", "low_freq_factor", low_freq_factor)
    if high_freq_factor <= low_freq_factor:
        raise ValueError(
            f"rope_type 'llama3': high_freq_factor={high_freq_factor} must be greater than "
            f"low_freq_factor={low_freq_factor} (defaults 4 and 1)"
        )
    old_len = original_max_position_embeddings
    inv_freq = default_inv_freq(dim, base)  # (dim/2,)
    wavelen = 2 * math.pi / inv_freq  # (dim/2,)
    smooth = (old_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)  # (dim/2,)
    smoothed = (1 - smooth) * inv_freq / factor + smooth * inv_freq  # (dim/2,)
    out = torch.where(wavelen > old_len / low_freq_factor, inv_freq / factor, inv_freq)  # (dim/2,)
    is_mid = (wavelen >= old_len / high_freq_factor) & (wavelen <= old_len / low_freq_factor)  # (dim/2,)
    return torch.where(is_mid, smoothed, out), 1.0  # (dim/2,)


@ROPE_TYPES.register("longrope")
def _longrope(
    dim: int,
    base: float,
    seq_len: int | None = None,
    *,
    short_factor: list[float],
    long_factor: list[float],
    original_max_position_embeddings: int,
    factor: float | None = None,
    attention_factor: float | None = None,
    max_position_embeddings: int | None = None,
) -> tuple[torch.Tensor, float]:
    """LongRoPE: searched per-frequency rescale factors, short ones up to the trained length, long ones past it.

    θ'_i = θ_i / λ_i with λ = long_factor when seq_len > L0 = original_max_position_embeddings,
    else short_factor. Attention factor: `attention_factor` if given, else
    sqrt(1 + ln(factor) / ln(L0)) (1 when factor <= 1). When `factor` is not given it is
    max_position_embeddings / L0, as transformers derives it for Phi-3.

    Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens"; Phi-3
    (Abdin et al. 2024). transformers `rope_type="longrope"`.

    Args:
        short_factor: dim/2 rescale factors used up to L0.
        long_factor: dim/2 rescale factors used past L0.
        original_max_position_embeddings: the training length L0.
        factor: length extension ratio >= 1, used for the default attention factor.
        attention_factor: overrides the computed attention factor.
        max_position_embeddings: the extended length; only read to derive `factor` when it is absent.
    """
    _check_length("longrope", original_max_position_embeddings)
    _check_positive("longrope", "attention_factor", attention_factor)
    for name, ext in (("short_factor", short_factor), ("long_factor", long_factor)):
        if len(ext) != dim // 2:
            raise ValueError(
                f"rope_type 'longrope': {name} has {len(ext)} entries but the rotated dimension {dim} "
                f"needs dim/2 = {dim // 2}; give one factor per rotated channel pair"
            )
    if attention_factor is None:
        if factor is None and max_position_embeddings is None:
            raise ValueError(
                "rope_type 'longrope' needs parameter 'factor' (or 'max_position_embeddings', from which "
                "factor = max_position_embeddings / original_max_position_embeddings) to set the attention factor"
            )
        if factor is None:
            factor = max_position_embeddings / original_max_position_embeddings
        _check_factor("longrope", factor)
        log_ratio = math.log(factor) / math.log(original_max_position_embeddings)
        attention_factor = 1.0 if factor <= 1 else math.sqrt(1 + log_ratio)
    elif factor is not None:
        _check_factor("longrope", factor)
    long = seq_len is not None and seq_len > original_max_position_embeddings
    ext = torch.tensor(long_factor if long else short_factor, dtype=torch.float64)  # (dim/2,)
    return default_inv_freq(dim, base) / ext, float(attention_factor)  # (dim/2,)


@ROPE_TYPES.register("drope")
def _drope(dim: int, base: float, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """DroPE: every positional embedding dropped (Gelberg et al. 2025, "Extending the Context of
    Pretrained LLMs by Dropping Their Positional Embeddings", arXiv 2512.12167): every frequency 0,
    so cos = 1 and sin = 0 at every position and the rotation is the identity: a RoPE model's
    attention becomes NoPE's with the same weights, exactly (x · 1 − y · 0 = x).

    This is how the authors drop RoPE (github.com/SakanaAI/DroPE, commit 260a8bb,
    custom_models/attention.py l. 56–63: `position_embeddings = (ones_like(cos), zeros_like(sin))`
    on the pretrained model's weights, l. 93–94). Not a transformers rope_type: lenbench's own. A
    suite uses it as a fine-tuned variant (`finetune_steps` > 0, `finetune_ratio: 1`): after RoPE
    training the copy is recalibrated at the training length without positions, as their
    recalibration runs at the pretraining context (cfgs/run_cfg/llama2_7b_drope.yaml:
    `max_seq_length: 4096`), then evaluated without positions at every length.

    Args:
        dim: the rotated dimension (even).
        base: the RoPE base; unused (no frequency is left).
        seq_len: unused.
    """
    return torch.zeros(dim // 2, dtype=torch.float64), 1.0  # (dim/2,)
