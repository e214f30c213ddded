"""`lenbench calibrate`: ladders climbed round by round, stopping at the first rung where half the
encodings are learned by the board's own definition; the table as written; resume; bad input."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from lenbench.calibration import (
    COLUMNS,
    CONVERGENCE_COLUMNS,
    calibrate,
    known_rungs,
    ladders,
    markdown,
    published_seed_overlap,
    read_table,
    rung_result,
)
from lenbench.cli import main
from lenbench.config import load_suite, parse_suite
from lenbench.report.rows import load_results
from lenbench.report.tables import leaderboard
from lenbench.run.driver import run_suite
from lenbench.run.store import load_cell_results

#: copy: a rung no encoding learns (40 steps), then one rope learns (400 steps); lm: one rung only.
LADDERS = {
    "name": "caltiny",
    "seeds": [0],
    "model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "ff_mult": 2},
    "train": {"steps": 40, "batch_size": 16, "lr": 3.0e-3, "warmup": 10},
    "eval": {"ratios": [1], "samples": 16},
    "encodings": ["nope", "rope"],
    "tasks": [
        {"name": "copy", "train_len": 4, "label": "copy_a"},
        {"name": "copy", "train_len": 4, "train": {"steps": 400}, "label": "copy_b"},
        {"name": "copy", "train_len": 4, "train": {"steps": 500}, "label": "copy_c"},
        {"name": "lm", "train_len": 16, "label": "lm_a"},
    ],
}


class Recorder:
    """`run_suite`, recording each round's task labels and how many cells it ran."""

    def __init__(self):
        self.rounds: list[list[str]] = []
        self.ran: list[int] = []

    def __call__(self, suite, out, **options):
        self.rounds.append([t.key for t in suite.tasks])
        result = run_suite(suite, out, executor="serial", progress=False, log=lambda _: None, **options)
        self.ran.append(len(result.computed))
        return result


@pytest.fixture(scope="module")
def climbed(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "run"
    suite = parse_suite(LADDERS)
    recorder = Recorder()
    table = calibrate(suite, out, run=recorder, log=lambda _: None)
    return suite, out, recorder, table


def learned_by_board(out) -> dict[str, int]:
    """Encodings learned per task label, read independently from the run's leaderboard."""
    board = leaderboard(load_results(out)).per_task
    models = board[board["kind"] == "model"]
    return {task: int((~g["not_learned"].astype(bool)).sum()) for task, g in models.groupby("task")}


def test_each_task_stops_at_its_first_passing_rung(climbed):
    suite, out, recorder, table = climbed
    learned = learned_by_board(out)
    assert learned["copy_a"] == 0 and learned["copy_b"] >= 1  # the ladder this test is about
    # round 1: every task's first rung; round 2: copy only (lm has no second rung); copy_b passes: no copy_c
    assert recorder.rounds == [["copy_a", "lm_a"], ["copy_b"]]
    assert list(table["label"]) == ["copy_a", "copy_b", "lm_a"]
    assert list(table["n_learned"]) == [learned[x] for x in table["label"]]
    assert list(table["passes"]) == [n >= math.ceil(0.5 * 2) for n in table["n_learned"]]
    verdicts = dict(zip(table["label"], table["verdict"], strict=True))
    assert verdicts["copy_a"] == "" and verdicts["copy_b"].startswith("calibrated")
    assert verdicts["lm_a"] == ("calibrated: the smallest budget tried that passes" if learned["lm_a"] >= 1
                                else "not learned at any budget tried: shown, not ranked")
    assert list(table["n_cells"]) == [2, 2, 2] and (table["seconds_per_cell"] > 0).all()
    assert list(table["settings"]) == ["steps=40", "steps=400", "steps=40"]


def test_the_table_is_written_as_returned(climbed):
    suite, out, _, table = climbed
    written = pd.read_csv(out / "calibration.csv", keep_default_na=False)
    assert list(written.columns) == list(COLUMNS)
    assert list(written["label"]) == list(table["label"]) and list(written["n_learned"]) == list(table["n_learned"])
    md = (out / "calibration.md").read_text()
    assert "at least 1 of the 2 encodings (nope, rope)" in md
    for label in table["label"]:
        assert f"| {label} " in md and f"**{label}**" in md


@pytest.mark.slow
def test_every_rung_runs_the_rest_and_resumes_what_was_run(climbed):
    suite, out, _, _ = climbed
    recorder = Recorder()
    table = calibrate(suite, out, run=recorder, every_rung=True, log=lambda _: None)
    assert recorder.rounds == [["copy_a", "lm_a"], ["copy_b"], ["copy_c"]]
    assert recorder.ran == [0, 0, 2]  # only copy_c's two cells are new
    assert list(table["label"]) == ["copy_a", "copy_b", "copy_c", "lm_a"]
    assert table.loc[table["label"] == "copy_b", "verdict"].item().startswith("calibrated")  # the first pass, still
    assert table.loc[table["label"] == "copy_c", "verdict"].item() == ""


def test_one_task_of_the_suite():
    suite = parse_suite(LADDERS)
    assert [t.key for t in ladders(suite, ["lm"])["lm"]] == ["lm_a"]
    assert list(ladders(suite)) == ["copy", "lm"]


def board_of(learned: list[bool]) -> pd.DataFrame:
    return pd.DataFrame({"task": "t", "train_len": 8, "kind": "model", "metric": "exact_match",
                         "encoding": [f"e{i}" for i in range(len(learned))], "not_learned": [not x for x in learned],
                         "in_dist": 0.5, "in_dist_ci_low": 0.4, "in_dist_ci_high": 0.6})


@pytest.mark.parametrize(("learned", "passes"), [([True, True, False, False], True), ([True, False, False, False], False),
                                                 ([True, True, False], True), ([True, False, False], False)])
def test_a_rung_passes_with_half_of_the_encodings_learned(learned, passes):
    encodings = [{"name": "nope", "label": f"e{i}"} for i in range(len(learned))]
    suite = parse_suite({"name": "q", "tasks": [{"name": "copy", "train_len": 8, "label": "t"}], "encodings": encodings})
    cells = pd.DataFrame({"task": "t", "train_len": 8, "encoding": ["e0", "e1"], "train_seconds": [1.5, 9.0],
                          "status": ["ok", "failed"], "train_steps": [1000, None], "stop_reason": ["budget", "budget"]})
    row = rung_result(board_of(learned), cells, suite.tasks[0], suite, 1)
    assert (row["n_converged"], row["max_train_steps"]) == ("", "")  # trained exactly its steps: not asked
    assert row["passes"] is passes and row["n_learned"] == sum(learned) and row["n_encodings"] == len(learned)
    assert row["learned"] == " ".join(f"e{i}" for i, x in enumerate(learned) if x)
    assert row["scores"].startswith("e0 0.500±0.100") and row["threshold"] == 0.9
    assert (row["seconds_per_cell"], row["n_cells"], row["n_failed"]) == (1.5, 1, 1)  # a failed cell's time is not a cost


@pytest.mark.parametrize(("stops", "passes"), [(["converged"] * 4, True), (["converged"] * 3 + ["budget"], False)])
def test_a_rung_trained_until_convergence_passes_only_if_every_run_converged(stops, passes):
    """Half learned is not enough under `patience`: a run that reached the maximum says the maximum is
    the quorum's edge again."""
    encodings = [{"name": "nope", "label": f"e{i}"} for i in range(4)]
    suite = parse_suite({"name": "q", "train": {"steps": 6000, "patience": 5, "schedule": "plateau"},
                         "tasks": [{"name": "copy", "train_len": 8, "label": "t"}], "encodings": encodings})
    cells = pd.DataFrame({"task": "t", "train_len": 8, "encoding": [f"e{i}" for i in range(4)],
                          "train_seconds": 1.0, "status": "ok", "train_steps": [3100, 4500, 2000, 6000],
                          "stop_reason": stops})
    row = rung_result(board_of([True, True, True, False]), cells, suite.tasks[0], suite, 1)
    assert row["n_learned"] == 3 and row["passes"] is passes
    assert (row["n_converged"], row["max_train_steps"]) == (stops.count("converged"), 6000)


def test_a_ladder_of_maxima_and_its_verdicts(tmp_path):
    """A real climb under the plateau schedule: the table names each rung's converged runs and the most
    steps trained; the markdown grows its converged column only then; the csv reads back."""
    spec = {**LADDERS, "name": "calplateau", "train": {**LADDERS["train"], "patience": 2, "validate_every": 10,
                                                       "val_samples": 16, "schedule": "plateau"},
            "tasks": [{"name": "copy", "train_len": 4, "label": "copy_max20", "train": {"steps": 20}},
                      {"name": "copy", "train_len": 4, "label": "copy_max2k", "train": {"steps": 2000}}]}
    suite = parse_suite(spec)
    table = calibrate(suite, tmp_path / "run", every_rung=True, log=lambda _: None,
                      run=lambda s, out, **o: run_suite(s, out, executor="serial", progress=False, log=lambda _: None))
    steps: dict[str, list] = {}
    for c in load_cell_results(tmp_path / "run"):
        steps.setdefault(c.config["task_label"], []).append((c.rows[0]["train_steps"], c.rows[0]["stop_reason"]))
    for r in table.itertuples():  # the columns are the cells' own records
        assert r.n_converged == sum(reason == "converged" for _, reason in steps[r.label])
        assert r.max_train_steps == max(n for n, _ in steps[r.label])
    first = table.iloc[0]
    assert first["n_converged"] == 0 and not first["passes"]  # 20 steps: no run can have stalled three times
    assert first["verdict"] == ""  # neither the first passing rung nor the last: no verdict of its own
    md = markdown(table, suite)
    assert "| converged (most steps) |" in md and "0/2 (20)" in md
    again = read_table(tmp_path / "run" / "calibration.csv")
    assert list(again["n_converged"]) == list(table["n_converged"])
    assert list(again["max_train_steps"]) == list(table["max_train_steps"])


def test_a_table_from_before_convergence_training_still_reads(tmp_path):
    suite = parse_suite(LADDERS)
    row = {c: "" for c in COLUMNS if c not in CONVERGENCE_COLUMNS}
    row.update(task="copy", rung=1, label="copy_a", train_len=4, settings="steps=40", metric="exact_match",
               threshold=0.9, n_learned=1, n_encodings=2, passes=True, learned="rope", scores="nope 0.1±0.1; rope 0.9±0.1",
               seconds_per_cell=1.0, n_cells=2, n_failed=0, verdict="calibrated: the smallest budget tried that passes")
    path = tmp_path / "old.csv"
    pd.DataFrame([row]).to_csv(path, index=False)
    table = read_table(path)
    assert list(table.columns) == list(COLUMNS) and table["n_converged"].item() == ""
    assert "converged" not in markdown(table, suite).split("## Scores")[0]  # the published study renders as before
    assert known_rungs(table, suite)["copy_a"]["n_learned"] == 1
    plateau = parse_suite({**LADDERS, "train": {**LADDERS["train"], "patience": 3}})
    assert "copy_a" not in known_rungs(table, plateau)  # measured at exact steps: not a convergence rung


def test_calibrating_on_the_published_seeds_is_said(tmp_path):
    published = set(load_suite("quick").seeds) | set(load_suite("catalog").seeds)
    assert published_seed_overlap(parse_suite(LADDERS)) == sorted({0} & published)
    assert published_seed_overlap(parse_suite({**LADDERS, "seeds": [97, 98]})) == []
    lines = []
    with pytest.raises(_Stop):  # said before anything runs
        calibrate(parse_suite(LADDERS), tmp_path / "o", log=lines.append, run=_no_run)
    assert lines and lines[0].startswith("calibrate: seed(s) 0 of suite 'caltiny' are also seeds of the benchmark presets")


class _Stop(Exception):
    pass


def _no_run(*args, **kwargs):
    raise _Stop


def test_an_unknown_task_is_one_line_with_a_suggestion(tmp_path, capsys):
    assert main(["calibrate", "cpy", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("lenbench: error: calibrate: suite 'calibration' has no ladder for "
                                               "task 'cpy'; did you mean 'copy'?"), err
    assert not (tmp_path / "o").exists()


def test_a_rung_whose_cells_failed_leaves_its_task_undecided_and_the_command_fails(tmp_path, capsys, monkeypatch):
    """A rung whose every cell fails (here: the task's sampler raises mid-training): no verdict is
    drawn from it, the next rung is not tried, and `lenbench calibrate` exits 1 naming the failed cells."""
    import json

    from lenbench.tasks.recall import AssociativeRecallTask

    def broken(*args, **kwargs):
        raise RuntimeError("sampler broke")

    monkeypatch.setattr(AssociativeRecallTask, "sample", broken)
    data = {**LADDERS, "tasks": [{"name": "recall", "train_len": 8, "params": {"num_keys": 16}, "label": "recall_a"},
                                 {"name": "recall", "train_len": 4, "params": {"num_keys": 16}, "label": "recall_b"}]}
    path = tmp_path / "ladders.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    out = tmp_path / "out"
    assert main(["calibrate", "--suite", str(path), "--out", str(out), "--executor", "serial", "--quiet"]) == 1
    captured = capsys.readouterr()
    table = pd.read_csv(out / "calibration.csv", keep_default_na=False)
    assert list(table["label"]) == ["recall_a"]  # recall_b is not tried over a rung that could not be judged
    assert table["n_failed"].item() == 2 and table["n_cells"].item() == 0 and not table["passes"].item()
    assert table["verdict"].item() == "undecided: 2 cell(s) failed; rerun with --retry-failed"
    err = captured.err.splitlines()
    assert err[-1] == "lenbench: 2 cell(s) of the rungs failed; --retry-failed reruns them"
    assert sum(line.startswith("  failed: recall_a-") for line in err) == 2
    assert "| recall | recall_a |" in (out / "calibration.md").read_text() and "0/2 (2 failed)" in \
        (out / "calibration.md").read_text()


# --- --from: rungs an earlier table measured are not run again -------------------------------------------


def test_rungs_of_an_earlier_table_are_taken_as_measured(climbed, tmp_path):
    suite, _, _, table = climbed
    recorder = Recorder()
    again = calibrate(suite, tmp_path / "fresh", run=recorder, known=table, log=lambda _: None)
    assert recorder.rounds == []  # every ladder is decided by the table: nothing runs
    pd.testing.assert_frame_equal(again.reset_index(drop=True), table.reset_index(drop=True), check_dtype=False)


def test_an_extended_ladder_runs_only_its_new_rungs(climbed):
    suite, out, _, table = climbed
    earlier = table[table["label"] == "copy_a"]  # as if copy_b were a rung added since, and lm_a new
    recorder = Recorder()
    extended = calibrate(suite, out, run=recorder, known=earlier, log=lambda _: None)
    assert recorder.rounds == [["copy_b", "lm_a"]]  # copy_a is not run again
    assert list(extended["label"]) == ["copy_a", "copy_b", "lm_a"] and list(extended["rung"]) == [1, 2, 1]
    assert list(extended["verdict"]) == list(table["verdict"])  # verdicts decided over the whole ladder
    pd.testing.assert_frame_equal(extended.reset_index(drop=True), table.reset_index(drop=True), check_dtype=False,
                                  check_exact=False)


def test_rungs_measured_past_the_first_pass_stay_in_the_table(climbed, tmp_path):
    """A cheaper rung inserted before a passing one decides the task; the rungs past it that the earlier
    table measured are kept as measured (not run, not dropped), in ladder order, verdict on the first pass."""
    suite, out, _, _ = climbed
    every = calibrate(suite, out, run=Recorder(), every_rung=True, log=lambda _: None)  # copy_a, b, c measured
    recorder = Recorder()
    again = calibrate(suite, tmp_path / "fresh", run=recorder, known=every, log=lambda _: None)
    assert recorder.rounds == []
    assert list(again["label"]) == ["copy_a", "copy_b", "copy_c", "lm_a"] and list(again["rung"]) == [1, 2, 3, 1]
    verdicts = dict(zip(again["label"], again["verdict"], strict=True))
    assert verdicts["copy_b"].startswith("calibrated") and verdicts["copy_c"] == ""
    assert list(again["n_learned"]) == list(every["n_learned"])
    gap = every[every["label"] != "copy_c"]  # a rung the table lacks is not invented
    assert list(calibrate(suite, tmp_path / "gap", run=Recorder(), known=gap, log=lambda _: None)["label"]) == [
        "copy_a", "copy_b", "lm_a"]


def test_a_rung_changed_since_the_table_runs_again(climbed, tmp_path):
    suite, out, _, table = climbed
    out = Path(shutil.copytree(out, tmp_path / "run"))  # the older copy_a cells stay beside the new ones
    changed = parse_suite({**LADDERS, "tasks": [{**LADDERS["tasks"][0], "train": {"steps": 41}}, *LADDERS["tasks"][1:]]})
    recorder = Recorder()
    again = calibrate(changed, out, run=recorder, known=table, log=lambda _: None)
    assert recorder.rounds == [["copy_a"]]  # its settings differ (steps=41): measured anew; the rest reused
    # its row is its new cells' alone, though the older ones (same label, same rows) are still in `out`
    new_ids = {cell.cell_id for cell in changed.cells() if cell.task.key == "copy_a"}
    new_cells = [json.loads((out / "cells" / f"{cid}.json").read_text()) for cid in new_ids]
    row = again.set_index("label").loc["copy_a"]
    assert row["n_cells"] == 2 and "steps=41" in row["settings"]
    assert row["seconds_per_cell"] == pytest.approx(sum(c["train_seconds"] for c in new_cells) / 2)
    scores = load_results(out, cell_ids=new_ids)
    assert set(scores["cell_id"]) == new_ids
    one_seed_more = parse_suite({**LADDERS, "seeds": [0, 1]})
    assert known_rungs(table, one_seed_more) == {}  # 2 cells per rung in the table, 4 in this suite: none reused


def test_a_table_of_other_encodings_is_one_line(climbed):
    suite, _, _, table = climbed
    other = parse_suite({**LADDERS, "encodings": ["nope", "alibi"]})
    with pytest.raises(ValueError, match=r"scored encodings nope, rope, suite 'caltiny' has nope, alibi"):
        calibrate(other, "unused", run=Recorder(), known=table, log=lambda _: None)


def test_from_a_missing_file_is_one_line(tmp_path, capsys):
    assert main(["calibrate", "--from", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--from" in err[0] and "no such file" in err[0]


@pytest.mark.parametrize(("content", "why"), [
    (b"", "No columns to parse"),
    (bytes(range(128, 256)) * 3, "codec can't decode"),
    (b"a,b\n1,2\n", "not a calibration table"),
    (",".join(COLUMNS).encode() + b"\n" + b",".join([b"x"] * len(COLUMNS)) + b"\n", "invalid literal"),
    (",".join(COLUMNS).encode() + b"\n" + b",".join([b"1"] * (len(COLUMNS) + 2)) + b"\n", "more fields than its header"),
    (",".join(COLUMNS).encode() + b"\n" + b",".join([b"1" * 40] * len(COLUMNS)) + b"\n", "too large"),
])
def test_from_an_empty_binary_or_malformed_table_is_one_line_naming_it(tmp_path, capsys, content, why):
    table = tmp_path / "calibration.csv"
    table.write_bytes(content)
    assert main(["calibrate", "--from", str(table), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"lenbench: error: {table}: not a calibration table") and why in err[0]


def test_from_a_table_with_no_rows_is_one_line_and_runs_nothing(tmp_path, capsys, monkeypatch):
    import lenbench.calibration

    def ran(*_, **__):
        raise AssertionError("calibrate ran with a table of no rows")

    monkeypatch.setattr(lenbench.calibration, "calibrate", ran)
    table = tmp_path / "calibration.csv"
    table.write_text(",".join(COLUMNS) + "\n")
    assert main(["calibrate", "--from", str(table), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"lenbench: error: {table}: a calibration table with no rows, so no rung to reuse; pass the calibration.csv "
        "of a run that measured some, or leave out --from"]
    assert not (tmp_path / "o").exists()


def test_from_an_unreadable_table_is_one_line(tmp_path, capsys, monkeypatch):
    """Permission denied (as root a chmod does not deny it, so the read is made to fail)."""
    import pandas as pd

    def denied(path, **_):
        raise PermissionError(13, "Permission denied", str(path))

    table = tmp_path / "calibration.csv"
    table.write_text(",".join(COLUMNS) + "\n")
    monkeypatch.setattr(pd, "read_csv", denied)
    assert main(["calibrate", "--from", str(table), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"lenbench: error: {table}: cannot be read (Permission denied); pass a calibration.csv written by "
        "`lenbench calibrate`"]
