"""Checks of an encoding's constructor parameters: one line naming the encoding, the parameter and the range.

Constructors call these on each parameter a suite can set, so a suite that sets one out of range (or two
that set the same thing) fails at load time (`lenbench.config.checks.probe_encoding`), before any cell runs.
"""
from __future__ import annotations

import math
from typing import Any


def number_param(encoding: str, param: str, value: Any, *, low: float = 0.0, strict: bool = True) -> float:
    """`value` as a float, when it is a finite number above `low` (or equal to it, unless `strict`).

    Numeric strings count as numbers (PyYAML reads ``1e4`` as a string). Constructors call this
    on each numeric parameter, so a suite that sets one out of range fails at load time
    (`lenbench.config.checks.probe_encoding`) with the encoding, the parameter and the range.

    Args:
        encoding: the encoding's name, for the message.
        param: the parameter's name.
        value: what was given.
        low: the bound below which values are invalid.
        strict: True for ``> low``, False for ``>= low``.

    Raises:
        ValueError: one line, e.g. "encoding 'rope': theta = 0 is out of range (valid: a finite number > 0)".
    """
    valid = f"a finite number {'>' if strict else '>='} {low:g}"
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < low or (strict and number == low):
        raise ValueError(f"encoding {encoding!r}: {param} = {value!r} is out of range (valid: {valid})")
    return number


def int_param(encoding: str, param: str, value: Any, *, low: int = 1) -> int:
    """`value` when it is an integer (not a bool) of at least `low`; see `number_param`.

    Raises:
        ValueError: one line, e.g. "encoding 'cope': npos_max = 1 is out of range (valid: an integer >= 2)".
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"encoding {encoding!r}: {param} = {value!r} is out of range (valid: an integer >= {low})")
    return value


def one_of(encoding: str, sets: str, **given: Any) -> None:
    """Refuse two parameters that set the same quantity, e.g. an absolute value and its length-relative form.

    Args:
        encoding: the encoding's name, for the message.
        sets: what each of them sets, e.g. "the initial threshold".
        given: the parameters by name; None means not given.

    Raises:
        ValueError: one line, e.g. "encoding 'fire': threshold = 512 and threshold_fraction = 0.25 both set
            the initial threshold; keep one".
    """
    named = [f"{param} = {value!r}" for param, value in given.items() if value is not None]
    if len(named) > 1:
        raise ValueError(f"encoding {encoding!r}: {' and '.join(named)} both set {sets}; keep one")
