"""Tasks: one module per task, all registered in `TASKS`."""

from lenbench.tasks.base import TASKS, Batch, Task, build_task, register_task

__all__ = ["TASKS", "Batch", "Task", "build_task", "register_task"]
