"""Plain-dict registries with "did you mean …?" errors for unknown names.

Example:
    >>> TASKS = Registry("task")
    >>> @TASKS.register("copy")
    ... class Copy: ...
    >>> TASKS.get("cpy")
    Traceback (most recent call last):
    ...
    KeyError: "unknown task 'cpy'; did you mean 'copy'? (known: copy)"
"""

from __future__ import annotations

import ast
import difflib
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from lenbench import names, plugins

T = TypeVar("T")


def did_you_mean(name: str, choices: list[str] | tuple[str, ...]) -> str:
    """Return `"; did you mean 'x'?"` for the closest of `choices`, or an empty string."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_keywords(what: str, fn: Callable, params: dict, skip: tuple[str, ...] = ()) -> None:
    """Raise a one-line ValueError if `params` holds a keyword that `fn` does not accept.

    Example message: "encoding 'rope' has no parameter 'thta'; did you mean 'theta'? (parameters: theta, layout)".
    """
    sig = inspect.signature(fn).parameters
    accepted = [n for n, p in sig.items() if n not in ("self", *skip) and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for key in params:
        if key not in accepted:
            raise ValueError(
                f"{what} has no parameter {key!r}{did_you_mean(key, accepted)} "
                f"(parameters: {', '.join(accepted) or 'none'})"
            )


def import_members(package: str, path: Iterable[str], skip: Collection[str] = ()) -> list[str]:
    """Import every public module of `package` (its `__path__` is `path`) but those in `skip`, by
    name: a package whose modules register themselves on import (the encodings, the tasks) needs no
    list of them, so a new encoding or task is one new file. Returns the module names, in import order.
    """
    names = sorted(info.name for info in pkgutil.iter_modules(list(path))
                   if not info.name.startswith("_") and info.name not in skip)
    for name in names:
        importlib.import_module(f"{package}.{name}")
    return names


def module_declarations(directory: Path, name: str) -> Iterator[tuple[Path, ast.expr]]:
    """(file, value) of every module-level ``name = value`` in the public modules of `directory`, by
    file name, read from the source without importing anything: how a plot module's figures and an
    executor module's names are found without importing matplotlib or Ray."""
    for path in sorted(directory.glob("[!_]*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                yield path, node.value


class UnknownNameError(KeyError):
    """An unknown registry name; `str()` gives the one-line message (KeyError would quote it)."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    """A name → object mapping that refuses duplicates and suggests the closest known name.

    With `entry_point_group` (the encoding and task registries), names also come from plugins
    (`lenbench.plugins`): a name not registered yet is looked up among installed entry points of
    that group, loaded on demand. Each entry remembers its origin (None: lenbench itself, else the
    `lenbench.plugins.Plugin`); this is the one record of who registered what, which `lenbench
    list` shows and a plugin's reload clears. A plugin may not take a name already registered,
    and every name follows `lenbench.names.SAFE_NAME` (names become file names in reports).
    """

    def __init__(self, kind: str, entry_point_group: str | None = None) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._items: dict[str, T] = {}
        self._origins: dict[str, object] = {}
        plugins.track(self)

    def register(self, name: str, *, set_name: bool = False, origin: object = None) -> Callable[[T], T]:
        """Decorator registering an object under `name`; `set_name` also sets its `name` attribute.

        `origin` names the plugin on whose behalf lenbench's own code registers an object (an
        entry point naming a bare class); left out, the origin follows from the object (`_origin_of`).
        """

        def decorator(obj: T) -> T:
            by = origin if origin is not None else self._origin_of(obj)
            if not names.is_safe_name(name):
                self._refuse_unsafe(name, by)
            if name in self._items:
                self.refuse(name, by)
            if set_name:
                obj.name = name  # type: ignore[attr-defined]
            self._items[name] = obj
            self._origins[name] = by
            return obj

        return decorator

    def _origin_of(self, obj: object):
        """The plugin registering `obj`: None for an object defined in lenbench's own modules,
        whoever's import ran them (a plugin imported first imports the built-ins, which stay
        lenbench's); else the plugin being loaded; else, for an object of a module outside
        lenbench registered by plain import (a user's script or package), a module plugin of that
        module, so jobs carry it to workers."""
        module = getattr(obj, "__module__", "") or ""
        if module.split(".")[0] == "lenbench":
            return None
        plugin = plugins.current()
        if plugin is None and self.entry_point_group:
            plugin = plugins.adopt_module(module)
        return plugin

    def refuse(self, name: str, origin) -> None:
        """Raise the one-line error for `origin` (a plugin; None: lenbench itself) taking `name`,
        which is already registered: a `lenbench.plugins.PluginError` naming who has it."""
        if origin is None:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        taken = self._origins.get(name)
        by = f"the built-in lenbench {self.kind}" if taken is None else f"{self.kind} {name!r} of plugin {taken.label}"
        raise plugins.PluginError(f"plugin {origin.label} registers {self.kind} {name!r}, which is already {by}; "
                          f"give yours another name (e.g. '{origin.module.rsplit('.', 1)[-1].removeprefix('lenbench_plugin_')}-{name}')")

    def _refuse_unsafe(self, name: object, origin) -> None:
        what = f"{self.kind} {name!r}, which is not a safe name ({names.RULE}): it becomes a file name in reports"
        if origin is None:
            raise ValueError(f"lenbench registers {what}")
        raise plugins.PluginError(f"plugin {origin.label} registers {what}; rename it "
                                  f"(e.g. {names.safe_name(str(name).rsplit('/', 1)[-1])!r})")

    def forget(self, origin: object) -> None:
        """Remove every name `origin` (a plugin) registered."""
        for name in self.names_of(origin):
            del self._items[name]
            del self._origins[name]

    def unregister(self, name: str) -> None:
        """Remove `name` (tests of temporary entries; a plugin's own names go with `forget`)."""
        self._items.pop(name, None)
        origin = self._origins.pop(name, None)
        if origin is not None:
            plugins.release(origin)

    def names_of(self, origin: object) -> list[str]:
        """The names `origin` (a plugin) registered here."""
        return [n for n, o in self._origins.items() if o is not None and o == origin]

    def _on_demand(self, name: str) -> bool:
        """Whether `name` is registered, loading an installed entry point of that name if needed."""
        if name in self._items:
            return True
        if self.entry_point_group and isinstance(name, str):
            return plugins.load_entry_point(self.entry_point_group, name) and name in self._items
        return False

    def get(self, name: str) -> T:
        if self._on_demand(name):
            return self._items[name]
        known = sorted({*self._items, *self._entry_point_names()})
        loaded = f"; {plugins.hint()}" if self.entry_point_group else ""
        raise UnknownNameError(
            f"unknown {self.kind} {name!r}{did_you_mean(str(name), known)} (known: {', '.join(known)}{loaded})"
        )

    def _entry_point_names(self) -> list[str]:
        if not self.entry_point_group:
            return []
        return list(plugins.entry_points(self.entry_point_group))

    def origin(self, name: str):
        """The plugin that registered `name` (`lenbench.plugins.Plugin`), None for a built-in."""
        self.get(name)
        return self._origins.get(name)

    def builtin_names(self) -> list[str]:
        """Names registered by lenbench itself, in registration order."""
        return [n for n in self._items if self._origins.get(n) is None]

    def load_all(self) -> list[str]:
        """Load every installed entry point of this registry's group; one line per broken one."""
        if not self.entry_point_group:
            return []
        return plugins.load_all_entry_points(self.entry_point_group)

    def names(self) -> list[str]:
        """Names registered in this process, in registration order, without loading entry points."""
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._on_demand(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def items(self):
        return self._items.items()
