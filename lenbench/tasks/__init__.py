"""Tasks: one module per task, all registered in `TASKS`."""

from lenbench.tasks import addition, copying, count, lm, parity, passkey, recall, reversal, sorting  # noqa: F401 (register)
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
