"""A task's parameters, declared once: each built-in task class lists its keyword parameters in
`Task.PARAMS` (name → `Param`), its constructor validates each value through it (`Task.param`), and the
suite loader checks a suite's `params:` against the same declaration before any cell runs
(`check_task_params`), so a value out of range is one line at load instead of a failed cell per
encoding and seed.

A declaration states the value's type and range only; facts that need the task's data (an `lm`
corpus file that must exist and be UTF-8) stay with the constructor, which runs where the data is
(a Ray worker may see a corpus the head does not). How large a value may be is not declared per
parameter: the memory and time it implies (a vocabulary's embedding, a length's attention) are
estimated for the whole cell before it runs (`lenbench.run.estimate.check_suite_fits`).

    >>> Param(int, low=2).check("copy", "vocab", 0)
    Traceback (most recent call last):
    ...
    ValueError: task 'copy': parameter vocab must be an int >= 2, got 0
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lenbench.registry import check_keywords

#: Longest value shown in an error (a long list is cut with "…"): the error stays one short line.
SHOWN_CHARS = 60


@dataclass(frozen=True)
class Param:
    """The type and range of one task parameter.

    Args:
        kind: `int` (not a bool), `bool`, or `str` (also any `os.PathLike`, for a path).
        low: the smallest valid int (int parameters; None: any).
        choices: the valid strings of a `str` parameter, or the strings an int parameter also takes
            (recall's ``queries: all``); () for any string.
        optional: None is valid (the parameter's default derives it).
    """

    kind: type
    low: int | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False

    @property
    def valid(self) -> str:
        """The valid values in words, as errors and docs/suite-reference.md state them."""
        if self.kind is bool:
            return "true or false"
        if self.kind is int:
            words = "an int" if self.low is None else f"an int >= {self.low}"
            return words + "".join(f" or {c!r}" for c in self.choices)
        return f"one of {', '.join(self.choices)}" if self.choices else "a string"

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if isinstance(value, str) and value in self.choices:
            return True
        if self.kind is bool:
            return isinstance(value, bool)
        if self.kind is int:
            return isinstance(value, int) and not isinstance(value, bool) and (self.low is None or value >= self.low)
        return isinstance(value, (str, os.PathLike)) and not self.choices

    def check(self, task: str, name: str, value: Any) -> Any:
        """`value`, once valid; else a one-line ValueError naming the task, the parameter, the value
        and the valid range."""
        if not self.accepts(value):
            raise ValueError(f"task {task!r}: parameter {name} must be {self.valid}, got {shown(value)}")
        return value


def shown(value: Any) -> str:
    """`repr(value)`, cut to `SHOWN_CHARS` characters."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"


def check_task_params(name: str, cls: type, params: dict) -> None:
    """Check a suite's `params` of task `name` (class `cls`) without building it: every key a
    keyword of the constructor, every value valid for its declaration (`cls.PARAMS`; a plugin task
    that declares none is checked by its constructor when its cells run).

    Raises:
        ValueError: one line, e.g. "task 'copy': parameter vocab must be an int >= 2, got 0".
    """
    init: Callable = cls.__init__
    check_keywords(f"task {name!r}", init, params)
    declared = getattr(cls, "PARAMS", None)
    if declared is None:
        return
    for key, value in params.items():
        declared[key].check(name, key, value)
