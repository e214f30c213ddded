"""Suite presets (YAML) → validated `Suite` → grid cells with stable ids.

A suite names the tasks, encodings, seeds, model and training settings, evaluation ratios and
inference-time variants. It is read as safe YAML that rejects a key given twice
(`lenbench.config.checks.read_yaml`); every unknown key, task, encoding or variant is an error naming
the file, the key and the closest valid name.

    >>> suite = load_suite("smoke")
    >>> cells = suite.cells()               # task × encoding × train_len × seed
    >>> cells[0].cell_id                    # stable hash of the canonical config + lenbench version

Every number is range-checked at load time (`RANGES`; seeds and encoding parameters:
`lenbench.config.checks`, each encoding built once for the suite's model): a value out of range is
a one-line `SuiteError` naming the file, the key, the value and the valid range. Float fields also accept
numeric strings, since PyYAML reads an exponent without a sign or dot (``1e-3``, ``1.0e9``) as a
string. A grid entry listed twice (same task and length, same encoding label, same seed, same
variant) runs once, with a `SuiteWarning`. The suite `name` becomes a directory (``runs/<name>``):
an explicit name must be a safe directory name (`SAFE_NAME`), else a one-line error; a name taken
from the file name is sanitised (other characters become ``_``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import lenbench
from lenbench.encodings import ENCODINGS
from lenbench.encodings.rope_scaling import ADAPTIVE_FACTOR, LENGTH_ADAPTIVE, ROPE_TYPES
from lenbench.registry import check_keywords, did_you_mean
from lenbench.config.checks import DuplicateKeyError, check_seed, probe_encoding, read_yaml
from lenbench.tasks import TASKS

SUITES_DIR = Path(__file__).resolve().parent / "suites"  # package data: a wheel install finds its presets


class SuiteError(ValueError):
    """A malformed suite file; the message names the file and the offending key."""


class SuiteWarning(UserWarning):
    """A suite that loads but holds something odd (a duplicate grid entry, dropped)."""


@dataclass(frozen=True)
class ModelSpec:
    """Model geometry shared by every cell (see `lenbench.model.ModelConfig`)."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    ff_mult: int = 4
    dropout: float = 0.0


@dataclass(frozen=True)
class TrainSpec:
    """Training settings: AdamW with linear warm-up then cosine decay, gradient clipping.

    `length_sampling` is "fixed" (every batch at train_len) or "uniform" (each batch at a length
    drawn uniformly from the task's `min_length` … train_len, see `lenbench.train.train_model`).
    """

    steps: int = 1000
    batch_size: int = 32
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    length_sampling: str = "fixed"


@dataclass(frozen=True)
class EvalSpec:
    """Evaluation settings: ratios of the training length and how many samples per length.

    `tokens_per_batch` bounds the memory of one evaluation batch (batch = tokens // seq_len).
    `memory_budget_gb` caps an evaluation's estimated peak memory (0: half the memory available,
    or env LENBENCH_MEMORY_BUDGET_GB; see `lenbench.run.memory`); batches shrink to fit it. It changes
    how samples are batched, not results, so it is not part of the cell id.
    """

    ratios: tuple[float, ...] = (1, 2, 4, 8, 16)
    samples: int = 64
    tokens_per_batch: int = 16384
    memory_budget_gb: float = 0.0


@dataclass(frozen=True)
class KernelSpec:
    """What `bench/test_kernels.py` times for this suite (the suite's `kernels:` section).

    Environment variables override these fields one by one (`LENBENCH_KERNEL_LENGTHS`,
    `LENBENCH_KERNEL_DTYPES`, `LENBENCH_KERNEL_SECONDS`, `LENBENCH_KERNEL_ENCODINGS`,
    `LENBENCH_CONTENT_MAX_T`, `LENBENCH_TRAIN_ROUNDS`; see `kernel_settings` in lenbench/kernels/plans.py):
    environment > suite file > these defaults.

    Args:
        enabled: False skips every kernel benchmark of the suite (with that reason).
        lengths: sequence lengths T of the forward-kernel benchmarks.
        dtypes: "fp32" and / or "bf16" (bf16 is skipped where it is not native).
        seconds: timing budget per benchmark (rounds = seconds / one call, 3 … 50).
        encodings: registered encodings to time (forward kernels and training steps); empty: all.
        content_max_t: longest T of content-dependent (CoPE) kernels on the CPU.
        train_rounds: timed rounds of each training-step and MFU benchmark.
    """

    enabled: bool = True
    lengths: tuple[int, ...] = (256, 512, 1024, 2048, 4096)
    dtypes: tuple[str, ...] = ("fp32", "bf16")
    seconds: float = 0.25
    encodings: tuple[str, ...] = ()
    content_max_t: int = 1024
    train_rounds: int = 20


KERNEL_DTYPES = ("fp32", "bf16")


def parse_kernels(data: Any, source: str = "<suite>") -> KernelSpec:
    """Validate a suite's `kernels:` mapping into a `KernelSpec` (None or absent: the defaults)."""
    data = dict(data or {})
    for key in ("lengths", "dtypes", "encodings"):  # a scalar is shorthand for a one-item list
        if key in data and isinstance(data[key], (int, str)) and not isinstance(data[key], bool):
            data[key] = [data[key]]
    spec = _typed(KernelSpec, data, "kernels", source)
    if not spec.lengths or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in spec.lengths):
        raise SuiteError(f"{source}: kernels.lengths must be a non-empty list of positive integers, got {list(spec.lengths)!r}")
    for dt in spec.dtypes:
        if dt not in KERNEL_DTYPES:
            raise SuiteError(f"{source}: kernels.dtypes: unknown dtype {dt!r}{did_you_mean(str(dt), list(KERNEL_DTYPES))} "
                             f"(choose from {', '.join(KERNEL_DTYPES)})")
    if not spec.dtypes:
        raise SuiteError(f"{source}: kernels.dtypes must name at least one of {', '.join(KERNEL_DTYPES)}")
    for i, name in enumerate(spec.encodings):
        _name("encoding", name, ENCODINGS, f"kernels.encodings[{i}]", source)
    for key in ("seconds", "content_max_t", "train_rounds"):
        if getattr(spec, key) <= 0:
            raise SuiteError(f"{source}: kernels.{key} must be positive, got {getattr(spec, key)!r}")
    return spec


@dataclass(frozen=True)
class TaskSpec:
    """One task: its name, the training lengths (task units), and task parameters."""

    name: str
    train_len: tuple[int, ...]
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class EncodingSpec:
    """One encoding: registry name, parameters, and the label used in results (default: name)."""

    name: str
    params: dict = field(default_factory=dict)
    label: str = ""

    @property
    def key(self) -> str:
        return self.label or self.name


@dataclass(frozen=True)
class VariantSpec:
    """An inference-time RoPE length-extension variant, applied to every encoding that has `set_scaling`.

    `rope_type` is a transformers rope_type; `params` are its parameters (a transformers
    `rope_scaling` dict's keys). `original_max_position_embeddings` defaults to the number of
    tokens at the training length. The factor follows the variant's factor mode (`factor_mode`):

    - "pinned": the suite gives `factor` (or yarn's max_position_embeddings with
      original_max_position_embeddings), used at every evaluation length, the way models are
      deployed; key "<rope_type>@<factor>", e.g. "yarn@4".
    - "adaptive": length-adaptive types (`LENGTH_ADAPTIVE`: dynamic) without a pinned factor get
      `ADAPTIVE_FACTOR` = 1, never the ratio; key "<rope_type>".
    - "oracle": other types without a pinned factor get factor = the evaluation ratio at each
      length, an oracle that knows the target length; key "<rope_type>", e.g. "yarn".
    - "fine-tuned": with `finetune_steps` > 0 and no pinned factor, factor = `finetune_ratio`
      for fine-tuning and every evaluation; key "finetune-<rope_type>-x<ratio>".
    - "none": the type takes no factor (`default`).

    With `finetune_steps` > 0 the model is first trained that many more steps at
    `finetune_ratio` × train_len with the scaling, then evaluated (Chen et al. 2023 fine-tune
    1000 steps at paper scale; 200 is their position-interpolation default here).
    """

    rope_type: str
    params: dict = field(default_factory=dict)
    name: str = ""
    finetune_steps: int = 0
    finetune_ratio: float = 4
    finetune_lr: float = 1e-4

    @property
    def pinned_factor(self) -> float | None:
        """The factor the suite fixes for every length, or None (see the class docstring)."""
        p = self.params
        if p.get("factor") is not None:
            return float(p["factor"])
        if p.get("max_position_embeddings") and p.get("original_max_position_embeddings") and self.rope_type == "yarn":
            return p["max_position_embeddings"] / p["original_max_position_embeddings"]
        return None

    @property
    def factor_mode(self) -> str:
        """"pinned", "adaptive", "oracle", "fine-tuned" or "none" (see the class docstring)."""
        import inspect

        if "factor" not in inspect.signature(ROPE_TYPES.get(self.rope_type)).parameters:
            return "none"
        if self.pinned_factor is not None:
            return "pinned"
        if self.rope_type in LENGTH_ADAPTIVE:
            return "adaptive"
        return "fine-tuned" if self.finetune_steps else "oracle"

    def factor_at(self, ratio: float) -> float | None:
        """The `factor` to add to the scaling dict at evaluation (or fine-tuning) ratio `ratio`;
        None when the dict needs none added (pinned in params, derived, or no factor)."""
        mode = self.factor_mode
        if mode == "adaptive":
            return ADAPTIVE_FACTOR
        if mode in ("oracle", "fine-tuned"):
            return max(1.0, float(ratio))
        return None

    @property
    def key(self) -> str:
        if self.name:
            return self.name
        pinned = self.pinned_factor
        head = self.rope_type if pinned is None else f"{self.rope_type}@{pinned:g}"
        return f"finetune-{head}-x{self.finetune_ratio:g}" if self.finetune_steps else head


@dataclass(frozen=True)
class ResourceSpec:
    """What one cell reserves on a cluster (the `ray` executor; local executors ignore it).

    Ray schedules each cell as a task with these resources, so fractional GPUs let several small
    models share one GPU (`num_gpus: 0.25` → four cells per GPU). They never change the rows: the
    intra-op thread count is `--threads` (see `lenbench.run.engine.run_suite`).

    Args:
        num_cpus: logical CPUs reserved per cell (> 0).
        num_gpus: GPUs per cell (≥ 0, fractions allowed).
        memory_gb: memory reserved per cell in GiB (0: no reservation).
    """

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory_gb: float = 0.0


def _parse_resources(data: Any, source: str) -> ResourceSpec:
    spec = _typed(ResourceSpec, data or {}, "resources", source)
    for key, low, ok in (("num_cpus", "> 0", spec.num_cpus > 0), ("num_gpus", ">= 0", spec.num_gpus >= 0),
                         ("memory_gb", ">= 0", spec.memory_gb >= 0)):
        if not ok:
            raise SuiteError(f"{source}: resources.{key} must be {low}, got {getattr(spec, key)!r}")
    return spec


@dataclass(frozen=True)
class Suite:
    name: str
    tasks: tuple[TaskSpec, ...]
    encodings: tuple[EncodingSpec, ...]
    description: str = ""
    seeds: tuple[int, ...] = (0,)
    model: ModelSpec = ModelSpec()
    train: TrainSpec = TrainSpec()
    eval: EvalSpec = EvalSpec()
    variants: tuple[VariantSpec, ...] = ()
    kernels: KernelSpec = KernelSpec()
    source: str = ""
    resources: ResourceSpec = ResourceSpec()

    def cells(self) -> list[Cell]:
        """Expand to cells in a stable order: task × train_len × encoding × seed."""
        return [
            Cell(suite=self.name, task=t, train_len=n, encoding=e, seed=s, model=self.model, train=self.train,
                 eval=self.eval, variants=self.variants)
            for t in self.tasks for n in t.train_len for e in self.encodings for s in self.seeds
        ]


@dataclass(frozen=True)
class Cell:
    """One grid cell: train once at `train_len`, evaluate at every ratio and variant."""

    suite: str
    task: TaskSpec
    train_len: int
    encoding: EncodingSpec
    seed: int
    model: ModelSpec
    train: TrainSpec
    eval: EvalSpec
    variants: tuple[VariantSpec, ...]

    def training_config(self) -> dict:
        """Everything that determines the trained weights (the checkpoint key)."""
        return {
            "lenbench_version": lenbench.__version__,
            "task": self.task.name, "task_params": self.task.params, "train_len": self.train_len,
            "encoding": self.encoding.name, "encoding_params": self.encoding.params, "seed": self.seed,
            "model": dataclasses.asdict(self.model), "train": dataclasses.asdict(self.train),
            "max_ratio": max(self.eval.ratios),  # sizes position tables such as `learned`
        }

    def config(self) -> dict:
        """The canonical config of the whole cell (training + evaluation)."""
        return {**self.training_config(), "label": self.encoding.key, "eval": {k: v for k, v in dataclasses.asdict(self.eval).items() if k != "memory_budget_gb"},
                "variants": [dataclasses.asdict(v) for v in self.variants]}

    @property
    def train_id(self) -> str:
        return digest(self.training_config())

    @property
    def cell_id(self) -> str:
        return digest(self.config())

    @property
    def title(self) -> str:
        return f"{self.task.name}-{self.encoding.key}-L{self.train_len}-s{self.seed}"


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def list_suites() -> dict[str, Path]:
    """Preset suite names → their YAML files in lenbench/config/suites/."""
    return {p.stem: p for p in sorted(SUITES_DIR.glob("*.yaml"))}


def load_suite(name_or_path: str | Path) -> Suite:
    """Load a preset by name (smoke, quick, standard, paper) or any YAML file by path."""
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
    except UnicodeDecodeError as err:
        raise SuiteError(f"{path}: not a UTF-8 text file (byte {err.start}: {err.reason}); a suite is a YAML file") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise SuiteError(f"{path}:{where} is not valid YAML ({getattr(err, 'problem', err)})") from None
    return parse_suite(data, source=str(path), default_name=_sanitise_name(path.stem))


# --- validation -------------------------------------------------------------------------------


def _check_keys(data: Any, cls: type, where: str, source: str) -> dict:
    if not isinstance(data, dict):
        raise SuiteError(f"{source}: {where} must be a mapping, got {type(data).__name__}")
    valid = [f.name for f in dataclasses.fields(cls) if f.name != "source"]
    for key in data:
        if key not in valid:
            raise SuiteError(f"{source}: unknown key {where}.{key}{did_you_mean(str(key), valid)} (valid: {', '.join(valid)})")
    return data


def _typed(cls: type, data: dict, where: str, source: str):
    """Build a flat dataclass, checking each value against its default's type."""
    _check_keys(data, cls, where, source)
    defaults = cls()
    out = {}
    for key, value in data.items():
        want = type(getattr(defaults, key))
        if want is tuple:
            value = tuple(value) if isinstance(value, list) else value
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if want is float and isinstance(value, str):
            value = _numeric_string(value)
        if not isinstance(value, want) or isinstance(value, bool) != (want is bool):
            raise SuiteError(f"{source}: {where}.{key} must be {want.__name__}, got {value!r}")
        out[key] = value
    return cls(**out)


def _name(kind: str, name: Any, registry, where: str, source: str) -> str:
    if name not in registry:
        raise SuiteError(f"{source}: {where}: unknown {kind} {name!r}{did_you_mean(str(name), registry.names())} "
                         f"(known: {', '.join(sorted(registry.names()))})")
    return name


def _entries(data: Any, where: str, source: str) -> list[dict]:
    """A list of mappings; a bare string `x` is shorthand for `{name: x}`."""
    if not isinstance(data, list) or not data:
        raise SuiteError(f"{source}: {where} must be a non-empty list")
    return [{"name": d} if isinstance(d, str) else d for d in data]


def _params(data: dict, where: str, source: str, check) -> dict:
    params = data.get("params", {}) or {}
    if not isinstance(params, dict):
        raise SuiteError(f"{source}: {where}.params must be a mapping")
    try:
        check(params)
    except ValueError as err:
        raise SuiteError(f"{source}: {where}: {err}") from None
    return params


def _numeric_string(value: str) -> float | str:
    """`float(value)` for a numeric string (PyYAML reads ``1e-3`` and ``1.0e9`` as strings), else `value`."""
    try:
        return float(value)
    except ValueError:
        return value


#: Valid range of every numeric suite field: key → (predicate, the range in words).
RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "model.d_model": (lambda v: v >= 1, ">= 1"),
    "model.n_layers": (lambda v: v >= 1, ">= 1"),
    "model.n_heads": (lambda v: v >= 1, ">= 1"),
    "model.ff_mult": (lambda v: v >= 1, ">= 1"),
    "model.dropout": (lambda v: 0 <= v < 1, "0 <= dropout < 1"),
    "train.steps": (lambda v: v >= 1, ">= 1"),
    "train.batch_size": (lambda v: v >= 1, ">= 1"),
    "train.lr": (lambda v: 0 < v < math.inf, "> 0 and finite"),
    "train.warmup": (lambda v: v >= 0, ">= 0"),
    "train.weight_decay": (lambda v: 0 <= v < math.inf, ">= 0 and finite"),
    "train.grad_clip": (lambda v: v > 0, "> 0 (.inf: no clipping)"),
    "eval.samples": (lambda v: v >= 1, ">= 1"),
    "eval.tokens_per_batch": (lambda v: v >= 1, ">= 1"),
    "eval.memory_budget_gb": (lambda v: 0 <= v < math.inf, "0 for automatic, or a positive finite number of GiB"),
    "variants.finetune_steps": (lambda v: v >= 0, ">= 0"),
    "variants.finetune_ratio": (lambda v: 1 <= v < math.inf, ">= 1 and finite, with finetune_steps > 0"),
    "variants.finetune_lr": (lambda v: 0 < v < math.inf, "> 0 and finite, with finetune_steps > 0"),
}

#: A suite name that is safe as one directory under runs/: no path separator, no leading dot.
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")


def _check_range(key: str, value: Any, where: str, source: str) -> None:
    ok, valid = RANGES[key]
    if not ok(value):
        raise SuiteError(f"{source}: {where} = {value!r} is out of range (valid: {valid})")


def _check_ranges(spec: Any, where: str, source: str) -> None:
    """Range-check every field of a ModelSpec / TrainSpec / EvalSpec that has an entry in `RANGES`."""
    for f in dataclasses.fields(spec):
        key = f"{where}.{f.name}"
        if key in RANGES:
            _check_range(key, getattr(spec, f.name), key, source)


def _sanitise_name(stem: str) -> str:
    """A safe directory name from a file name: characters outside `SAFE_NAME` become ``_``."""
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", stem)
    return "_" + name if name[:1] in ("", ".", "-", "+") else name


def _suite_name(name: Any, source: str) -> str:
    name = str(name)
    if not SAFE_NAME.fullmatch(name):
        raise SuiteError(f"{source}: name {name!r} is not a safe directory name for runs/<name> (letters, digits and "
                         f"._+- only, not starting with . + or -); e.g. name: {_sanitise_name(name.replace('/', '_'))!r}")
    return name


def _dedupe(items: list, key: Callable[[Any], Any], what: Callable[[Any], str], source: str) -> list:
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


def _canon(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=str)


#: Keys of a transformers rope dict that are not parameters of a rope_type function.
VARIANT_EXTRA_KEYS = ("theta", "rope_theta", "partial_rotary_factor")


def _variant_mapping(v: Any, where: str, source: str) -> dict:
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


def parse_suite(data: Any, *, source: str = "<suite>", default_name: str = "suite") -> Suite:
    """Validate a suite mapping (as read from YAML) into a `Suite`."""
    if data is None:
        raise SuiteError(f"{source}: the suite is empty")
    _check_keys(data, Suite, "suite", source)
    for required in ("tasks", "encodings"):
        if required not in data:
            raise SuiteError(f"{source}: missing required key {required!r}")

    tasks = []
    for i, t in enumerate(_entries(data["tasks"], "tasks", source)):
        where = f"tasks[{i}]"
        _check_keys(t, TaskSpec, where, source)
        name = _name("task", t.get("name"), TASKS, where, source)
        lens = t.get("train_len")
        if lens is None and set(t) == {"name"}:  # `tasks: [copy]`: every task needs its training length
            raise SuiteError(f"{source}: {where} is the bare task name {name!r}, which has no training length; "
                             f"write {{name: {name}, train_len: N}} (N in {TASKS.get(name).length_unit})")
        lens = (lens,) if isinstance(lens, int) else tuple(lens or ())
        if not lens or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in lens):
            raise SuiteError(f"{source}: {where}.train_len must be a positive integer or a list of them, got {t.get('train_len')!r}")
        params = _params(t, where, source, lambda p, n=name: check_keywords(f"task {n!r}", TASKS.get(n).__init__, p))
        seen = [n for x in tasks if (x.name, _canon(x.params)) == (name, _canon(params)) for n in x.train_len]
        lens = _dedupe([*seen, *lens], key=lambda n: n, what=lambda n, w=where, t=name: f"{w}: task {t!r} at train_len {n}",
                       source=source)[len(seen):]
        if lens:
            tasks.append(TaskSpec(name=name, train_len=tuple(lens), params=params))

    model = _typed(ModelSpec, data.get("model") or {}, "model", source)
    _check_ranges(model, "model", source)
    if model.d_model % model.n_heads:
        raise SuiteError(f"{source}: model.d_model = {model.d_model} is out of range (valid: a multiple of "
                         f"model.n_heads = {model.n_heads})")
    encodings = []
    for i, e in enumerate(_entries(data["encodings"], "encodings", source)):
        where = f"encodings[{i}]"
        _check_keys(e, EncodingSpec, where, source)
        name = _name("encoding", e.get("name"), ENCODINGS, where, source)
        params = _params(e, where, source,
                         lambda p, n=name: check_keywords(f"encoding {n!r}", ENCODINGS.get(n).__init__, p, skip=("dims",)))
        reason = probe_encoding(name, params, model.d_model, model.n_heads)  # every parameter in range, now
        if reason:
            raise SuiteError(f"{source}: {where}: {reason}")
        encodings.append(EncodingSpec(name=name, params=params, label=str(e.get("label", ""))))
    encodings = _dedupe(encodings, key=lambda e: (e.name, _canon(e.params), e.key),
                        what=lambda e: f"encoding {e.key!r}", source=source)
    labels = [e.key for e in encodings]
    if len(set(labels)) != len(labels):
        raise SuiteError(f"{source}: two encodings share the label {next(x for x in labels if labels.count(x) > 1)!r}; give each a distinct `label`")

    variants = []
    for i, v in enumerate(data.get("variants") or []):
        where = f"variants[{i}]"
        v = {"rope_type": v} if isinstance(v, str) else v
        v = _variant_mapping(v, where, source)
        rope_type = _name("variant", v.get("rope_type"), ROPE_TYPES, where, source)
        params = _params(v, where, source, lambda p, r=rope_type: check_keywords(
            f"rope_type {r!r}", ROPE_TYPES.get(r), {k: x for k, x in p.items() if k not in VARIANT_EXTRA_KEYS},
            skip=("dim", "base", "seq_len")))
        extra = {k: v[k] for k in ("name", "finetune_steps", "finetune_ratio", "finetune_lr") if k in v}
        for key in ("finetune_ratio", "finetune_lr"):
            if isinstance(extra.get(key), str):
                extra[key] = _numeric_string(extra[key])
        for key, want in (("name", str), ("finetune_steps", int), ("finetune_ratio", (int, float)), ("finetune_lr", (int, float))):
            if key in extra and (not isinstance(extra[key], want) or isinstance(extra[key], bool)):
                raise SuiteError(f"{source}: {where}.{key} has the wrong type: {extra[key]!r}")
        variant = VariantSpec(rope_type=rope_type, params=params, **extra)
        _check_range("variants.finetune_steps", variant.finetune_steps, f"{where}.finetune_steps", source)
        if variant.finetune_steps:
            _check_range("variants.finetune_ratio", variant.finetune_ratio, f"{where}.finetune_ratio", source)
            _check_range("variants.finetune_lr", variant.finetune_lr, f"{where}.finetune_lr", source)
        variants.append(variant)
    variants = _dedupe(variants, key=lambda v: (v.key, v.rope_type, _canon(v.params), v.finetune_steps,
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
    seeds = tuple(_dedupe(list(seeds), key=lambda s: s, what=lambda s: f"seed {s}", source=source))
    train = _typed(TrainSpec, data.get("train") or {}, "train", source)
    _check_ranges(train, "train", source)
    if train.length_sampling not in ("fixed", "uniform"):
        raise SuiteError(f"{source}: train.length_sampling must be 'fixed' or 'uniform', got {train.length_sampling!r}")
    ev = _typed(EvalSpec, data.get("eval") or {}, "eval", source)
    _check_ranges(ev, "eval", source)
    ratios = []
    for i, r in enumerate(ev.ratios):
        value = _numeric_string(r) if isinstance(r, str) else r
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise SuiteError(f"{source}: eval.ratios[{i}] must be a number, got {r!r}")
        if not 0 < value < math.inf:
            raise SuiteError(f"{source}: eval.ratios[{i}] = {r!r} is out of range (valid: > 0 and finite)")
        ratios.append(value)
    if not ratios:
        raise SuiteError(f"{source}: eval.ratios must be a non-empty list of positive numbers")
    ev = dataclasses.replace(ev, ratios=tuple(_dedupe(ratios, key=float, what=lambda r: f"eval ratio {r!r}", source=source)))
    return Suite(
        name=_suite_name(data["name"], source) if "name" in data else default_name,
        description=str(data.get("description", "")),
        tasks=tuple(tasks), encodings=tuple(encodings), seeds=seeds,
        model=model, train=train, eval=ev,
        variants=tuple(variants), kernels=parse_kernels(data.get("kernels"), source), source=source, resources=_parse_resources(data.get("resources"), source),
    )
