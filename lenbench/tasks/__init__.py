"""Tasks: one module per task, each registering itself in `TASKS` on import.

Every public module of this package is imported here (`lenbench.registry.import_members`), so a new
task is one new file; the classes below are re-exported for `from lenbench.tasks import CopyTask`.
"""

from lenbench.registry import import_members
from lenbench.tasks.addition import AdditionTask
from lenbench.tasks.base import TASKS, Batch, Task, build_task, register_task
from lenbench.tasks.copying import CopyTask
from lenbench.tasks.count import CountTask
from lenbench.tasks.lm import ByteLMTask
from lenbench.tasks.parity import ParityTask
from lenbench.tasks.passkey import PasskeyTask
from lenbench.tasks.recall import AssociativeRecallTask
from lenbench.tasks.reversal import ReverseTask
from lenbench.tasks.sorting import SortTask

__all__ = [
    "TASKS",
    "AdditionTask",
    "AssociativeRecallTask",
    "Batch",
    "ByteLMTask",
    "CopyTask",
    "CountTask",
    "ParityTask",
    "PasskeyTask",
    "ReverseTask",
    "SortTask",
    "Task",
    "build_task",
    "register_task",
]

import_members(__name__, __path__)
