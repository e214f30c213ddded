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

import difflib
import inspect
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

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


class UnknownNameError(KeyError):
    """An unknown registry name; `str()` gives the one-line message (KeyError would quote it)."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    """A name → object mapping that refuses duplicates and suggests the closest known name."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, *, set_name: bool = False) -> Callable[[T], T]:
        """Decorator registering an object under `name`; `set_name` also sets its `name` attribute."""

        def decorator(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            if set_name:
                obj.name = name  # type: ignore[attr-defined]
            self._items[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            known = sorted(self._items)
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}{did_you_mean(name, known)} (known: {', '.join(known)})"
            ) from None

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def items(self):
        return self._items.items()
