"""Per-task overrides of the suite's `train:`, `eval:` and `model:` sections.

A task entry's `train:` / `eval:` / `model:` fields replace the suite's for that entry's cells alone, checked
like the suite's own sections; entries without overrides keep the very cell ids and training
configs they had before overrides existed (golden ids computed on main); `label` keeps two entries
of one task apart in rows, titles and leaderboard boards, whose provenance shows the settings.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest
import yaml
from lenbench_testing import TINY_SUITE, write_cells

import lenbench
from lenbench.config import SuiteError, SuiteWarning, TrainSpec, load_suite, parse_suite
from lenbench.names import RULE

GOLDEN = Path(__file__).with_name("quick_ids_before_overrides.json")

#: The tiny suite with a second copy entry: 8 more steps, more evaluation samples, its own label.
LONG = {"name": "copy", "train_len": 4, "label": "copy_long", "train": {"steps": 14, "lr": "1e-3"},
        "eval": {"samples": 6}}


def tiny(*tasks, **top) -> dict:
    return {**TINY_SUITE, "tasks": list(tasks) or TINY_SUITE["tasks"], **top}


def one_line_error(data: dict, message: str, tmp_path: Path) -> None:
    """Loading `data` from a file fails with exactly `message` after the file name, on one line."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    assert str(err.value) == f"{path}: {message}"
    assert "\n" not in str(err.value)


# --- ids of cells without overrides ----------------------------------------------------------------


def test_quick_cells_keep_the_ids_main_gave_them(monkeypatch):
    """Every quick cell of a task entry without overrides has the cell id and train id main computed
    before overrides existed (tests/config/quick_ids_before_overrides.json: quick.yaml with dynamic
    pinned at 2, issue 24); an entry with overrides (the calibrated budgets) makes new cells. Since
    every entry of quick.yaml has a calibrated budget, the suite checked is quick.yaml as it was with
    one plain entry left (passkey at its suite budget: tests/config/quick_with_a_plain_entry.yaml)."""
    golden = json.loads(GOLDEN.read_text())
    monkeypatch.setattr(lenbench, "__version__", golden["lenbench_version"])  # ids hash the version
    suite = load_suite(str(Path(__file__).parent / "quick_with_a_plain_entry.yaml"))
    plain = {t.key for t in suite.tasks if not (t.train or t.eval or t.label)}
    cells = [c for c in suite.cells() if c.task.key in plain]
    assert cells, "quick has no task entry without overrides left to check"
    assert sorted(c.title for c in cells) == sorted(t for t in golden["cells"] if t.split("-")[0] in plain)
    for c in cells:
        assert {"cell_id": c.cell_id, "train_id": c.train_id} == golden["cells"][c.title], c.title


def test_an_entry_with_overrides_leaves_the_other_entries_cells_bit_identical():
    plain = {c.title: c for c in parse_suite(tiny()).cells()}
    both = {c.title: c for c in parse_suite(tiny(*TINY_SUITE["tasks"], LONG)).cells()}
    assert set(both) == set(plain) | {"copy_long-nope-L4-s0", "copy_long-rope-L4-s0"}
    for title, cell in plain.items():
        assert both[title].config() == cell.config() and both[title].cell_id == cell.cell_id
        assert both[title].training_config() == cell.training_config()
    assert "task_label" not in plain["copy-nope-L4-s0"].config()


def test_an_override_equal_to_the_suite_value_makes_the_same_cells():
    same = {"name": "copy", "train_len": 4, "train": {"steps": TINY_SUITE["train"]["steps"]}, "eval": {"samples": 4}}
    assert [c.cell_id for c in parse_suite(tiny(same)).cells()] == [c.cell_id for c in parse_suite(tiny()).cells()]


# --- the effective settings ------------------------------------------------------------------------


def test_overrides_flow_into_the_cells_train_and_eval_for_that_entry_only():
    suite = parse_suite(tiny(*TINY_SUITE["tasks"], LONG))
    assert suite.tasks[1].train == {"steps": 14, "lr": 1e-3} and suite.tasks[1].eval == {"samples": 6}
    for cell in suite.cells():
        if cell.task.key == "copy_long":
            assert cell.train == dataclasses.replace(suite.train, steps=14, lr=1e-3)
            assert cell.eval == dataclasses.replace(suite.eval, samples=6)
            assert cell.config()["train"]["steps"] == 14 and cell.config()["eval"]["samples"] == 6
            assert cell.config()["task"] == "copy" and cell.config()["task_label"] == "copy_long"
        else:
            assert cell.train == suite.train == TrainSpec(**{**TINY_SUITE["train"], "lr": 0.003})
            assert cell.eval == suite.eval
    assert suite.train.steps == 6 and suite.eval.samples == 4  # the suite's own sections are untouched


def test_eval_ratios_per_task_size_the_position_tables_and_drop_repeats_with_a_warning():
    entry = {"name": "copy", "train_len": 4, "label": "copy_far", "eval": {"ratios": [1, 8, 8.0]}}
    with pytest.warns(SuiteWarning, match=r"tasks\[1\]\.eval ratio 8\.0 is listed twice; it runs once"):
        suite = parse_suite(tiny(*TINY_SUITE["tasks"], entry))
    far = [c for c in suite.cells() if c.task.key == "copy_far"]
    assert {c.eval.ratios for c in far} == {(1, 8)} and {c.training_config()["max_ratio"] for c in far} == {8}
    assert {c.training_config()["max_ratio"] for c in suite.cells() if c.task.key == "copy"} == {2}


def test_settings_name_every_effective_training_field_and_the_evaluation_samples():
    cells = {c.task.key: c for c in parse_suite(tiny(*TINY_SUITE["tasks"], LONG)).cells()}
    assert cells["copy"].settings == ("train: steps=6 batch_size=4 lr=0.003 warmup=2 weight_decay=0.01 grad_clip=1 "
                                      "length_sampling=fixed; eval: samples=4 tokens_per_batch=16384")
    assert cells["copy_long"].settings == ("train: steps=14 batch_size=4 lr=0.001 warmup=2 weight_decay=0.01 "
                                           "grad_clip=1 length_sampling=fixed; eval: samples=6 tokens_per_batch=16384")


def test_a_model_override_changes_that_entrys_cells_alone_and_a_later_field_at_its_default_no_id():
    wide = {"name": "copy", "train_len": 4, "label": "copy_emb", "model": {"embedding_std": 1.0}}
    suite = parse_suite(tiny(*TINY_SUITE["tasks"], wide))
    cells = {c.title: c for c in suite.cells()}
    emb = [c for c in cells.values() if c.task.key == "copy_emb"]
    assert emb and all(c.model.embedding_std == 1.0 and c.training_config()["model"]["embedding_std"] == 1.0
                       for c in emb)
    assert all(c.settings.endswith("; eval: samples=4 tokens_per_batch=16384; model: embedding_std=1") for c in emb)
    plain = parse_suite(tiny()).cells()
    for c in plain:  # the default is left out of ids and settings: the cells of main
        assert cells[c.title].cell_id == c.cell_id and "embedding_std" not in c.training_config()["model"]
        assert "model:" not in c.settings
    explicit = parse_suite(tiny(model={**TINY_SUITE["model"], "embedding_std": 0.02})).cells()
    assert [c.cell_id for c in explicit] == [c.cell_id for c in plain]


def test_a_dense_axis_adds_every_length_to_its_ratio_and_leaves_other_entries_ids_alone():
    """eval.dense_until adds every length from train_len to dense_until · train_len, as ratios: the
    cell's EvalSpec holds them (its id names them), the run checks and evaluates each."""
    dense = {"name": "copy", "train_len": 4, "label": "copy_dense", "eval": {"ratios": [1, 4], "dense_until": 2}}
    suite = parse_suite(tiny(*TINY_SUITE["tasks"], dense))
    cells = {c.title: c for c in suite.cells()}
    for c in (c for c in cells.values() if c.task.key == "copy_dense"):
        assert c.eval.ratios == (1, 1.25, 1.5, 1.75, 2.0, 4) and c.eval.dense_until == 0
        assert list(c.config()["eval"]["ratios"]) == [1, 1.25, 1.5, 1.75, 2.0, 4] and "dense_until" not in c.config()["eval"]
        assert [max(1, round(r * c.train_len)) for r in c.eval.ratios] == [4, 5, 6, 7, 8, 16]
    for c in parse_suite(tiny()).cells():  # entries without it: the cells of main
        assert cells[c.title].cell_id == c.cell_id
    # a given ratio keeps its spelling where the dense axis lands on the same length
    odd = parse_suite(tiny({"name": "copy", "train_len": 3, "eval": {"ratios": [1, 1.3, 8], "dense_until": 2}}))
    assert odd.cells()[0].eval.ratios == (1, 1.3, 5 / 3, 2.0, 8)


# --- validation: exactly like the suite's sections --------------------------------------------------


@pytest.mark.parametrize(("entry", "message"), [
    ({"train": {"stepz": 3}}, "unknown key tasks[0].train.stepz; did you mean 'steps'? (valid: steps, batch_size, lr, "
                              "warmup, weight_decay, grad_clip, length_sampling, patience, validate_every, val_samples, min_delta, "
                              "schedule)"),
    ({"eval": {"sample": 3}}, "unknown key tasks[0].eval.sample; did you mean 'samples'? (valid: ratios, samples, "
                              "tokens_per_batch, memory_budget_gb, dense_until)"),
    ({"eval": {"dense_until": 0.5}}, "tasks[0].eval.dense_until = 0.5 is out of range (valid: 0 (off) or a ratio >= 1)"),
    ({"train": {"steps": 0}}, "tasks[0].train.steps = 0 is out of range (valid: >= 1)"),
    ({"train": {"grad_clip": -1.0}}, "tasks[0].train.grad_clip = -1.0 is out of range (valid: > 0 (.inf: no clipping))"),
    ({"train": {"lr": "fast"}}, "tasks[0].train.lr must be float, got 'fast'"),
    ({"train": {"steps": 2.5}}, "tasks[0].train.steps must be int, got 2.5"),
    ({"train": {"length_sampling": "random"}}, "tasks[0].train.length_sampling must be 'fixed' or 'uniform', got 'random'"),
    ({"eval": {"samples": 0}}, "tasks[0].eval.samples = 0 is out of range (valid: >= 1)"),
    ({"eval": {"ratios": [1, -2]}}, "tasks[0].eval.ratios[1] = -2 is out of range (valid: > 0 and finite)"),
    ({"eval": {"ratios": []}}, "tasks[0].eval.ratios must be a non-empty list of positive numbers"),
    ({"train": [3000]}, "tasks[0].train must be a mapping, got list"),
    ({"trian": {"steps": 3}}, "unknown key tasks[0].trian; did you mean 'train'? (valid: name, train_len, params, "
                              "label, train, eval, model)"),
    ({"model": {"embedding_std": 0}}, "tasks[0].model.embedding_std = 0.0 is out of range (valid: > 0 and finite)"),
    ({"model": {"embeding_std": 1}}, "unknown key tasks[0].model.embeding_std; did you mean 'embedding_std'? (valid: "
                                     "d_model, n_layers, n_heads, ff_mult, dropout, embedding_std)"),
    ({"model": {"n_heads": 3}}, "tasks[0].model.d_model = 16 is out of range (valid: a multiple of tasks[0].model.n_heads = 3)"),
    ({"label": "copy-long"}, f"tasks[0].label 'copy-long' is not a task label ({RULE}; no '-', which separates "
                             "the parts of a cell title); e.g. label: copy_long"),
    ({"label": 3000}, f"tasks[0].label 3000 is not a task label ({RULE}; no '-', which separates the parts of a "
                      "cell title); e.g. label: copy_3000"),
    ({"label": "lm"}, "tasks[0].label 'lm' is the name of another task, whose rows it would join; e.g. label: copy_lm"),
    ({"label": "overall"}, "tasks[0].label 'overall' is reserved (the leaderboard's overall ranking); e.g. label: copy_overall"),
])
def test_bad_overrides_are_one_line_errors_naming_file_and_key(entry, message, tmp_path):
    one_line_error(tiny({"name": "copy", "train_len": 4, **entry}), message, tmp_path)


def test_numeric_strings_in_overrides_are_floats_as_in_the_suite_sections(tmp_path):
    path = tmp_path / "s.yaml"
    text = yaml.safe_dump({k: v for k, v in TINY_SUITE.items() if k != "tasks"})
    path.write_text(text + "tasks:\n  - {name: copy, train_len: 4, train: {lr: 1e-3, grad_clip: 1.0e9}, eval: {ratios: [1, 2e0]}}\n")
    (task,) = load_suite(path).tasks
    assert task.train == {"lr": 1e-3, "grad_clip": 1e9} and task.eval == {"ratios": (1, 2.0)}


# --- one task twice ---------------------------------------------------------------------------------


def test_one_task_twice_with_different_settings_needs_a_label_in_one_line(tmp_path):
    unlabelled = {k: v for k, v in LONG.items() if k != "label"}
    one_line_error(tiny(*TINY_SUITE["tasks"], unlabelled),
                   "tasks[1] and tasks[0] are both task 'copy' at train_len 4 but differ in train.steps, train.lr, "
                   "eval.samples, so their rows would merge; give one a distinct `label` (e.g. label: copy_steps14)",
                   tmp_path)
    # a label that is another entry's label collides the same way
    one_line_error(tiny({**LONG, "train": {"steps": 14}}, {**LONG, "train": {"steps": 9}}),
                   "tasks[1] and tasks[0] are both task 'copy_long' at train_len 4 but differ in train.steps, so their "
                   "rows would merge; give one a distinct `label` (e.g. label: copy_steps9)", tmp_path)
    # two tasks under one label
    one_line_error(tiny({"name": "copy", "train_len": 4, "label": "x"}, {"name": "reverse", "train_len": 4, "label": "x"}),
                   "tasks[1] and tasks[0] are both task 'x' at train_len 4 but differ in task, so their rows would "
                   "merge; give one a distinct `label` (e.g. label: reverse_1)", tmp_path)


def test_one_task_twice_at_different_lengths_or_labels_is_two_entries():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        suite = parse_suite(tiny({"name": "copy", "train_len": 4}, {"name": "copy", "train_len": 6, "train": {"steps": 9}},
                                 {"name": "copy", "train_len": 4, "label": "copy_again"}))
    assert [(t.key, t.train_len, t.train) for t in suite.tasks] == \
        [("copy", (4,), {}), ("copy", (6,), {"steps": 9}), ("copy_again", (4,), {})]
    cells = {c.title: c for c in suite.cells()}
    assert len(cells) == len(suite.cells()) == 6
    # the same settings under a second label: a cell of its own, the same trained model (checkpoint)
    assert cells["copy_again-rope-L4-s0"].cell_id != cells["copy-rope-L4-s0"].cell_id
    assert cells["copy_again-rope-L4-s0"].train_id == cells["copy-rope-L4-s0"].train_id


def test_an_exact_repeat_runs_once_with_a_warning_and_a_label_equal_to_the_name_is_no_label():
    with pytest.warns(SuiteWarning, match=r"tasks\[1\]: task 'copy_long' at train_len 4 is listed twice; it runs once"):
        suite = parse_suite(tiny(LONG, {**LONG, "train": {"lr": 0.001, "steps": 14}}))
    assert [t.key for t in suite.tasks] == ["copy_long"]
    named = parse_suite(tiny({"name": "copy", "train_len": 4, "label": "copy"}))
    assert named.tasks[0].label == "" and [c.cell_id for c in named.cells()] == [c.cell_id for c in parse_suite(tiny()).cells()]


# --- rows and the leaderboard -------------------------------------------------------------------------


@pytest.mark.slow
def test_rows_record_the_label_and_settings_and_the_leaderboard_keeps_the_boards_apart(tmp_path):
    from lenbench.report.rows import load_results
    from lenbench.report.tables import leaderboard
    from lenbench.run.cell import CellJob, compute_cell

    suite = parse_suite(tiny(*TINY_SUITE["tasks"], LONG, encodings=["nope"], variants=[]))
    results = {c.task.key: compute_cell(CellJob(cell=c, device="cpu", threads=1)).result for c in suite.cells()}
    rows = []
    for key, result in results.items():
        assert result.status == "ok", result.error
        assert result.config["train"]["steps"] == (14 if key == "copy_long" else 6)
        cell = next(c for c in suite.cells() if c.task.key == key)
        assert {r["task"] for r in result.rows} == {key}  # baseline rows too
        assert {r["settings"] for r in result.rows} == {cell.settings}
        assert {r["n_samples"] for r in result.rows if r["encoding"] == "nope"} == {6 if key == "copy_long" else 4}
        rows += result.rows
    df = load_results(write_cells(tmp_path, rows))
    assert set(df["task"]) == {"copy", "copy_long"} and set(df["settings"]) == {c.settings for c in suite.cells()}
    board = leaderboard(df, n_boot=50)
    per_task = board.per_task.set_index(["task", "encoding"])
    assert per_task.loc[("copy_long", "nope"), "settings"] == next(c.settings for c in suite.cells() if c.task.key == "copy_long")
    assert per_task.loc[("copy", "nope"), "settings"] == next(c.settings for c in suite.cells() if c.task.key == "copy")
    assert "steps=14" in per_task.loc[("copy_long", "nope"), "settings"]
    assert set(board.long()["task"]) == {"copy", "copy_long", "overall"}
