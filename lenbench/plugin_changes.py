"""What a plugin changes in lenbench or torch when it is imported, found by comparing before and after.

Why: a plugin is fingerprinted with the cells of the classes it registers, so editing it recomputes
exactly those cells. A plugin that *changes* lenbench instead (rebinds `Transformer._init_weights`,
replaces `torch.nn.init.normal_`) moves the numbers of every cell, including built-in ones, while
registering nothing. `lenbench.plugins` takes a `snapshot` before running a plugin and asks
`changed_since` afterwards; a plugin that changed anything (or registered nothing at all) joins
every cell's fingerprint (`lenbench.run.fingerprint`).

What is compared: every attribute of every imported ``lenbench`` and ``torch.nn`` module and of
``torch`` itself, and every attribute of the classes those modules define, by identity. An
attribute rebound or deleted is a change; one added to a class is a change (it may shadow an
inherited method); a submodule added to its package by a plain import is not. Not seen: changes a
plugin makes later, when its classes run (a registered encoding that rebinds a lenbench function
in its constructor); those are outside what any fingerprint can know, and docs/add-encoding.md says so.
"""

from __future__ import annotations

import dataclasses
import sys
import types

#: Module name prefixes whose state a plugin must not change unseen (and ``torch`` itself).
WATCHED = ("lenbench", "torch.nn")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The watched state at one moment.

    Args:
        values: ``module.attr`` and ``module.Class.member`` → the value (held, so identities compare).
        modules: the watched modules imported then.
        classes: the ``module.Class`` keys among `values`.
    """

    values: dict[str, object]
    modules: frozenset[str]
    classes: frozenset[str]


def _watched(name: str) -> bool:
    return name == "torch" or any(name == p or name.startswith(p + ".") for p in WATCHED)


def snapshot() -> Snapshot:
    """The watched state now."""
    values: dict[str, object] = {}
    modules, classes = set(), set()
    for name, module in list(sys.modules.items()):
        if module is None or not _watched(name):
            continue
        modules.add(name)
        for attr, value in list(vars(module).items()):
            values[f"{name}.{attr}"] = value
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                classes.add(f"{name}.{attr}")
                for member, inner in list(vars(value).items()):
                    values[f"{name}.{attr}.{member}"] = inner
    return Snapshot(values, frozenset(modules), frozenset(classes))


def changed_since(before: Snapshot) -> tuple[str, ...]:
    """The watched attributes rebound, deleted or added since `before`, sorted. Not a change: a
    module imported for the first time (and the classes it defines), a submodule added to its package
    or imported again."""
    after = snapshot().values
    changed = {key for key, value in before.values.items()
               if key not in after or (after[key] is not value and not _both_modules(value, after[key]))}
    for key, value in after.items():
        if key in before.values or isinstance(value, types.ModuleType):
            continue
        owner = key.rsplit(".", 1)[0]
        if owner in before.classes or owner in before.modules:
            changed.add(key)
    return tuple(sorted(changed))


def _both_modules(old: object, new: object) -> bool:
    return isinstance(old, types.ModuleType) and isinstance(new, types.ModuleType)
