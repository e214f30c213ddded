"""The typed schema of a suite: the frozen dataclasses a YAML preset becomes, and the grid cells.

`lenbench.config.parse` builds a `Suite` from a YAML mapping and validates every value; this module
only holds the data and what follows from it without a file: the cell grid (`Suite.cells`), the
canonical config of a cell and its stable ids (`Cell.config`, `Cell.cell_id`, `Cell.train_id`, the
sha256 `digest` of the canonical JSON, with the lenbench version), and the result labels
(`EncodingSpec.key`, `VariantSpec.key`).

    >>> suite = load_suite("smoke")
    >>> cells = suite.cells()               # task × encoding × train_len × seed
    >>> cells[0].cell_id                    # stable hash of the canonical config + lenbench version

The compute path (engine, train, executors) imports only this module of `lenbench.config`, with the
section spec a `Suite` holds beside `KernelSpec` (`resources.ResourceSpec`, and its `fields`), so
these are the config files a cell's fingerprint hashes; `parse`, `checks` and `kernels` (the checks
against the registries) are not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import lenbench
from lenbench.config.resources import ResourceSpec
from lenbench.rope_factors import pinned_factor


@dataclass(frozen=True)
class KernelSpec:
    """What `bench/test_kernels.py` times for this suite (the suite's `kernels:` section).

    Environment variables override these fields one by one (`LENBENCH_KERNEL_LENGTHS`,
    `LENBENCH_KERNEL_DTYPES`, `LENBENCH_KERNEL_SECONDS`, `LENBENCH_KERNEL_ENCODINGS`,
    `LENBENCH_CONTENT_MAX_T`, `LENBENCH_TRAIN_ROUNDS`; see `kernel_settings` in bench/kernel_plans.py):
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


#: ModelSpec fields added after the first published cells, each with the default that leaves it out
#: of a cell's id (`ModelSpec.identity`) and its settings line (`Cell.settings`).
LATER_MODEL_FIELDS: dict[str, Any] = {"embedding_std": 0.02}


@dataclass(frozen=True)
class ModelSpec:
    """Model geometry and initialisation of the cells (see `lenbench.model.ModelConfig`).

    `embedding_std` is the standard deviation of the token embeddings' normal initialisation
    (GPT-2's 0.02 by default; studies/tasks/ measured why multi-query recall needs 1.0).
    """

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    ff_mult: int = 4
    dropout: float = 0.0
    embedding_std: float = 0.02

    def identity(self) -> dict:
        """The fields that name a cell (`Cell.training_config`): every field, except those added after
        the first published cells (`LATER_FIELDS`) while they keep their default, so those cells keep
        their ids."""
        out = dataclasses.asdict(self)
        for name, default in LATER_MODEL_FIELDS.items():
            if out[name] == default:
                del out[name]
        return out

    def later_settings(self) -> dict:
        """The `LATER_MODEL_FIELDS` set away from their defaults (what `Cell.settings` adds)."""
        return {k: v for k, v in self.identity().items() if k in LATER_MODEL_FIELDS}


#: TrainSpec fields added after the first published cells: while `patience` is 0 (train exactly
#: `steps`) none of them is in a cell's id or settings line, so those cells keep their ids.
LATER_TRAIN_FIELDS: dict[str, Any] = {"patience": 0, "validate_every": 100, "val_samples": 64, "min_delta": 1e-3,
                                       "schedule": "cosine"}


@dataclass(frozen=True)
class TrainSpec:
    """Training settings: AdamW with linear warm-up then cosine decay, gradient clipping.

    `length_sampling` is "fixed" (every batch at train_len) or "uniform" (each batch at a length
    drawn uniformly from the task's `min_length` … train_len, see `lenbench.train.train_model`).

    Training until convergence: with `patience` > 0, `steps` is the maximum budget (the schedule's
    length); every `validate_every` steps the loss on `val_samples` held-out samples at the training
    length (the task's "val" split) is measured, and training stops once it has not improved by more
    than `min_delta` (nats per scored token) for `patience` validations in a row; the weights of the
    best validation are kept. `schedule` "cosine" decays over `steps` whenever training stops;
    "plateau" holds the peak rate after warm-up and divides it by 10 at each stall, stopping at the
    third (`lenbench.train`). Rows record the steps trained and why training stopped
    (`lenbench.train.TrainStats`).
    """

    steps: int = 1000
    batch_size: int = 32
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    length_sampling: str = "fixed"
    patience: int = 0
    validate_every: int = 100
    val_samples: int = 64
    min_delta: float = 1e-3
    schedule: str = "cosine"

    def identity(self) -> dict:
        """The fields that name a cell: every field, less `LATER_TRAIN_FIELDS` while `patience` is 0
        (training then never validates, whatever the others say), and less `schedule` at its default."""
        out = dataclasses.asdict(self)
        for name, default in LATER_TRAIN_FIELDS.items():
            if self.patience == 0 or (name == "schedule" and out[name] == default):
                del out[name]
        return out


@dataclass(frozen=True)
class EvalSpec:
    """Evaluation settings: ratios of the training length and how many samples per length.

    `dense_until` adds every length from the training length up to `dense_until` times it (0: off):
    a dense axis where models fall off, between the sparse `ratios` (Delétang et al. 2023 evaluate
    every length). A cell's EvalSpec holds the expanded ratios (`at`), so its id names exactly the
    lengths it evaluates and a suite without `dense_until` keeps its cell ids.
    `tokens_per_batch` bounds the memory of one evaluation batch (batch = tokens // seq_len).
    `memory_budget_gb` caps an evaluation's estimated peak memory (0: half the memory available,
    or env LENBENCH_MEMORY_BUDGET_GB; see `lenbench.run.memory`); batches shrink to fit it. It changes
    how samples are batched, not results, so it is not part of the cell id.
    """

    ratios: tuple[float, ...] = (1, 2, 4, 8, 16)
    samples: int = 64
    tokens_per_batch: int = 16384
    memory_budget_gb: float = 0.0
    dense_until: float = 0.0

    def at(self, train_len: int) -> EvalSpec:
        """The settings of a cell trained at `train_len`: `ratios` with every length ``train_len …
        dense_until · train_len`` added as its ratio ``length / train_len``, ascending, and
        `dense_until` 0. E.g. ratios (1, 4), dense_until 2, train_len 4: 1, 1.25, 1.5, 1.75, 2, 4."""
        if not self.dense_until:
            return self
        by_length = {max(1, round(r * train_len)): r for r in self.ratios}  # a given ratio wins its length
        for n in range(train_len, math.floor(self.dense_until * train_len + 1e-9) + 1):
            by_length.setdefault(n, n / train_len)
        return dataclasses.replace(self, ratios=tuple(by_length[n] for n in sorted(by_length)), dense_until=0.0)



@dataclass(frozen=True)
class TaskSpec:
    """One task entry of a suite: the task, its training lengths, parameters and per-task overrides.

    Args:
        name: the registered task.
        train_len: the training lengths (task units); one cell per length (× encoding × seed).
        params: the task's parameters.
        label: the task's name in results (the `task` column, cell titles); "" for the registry
            name. Two entries of one task at one training length with different settings need
            distinct labels, or their rows would merge (`lenbench.config.parse`).
        train: per-task overrides of the suite's `train:` section, field → value (validated, only
            the fields given); the cells' `Cell.train` is the suite's TrainSpec with these replaced.
        eval: per-task overrides of the suite's `eval:` section, likewise: any field (a leaderboard
            board is one task at one training length, so its ratios, samples and batching may be
            its own; `memory_budget_gb` only bounds how samples are batched).
        model: per-task overrides of the suite's `model:` section, likewise (e.g. a task whose
            models learn only from larger token embeddings, `embedding_std`).

    An entry without overrides makes exactly the cells it made before overrides existed: its cells'
    TrainSpec and EvalSpec are the suite's, and `label` enters the cell config only when given.
    """

    name: str
    train_len: tuple[int, ...]
    params: dict = field(default_factory=dict)
    label: str = ""
    train: dict = field(default_factory=dict)
    eval: dict = field(default_factory=dict)
    model: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The task's label in results: `label`, else the registry name."""
        return self.label or self.name

    def train_spec(self, suite: TrainSpec) -> TrainSpec:
        """The effective training settings of this task's cells: `suite` with `train` replaced."""
        return dataclasses.replace(suite, **self.train) if self.train else suite

    def eval_spec(self, suite: EvalSpec) -> EvalSpec:
        """The effective evaluation settings of this task's cells: `suite` with `eval` replaced."""
        return dataclasses.replace(suite, **self.eval) if self.eval else suite

    def model_spec(self, suite: ModelSpec) -> ModelSpec:
        """The effective model of this task's cells: `suite` with `model` replaced."""
        return dataclasses.replace(suite, **self.model) if self.model else suite


@dataclass(frozen=True)
class EncodingSpec:
    """One encoding: registry name, parameters, and the label used in results (default: name)."""

    name: str
    params: dict = field(default_factory=dict)
    label: str = ""

    @property
    def key(self) -> str:
        """The encoding's label in results: `label`, else the registry name."""
        return self.label or self.name



@dataclass(frozen=True)
class VariantSpec:
    """An inference-time RoPE length-extension variant, applied to every encoding that has `set_scaling`.

    `rope_type` is a transformers rope_type; `params` are its parameters (a transformers
    `rope_scaling` dict's keys). `original_max_position_embeddings` defaults to the number of
    tokens at the training length. The factor follows the variant's factor mode
    (`lenbench.encodings.rope_scaling.factor_mode`, which also computes it: `factor_at`):

    - "pinned": the suite gives `factor` (or yarn's max_position_embeddings with
      original_max_position_embeddings), used at every evaluation length, the way models are
      deployed; key "<rope_type>@<factor>", e.g. "yarn@4", "dynamic@2".
    - length-adaptive types (`lenbench.rope_factors.LENGTH_ADAPTIVE`: dynamic) must be pinned: at factor 1
      they are oracle ntk again, and the ratio would scale twice (a load-time error otherwise).
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
    def key(self) -> str:
        """The variant's label in results (the class docstring)."""
        if self.name:
            return self.name
        pinned = pinned_factor(self)
        head = self.rope_type if pinned is None else f"{self.rope_type}@{pinned:g}"
        return f"finetune-{head}-x{self.finetune_ratio:g}" if self.finetune_steps else head


#: What a suite is for (its `purpose:`), and the one-line note its report and `lenbench run` print for
#: it: a fact the suite declares, so a reader is told what its board means before reading it (a smoke
#: suite's tiny training learns nothing: every model marked not learned is expected).
PURPOSE_NOTES = {
    "benchmark": "",
    "smoke": ("This is a smoke suite: it checks that the pipeline runs end to end, and its training is too short to "
              "learn any task, so every model marked not learned is expected; the quick suite is the benchmark."),
}


@dataclass(frozen=True)
class Suite:
    """A validated suite (`lenbench.config.parse.parse_suite`): the grid, shared settings and sections."""

    name: str
    tasks: tuple[TaskSpec, ...]
    encodings: tuple[EncodingSpec, ...]
    description: str = ""
    #: `PURPOSE_NOTES`' key: ``benchmark`` (default) or ``smoke``; not part of any cell id.
    purpose: str = "benchmark"
    seeds: tuple[int, ...] = (0,)
    model: ModelSpec = ModelSpec()
    train: TrainSpec = TrainSpec()
    eval: EvalSpec = EvalSpec()
    variants: tuple[VariantSpec, ...] = ()
    kernels: KernelSpec = KernelSpec()
    source: str = ""
    resources: ResourceSpec = ResourceSpec()
    #: Plugins the suite loads (`lenbench.plugins`): module names and paths to .py files as given,
    #: paths relative to the suite file. Not part of any cell id: a cell is named by its encoding
    #: and task, and its fingerprint holds the plugin's source.
    plugins: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """The one-line note of the suite's `purpose` (`PURPOSE_NOTES`), "" for a benchmark."""
        return PURPOSE_NOTES[self.purpose]

    def cells(self) -> list[Cell]:
        """Expand to cells in a stable order: task × train_len × encoding × seed; each cell gets its
        task entry's effective training and evaluation settings (`TaskSpec.train_spec`, `eval_spec`)."""
        return [
            Cell(suite=self.name, task=t, train_len=n, encoding=e, seed=s, model=t.model_spec(self.model),
                 train=t.train_spec(self.train), eval=t.eval_spec(self.eval).at(n), variants=self.variants)
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
            "model": self.model.identity(), "train": self.train.identity(),
            "max_ratio": max(self.eval.ratios),  # sizes position tables such as `learned`
        }

    def config(self) -> dict:
        """The canonical config of the whole cell (training + evaluation). A task label is in it
        (``task_label``) only when the entry gives one, so unlabelled cells keep their ids."""
        labelled = {"task_label": self.task.label} if self.task.label else {}
        return {**self.training_config(), **labelled, "label": self.encoding.key,
                "eval": {k: v for k, v in dataclasses.asdict(self.eval).items()
                         if k not in ("memory_budget_gb", "dense_until")},  # dense_until: expanded into ratios
                "variants": [dataclasses.asdict(v) for v in self.variants]}

    @property
    def settings(self) -> str:
        """The cell's effective training and evaluation settings in one line, as every row records
        them (the `settings` column; per-task overrides show here), e.g.
        "train: steps=1000 batch_size=32 lr=0.002 warmup=100 weight_decay=0.01 grad_clip=1
        length_sampling=uniform; eval: samples=64 tokens_per_batch=16384". The evaluation ratios are
        the rows' own `ratio` column; `memory_budget_gb` changes no result and is left out. A model
        setting added later (`LATER_MODEL_FIELDS`) set away from its default ends the line, e.g.
        "; model: embedding_std=1"."""
        train = " ".join(f"{k}={_setting(v)}" for k, v in self.train.identity().items())
        ev = " ".join(f"{k}={_setting(getattr(self.eval, k))}" for k in ("samples", "tokens_per_batch"))
        later = " ".join(f"{k}={_setting(v)}" for k, v in self.model.later_settings().items())
        return f"train: {train}; eval: {ev}" + (f"; model: {later}" if later else "")

    @property
    def train_id(self) -> str:
        return digest(self.training_config())

    @property
    def cell_id(self) -> str:
        return digest(self.config())

    @property
    def title(self) -> str:
        return f"{self.task.key}-{self.encoding.key}-L{self.train_len}-s{self.seed}"


def _setting(value: Any) -> str:
    """A setting's value as `Cell.settings` writes it: a float in its shortest exact form without
    a trailing ".0" (0.002, 1, inf), anything else as `str`."""
    if not isinstance(value, float):
        return str(value)
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def digest(obj: Any) -> str:
    """The first 16 hex digits of the sha256 of `obj` as canonical JSON (sorted keys, `str` for the rest)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]

