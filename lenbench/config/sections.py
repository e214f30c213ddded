"""The suite's shared sections (model, train, eval, inference-time variants): each read into its typed
spec (`lenbench.config.schema`) and range-checked, with the name and list helpers the parser shares.

`lenbench.config.parse` reads a suite file and its task entries through these; a task entry's
`train:`, `eval:` and `model:` overrides go through the same section readers as the suite's own.
Every number is checked against `RANGES`: a value out of range is a one-line `SuiteError` naming
the file, the key, the value and the valid range.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import warnings
from collections.abc import Callable
from typing import Any

from lenbench.config.fields import SuiteError, SuiteWarning, numeric_string, typed
from lenbench.config.schema import EvalSpec, ModelSpec, TrainSpec, VariantSpec
from lenbench.encodings.rope_types import ROPE_TYPES
from lenbench.names import RULE, is_safe_name, safe_name
from lenbench.registry import did_you_mean


def entry_list(data: Any, where: str, source: str) -> list[dict]:
    """A list of mappings; a bare string `x` is shorthand for `{name: x}`."""
    if not isinstance(data, list) or not data:
        raise SuiteError(f"{source}: {where} must be a non-empty list")
    return [{"name": d} if isinstance(d, str) else d for d in data]


def checked_params(data: dict, where: str, source: str, check) -> dict:
    params = data.get("params", {}) or {}
    if not isinstance(params, dict):
        raise SuiteError(f"{source}: {where}.params must be a mapping")
    try:
        check(params)
    except ValueError as err:
        raise SuiteError(f"{source}: {where}: {err}") from None
    return params


#: Valid range of every numeric suite field: key → (predicate, the range in words).
RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "model.d_model": (lambda v: v >= 1, ">= 1"),
    "model.n_layers": (lambda v: v >= 1, ">= 1"),
    "model.n_heads": (lambda v: v >= 1, ">= 1"),
    "model.ff_mult": (lambda v: v >= 1, ">= 1"),
    "model.dropout": (lambda v: 0 <= v < 1, "0 <= dropout < 1"),
    "model.embedding_std": (lambda v: 0 < v < math.inf, "> 0 and finite"),
    "train.steps": (lambda v: v >= 1, ">= 1"),
    "train.batch_size": (lambda v: v >= 1, ">= 1"),
    "train.lr": (lambda v: 0 < v < math.inf, "> 0 and finite"),
    "train.warmup": (lambda v: v >= 0, ">= 0"),
    "train.weight_decay": (lambda v: 0 <= v < math.inf, ">= 0 and finite"),
    "train.grad_clip": (lambda v: v > 0, "> 0 (.inf: no clipping)"),
    "train.patience": (lambda v: v >= 0, ">= 0 (0: train exactly steps)"),
    "train.validate_every": (lambda v: v >= 1, ">= 1"),
    "train.val_samples": (lambda v: v >= 1, ">= 1"),
    "train.min_delta": (lambda v: 0 <= v < math.inf, ">= 0 and finite"),
    "eval.samples": (lambda v: v >= 1, ">= 1"),
    "eval.tokens_per_batch": (lambda v: v >= 1, ">= 1"),
    "eval.dense_until": (lambda v: v == 0 or 1 <= v < math.inf, "0 (off) or a ratio >= 1"),
    "eval.memory_budget_gb": (lambda v: 0 <= v < math.inf, "0 for automatic, or a positive finite number of GiB"),
    "variants.finetune_steps": (lambda v: v >= 0, ">= 0"),
    "variants.finetune_ratio": (lambda v: 1 <= v < math.inf, ">= 1 and finite, with finetune_steps > 0"),
    "variants.finetune_lr": (lambda v: 0 < v < math.inf, "> 0 and finite, with finetune_steps > 0"),
}



def check_range(key: str, value: Any, where: str, source: str) -> None:
    ok, valid = RANGES[key]
    if not ok(value):
        raise SuiteError(f"{source}: {where} = {value!r} is out of range (valid: {valid})")


def check_ranges(spec: Any, section: str, source: str, where: str | None = None) -> None:
    """Range-check every field of a ModelSpec / TrainSpec / EvalSpec that has an entry in `RANGES`.

    Args:
        spec: the section's dataclass.
        section: its `RANGES` prefix ("model", "train", "eval").
        source: the suite file.
        where: its place in the file for the error (default `section`; "tasks[2].train" for a task's overrides).
    """
    for f in dataclasses.fields(spec):
        key = f"{section}.{f.name}"
        if key in RANGES:
            check_range(key, getattr(spec, f.name), f"{where or section}.{f.name}", source)


def suite_name(name: Any, source: str) -> str:
    """A suite's explicit `name`, once it is shown to follow `lenbench.names.SAFE_NAME` (it names
    the directory ``runs/<name>``)."""
    name = str(name)
    if not is_safe_name(name):
        raise SuiteError(f"{source}: name {name!r} is not a safe directory name for runs/<name> ({RULE}); "
                         f"e.g. name: {safe_name(name.replace('/', '_'))!r}")
    return name


def label_name(value: Any, where: str, source: str) -> str:
    """An encoding's `label` or a variant's `name`, once it is shown to follow
    `lenbench.names.SAFE_NAME` (it is a label of every results file, and an encoding's the stem of
    its figure file); "" when absent."""
    value = "" if value is None else str(value)
    if value and not is_safe_name(value):
        raise SuiteError(f"{source}: {where} {value!r} is not a safe name ({RULE}); "
                         f"e.g. {where.rsplit('.', 1)[-1]}: {safe_name(str(value).replace('/', '_'))}")
    return value


def dedupe(items: list, key: Callable[[Any], Any], what: Callable[[Any], str], source: str) -> list:
    """`items` without repeats of `key` (first kept), warning once per dropped repeat."""
    seen, out = set(), []
    for item in items:
        k = key(item)
        if k in seen:
            warnings.warn(f"{source}: {what(item)} is listed twice; it runs once", SuiteWarning, stacklevel=4)
            continue
        seen.add(k)
        out.append(item)
    return out


def canonical_params(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=str)


#: Keys of a transformers rope dict that are not parameters of a rope_type function.
VARIANT_EXTRA_KEYS = ("theta", "rope_theta", "partial_rotary_factor")


def variant_mapping(v: Any, where: str, source: str) -> dict:
    """A variant mapping with rope parameters given beside `rope_type` moved into `params`, so a
    transformers `rope_scaling` dict pasted as a variant works unchanged (`type` is an alias of
    `rope_type`) and `{rope_type: yarn, factor: 16}` pins a factor."""
    if not isinstance(v, dict):
        raise SuiteError(f"{source}: {where} must be a mapping, got {type(v).__name__}")
    v = dict(v)
    if "type" in v and "rope_type" not in v:
        v["rope_type"] = v.pop("type")
    fields = [f.name for f in dataclasses.fields(VariantSpec)]
    rope_type = v.get("rope_type")
    accepted = list(inspect.signature(ROPE_TYPES.get(rope_type)).parameters) if rope_type in ROPE_TYPES else []
    extra = {k: v.pop(k) for k in list(v) if k not in fields}
    for key in extra:
        if key not in accepted and key not in VARIANT_EXTRA_KEYS:
            valid = [*fields, *(a for a in accepted if a not in ("dim", "base", "seq_len"))]
            raise SuiteError(f"{source}: unknown key {where}.{key}{did_you_mean(str(key), valid)} (valid: {', '.join(valid)})")
    if extra:
        params = v.get("params") or {}
        if not isinstance(params, dict):
            raise SuiteError(f"{source}: {where}.params must be a mapping")
        both = sorted(set(params) & set(extra))
        if both:
            raise SuiteError(f"{source}: {where} gives {both[0]!r} both beside rope_type and in params; keep one")
        v["params"] = {**extra, **params}
    return v


def model_section(data: Any, where: str, source: str) -> ModelSpec:
    """A `model:` mapping as a ModelSpec, every value type- and range-checked (`RANGES`).

    Args:
        data: the mapping (None: every default).
        where: its place in the file for the error ("model", or "tasks[2].model" for a task's overrides).
        source: the suite file.
    """
    model = typed(ModelSpec, data or {}, where, source)
    check_ranges(model, "model", source, where)
    return model


def check_heads(model: ModelSpec, where: str, source: str) -> None:
    """d_model must split evenly into the heads (`where`: the section whose values make `model`)."""
    if model.d_model % model.n_heads:
        raise SuiteError(f"{source}: {where}.d_model = {model.d_model} is out of range (valid: a multiple of "
                         f"{where}.n_heads = {model.n_heads})")


def train_section(data: Any, where: str, source: str) -> TrainSpec:
    """A `train:` mapping as a TrainSpec, every value type- and range-checked (`RANGES`).

    Args:
        data: the mapping (None: every default).
        where: its place in the file for the error ("train", or "tasks[2].train" for a task's overrides).
        source: the suite file.
    """
    train = typed(TrainSpec, data or {}, where, source)
    check_ranges(train, "train", source, where)
    if train.length_sampling not in ("fixed", "uniform"):
        raise SuiteError(f"{source}: {where}.length_sampling must be 'fixed' or 'uniform', got {train.length_sampling!r}")
    if train.schedule not in ("cosine", "plateau"):
        raise SuiteError(f"{source}: {where}.schedule must be 'cosine' or 'plateau', got {train.schedule!r}")
    if train.schedule == "plateau" and not train.patience:
        raise SuiteError(f"{source}: {where}.schedule 'plateau' anneals when the validation loss stalls: give "
                         f"{where}.patience > 0 too")
    return train


def eval_section(data: Any, where: str, source: str) -> EvalSpec:
    """An `eval:` mapping as an EvalSpec, every value type- and range-checked, ratios numbers > 0
    (numeric strings accepted) with repeats dropped (a `SuiteWarning`).

    Args:
        data: the mapping (None: every default).
        where: its place in the file for the error ("eval", or "tasks[2].eval").
        source: the suite file.
    """
    ev = typed(EvalSpec, data or {}, where, source)
    check_ranges(ev, "eval", source, where)
    ratios = []
    for i, r in enumerate(ev.ratios):
        value = numeric_string(r) if isinstance(r, str) else r
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise SuiteError(f"{source}: {where}.ratios[{i}] must be a number, got {r!r}")
        if not 0 < value < math.inf:
            raise SuiteError(f"{source}: {where}.ratios[{i}] = {r!r} is out of range (valid: > 0 and finite)")
        ratios.append(value)
    if not ratios:
        raise SuiteError(f"{source}: {where}.ratios must be a non-empty list of positive numbers")
    name = "eval ratio" if where == "eval" else f"{where} ratio"
    return dataclasses.replace(ev, ratios=tuple(dedupe(ratios, key=float, what=lambda r: f"{name} {r!r}", source=source)))
