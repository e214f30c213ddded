"""Each built-in task's table order and chance level, declared by name, no torch: the report
orders boards and draws the chance line from these without building a task (building one imports
torch). `tests/test_task_display.py` holds them to the task registry. A task not named here (a
plugin's) sorts after the built-ins by name and has no chance line."""

from __future__ import annotations

from collections.abc import Iterable

#: The built-in tasks in registration order (`lenbench.tasks.TASKS.names()`): those `lenbench/tasks/__init__.py`
#: imports by name, then the other modules of the package by file name (`mqar`).
TASK_ORDER: tuple[str, ...] = ("addition", "copy", "count", "lm", "parity", "passkey", "recall", "reverse", "sort", "mqar")

#: Chance-level token accuracy of each built-in task at its default parameters (`Task.chance`);
#: tasks without one (lm) are left out.
CHANCE: dict[str, float] = {"addition": 0.1, "copy": 1.0 / 8, "count": 1.0 / 257, "parity": 0.5, "passkey": 0.1, "recall": 0.125,
                            "reverse": 1.0 / 8, "sort": 1.0 / 8, "mqar": 1.0 / 128}


#: The built-in negative controls (`Task.solvable_past_training` False): unsolvable past the
#: training length by construction, so an entry above the floor there reveals a leak.
NEGATIVE_CONTROLS: frozenset[str] = frozenset({"count"})


def is_negative_control(task: str) -> bool:
    """`task` is a built-in negative control (a plugin task never is, here)."""
    return task in NEGATIVE_CONTROLS


def task_order(tasks: Iterable[str]) -> list[str]:
    """`tasks`, deduplicated: the built-ins in `TASK_ORDER`, then any other by name."""
    return sorted(set(tasks), key=lambda t: (0, TASK_ORDER.index(t), "") if t in TASK_ORDER else (1, 0, t))


def task_chance(task: str) -> float | None:
    """The chance-level token accuracy of a built-in task at its default parameters, or None."""
    return CHANCE.get(task)
