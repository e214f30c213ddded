"""The catalog tables of the pages follow the code: tasks and encodings (docs/protocol.md) against
their registries, the pinned numerics (docs/reproducibility.md) against `lenbench.numerics`."""

import pytest
from docs_markdown import DOCS, code_spans, table_after

from lenbench.baselines import task_baselines
from lenbench.encodings import ENCODINGS
from lenbench.numerics import PINNED_ENV
from lenbench.tasks import TASKS, build_task

pytestmark = pytest.mark.docs


def test_task_table_names_every_task_with_its_unit():
    rows = table_after((DOCS / "protocol.md").read_text(),
                       "<!-- tasks: checked against lenbench.tasks.TASKS by tests/docs/test_docs_catalog.py -->")
    documented = {code_spans(r["task"])[0]: r["unit"] for r in rows}
    assert sorted(documented) == sorted(TASKS.names()), f"protocol.md's tasks {sorted(documented)}, registered {sorted(TASKS.names())}"
    for name, unit in documented.items():
        assert unit == TASKS.get(name).length_unit, f"task {name!r}: its unit is {TASKS.get(name).length_unit!r}, not {unit!r}"


def test_task_table_names_each_tasks_trivial_baselines_and_paper():
    rows = table_after((DOCS / "protocol.md").read_text(),
                       "<!-- tasks: checked against lenbench.tasks.TASKS by tests/docs/test_docs_catalog.py -->")
    for r in rows:
        name = code_spans(r["task"])[0]
        task = build_task(name)
        scored = [b.name for b in task_baselines(task)]
        assert code_spans(r["trivial baselines"]) == scored, f"task {name!r} is scored with the baselines {scored}"
        fraction = r["chance"].split("/")
        chance = None if r["chance"] == "–" else int(fraction[0]) / int(fraction[1])
        assert chance == task.chance, f"task {name!r}: its chance is {task.chance}, the page says {r['chance']}"
        cited = task.paper.split(",")[0]
        assert cited and r["paper"] == cited, f"task {name!r} cites {cited!r}, the page says {r['paper']!r}"


def test_encoding_table_names_every_encoding_with_its_paper():
    rows = table_after((DOCS / "protocol.md").read_text(),
                       "<!-- encodings: checked against lenbench.encodings.ENCODINGS by tests/docs/test_docs_catalog.py -->")
    documented = {code_spans(r["name"])[0]: r["paper"] for r in rows}
    assert sorted(documented) == sorted(ENCODINGS.names()), \
        f"protocol.md's encodings {sorted(documented)}, registered {sorted(ENCODINGS.names())}"
    for name, paper in documented.items():
        cited = ENCODINGS.get(name).paper.split(",")[0]  # "Press et al. 2022, Train Short, …" → authors and year
        assert paper == cited, f"encoding {name!r} cites {cited!r}, the page says {paper!r}"


def test_pinned_numerics_table_is_the_pin():
    rows = table_after((DOCS / "reproducibility.md").read_text(),
                       "<!-- pinned: checked against lenbench.numerics.PINNED_ENV by tests/docs/test_docs_catalog.py -->")
    pinned = {}
    for r in rows:
        for var, value in zip(code_spans(r["variable"]), code_spans(r["value"]), strict=True):
            pinned[var] = value
    assert pinned == PINNED_ENV, f"reproducibility.md's table {pinned} differs from lenbench.numerics.PINNED_ENV {PINNED_ENV}"
