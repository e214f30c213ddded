"""Suite presets (YAML) → a validated `Suite` (`lenbench.config.schema`): loading and every check.

A suite names the tasks, encodings, seeds, model and training settings, evaluation ratios and
inference-time variants. It is read as safe YAML that rejects a key given twice
(`lenbench.config.checks.read_yaml`); every unknown key, task, encoding or variant is an error naming
the file, the key and the closest valid name.

    >>> suite = load_suite("smoke")
    >>> cells = suite.cells()               # task × encoding × train_len × seed
    >>> cells[0].cell_id                    # stable hash of the canonical config + lenbench version

Every number is range-checked at load time (`lenbench.config.sections.RANGES`; seeds and encoding parameters:
`lenbench.config.checks`, each encoding built once for the suite's model): a value out of range is
a one-line `SuiteError` naming the file, the key, the value and the valid range. Float fields also accept
numeric strings, since PyYAML reads an exponent without a sign or dot (``1e-3``, ``1.0e9``) as a
string. A grid entry listed twice (same task and length, same encoding label, same seed, same
variant) runs once, with a `SuiteWarning`.

A task entry may override the suite's `train:`, `eval:` and `model:` fields for that task alone,
checked exactly like the suite's own sections (unknown keys with did-you-mean, types, `RANGES`):

    tasks:
      - {name: copy, train_len: 16}                                    # the suite's settings
      - {name: copy, train_len: 16, label: copy_long, train: {steps: 3000}, eval: {samples: 128}}
      - {name: recall, train_len: 8, model: {embedding_std: 1.0}}

Its cells get the suite's TrainSpec / EvalSpec / ModelSpec with those fields replaced
(`TaskSpec.train_spec`);
an entry without overrides makes the very cells (ids, checkpoints) it made before. `label` names
the entry in results (the `task` column, `TaskSpec.key`): one task at one training length under one
label is one leaderboard board, so two entries that would share a board with different settings
are an error asking for a label (`is_task_label`: a safe name with no "-", not another task's name, not
"overall"). The suite `name` becomes a directory (``runs/<name>``) and an encoding's `label` a figure's
file name: an explicit name or label (a variant's `name` too) must follow `lenbench.names.SAFE_NAME`, else
a one-line error; a name taken from the file name is made safe (`lenbench.names.safe_name`).
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path
from typing import Any

import yaml

from lenbench.config.checks import (
    MAX_VALUES,
    DuplicateKeyError,
    TooManyValuesError,
    check_seed,
    probe_encoding,
    probe_variant,
    read_yaml,
)
from lenbench.config.fields import SuiteError, SuiteWarning, check_keys, numeric_string, registered
from lenbench.config.kernels import parse_kernels
from lenbench.config.resources import parse_resources
from lenbench.config.schema import (
    PURPOSE_NOTES,
    EncodingSpec,
    EvalSpec,
    ModelSpec,
    Suite,
    TaskSpec,
    TrainSpec,
    VariantSpec,
)
from lenbench.config.sections import (
    VARIANT_EXTRA_KEYS,
    canonical_params,
    check_heads,
    check_range,
    checked_params,
    dedupe,
    entry_list,
    eval_section,
    label_name,
    model_section,
    suite_name,
    train_section,
    variant_mapping,
)
from lenbench.encodings import ENCODINGS
from lenbench.encodings.rope_types import ROPE_TYPES
from lenbench.names import RULE, is_safe_name, safe_name
from lenbench.plugins import PluginError, load_plugins
from lenbench.registry import check_keywords, did_you_mean
from lenbench.tasks import TASKS
from lenbench.tasks.params import check_task_params

SUITES_DIR = Path(__file__).resolve().parent / "suites"  # package data: a wheel install finds its presets


def list_suites() -> dict[str, Path]:
    """Preset suite names → their YAML files in lenbench/config/suites/."""
    return {p.stem: p for p in sorted(SUITES_DIR.glob("*.yaml"))}


def load_suite(name_or_path: str | Path) -> Suite:
    """Load a preset by name (a YAML file of `SUITES_DIR`: `list_suites`) or any YAML file by path."""
    path = Path(name_or_path)
    presets = list_suites()
    if not path.suffix and str(name_or_path) in presets:
        path = presets[str(name_or_path)]
    elif path.is_dir():
        raise SuiteError(f"suite {str(path)!r} is a directory, not a suite file; pass a .yaml file or a preset "
                         f"name ({', '.join(presets)})")
    elif not path.suffix:
        raise SuiteError(f"unknown suite {str(name_or_path)!r}{did_you_mean(str(name_or_path), list(presets))} "
                         f"(presets: {', '.join(presets)}; or give a path to a .yaml file)")
    if not path.is_file():
        raise SuiteError(f"suite file {str(path)!r} does not exist")
    try:
        data = read_yaml(path)
    except DuplicateKeyError as err:
        raise SuiteError(f"{path}: line {err.line}: duplicate key {err.key!r} (first given on line {err.first}); "
                         "YAML would keep only the last value: keep one") from None
    except TooManyValuesError as err:
        raise SuiteError(f"{path}: {err}; a suite holds at most {MAX_VALUES} values (the presets: a few hundred): "
                         "write the values out instead of repeating aliases") from None
    except RecursionError:
        raise SuiteError(f"{path}: is nested too deeply to read (lists or mappings inside each other about "
                         "a thousand levels down); a suite nests a few levels") from None
    except UnicodeDecodeError as err:
        raise SuiteError(f"{path}: not a UTF-8 text file (byte {err.start}: {err.reason}); a suite is a YAML file") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise SuiteError(f"{path}:{where} is not valid YAML ({getattr(err, 'problem', err)})") from None
    return parse_suite(data, source=str(path), default_name=safe_name(path.stem), base_dir=path.parent)


def is_task_label(value: Any) -> bool:
    """Whether `value` may label a task entry: a safe name (`lenbench.names.SAFE_NAME`) without
    "-", which separates the parts of a cell title."""
    return is_safe_name(value) and "-" not in value


#: The task name the leaderboard's long table gives its overall ranking (`lenbench.report.tables`).
RESERVED_TASK_LABELS = ("overall",)


def _task_label(value: Any, name: str, where: str, source: str) -> str:
    """A task entry's `label`, checked; "" when absent or equal to the task's own name (so the
    entry's cells keep the ids of an unlabelled one)."""
    if value is None or value == name:
        return ""
    if not is_task_label(value):
        fix = re.sub(r"[^A-Za-z0-9_.+@]", "_", str(value)).lstrip("_.+@")
        fix = fix if isinstance(value, str) and fix and fix[0].isalpha() else f"{name}_{fix}".rstrip("_")
        raise SuiteError(f"{source}: {where}.label {value!r} is not a task label ({RULE}; no '-', which "
                         f"separates the parts of a cell title); e.g. label: {fix}")
    if value in RESERVED_TASK_LABELS:
        raise SuiteError(f"{source}: {where}.label {value!r} is reserved (the leaderboard's overall ranking); "
                         f"e.g. label: {name}_{value}")
    if value in TASKS:
        raise SuiteError(f"{source}: {where}.label {value!r} is the name of another task, whose rows it would "
                         f"join; e.g. label: {name}_{value}")
    return value


def _differences(a: tuple, b: tuple) -> list[str]:
    """What two task entries' signatures (`_tasks`) differ in: "task", "params", "train.<field>",
    "eval.<field>", "model.<field>"."""
    out = [what for what, x, y in (("task", a[0], b[0]), ("params", a[1], b[1])) if x != y]
    for section, x, y in (("train", a[2], b[2]), ("eval", a[3], b[3]), ("model", a[4], b[4])):
        out += [f"{section}.{f.name}" for f in dataclasses.fields(x) if getattr(x, f.name) != getattr(y, f.name)]
    return out


def _tasks(data: Any, train: TrainSpec, ev: EvalSpec, model: ModelSpec, source: str) -> list[TaskSpec]:
    """The `tasks:` entries as TaskSpecs, with their per-task overrides checked like the suite's sections.

    One (label, train_len) is one board of results. An entry that repeats an earlier one at a
    training length (same task, parameters and effective settings) is dropped there with a
    `SuiteWarning`; one that differs is an error naming what differs and asking for a `label`.

    Args:
        data: the `tasks:` list.
        train: the suite's training settings (a task's `train:` overrides replace fields of it).
        ev: the suite's evaluation settings (likewise for `eval:`).
        model: the suite's model (likewise for `model:`).
        source: the suite file.
    """
    tasks = []
    boards: dict[tuple[str, int], tuple[str, tuple]] = {}  # (label, train_len) → (where, signature)
    for i, t in enumerate(entry_list(data, "tasks", source)):
        where = f"tasks[{i}]"
        check_keys(t, TaskSpec, where, source)
        name = registered("task", t.get("name"), TASKS, where, source)
        lens = t.get("train_len")
        if lens is None and set(t) == {"name"}:  # `tasks: [copy]`: every task needs its training length
            raise SuiteError(f"{source}: {where} is the bare task name {name!r}, which has no training length; "
                             f"write {{name: {name}, train_len: N}} (N in {TASKS.get(name).length_unit})")
        lens = tuple(lens) if isinstance(lens, (list, tuple)) else (lens,) if lens is not None else ()
        if not lens or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in lens):
            raise SuiteError(f"{source}: {where}.train_len must be a positive integer or a list of them, got {t.get('train_len')!r}")
        params = checked_params(t, where, source, lambda p, n=name: check_task_params(n, TASKS.get(n), p))
        label = _task_label(t.get("label"), name, where, source)
        overrides = {}
        for section, parse in (("train", train_section), ("eval", eval_section), ("model", model_section)):
            given = t.get(section) or {}
            spec = parse(given, f"{where}.{section}", source)
            overrides[section] = {k: getattr(spec, k) for k in given}
        spec = TaskSpec(name=name, train_len=lens, params=params, label=label, **overrides)
        if spec.model:
            check_heads(spec.model_spec(model), f"{where}.model", source)
        signature = (name, canonical_params(params), spec.train_spec(train), spec.eval_spec(ev), spec.model_spec(model))
        kept = []
        for n in lens:
            first = boards.get((spec.key, n))
            if first is None:
                boards[(spec.key, n)] = (where, signature)
                kept.append(n)
            elif first[1] == signature:
                warnings.warn(f"{source}: {where}: task {spec.key!r} at train_len {n} is listed twice; it runs once",
                              SuiteWarning, stacklevel=3)
            else:
                diff = _differences(signature, first[1])
                raise SuiteError(f"{source}: {where} and {first[0]} are both task {spec.key!r} at train_len {n} but differ "
                                 f"in {', '.join(diff)}, so their rows would merge; give one a distinct `label` "
                                 f"(e.g. label: {_label_hint(name, diff, signature, params, i)})")
        if kept:
            tasks.append(dataclasses.replace(spec, train_len=tuple(kept)))
    return tasks


def _label_hint(name: str, diff: list[str], signature: tuple, params: dict, index: int) -> str:
    """A label to suggest for a task entry that collides with an earlier one: the task name and its
    first differing setting ("copy_steps3000") or parameter ("copy_vocab12"), else its position ("copy_2")."""
    for d in diff:
        section, _, field = d.partition(".")
        if field or section == "params":
            if field:
                value = getattr(signature[{"train": 2, "eval": 3, "model": 4}[section]], field)
            elif params:
                field, value = sorted(params.items())[0]
            else:
                continue
            text = repr(value) if isinstance(value, float) else str(value)
            text = text[:-2] if text.endswith(".0") else text
            hint = f"{name}_{field.replace('_', '')}{re.sub(r'[^A-Za-z0-9_.+@]', '', text)}"
            if is_task_label(hint):
                return hint
    return f"{name}_{index}"

def parse_suite(data: Any, *, source: str = "<suite>", default_name: str = "suite",
                base_dir: str | Path | None = None) -> Suite:
    """Validate a suite mapping (as read from YAML) into a `Suite`; its `plugins:` are loaded
    first (paths relative to `base_dir`, the suite file's directory), so their names are known."""
    if data is None:
        raise SuiteError(f"{source}: the suite is empty")
    check_keys(data, Suite, "suite", source)
    for required in ("tasks", "encodings"):
        if required not in data:
            raise SuiteError(f"{source}: missing required key {required!r}")
    plugin_specs = _plugins(data.get("plugins"), source, base_dir)

    train = train_section(data.get("train"), "train", source)
    ev = eval_section(data.get("eval"), "eval", source)
    model = model_section(data.get("model"), "model", source)
    check_heads(model, "model", source)
    tasks = _tasks(data["tasks"], train, ev, model, source)
    encodings = []
    for i, e in enumerate(entry_list(data["encodings"], "encodings", source)):
        where = f"encodings[{i}]"
        check_keys(e, EncodingSpec, where, source)
        name = registered("encoding", e.get("name"), ENCODINGS, where, source)
        params = checked_params(e, where, source,
                         lambda p, n=name: check_keywords(f"encoding {n!r}", ENCODINGS.get(n).__init__, p, skip=("dims",)))
        reason = probe_encoding(name, params, model.d_model, model.n_heads)  # every parameter in range, now
        if reason:
            raise SuiteError(f"{source}: {where}: {reason}")
        label = label_name(e.get("label"), f"{where}.label", source)
        encodings.append(EncodingSpec(name=name, params=params, label=label))
    encodings = dedupe(encodings, key=lambda e: (e.name, canonical_params(e.params), e.key),
                        what=lambda e: f"encoding {e.key!r}", source=source)
    labels = [e.key for e in encodings]
    if len(set(labels)) != len(labels):
        raise SuiteError(f"{source}: two encodings share the label {next(x for x in labels if labels.count(x) > 1)!r}; give each a distinct `label`")

    variants = []
    for i, v in enumerate(data.get("variants") or []):
        where = f"variants[{i}]"
        v = {"rope_type": v} if isinstance(v, str) else v
        v = variant_mapping(v, where, source)
        rope_type = registered("variant", v.get("rope_type"), ROPE_TYPES, where, source)
        params = checked_params(v, where, source, lambda p, r=rope_type: check_keywords(
            f"rope_type {r!r}", ROPE_TYPES.get(r), {k: x for k, x in p.items() if k not in VARIANT_EXTRA_KEYS},
            skip=("dim", "base", "seq_len")))
        extra = {k: v[k] for k in ("name", "finetune_steps", "finetune_ratio", "finetune_lr") if k in v}
        for key in ("finetune_ratio", "finetune_lr"):
            if isinstance(extra.get(key), str):
                extra[key] = numeric_string(extra[key])
        for key, want in (("name", str), ("finetune_steps", int), ("finetune_ratio", (int, float)), ("finetune_lr", (int, float))):
            if key in extra and (not isinstance(extra[key], want) or isinstance(extra[key], bool)):
                raise SuiteError(f"{source}: {where}.{key} has the wrong type: {extra[key]!r}")
        if "name" in extra:
            extra["name"] = label_name(extra["name"], f"{where}.name", source)
        variant = VariantSpec(rope_type=rope_type, params=params, **extra)
        # a pinned factor in range, dynamic with one (`factor_mode`'s error, with the fix): now
        reason = probe_variant(variant, model.d_model, model.n_heads)
        if reason:
            raise SuiteError(f"{source}: {where}: {reason}")
        check_range("variants.finetune_steps", variant.finetune_steps, f"{where}.finetune_steps", source)
        if variant.finetune_steps:
            check_range("variants.finetune_ratio", variant.finetune_ratio, f"{where}.finetune_ratio", source)
            check_range("variants.finetune_lr", variant.finetune_lr, f"{where}.finetune_lr", source)
        variants.append(variant)
    variants = dedupe(variants, key=lambda v: (v.key, v.rope_type, canonical_params(v.params), v.finetune_steps,
                                                v.finetune_ratio, v.finetune_lr),
                       what=lambda v: f"variant {v.key!r}", source=source)
    keys = [v.key for v in variants]
    if len(set(keys)) != len(keys):
        raise SuiteError(f"{source}: two variants share the name {next(x for x in keys if keys.count(x) > 1)!r}; give each a distinct `name`")

    seeds = data.get("seeds", [0])
    seeds = (seeds,) if isinstance(seeds, int) else tuple(seeds) if isinstance(seeds, list) else ()
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise SuiteError(f"{source}: seeds must be an integer or a list of integers (not true/false), got {data.get('seeds')!r}")
    for s in seeds:
        valid = check_seed(s)
        if valid:
            raise SuiteError(f"{source}: seeds = {s} is out of range (valid: {valid})")
    seeds = tuple(dedupe(list(seeds), key=lambda s: s, what=lambda s: f"seed {s}", source=source))
    return Suite(
        name=suite_name(data["name"], source) if "name" in data else default_name,
        description=str(data.get("description", "")), purpose=_purpose(data.get("purpose", "benchmark"), source),
        tasks=tuple(tasks), encodings=tuple(encodings), seeds=seeds,
        model=model, train=train, eval=ev,
        variants=tuple(variants), kernels=parse_kernels(data.get("kernels"), source), source=source, resources=parse_resources(data.get("resources"), source),
        plugins=plugin_specs,
    )


def _purpose(value: Any, source: str) -> str:
    """The suite's `purpose:`, one of `PURPOSE_NOTES`."""
    if value not in PURPOSE_NOTES:
        raise SuiteError(f"{source}: purpose must be one of {', '.join(PURPOSE_NOTES)}, got {value!r}")
    return value


def _plugins(value: Any, source: str, base_dir: str | Path | None) -> tuple[str, ...]:
    """Load the suite's `plugins:` (a module name or .py path, or a list of them); their specs."""
    if value is None:
        return ()
    specs = [value] if isinstance(value, str) else value
    if not isinstance(specs, list) or not all(isinstance(x, str) for x in specs):
        raise SuiteError(f"{source}: plugins must be a list of module names or paths to .py files, got {value!r}")
    for i, spec in enumerate(specs):
        try:
            load_plugins([spec], base_dir=base_dir)
        except PluginError as err:
            raise SuiteError(f"{source}: plugins[{i}]: {err}") from None
    return tuple(specs)
