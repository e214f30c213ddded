"""Tasks: one module per task, all registered in `TASKS`."""

from lenbench.tasks.base import TASKS, Batch, Task, register_task

__all__ = ["TASKS", "Batch", "Task", "register_task"]
