"""What a cell's result depends on, as a fingerprint: a cached result is valid only while it matches.

A cell's id hashes its config (suite YAML → `Cell.config`). Its *result* also depends on code and
environment, which the id does not see; the fingerprint covers them:

- **sources** (sha256 of each file, relative to the `lenbench` package):
    - the cell's encoding module and the `lenbench.encodings` modules it imports, transitively
      (e.g. `encodings/rope.py` → `encodings/rope_scaling.py`, `encodings/base.py`); an encoding
      that wraps another (`randomized`'s `base` parameter) adds the wrapped one's modules;
    - the cell's task module and the `lenbench.tasks` modules it imports (`tasks/base.py`,
      `tasks/_common.py`);
    - the shared core: `model.py`, `train.py`, `evaluate.py`, the compute half of `engine.py`
      (everything above its "the driver" marker) and the `lenbench` modules these import,
      transitively (e.g. `kernels.py` once training uses it).
  Deliberately *not* included: `suite.py` (what it contributes to a cell reaches the engine as
  the cell's config, i.e. its id), `registry.py` (names and error messages), `device.py`
  (the device is recorded itself), `atomic.py`, `executors.py`, `ray_executor.py`, `cli.py`,
  `results.py`, `plots.py`, `compare.py`, this module, and the packages' `__init__.py` (they only
  import every encoding / task: following them would make every cell depend on every encoding).
- **environment**: torch version, device type, dtype, the intra-op thread count and the CPU
  numeric mode (`lenbench.numerics`: pinned code paths, or the CPU's own choice).

`code_fingerprint` is the digest of both; `data_fingerprint` identifies the task's data beyond its
parameters (the `lm` corpus sha256; "" for synthetic tasks). Both are stored in every row, in the
cell file and in each checkpoint's metadata; the engine recomputes a cell when either changed and
names the reason (`stale_reasons`). Editing `encodings/alibi.py` thus reruns exactly the cells
whose encoding is `alibi` (or wraps it).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import platform
from pathlib import Path
from typing import Any

import torch

import lenbench

PACKAGE = Path(lenbench.__file__).resolve().parent
#: The shared core every cell depends on (files relative to the package).
CORE = ("model.py", "train.py", "evaluate.py", "engine.py")
#: Modules never followed or included (see the module docstring for why).
EXCLUDED = {
    "__init__.py", "suite.py", "registry.py", "device.py", "atomic.py", "executors.py", "ray_executor.py",
    "cli.py", "results.py", "plots.py", "compare.py", "fingerprint.py", "memory.py",
    "encodings/__init__.py", "tasks/__init__.py",
}
#: engine.py is fingerprinted up to this line: the driver below it only reads and writes files.
ENGINE_DRIVER_MARKER = "# --- the driver:"
DTYPE = "float32"


def python_version() -> str:
    return platform.python_version()


def _module_file(module: str) -> str | None:
    """'lenbench.encodings.rope' → 'encodings/rope.py' when that file exists in the package."""
    if not module.startswith("lenbench."):
        return None
    rel = module.removeprefix("lenbench.").replace(".", "/")
    for candidate in (f"{rel}.py", f"{rel}/__init__.py"):
        if (PACKAGE / candidate).is_file():
            return candidate
    return None


def _source(rel: str) -> bytes:
    data = (PACKAGE / rel).read_bytes()
    if rel == "engine.py":
        text = data.decode()
        cut = text.find(ENGINE_DRIVER_MARKER)
        data = (text[:cut] if cut >= 0 else text).encode()
    return data


def _imports(rel: str) -> frozenset[str]:
    """Package files imported by `rel` (`from lenbench.x import y` and `from lenbench.x.y import z`)."""
    return _parsed_imports(_source(rel))


@functools.lru_cache(maxsize=256)
def _parsed_imports(source: bytes) -> frozenset[str]:
    """Parsed once per distinct source text (an edited file is parsed again)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            path = _module_file(name)
            if path is not None and path not in EXCLUDED:
                found.add(path)
    return frozenset(found)


def closure(roots: list[str]) -> list[str]:
    """`roots` and every package file they import, transitively (minus `EXCLUDED`), sorted."""
    seen: set[str] = set()
    todo = [r for r in roots if r not in EXCLUDED]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        todo += [m for m in _imports(rel) if m not in seen]
    return sorted(seen)


def _class_file(cls: type) -> str:
    return str(Path(cls.__module__.replace(".", "/") + ".py").relative_to("lenbench"))


def encoding_files(name: str, params: dict) -> list[str]:
    """Source files of encoding `name` (with `params`; follows a wrapped `base` encoding)."""
    from lenbench.encodings import ENCODINGS

    roots = [_class_file(ENCODINGS.get(name))]
    inner = params.get("base")
    if isinstance(inner, str) and inner in ENCODINGS and inner != name:
        roots += encoding_files(inner, params.get("base_params") or {})
    return closure(roots)


def task_files(name: str) -> list[str]:
    from lenbench.tasks import TASKS

    return closure([_class_file(TASKS.get(name))])


def source_files(cell) -> list[str]:
    """Every source file a cell's result depends on (see the module docstring)."""
    return sorted({*closure(list(CORE)), *encoding_files(cell.encoding.name, cell.encoding.params),
                   *task_files(cell.task.name)})


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
