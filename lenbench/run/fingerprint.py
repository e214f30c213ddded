"""What a cell's result depends on, as a fingerprint: a cached result is valid only while it matches.

A cell's id hashes its config (suite YAML → `Cell.config`). Its *result* also depends on code and
environment, which the id does not see; the fingerprint covers them:

- **sources** (sha256 of each file, relative to the `lenbench` package): the import closure of the
  cell's compute path (`lenbench.run.closure.import_closure`: every `lenbench` import anywhere in a
  file, transitively, read from the source), from these roots:
    - `run/cell.py` (the compute path of one cell, whole), `model.py`, `train.py`, `evaluate.py`;
    - the cell's encoding module, and the wrapped encoding's module for an encoding that wraps
      another (`randomized`'s `base` parameter);
    - the cell's task module.
  Nothing reached is left out by name: `encodings/rope_scaling.py` (`factor_at` computes the RoPE
  factor), `registry.py`, `device.py`, `run/memory.py`, this module and the others the compute path
  imports are all hashed. What it does not import cannot change a result and is not hashed: the
  driver (`run/driver.py`), the results-directory layout (`run/store.py`), the executors
  (`run/executors/`), the report and the command line. The one structural exception is how a
  package's `__init__.py` is treated: it imports every encoding / task to register it, so it is
  not followed into its members (that would make every cell depend on every encoding); a name
  imported from a package is followed to the module that defines it, and the `__init__` itself is
  hashed iff it holds code of its own (the top package does: `__version__`, which rows record).
  Code loaded by file path is not an import: tests/run/test_trust_fingerprint.py keeps every
  path load out of the closure.
  `tests/run/test_trust_fingerprint.py` states today's closure of a cell in full.
- **plugin sources** (`lenbench.plugins`): for an encoding or task from outside lenbench, its file
  as loaded (``plugin:mype.py``) or every module of its package that its module imports
  (``plugin:mypkg/enc.py``), and the lenbench modules those import join the closure's roots. A
  plugin that changed lenbench or torch when it was imported (`lenbench.plugin_changes`: it
  rebinds `Transformer._init_weights`, say) or that registers nothing is in *every* cell's
  fingerprint, built-in cells included.
- **environment**: torch version, device type, dtype, the intra-op thread count and the CPU
  numeric mode (`lenbench.numerics`: pinned code paths, or the CPU's own choice).

`code_fingerprint` is the digest of both; `data_fingerprint` identifies the task's data beyond its
parameters (the `lm` corpus sha256; "" for synthetic tasks). Both are stored in every row, in the
cell file and in each checkpoint's metadata; the driver recomputes a cell when either changed and
names the reason (`stale_reasons`). Editing `encodings/alibi.py` thus reruns exactly the cells
whose encoding is `alibi` (or wraps it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import sys
from pathlib import Path
from typing import Any

import torch

import lenbench
from lenbench.run.closure import import_closure, imports_outside, resolve_imports

PACKAGE = Path(lenbench.__file__).resolve().parent
#: The roots of every cell's compute path (files relative to the package); the cell adds its own.
CORE = ("run/cell.py", "model.py", "train.py", "evaluate.py")
DTYPE = "float32"


def python_version() -> str:
    return platform.python_version()


def _source(rel: str) -> bytes:
    return (PACKAGE / rel).read_bytes()


def closure(roots: list[str]) -> list[str]:
    """`roots` and every package file they import, transitively (`lenbench.run.closure`), sorted."""
    return import_closure(roots, PACKAGE, read=_source)


def _is_builtin(cls: type) -> bool:
    return cls.__module__ == "lenbench" or cls.__module__.startswith("lenbench.")


def _class_file(cls: type) -> str:
    return str(Path(cls.__module__.replace(".", "/") + ".py").relative_to("lenbench"))


def _class_roots(cls: type, plugin_files: dict[str, bytes]) -> list[str]:
    """The package files a class's result depends on: its module, or for a plugin class
    (`lenbench.plugins.class_sources`) the lenbench modules its sources import, adding the
    plugin's own sources to `plugin_files`."""
    if _is_builtin(cls):
        return [_class_file(cls)]
    sources = class_sources(cls)
    plugin_files.update(sources.files)
    return resolve_imports(sources.lenbench_imports, PACKAGE, read=_source)


# --- plugin sources ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Sources:
    """What a plugin class's result depends on.

    Args:
        files: fingerprint key (``plugin:mype.py``, ``plugin:mypkg/enc.py``) → source bytes.
        lenbench_imports: (module, names) of every lenbench import in those files.
    """

    files: dict[str, bytes]
    lenbench_imports: list[tuple[str, tuple[str, ...]]]


def class_sources(cls: type) -> Sources:
    """The plugin sources of class `cls` (defined outside lenbench): see the module docstring."""
    from lenbench import plugins

    plugin = next((p for p in plugins.loaded() if p.module == cls.__module__), None)
    return module_sources(cls.__module__, plugin, what=cls.__qualname__)


def module_sources(module_name: str, plugin=None, what: str = "") -> Sources:
    """The sources of module `module_name` outside lenbench: a file plugin's bytes as loaded
    (`plugin`, a `lenbench.plugins.Plugin` of kind file), else the module's file and every module
    of its package it imports."""
    from lenbench import plugins

    if plugin is not None and plugin.kind == "file":
        rel = Path(plugin.path).name
        return Sources({f"plugin:{rel}": plugin.source},
                       imports_outside([rel], Path(plugin.path).parent, lambda _: plugin.source, name=module_name))
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not file:
        raise plugins.PluginError(f"{what or module_name} comes from module {module_name!r}, which has no source file; "
                                  "a plugin must be a .py file or a module of an installed package")
    top = module_name.split(".")[0]
    top_module = sys.modules.get(top)
    search = list(getattr(top_module, "__path__", []) or [])
    if not search:  # a top-level single module
        path = Path(file)
        return Sources({f"plugin:{path.name}": path.read_bytes()},
                       imports_outside([path.name], path.parent, name=module_name))
    root = next(Path(p) for p in search if Path(file).resolve().is_relative_to(Path(p).resolve()))
    rel = str(Path(file).resolve().relative_to(root.resolve()))
    files = import_closure([rel], root, name=top)
    return Sources({f"plugin:{top}/{f}": (root / f).read_bytes() for f in files},
                   imports_outside(files, root, name=top))


def global_plugin_roots(plugin_files: dict[str, bytes]) -> list[str]:
    """The plugins every cell depends on (`lenbench.plugins.reaches_every_cell`: they change
    lenbench or torch when imported, or register nothing): their sources go into `plugin_files`,
    and the package files they import are returned as roots."""
    from lenbench import plugins

    roots: list[str] = []
    for plugin in plugins.loaded():
        if plugin.module == "__main__" or not plugins.reaches_every_cell(plugin):
            continue
        sources = module_sources(plugin.module, plugin)
        plugin_files.update(sources.files)
        roots += resolve_imports(sources.lenbench_imports, PACKAGE, read=_source)
    return roots


def encoding_files(name: str, params: dict) -> list[str]:
    """Source files of encoding `name` (with `params`; follows a wrapped `base` encoding)."""
    plugin_files: dict[str, bytes] = {}
    return sorted([*closure(encoding_roots(name, params, plugin_files)), *plugin_files])


def encoding_roots(name: str, params: dict, plugin_files: dict[str, bytes] | None = None) -> list[str]:
    """The module of encoding `name`, and those of the encodings it wraps (`base`, transitively);
    a plugin encoding's sources go into `plugin_files` (key → bytes)."""
    from lenbench.encodings import ENCODINGS

    plugin_files = {} if plugin_files is None else plugin_files
    roots = _class_roots(ENCODINGS.get(name), plugin_files)
    inner = params.get("base")
    if isinstance(inner, str) and inner in ENCODINGS and inner != name:
        roots += encoding_roots(inner, params.get("base_params") or {}, plugin_files)
    return roots


def task_roots(name: str, plugin_files: dict[str, bytes] | None = None) -> list[str]:
    from lenbench.tasks import TASKS

    return _class_roots(TASKS.get(name), {} if plugin_files is None else plugin_files)


def cell_sources(cell) -> dict[str, str]:
    """Every source a cell's result depends on → its sha256 (16 hex): the import closure of its
    compute path (see the module docstring), and its plugins' sources (keys ``plugin:…``)."""
    plugin_files: dict[str, bytes] = {}
    roots = [*CORE, *encoding_roots(cell.encoding.name, cell.encoding.params, plugin_files),
             *task_roots(cell.task.name, plugin_files), *global_plugin_roots(plugin_files)]
    sources = {rel: file_sha(rel) for rel in closure(roots)}
    sources.update({key: _sha(data) for key, data in plugin_files.items()})
    return dict(sorted(sources.items()))


def source_files(cell) -> list[str]:
    """Every source file a cell's result depends on: the import closure of its compute path (see
    the module docstring), with plugin sources as ``plugin:…`` keys."""
    return list(cell_sources(cell))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def file_sha(rel: str) -> str:
    """sha256 (16 hex) of a package file's source as fingerprinted (read every time: edits count)."""
    return _sha(_source(rel))


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

    return Fingerprint(sources=cell_sources(cell), torch_version=str(torch.__version__),
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
