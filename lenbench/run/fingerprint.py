"""What a cell's result depends on, as a fingerprint: a cached result is valid only while it matches.

A cell's id hashes its config (suite YAML → `Cell.config`). Its *result* also depends on code and
environment, which the id does not see; the fingerprint covers them:

- **sources** (sha256 of each file, relative to the `lenbench` package): the import closure of the
  cell's compute path (`lenbench.run.closure.import_closure`: every `lenbench` import anywhere in a
  file, transitively, read from the source), from these roots:
    - the compute half of `run/engine.py` (everything above its "the driver" marker: the driver below
      it only reads and writes files, and its imports are not followed), `model.py`, `train.py`,
      `evaluate.py`;
    - the cell's encoding module, and the wrapped encoding's module for an encoding that wraps
      another (`randomized`'s `base` parameter);
    - the cell's task module.
  Nothing reached is left out by name: `config/suite.py` (`VariantSpec.factor_at` computes the RoPE
  factor), `registry.py`, `device.py`, `run/memory.py`, `atomic.py`, `run/executors/base.py` (the workers'
  entry point, which names `ray_executor` for a dynamic import), this module and the others the
  compute half imports are all hashed. The one structural exception is how a package's
  `__init__.py` is treated: it imports every encoding / task to register it, so it is not followed
  into its members (that would make every cell depend on every encoding); a name imported from
  a package is followed to the module that defines it, and the `__init__` itself is hashed iff it
  holds code of its own (the top package does: `__version__`, which rows record). Code loaded by
  file path is not an import: no package module loads one (`python -m lenbench.kernels` imports
  `lenbench.kernels.plans`), and tests/test_trust_fingerprint.py keeps every path load out of the closure.
  Today every cell's closure holds `__init__.py`, `atomic.py`, `baselines.py`, `run/closure.py`,
  `device.py`, `encodings/base.py`, `encodings/rope_scaling.py`, `run/engine.py`, `evaluate.py`,
  `run/executors/base.py`, `run/fingerprint.py`, `run/memory.py`, `model.py`, `numerics.py`, `run/executors/parent_watch.py`, `run/executors/ray.py`, `registry.py`,
  `config/suite.py`, `tasks/_common.py`, `tasks/base.py`, `train.py` (editing any of them reruns every
  cell), plus its encoding's and task's modules.
- **environment**: torch version, device type, dtype, the intra-op thread count and the CPU
  numeric mode (`lenbench.numerics`: pinned code paths, or the CPU's own choice).

`code_fingerprint` is the digest of both; `data_fingerprint` identifies the task's data beyond its
parameters (the `lm` corpus sha256; "" for synthetic tasks). Both are stored in every row, in the
cell file and in each checkpoint's metadata; the engine recomputes a cell when either changed and
names the reason (`stale_reasons`). Editing `encodings/alibi.py` thus reruns exactly the cells
whose encoding is `alibi` (or wraps it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
from pathlib import Path
from typing import Any

import torch

import lenbench
from lenbench.run.closure import import_closure

PACKAGE = Path(lenbench.__file__).resolve().parent
#: The roots of every cell's compute path (files relative to the package); the cell adds its own.
CORE = ("model.py", "train.py", "evaluate.py", "run/engine.py")
#: engine.py is fingerprinted up to this line: the driver below it only reads and writes files.
ENGINE_DRIVER_MARKER = "# --- the driver:"
DTYPE = "float32"


def python_version() -> str:
    return platform.python_version()


def _source(rel: str) -> bytes:
    data = (PACKAGE / rel).read_bytes()
    if rel == "run/engine.py":
        text = data.decode()
        cut = text.find(ENGINE_DRIVER_MARKER)
        data = (text[:cut] if cut >= 0 else text).encode()
    return data


def closure(roots: list[str]) -> list[str]:
    """`roots` and every package file they import, transitively (`lenbench.run.closure`), sorted;
    `run/engine.py` is read up to its driver marker."""
    return import_closure(roots, PACKAGE, read=_source)


def _class_file(cls: type) -> str:
    return str(Path(cls.__module__.replace(".", "/") + ".py").relative_to("lenbench"))


def encoding_files(name: str, params: dict) -> list[str]:
    """Source files of encoding `name` (with `params`; follows a wrapped `base` encoding)."""
    return closure(encoding_roots(name, params))


def encoding_roots(name: str, params: dict) -> list[str]:
    """The module of encoding `name`, and those of the encodings it wraps (`base`, transitively)."""
    from lenbench.encodings import ENCODINGS

    roots = [_class_file(ENCODINGS.get(name))]
    inner = params.get("base")
    if isinstance(inner, str) and inner in ENCODINGS and inner != name:
        roots += encoding_roots(inner, params.get("base_params") or {})
    return roots


def task_files(name: str) -> list[str]:
    return closure([task_root(name)])


def task_root(name: str) -> str:
    from lenbench.tasks import TASKS

    return _class_file(TASKS.get(name))


def source_files(cell) -> list[str]:
    """Every source file a cell's result depends on: the import closure of its compute path (see
    the module docstring)."""
    return closure([*CORE, *encoding_roots(cell.encoding.name, cell.encoding.params), task_root(cell.task.name)])


def file_sha(rel: str) -> str:
    """sha256 (16 hex) of a package file's source as fingerprinted (read every time: edits count)."""
    return hashlib.sha256(_source(rel)).hexdigest()[:16]


def data_fingerprint(task_fingerprint: dict) -> str:
    """One string for a task's `fingerprint()`: its sha256 entry (the lm corpus), a digest of any
    other content, "" when the task has none (synthetic tasks)."""
    if not task_fingerprint:
        return ""
    shas = [v for k, v in sorted(task_fingerprint.items()) if k.endswith("sha256")]
    if len(shas) == 1:
        return str(shas[0])
    return hashlib.sha256(json.dumps(task_fingerprint, sort_keys=True, default=str).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What a cell's result depends on beyond its config.

    Args:
        sources: package-relative file → sha256 (16 hex) of its source.
        torch_version, device, dtype, threads: the environment it ran in.
        data: the task's data fingerprint (see `data_fingerprint`).
        numerics: the CPU numeric mode it ran in (``pinned:x86-avx2``, ``native:AVX512`` …).
    """

    sources: dict[str, str]
    torch_version: str
    device: str
    dtype: str
    threads: int
    data: str = ""
    #: The CPU numeric mode (`lenbench.numerics.numerics_tag`): pinned code paths or the CPU's own.
    numerics: str = ""

    @property
    def code(self) -> str:
        """The code fingerprint: a digest of sources and environment (not the data)."""
        env = {k: v for k, v in dataclasses.asdict(self).items() if k != "data"}
        return hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        return {"code_fingerprint": self.code, **dataclasses.asdict(self)}


def cell_fingerprint(cell, device: str, threads: int, data: str) -> Fingerprint:
    """The fingerprint a run of `cell` here would have (`device`: a device type such as "cpu")."""
    from lenbench.numerics import numerics_tag

    return Fingerprint(sources={rel: file_sha(rel) for rel in source_files(cell)}, torch_version=str(torch.__version__),
                       device=device, dtype=DTYPE, threads=int(threads), data=data, numerics=numerics_tag())


def stale_reasons(stored: Any, current: Fingerprint) -> list[str]:
    """Why a stored fingerprint (a `to_json` dict, or None) no longer matches `current`; [] if it does.

    Each reason is a short class such as "source changed: encodings/alibi.py" or "threads 4 → 2",
    so cells can be grouped by reason in one line each.
    """
    if not isinstance(stored, dict) or "sources" not in stored:
        return ["no code fingerprint (made by an older lenbench)"]
    reasons = []
    old, new = stored.get("sources") or {}, current.sources
    changed = sorted(k for k in new.keys() | old.keys() if old.get(k) != new.get(k))
    if changed:
        reasons.append(f"source changed: {', '.join(changed)}")
    for key in ("torch_version", "device", "dtype", "threads", "numerics"):
        if stored.get(key) != getattr(current, key):
            reasons.append(f"{key} {stored.get(key, '(not recorded)')} → {getattr(current, key)}")
    if stored.get("data", "") != current.data:
        reasons.append("task data changed")
    return reasons
