"""Plugins: encodings and tasks from outside lenbench, on the board without forking it.

Three ways in, one mechanism (`load_plugins`, then the usual `register_encoding` /
`register_task` decorators inside the plugin):

- a suite's ``plugins:`` list: importable module names and/or paths to ``.py`` files, relative to
  the suite file (`lenbench.config.parse`);
- ``--plugin MODULE_OR_PATH`` (repeatable) on ``lenbench run``, ``lenbench list`` and
  ``lenbench report``, and ``--lenbench-plugin`` on ``pytest bench`` (relative to the current
  directory);
- installed distributions declaring entry points in the groups ``lenbench.encodings`` and
  ``lenbench.tasks`` (the entry point's name is the encoding's / task's name, its value
  ``module:Class`` or ``module``), loaded on demand: the first time the name is asked for, or
  when everything is listed. A broken one is one line naming it and its error
  (`PluginError`); it never stops the built-ins from listing.

Names: a plugin may not take the name of a built-in (or of another plugin's entry): that is refused
in one line, which suggests a prefixed name (``mype-alibi``); an entry point so named is refused the
same way when it is loaded (`lenbench list` prints the line; a run asking for the name gets the
built-in, which never loads that entry point). A name becomes a file name in reports
(``encodings/<name>.png``), so it must follow `lenbench.names.SAFE_NAME` (letters, digits and
``._+@-``, starting with a letter, a digit or ``_``, at most 128 characters): ``../../x`` or ``a/b``
is refused in one line when it is registered, and the plugin does not load.
Each registry records who registered each name (`lenbench.registry.Registry.origin`): a class of
lenbench's own modules is a built-in even when a plugin's import is what first imported it, so a
reload drops only the plugin's own names.

Workers: every executor's worker entry (`lenbench.run.executors.base.compute_cell`) calls `ensure`
with the job's `Plugin` list (what the driver loaded, `loaded()`) before it builds the cell. A file
plugin travels as its source bytes, so no worker needs the file (Ray nodes need no shared
filesystem); a module plugin is imported by name, so it must be importable there (installed, or
on the ``PYTHONPATH`` the Ray executor forwards).

Fingerprint: a plugin's source is part of every cell that uses one of its classes
(`lenbench.run.fingerprint`): a file plugin's bytes *as loaded* (so the hash always describes
the code that ran), or, for a module of an installed package, every module of that package its
module imports (`lenbench.run.closure`), plus the lenbench modules they import (a subclass of
`ALiBi` depends on ``encodings/alibi.py``). Keys read ``plugin:mype.py`` or
``plugin:mypkg/encodings.py``. A file plugin whose file changed since it was loaded is loaded
again by the next `ensure` / `load_plugins` (its old names are replaced), so one long-lived
process never runs stale plugin code under a new fingerprint.

    >>> load_plugins(["examples/plugins/alibi_steep.py"])       # doctest: +SKIP
    [Plugin(spec='examples/plugins/alibi_steep.py', kind='file', ...)]
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

#: Prefix of the module name a file plugin runs as (``mype.py`` → ``lenbench_plugin_mype``).
FILE_MODULE_PREFIX = "lenbench_plugin_"
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class PluginError(ValueError):
    """A plugin that cannot be loaded or registers a forbidden name; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Plugin:
    """One loaded plugin, as jobs carry it to workers (picklable; no open files).

    Args:
        spec: what the user gave (``mype.py``, ``mypkg.encodings``) or, for an entry point,
            ``group:name``.
        kind: ``file``, ``module`` or ``entry point``.
        module: the module name it runs as (a file plugin: ``lenbench_plugin_<stem>``).
        path: a file plugin's absolute path (messages; workers never read it).
        source: a file plugin's source bytes as loaded (what workers run and the fingerprint hashes).
    """

    spec: str
    kind: str
    module: str
    path: str = ""
    source: bytes = dataclasses.field(default=b"", repr=False)

    @property
    def label(self) -> str:
        """How messages and `lenbench list` name it: the file's name, the module, or the entry point."""
        if self.kind == "file":
            return Path(self.path).name
        return self.spec if self.kind == "module" else f"entry point {self.spec}"


#: Every registry made in this process (`track`): a reloaded plugin's names go from all of them.
#: Which plugin registered which name is each registry's own record (`Registry.origin`).
_REGISTRIES: list[Any] = []
#: Plugins loaded in this process, in load order: module name → Plugin.
_LOADED: dict[str, Plugin] = {}
#: What each loaded plugin changed in lenbench or torch while it was imported, by module name
#: (`lenbench.plugin_changes`); a plugin that changed something is in every cell's fingerprint.
_CHANGES: dict[str, tuple[str, ...]] = {}
#: The plugin being imported right now (registrations inside it record it as their origin).
_CURRENT: contextvars.ContextVar[Plugin | None] = contextvars.ContextVar("lenbench_plugin", default=None)


def track(registry: Any) -> None:
    """Called by each `lenbench.registry.Registry` when it is made (registry imports this module,
    never the other way)."""
    _REGISTRIES.append(registry)


def current() -> Plugin | None:
    """The plugin whose import is running now, None for lenbench's own code."""
    return _CURRENT.get()


def loaded() -> tuple[Plugin, ...]:
    """Every plugin this process loaded, in load order (what a job hands its worker)."""
    return tuple(_LOADED.values())


def changes(plugin: Plugin) -> tuple[str, ...]:
    """The lenbench / torch attributes `plugin` rebound, deleted or added when it was imported."""
    return _CHANGES.get(plugin.module, ())


def reaches_every_cell(plugin: Plugin) -> bool:
    """Whether `plugin`'s sources belong in every cell's fingerprint (`lenbench.run.fingerprint`), not
    only in those of the classes it registers: it changed lenbench or torch when imported, or it
    registered nothing (then changing something is all it can be for)."""
    return bool(changes(plugin)) or not any(registry.names_of(plugin) for registry in _REGISTRIES)


@contextlib.contextmanager
def _loading(plugin: Plugin) -> Iterator[None]:
    from lenbench.plugin_changes import changed_since, snapshot

    token = _CURRENT.set(plugin)
    before = snapshot()
    try:
        yield
    finally:
        _CURRENT.reset(token)
        _CHANGES[plugin.module] = changed_since(before)


def _one_line(err: BaseException) -> str:
    if isinstance(err, SystemExit):  # would end the whole command silently, with the plugin's status
        code = "" if err.code is None else repr(err.code)
        return f"it called sys.exit({code}) while being imported; a plugin must not exit (raise an exception instead)"
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


#: What importing a user's plugin may raise that becomes a `PluginError` (Ctrl-C stays an interrupt).
_PLUGIN_FAILURES = (Exception, SystemExit)


# --- loading ------------------------------------------------------------------------------------


def load_plugins(specs: Iterable[str], base_dir: str | Path | None = None) -> list[Plugin]:
    """Import each plugin of `specs` (module names or ``.py`` paths, relative to `base_dir` or the
    current directory), once per process; returns them in order.

    Raises:
        PluginError: a file that does not exist, a module that cannot be imported, an error raised
            while importing it, or a name it registers that is taken — one line naming the plugin.
    """
    return [_load_spec(str(spec), Path(base_dir) if base_dir is not None else None) for spec in specs]


def _is_path(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def _load_spec(spec: str, base_dir: Path | None) -> Plugin:
    if not spec.strip():
        raise PluginError("a plugin entry is empty; give a module name (mypkg.encodings) or a path to a .py file")
    if _is_path(spec):
        path = Path(spec).expanduser()
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        path = path.resolve()
        if not path.is_file():
            raise PluginError(f"plugin {spec!r} not found: no file {path}; give a path to a .py file or an "
                              "importable module name")
        if path.suffix != ".py":
            raise PluginError(f"plugin {spec!r} is not a .py file; give a Python file or an importable module name")
        return _load_file(spec, path, path.read_bytes())
    if not _DOTTED.fullmatch(spec):
        raise PluginError(f"plugin {spec!r} is neither a module name (dotted identifiers) nor a path to a .py file")
    return _load_module(Plugin(spec=spec, kind="module", module=spec))


def _file_module_name(path: Path) -> str:
    return FILE_MODULE_PREFIX + re.sub(r"\W", "_", path.stem)


def _load_file(spec: str, path: Path, source: bytes) -> Plugin:
    """Run a file plugin's `source` as module ``lenbench_plugin_<stem>`` (again if it changed)."""
    module = _file_module_name(path)
    old = _LOADED.get(module)
    if old is not None:
        if old.kind == "file" and Path(old.path) != path and old.source != source:
            raise PluginError(f"two plugin files named {path.name!r}: {old.path} and {path}; rename one")
        if old.source == source:
            return old
        _forget(old)  # edited since it was loaded: its names are registered again from the new source
    plugin = Plugin(spec=spec, kind="file", module=module, path=str(path), source=source)
    _run_file(plugin)
    return plugin


def _run_file(plugin: Plugin) -> None:
    spec = importlib.util.spec_from_loader(plugin.module, loader=None, origin=plugin.path)
    mod = importlib.util.module_from_spec(spec)
    mod.__file__ = plugin.path
    sys.modules[plugin.module] = mod  # before running it: dataclasses and pickling look it up
    try:
        code = compile(plugin.source, plugin.path, "exec")
        with _loading(plugin):
            exec(code, mod.__dict__)  # noqa: S102  (a user's plugin, run like an import of it)
    except PluginError:
        _forget(plugin)
        raise
    except _PLUGIN_FAILURES as err:  # noqa: BLE001  (any error of a user's file: one line naming it)
        _forget(plugin)
        raise PluginError(f"plugin {plugin.label} failed to load: {_one_line(err)}") from err
    _LOADED[plugin.module] = plugin


def _load_module(plugin: Plugin) -> Plugin:
    if plugin.module in _LOADED:
        return _LOADED[plugin.module]
    try:
        with _loading(plugin):
            importlib.import_module(plugin.module)
    except PluginError:
        raise
    except ModuleNotFoundError as err:
        if err.name and plugin.module.startswith(err.name):
            raise PluginError(f"plugin {plugin.spec!r}: no module named {err.name!r}; install it, put it on PYTHONPATH, "
                              "or give a path to a .py file") from None
        raise PluginError(f"plugin {plugin.label} failed to load: {_one_line(err)}") from err
    except _PLUGIN_FAILURES as err:  # noqa: BLE001
        raise PluginError(f"plugin {plugin.label} failed to load: {_one_line(err)}") from err
    _LOADED[plugin.module] = plugin
    return plugin


def adopt_module(module: str) -> Plugin:
    """The plugin record of a module outside lenbench that registered something by a plain import
    (a user's package or script): recorded as loaded, so jobs carry it to workers, unless it is
    ``__main__`` (no worker can import a script by that name; run it as a file plugin instead)."""
    plugin = _LOADED.get(module)
    if plugin is not None:
        return plugin
    plugin = Plugin(spec=module, kind="module", module=module)
    if module != "__main__":
        _LOADED[module] = plugin
    return plugin


def release(plugin: Plugin) -> None:
    """Stop carrying an adopted module plugin to workers once it has no registered name left."""
    if plugin.kind == "module" and not any(registry.names_of(plugin) for registry in _REGISTRIES):
        _LOADED.pop(plugin.module, None)


def _forget(plugin: Plugin) -> None:
    """Drop a plugin and every name it registered (before loading a changed file again)."""
    _LOADED.pop(plugin.module, None)
    _CHANGES.pop(plugin.module, None)
    sys.modules.pop(plugin.module, None)
    for registry in _REGISTRIES:
        registry.forget(plugin)


#: Plugins a worker could not load (`ensure`), with the one-line reason: named by `hint`.
_FAILED: dict[str, str] = {}


def ensure(plugins: Iterable[Plugin]) -> None:
    """Load `plugins` here as they were loaded where the job was made (the workers' first step):
    file plugins from their shipped source, modules and entry points by name. Idempotent.

    A plugin that fails to load here does not fail a cell that does not need it: the reason is
    kept, and the unknown-name error of a cell that does need it names it (`hint`).
    """
    for plugin in plugins:
        try:
            if plugin.kind == "file":
                _load_file(plugin.spec, Path(plugin.path), plugin.source)
            elif plugin.kind == "module":
                _load_module(plugin)
            else:
                group, _, name = plugin.spec.partition(":")
                load_entry_point(group, name)
            _FAILED.pop(plugin.label, None)
        except PluginError as err:
            _FAILED[plugin.label] = str(err)


def failed_here() -> dict[str, str]:
    """The plugins `ensure` could not load in this process: label → the one-line reason."""
    return dict(_FAILED)


def refresh() -> None:
    """Load again every file plugin whose file changed on disk since it was loaded (files gone
    are kept as loaded)."""
    for plugin in loaded():
        if plugin.kind == "file" and Path(plugin.path).is_file():
            source = Path(plugin.path).read_bytes()
            if source != plugin.source:
                _load_file(plugin.spec, Path(plugin.path), source)


def import_roots() -> list[str]:
    """The sys.path directories the loaded module and entry-point plugins were imported from (what
    a worker of another process tree needs on its PYTHONPATH to import them by name)."""
    roots: dict[str, None] = {}
    for plugin in loaded():
        if plugin.kind == "file" or plugin.module == "__main__":
            continue
        top = sys.modules.get(plugin.module.split(".")[0])
        search = list(getattr(top, "__path__", []) or [])
        file = getattr(top, "__file__", None)
        where = Path(search[0]).parent if search else Path(file).parent if file else None
        if where is not None:
            roots[str(where.resolve())] = None
    return list(roots)


# --- entry points -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _entry_points(group: str, path: tuple[str, ...]) -> tuple[importlib.metadata.EntryPoint, ...]:
    """The installed entry points of `group` (cached per `sys.path`)."""
    return tuple(importlib.metadata.entry_points(group=group))


def entry_points(group: str) -> dict[str, importlib.metadata.EntryPoint]:
    """Entry point name → entry point, of every installed distribution (first one wins)."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in _entry_points(group, tuple(sys.path)):
        found.setdefault(ep.name, ep)
    return found


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f" (distribution {dist.name} {dist.version})" if dist is not None else ""


def load_entry_point(group: str, name: str) -> bool:
    """Load the entry point `name` of `group` and register what it names under `name`; False if
    no distribution declares it. A class not registered by its own module is registered here.

    Raises:
        PluginError: it failed to load, registers nothing under `name`, or `name` is already a
            built-in's or another plugin's (the refusal a file plugin taking it gets; the built-in
            keeps the name).
    """
    ep = entry_points(group).get(name)
    if ep is None:
        return False
    registry = next(r for r in _REGISTRIES if r.entry_point_group == group)
    plugin = Plugin(spec=f"{group}:{name}", kind="entry point", module=ep.module)
    if name in registry.names():
        taken = registry.origin(name)
        if taken is not None and (taken == plugin or taken.module == ep.module):
            return True  # this entry point (or its module, imported before) registered it
        registry.refuse(name, plugin)  # a built-in's or another plugin's name, as for a file plugin
    try:
        with _loading(plugin):
            obj = ep.load()
            if name not in registry.names() and isinstance(obj, type):
                registry.register(name, set_name=True, origin=plugin)(obj)
    except PluginError:
        raise
    except _PLUGIN_FAILURES as err:  # noqa: BLE001
        raise PluginError(f"entry point {group}:{name} = {ep.value}{_distribution(ep)} failed to load: "
                          f"{_one_line(err)}") from err
    if name not in registry.names():
        raise PluginError(f"entry point {group}:{name} = {ep.value}{_distribution(ep)} registers no "
                          f"{registry.kind} named {name!r}; point it at the class (module:Class)")
    _LOADED.setdefault(f"{group}:{name}", plugin)
    return True


def load_all_entry_points(group: str) -> list[str]:
    """Load every entry point of `group`; returns one line per broken one (the others load)."""
    broken = []
    for name in entry_points(group):
        try:
            load_entry_point(group, name)
        except PluginError as err:
            broken.append(str(err))
    return broken


def hint() -> str:
    """The plugins clause of an unknown-name error: what is loaded, and how to load more."""
    names = [p.label for p in loaded()]
    failed = "".join(f"; not loaded here: {reason}" for reason in _FAILED.values())
    if names or failed:
        return f"plugins loaded: {', '.join(names) or 'none'}{failed}"
    return ("no plugins loaded: an encoding or task from outside lenbench comes in with the suite's `plugins:`, "
            "--plugin MODULE_OR_PATH, or an entry point")


def origin_label(origin: Any) -> str:
    """How `lenbench list` names where an entry came from: "" for lenbench itself."""
    return "" if origin is None else f"plugin: {origin.label}" + (f" ({origin.path})" if origin.path else "")
