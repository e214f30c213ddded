"""The errors of a suite file and the field checks every section parser shares.

`parse` (the suite), `kernels` (its `kernels:` section) and `resources` (its `resources:` section)
validate their mappings with these, so each error is one line naming the file, the key and, for
an unknown name, the closest valid one:

- `check_keys`: a mapping whose keys are fields of a dataclass.
- `typed`: a flat dataclass built from a mapping, each value checked against its default's type
  (float fields accept ints and numeric strings, tuple fields lists).
- `registered`: a name that must be in a registry (did-you-mean on a miss).
- `numeric_string`: PyYAML reads ``1e-3`` and ``1.0e9`` as strings; this makes them floats.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lenbench.registry import did_you_mean


class SuiteError(ValueError):
    """A malformed suite file; the message names the file and the offending key."""


class SuiteWarning(UserWarning):
    """A suite that loads but holds something odd (a duplicate grid entry, dropped)."""


def check_keys(data: Any, cls: type, where: str, source: str) -> dict:
    """`data` itself, once it is a mapping whose keys are all fields of `cls` (`source` is never a key)."""
    if not isinstance(data, dict):
        raise SuiteError(f"{source}: {where} must be a mapping, got {type(data).__name__}")
    valid = [f.name for f in dataclasses.fields(cls) if f.name != "source"]
    for key in data:
        if key not in valid:
            raise SuiteError(f"{source}: unknown key {where}.{key}{did_you_mean(str(key), valid)} (valid: {', '.join(valid)})")
    return data


def typed(cls: type, data: dict, where: str, source: str):
    """Build a flat dataclass, checking each value against its default's type."""
    check_keys(data, cls, where, source)
    defaults = cls()
    out = {}
    for key, value in data.items():
        want = type(getattr(defaults, key))
        if want is tuple:
            value = tuple(value) if isinstance(value, list) else value
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if want is float and isinstance(value, str):
            value = numeric_string(value)
        if not isinstance(value, want) or isinstance(value, bool) != (want is bool):
            raise SuiteError(f"{source}: {where}.{key} must be {want.__name__}, got {value!r}")
        out[key] = value
    return cls(**out)


def registered(kind: str, name: Any, registry, where: str, source: str) -> str:
    """`name`, once it is registered in `registry` (`kind` names the registry in the error)."""
    if name not in registry:
        hint = ""
        if getattr(registry, "entry_point_group", None):  # encodings and tasks come from plugins too
            from lenbench.plugins import hint as plugins_hint

            hint = f"; {plugins_hint()}"
        raise SuiteError(f"{source}: {where}: unknown {kind} {name!r}{did_you_mean(str(name), registry.names())} "
                         f"(known: {', '.join(sorted(registry.names()))}{hint})")
    return name


def numeric_string(value: str) -> float | str:
    """`float(value)` for a numeric string (PyYAML reads ``1e-3`` and ``1.0e9`` as strings), else `value`."""
    try:
        return float(value)
    except ValueError:
        return value
