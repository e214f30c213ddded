"""Issue 38, gaps 3-5: what a results directory holds is used only when it is what it claims to be.

- gap 3: a checkpoint copied over another cell's (same code, so the fingerprint matched) was loaded;
  its metadata now names the checkpoint it was saved as.
- gap 4: a cell file with a valid envelope and rows that are not this cell's, or not rows the engine
  writes, was treated as finished; it is now moved aside, named, and recomputed.
- gap 5: a failure of the environment (a bad environment variable) was stored as failed cells and
  reused; such a failure is now never cached, and the summary never says "0 failed" over failed cells.
"""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch
from lenbench_testing import TINY_SUITE

from lenbench.config import parse_suite
from lenbench.run.cell import compute_cell
from lenbench.run.checkpoint import load_checkpoint_bytes
from lenbench.run.driver import make_job, run_suite
from lenbench.run.store import cell_path, checkpoint_path, load_cell_results, load_rows

TINY = {**{k: v for k, v in TINY_SUITE.items() if k != "variants"},
        "train": {**TINY_SUITE["train"], "steps": 8}, "encodings": ["nope"], "seeds": [0, 1]}


def run(suite: dict, out, **kw):
    log: list[str] = []
    result = run_suite(parse_suite(suite), out, device="cpu", progress=False, log=log.append, **kw)
    return result, log


def rows_of(out) -> list[tuple]:
    return sorted((r["cell_id"], r["encoding"], r["eval_len"], r["metric"], repr(r["value"])) for r in load_rows(out))


# --- gap 3: a checkpoint names what it is ---------------------------------------------------------


def test_a_checkpoint_copied_over_another_cells_is_refused_and_retrained(tmp_path):
    run(TINY, tmp_path)
    reference = rows_of(tmp_path)
    by_seed = {r.config["seed"]: r for r in load_cell_results(tmp_path)}
    mine, other = checkpoint_path(tmp_path, by_seed[1].train_id), checkpoint_path(tmp_path, by_seed[0].train_id)
    _, meta = load_checkpoint_bytes(other.read_bytes(), torch.device("cpu"))
    assert meta["checkpoint"] == by_seed[0].train_id
    shutil.copyfile(other, mine)  # same code and shapes: only the name tells them apart
    cell_path(tmp_path, by_seed[1].cell_id).unlink()
    again, log = run(TINY, tmp_path)
    assert [r.cell_id for r in again.computed] == [by_seed[1].cell_id]
    assert len(log) == 1 and f"{mine} is damaged" in log[0]
    assert f"it is checkpoint {by_seed[0].train_id} (copied over this one?)" in log[0]
    assert mine.with_name(mine.name + ".corrupt").is_file()
    assert rows_of(tmp_path) == reference  # retrained, not seed 0's weights


def test_a_job_handed_another_cells_checkpoint_retrains(tmp_path):
    first, second = parse_suite(TINY).cells()
    trained = compute_cell(make_job(first, tmp_path, "cpu"))
    job = dataclasses.replace(make_job(second, tmp_path, "cpu"),
                              checkpoints={second.train_id: trained.checkpoints[first.train_id]})
    outcome = compute_cell(job)
    assert outcome.notes["rejected_checkpoints"] == {
        second.train_id: f"ValueError: it is checkpoint {first.train_id} (copied over this one?)"}
    assert second.train_id in outcome.checkpoints


# --- gap 4: rows that are not this cell's ---------------------------------------------------------


def _tamper(row: dict, other: dict) -> None:
    row.update(other)


TAMPERED = {
    "another cell's rows": {"cell_id": "0123456789abcdef"},
    "another task's rows": {"task": "sort"},
    "another seed's rows": {"seed": 7},
    "another encoding's rows": {"encoding": "alibi"},
    "an unknown status": {"status": "weird"},
    "an ok row without a value": {"value": None},
    "an ok row with a NaN value": {"value": float("nan")},
    "a ratio that is not eval_len / train_len": {"ratio": 99.0},
    "sample scores that do not parse": {"sample_scores": "abc"},
}


@pytest.mark.parametrize("what", TAMPERED)
def test_a_cell_whose_rows_do_not_validate_is_moved_aside_named_and_recomputed(tmp_path, what):
    suite = {**TINY, "seeds": [0]}
    run(suite, tmp_path)
    reference = rows_of(tmp_path)
    [path] = (tmp_path / "cells").glob("*.json")
    data = json.loads(path.read_text())
    model_rows = [r for r in data["rows"] if r["encoding"] == "nope"]
    _tamper(model_rows[0], TAMPERED[what])
    path.write_text(json.dumps(data))
    again, log = run(suite, tmp_path)
    assert [r.cell_id for r in again.computed] == [path.stem]
    assert len(log) == 1 and log[0].startswith(f"lenbench: {path} is damaged (") and "moved it aside" in log[0]
    assert rows_of(tmp_path) == reference


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_the_engine_never_writes_a_non_finite_value_with_status_ok(tmp_path, value):
    from lenbench.results.cell import CellResult
    from lenbench.results.schema import ResultsError
    from lenbench.run.store import write_cell

    run({**TINY, "seeds": [0]}, tmp_path)
    [path] = (tmp_path / "cells").glob("*.json")
    result = CellResult.from_json(json.loads(path.read_text()), path)
    result.rows[0]["value"] = value
    with pytest.raises(ResultsError, match=r"row 0: value is a number \((nan|inf)\), expected a finite number in a "
                                           "row of status ok"):
        write_cell(tmp_path / "elsewhere", result.cell_id, result)


# --- gap 5: failures of the environment are not cached --------------------------------------------


def test_a_bad_environment_variable_is_one_line_before_anything_runs(tmp_path, monkeypatch, capsys):
    from lenbench_testing import write_suite

    from lenbench.cli import main

    monkeypatch.setenv("LENBENCH_MEMORY_BUDGET_GB", "lots")
    suite = write_suite(tmp_path, {**TINY, "seeds": [0]})
    code = main(["run", "--suite", str(suite), "--out", str(tmp_path / "out"), "--executor", "serial", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines() == [
        "lenbench: error: LENBENCH_MEMORY_BUDGET_GB='lots' is not a positive number of GiB; set e.g. "
        "LENBENCH_MEMORY_BUDGET_GB=8 or unset it"]
    assert not (tmp_path / "out").exists()


def test_a_cell_failed_by_its_environment_is_recorded_and_computed_again(tmp_path, monkeypatch):
    """A worker whose environment cannot be used (here: the memory budget setting, as a Ray node with
    another environment would see it) fails the cell with the reason, and the next run recomputes it."""
    from lenbench.run import cell as cell_module

    suite = {**TINY, "seeds": [0]}

    def broken(*_a, **_k):
        raise ValueError("LENBENCH_MEMORY_BUDGET_GB='lots' is not a positive number of GiB")

    monkeypatch.setattr(cell_module, "memory_budget", broken)
    first, _ = run(suite, tmp_path)
    [failed] = first.computed
    assert failed.failed and failed.outside == ("OutsideCell: ValueError: LENBENCH_MEMORY_BUDGET_GB='lots' is not a "
                                                "positive number of GiB")
    monkeypatch.undo()
    again, log = run(suite, tmp_path)
    assert [r.status for r in again.computed] == ["ok"] and again.done == 0
    assert log == [f"lenbench: recomputing 1 stale cell(s): failed for a reason outside the cell: {failed.outside}"]


def test_a_length_that_ran_out_of_memory_makes_the_cell_computed_again(tmp_path, monkeypatch):
    from lenbench.run import cell as cell_module

    suite = {**TINY, "seeds": [0]}
    real = cell_module.evaluate_length

    def short_of_memory(net, task, eval_len, **kw):
        if eval_len > 4:
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")
        return real(net, task, eval_len, **kw)

    monkeypatch.setattr(cell_module, "evaluate_length", short_of_memory)
    first, _ = run(suite, tmp_path)
    [cell] = first.computed
    assert cell.status == "ok" and cell.outside.startswith("none at length 8: RuntimeError: [enforce fail")
    assert any(r["status"] == "failed" and r["eval_len"] == 8 for r in cell.rows)
    monkeypatch.undo()
    again, log = run(suite, tmp_path)
    assert len(again.computed) == 1 and again.computed[0].outside is None
    assert all(r["status"] == "ok" for r in again.computed[0].rows)
    assert len(log) == 1 and "failed for a reason outside the cell: none at length 8" in log[0]


def test_the_summary_counts_failed_cells_kept_from_an_earlier_run(tmp_path, monkeypatch, capsys):
    from lenbench_testing import write_suite

    from lenbench.cli import main
    from lenbench.run import cell as cell_module

    suite = write_suite(tmp_path, {**TINY, "seeds": [0]})
    args = ["run", "--suite", str(suite), "--out", str(tmp_path / "out"), "--executor", "serial", "--quiet"]

    def diverges(*_a, **_k):
        raise FloatingPointError("training loss became nan at step 3")

    monkeypatch.setattr(cell_module, "train_model", diverges)  # the cell's own failure: it would recur
    main(args)
    assert "1 cell(s) run, 0 already done, 1 failed;" in capsys.readouterr().out
    monkeypatch.undo()
    main(args)
    out = capsys.readouterr().out
    assert "0 cell(s) run, 1 already done, 1 failed (1 of them in an earlier run; --retry-failed reruns them);" in out
    [title] = [r.title for r in load_cell_results(tmp_path / "out")]
    assert f"  failed before: {title}" in out.splitlines()
