"""lenbench.task_display declares what the task registry holds, so the report needs no torch."""

import pytest

from lenbench.task_display import CHANCE, NEGATIVE_CONTROLS, TASK_ORDER, task_chance, task_order
from lenbench.tasks import TASKS, build_task


def builtin_tasks() -> list[str]:
    return [n for n in TASKS.names() if type(build_task(n)).__module__.startswith("lenbench.tasks.")]


def test_the_order_is_the_registration_order_of_the_built_ins():
    assert TASK_ORDER == tuple(builtin_tasks())


@pytest.mark.parametrize("name", TASK_ORDER)
def test_the_chance_is_the_task_s_at_its_default_parameters(name):
    chance = build_task(name).chance
    assert CHANCE.get(name) == (None if chance is None else float(chance))


def test_other_tasks_sort_after_the_built_ins_by_name_and_have_no_chance():
    assert task_order(["zeta", "sort", "alpha", "copy", "sort"]) == ["copy", "sort", "alpha", "zeta"]
    assert task_chance("zeta") is None and task_chance("lm") is None
    assert task_chance("parity") == 0.5



def test_the_negative_controls_are_the_tasks_unsolvable_past_training():
    assert NEGATIVE_CONTROLS == {n for n in builtin_tasks() if not build_task(n).solvable_past_training}
