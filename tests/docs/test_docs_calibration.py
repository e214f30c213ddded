"""The published calibration study (studies/calibration/) and the pages that quote it.

- calibration.md is the rendering of calibration.csv by the current code (`lenbench.calibration.markdown`
  with the `calibration` preset), byte for byte;
- every rung of the table is an entry of the preset, in its ladder's order, each task decided at
  its first passing rung (the rungs past it are those measured before a cheaper one joined the ladder);
- docs/calibration.md quotes the published calibration.md verbatim (after its title);
- the quick suite trains each task it shares with the study at the study's calibrated budget, and
  the catalog every task at its calibrated budget or, where none passed, at its last rung.
"""

import pytest
from docs_markdown import DOCS, ROOT, block

from lenbench.calibration import ladders, markdown, read_table
from lenbench.config import load_suite

pytestmark = pytest.mark.docs

STUDY = ROOT / "studies" / "calibration"
published = pytest.mark.skipif(not (STUDY / "calibration.csv").exists(), reason="the calibration study is not published")


@published
def test_the_markdown_is_the_csv_rendered_by_the_current_code():
    table = read_table(STUDY / "calibration.csv")
    assert markdown(table, load_suite("calibration")) == (STUDY / "calibration.md").read_text()


@pytest.mark.parametrize("pilot", sorted(p.stem for p in (STUDY / "pilots").glob("*.yaml")))
def test_each_pilot_table_is_its_suites_csv_rendered_by_the_current_code(pilot):
    """The one-seed pilots docs/calibration.md cites: each suite beside its table, rows in its ladder order."""
    suite = load_suite(STUDY / "pilots" / f"{pilot}.yaml")
    table = read_table(STUDY / "pilots" / f"{pilot}.csv")
    assert markdown(table, suite) == (STUDY / "pilots" / f"{pilot}.md").read_text()
    assert sorted(table["label"]) == sorted(t.label for t in suite.tasks)
    assert set(table["n_encodings"]) == {len(suite.encodings)}


@published
def test_every_rung_is_the_presets_in_ladder_order():
    table = read_table(STUDY / "calibration.csv")
    for task, rungs in ladders(load_suite("calibration")).items():
        rows = table[table["task"] == task]
        assert list(rows["label"]) == [r.key for r in rungs[:len(rows)]], task
        assert list(rows["rung"]) == list(range(1, len(rows) + 1))
        passed = list(rows["passes"])
        if True in passed:  # the first passing rung decides; rungs past it were measured before a cheaper one joined
            first = passed.index(True)
            assert rows["verdict"].iloc[first].startswith("calibrated"), task
            assert set(rows["verdict"].iloc[first + 1:]) <= {""}, task
        else:
            assert len(rows) == len(rungs) and rows["verdict"].iloc[-1].startswith("not learned")


@published
def test_the_docs_page_quotes_the_study():
    page = (DOCS / "calibration.md").read_text()
    study = (STUDY / "calibration.md").read_text().split("\n", 2)[2].strip()  # after its title and blank line
    assert block(page, "calibration", "studies/calibration/calibration.md") == " ".join(study.split())


@published
def test_quick_trains_at_the_calibrated_budgets():
    table = read_table(STUDY / "calibration.csv")
    chosen = table[table["verdict"].str.startswith("calibrated")].set_index("task")
    quick = load_suite("quick")
    for spec in quick.tasks:
        if spec.name not in chosen.index:
            continue
        rung = next(r for r in ladders(load_suite("calibration"))[spec.name] if r.key == chosen.at[spec.name, "label"])
        assert spec.train_len == rung.train_len and spec.train == rung.train and spec.params == rung.params, spec.name


@published
def test_the_catalog_trains_each_task_at_its_calibrated_budget_or_its_last_rung():
    """Every task of the catalog at its study's verdict: the calibrated rung, or where no rung
    passed, the last one tried (the most the catalog affords: shown, not ranked)."""
    table = read_table(STUDY / "calibration.csv")
    rungs = ladders(load_suite("calibration"))
    catalog = load_suite("catalog")
    assert sorted(t.name for t in catalog.tasks) == sorted(rungs)
    for spec in catalog.tasks:
        verdict = table[(table["task"] == spec.name) & (table["verdict"] != "")]
        assert len(verdict) == 1, f"{spec.name}: the study has no verdict for it yet"
        rung = next(r for r in rungs[spec.name] if r.key == verdict["label"].item())
        params = {**rung.params, **EVAL_RANGE_PARAMS.get(spec.name, {})}
        assert (spec.train_len, spec.train, spec.params) == (rung.train_len, rung.train, params), spec.name


#: Task parameters the catalog must raise above its study rung so that every length it evaluates
#: (up to 16x; the study evaluated 1x only) can be sampled: recall's 8 pairs at 16x are 128 distinct keys.
EVAL_RANGE_PARAMS = {"recall": {"num_keys": 128}}


def summary_sentence(table) -> str:
    """The README's sentence on the study, rendered from its table."""
    import re

    verdicts = table[table["verdict"] != ""]
    learned = list(verdicts.loc[verdicts["verdict"].str.startswith("calibrated"), "task"])
    not_learned = list(verdicts.loc[~verdicts["verdict"].str.startswith("calibrated"), "task"])
    steps = max(int(re.search(r"steps=(\d+)", s).group(1)) for s in table["settings"])

    def names(tasks: list[str]) -> str:
        return ", ".join(tasks[:-1]) + f" and {tasks[-1]}" if len(tasks) > 1 else tasks[0]

    return (f"at least half of the {table['n_encodings'].iloc[0]} core encodings learn {names(learned)} at 1×; "
            f"{names(not_learned)} get there at no budget tried (at most {steps} steps).")


@published
def test_the_readme_summarises_the_study():
    readme = (ROOT / "README.md").read_text()
    want = summary_sentence(read_table(STUDY / "calibration.csv"))
    assert block(readme, "calibration-summary", "studies/calibration/calibration.csv") == want, want
