"""The train-short / test-long engine: suites, determinism, resume after a kill, failures per cell."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from lenbench_testing import TINY_SUITE, metric_rows, write_suite

from lenbench.config import SuiteError, load_suite, parse_suite
from lenbench.run.driver import run_cell, run_suite
from lenbench.run.store import load_cell_results

TINY = TINY_SUITE

def test_presets_load_and_expand():
    for name in ("smoke", "quick", "standard", "paper"):
        suite = load_suite(name)
        assert suite.cells(), name
        ids = [c.cell_id for c in suite.cells()]
        assert len(set(ids)) == len(ids), f"{name}: cell ids collide"


def test_quick_suite_meets_its_contract():
    suite = load_suite("quick")
    encodings = {e.name for e in suite.encodings}
    assert {"nope", "sinusoidal", "learned", "rope", "alibi", "t5"} <= encodings and len(encodings) >= 7
    assert "lm" in {t.name for t in suite.tasks} and len(suite.tasks) >= 3
    assert {"linear", "ntk", "yarn"} <= {v.rope_type for v in suite.variants}


def test_cell_ids_are_stable_and_sensitive():
    a = parse_suite(TINY).cells()
    b = parse_suite(TINY).cells()
    assert [c.cell_id for c in a] == [c.cell_id for c in b]
    changed = parse_suite({**TINY, "train": {**TINY["train"], "steps": 7}}).cells()
    assert a[0].cell_id != changed[0].cell_id
    # evaluation settings change the cell but not the checkpoint
    more_eval = parse_suite({**TINY, "eval": {"ratios": [1, 2], "samples": 8}}).cells()
    assert a[0].cell_id != more_eval[0].cell_id and a[0].train_id == more_eval[0].train_id


def test_same_cell_twice_gives_identical_metrics(tmp_path):
    cell = parse_suite(TINY).cells()[1]  # rope, with the linear variant
    r1 = run_cell(cell, tmp_path / "a", "cpu", progress=False)
    r2 = run_cell(cell, tmp_path / "b", "cpu", progress=False)
    assert r1.status == r2.status == "ok"
    assert [(r["variant"], r["ratio"], r["metric"], r["value"]) for r in r1.rows] == \
           [(r["variant"], r["ratio"], r["metric"], r["value"]) for r in r2.rows]
    assert {r["variant"] for r in r1.rows} == {"none", "linear"}


def test_rerun_skips_finished_cells_and_reuses_checkpoints(tmp_path):
    suite = parse_suite(TINY)
    first = run_suite(suite, tmp_path, device="cpu", progress=False).computed
    assert len(first) == 2 and len(list((tmp_path / "checkpoints").glob("*.pt"))) == 2
    assert run_suite(suite, tmp_path, device="cpu", progress=False).computed == []
    # a new evaluation setting re-evaluates from the cached checkpoints without retraining
    more = parse_suite({**TINY, "eval": {"ratios": [1, 1.5, 2], "samples": 4}})  # same longest length
    results = run_suite(more, tmp_path, device="cpu", progress=False).computed
    assert len(results) == 2 and len(list((tmp_path / "checkpoints").glob("*.pt"))) == 2
    assert {r["ratio"] for r in results[0].rows} == {1.0, 1.5, 2.0}


@pytest.mark.subprocess
def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path):
    data = {**TINY, "train": {**TINY["train"], "steps": 150}, "encodings": ["nope", "rope", "alibi", "t5"]}
    path = write_suite(tmp_path, data)
    ref = tmp_path / "ref"
    run_suite(parse_suite(data), ref, device="cpu", progress=False)

    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "lenbench.cli", "run", "--suite", str(path), "--out", str(out), "--device", "cpu", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((out / "cells").glob("*.json"))) < 1:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # midway: at least one cell done, the others not
    proc.wait()
    done = len(list((out / "cells").glob("*.json")))
    assert 1 <= done < 4, f"kill landed at {done} finished cells"

    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert metric_rows(out) == metric_rows(ref)
    assert len(load_cell_results(out)) == 4
    assert not list((out / "cells").glob(".*.tmp")), "a temporary file was left behind"


def test_training_divergence_fails_only_that_cell(tmp_path, monkeypatch):
    from lenbench.model import Transformer

    forward = Transformer.forward

    def diverging(self, tokens, *args, **kw):  # rope models produce NaN logits while training
        logits = forward(self, tokens, *args, **kw)
        return logits * float("nan") if self.training and self.cfg.encoding == "rope" else logits

    monkeypatch.setattr(Transformer, "forward", diverging)
    results = run_suite(parse_suite(TINY), tmp_path, device="cpu", progress=False).computed
    by_enc = {r.config["encoding"]: r for r in results}
    assert by_enc["nope"].status == "ok" and by_enc["nope"].rows
    assert by_enc["rope"].status == "failed" and "nan" in by_enc["rope"].error.lower()
    assert json.loads((tmp_path / "cells" / f"{by_enc['rope'].cell_id}.json").read_text())["status"] == "failed"


def test_unrepresentable_length_is_a_failed_row_not_a_crash(tmp_path):
    data = {**TINY, "encodings": [{"name": "learned", "params": {"max_len": 8}}]}  # copy L=4 → 8 tokens; 2x needs 16
    (result,) = run_suite(parse_suite(data), tmp_path, device="cpu", progress=False).computed
    assert result.status == "ok"
    model_rows = [r for r in result.rows if not r["encoding"].startswith("baseline:")]  # baselines: every length
    ok = {r["ratio"] for r in model_rows if r["status"] == "ok"}
    failed = [r for r in model_rows if r["status"] == "failed"]
    assert ok == {1.0} and {r["ratio"] for r in failed} == {2.0}
    assert all("cannot represent length 16" in r["error"] and r["value"] is None for r in failed)


def test_finetune_variant_trains_at_target_length(tmp_path):
    data = {**TINY, "encodings": ["rope"],
            "variants": [{"rope_type": "linear", "finetune_steps": 3, "finetune_ratio": 2}]}
    (result,) = run_suite(parse_suite(data), tmp_path, device="cpu", progress=False).computed
    variants = {r["variant"] for r in result.rows}
    assert variants == {"none", "finetune-linear-x2"}
    assert len(list((tmp_path / "checkpoints").glob("*-ft-*.pt"))) == 1


@pytest.mark.parametrize("patch,message", [
    ({"tasks": [{"name": "cpy", "train_len": 4}]}, "unknown task 'cpy'; did you mean 'copy'?"),
    ({"encodings": ["alibii"]}, "unknown encoding 'alibii'; did you mean 'alibi'?"),
    ({"variants": ["yarm"]}, "unknown variant 'yarm'; did you mean 'yarn'?"),
    ({"trian": {}}, "unknown key suite.trian; did you mean 'train'?"),
    ({"train": {"stpes": 3}}, "unknown key train.stpes; did you mean 'steps'?"),
    ({"encodings": [{"name": "rope", "params": {"thta": 1}}]}, "has no parameter 'thta'; did you mean 'theta'?"),
    ({"train": {"steps": "many"}}, "train.steps must be int"),
])
def test_malformed_suites_name_file_key_and_fix(tmp_path, patch, message):
    path = write_suite(tmp_path, {**TINY, **patch}, "bad.yaml")
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    assert message in str(err.value) and "bad.yaml" in str(err.value)
    assert "\n" not in str(err.value)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "lenbench.cli", *args], capture_output=True, text=True)


@pytest.mark.subprocess
def test_cli_errors_are_one_line(tmp_path):
    bad = write_suite(tmp_path, {**TINY, "encodings": ["rop"]}, "bad.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("tasks: [copy\n")
    for args, needle in [
        (("run", "--suite", str(bad)), "did you mean 'rope'"),
        (("run", "--suite", str(broken)), "not valid YAML"),
        (("run", "--suite", "quik"), "unknown suite 'quik'; did you mean 'quick'?"),
        (("run", "--suite", str(write_suite(tmp_path, TINY)), "--device", "cuda", "--out", str(tmp_path / "o")),
         "device 'cuda' is not available"),
    ]:
        proc = _cli(*args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.subprocess
def test_cli_lists_encodings_tasks_and_suites():
    out = _cli("list", "encodings").stdout
    for name in ("nope", "sinusoidal", "learned", "rope", "alibi", "t5", "variant yarn", "Press et al. 2022"):
        assert name in out
    assert "passkey" in _cli("list", "tasks").stdout
    assert "quick" in _cli("list", "suites").stdout


def test_every_rope_variant_evaluates_at_16x(tmp_path):
    """Each rope_type of the registry, swapped onto a trained model, evaluates at 16× the training length."""
    from lenbench.encodings.rope_types import ROPE_TYPES

    half = 8 // 2  # head_dim 8 → 4 frequencies
    # dynamic NTK takes a pinned factor, as deployed (key "dynamic@2"); longrope its factor lists
    params = {"longrope": {"short_factor": [1.0] * half, "long_factor": [2.0] * half}, "dynamic": {"factor": 2}}
    variants = [{"rope_type": name, "params": params.get(name, {})} for name in ROPE_TYPES.names()]
    data = {**TINY, "encodings": ["rope"], "eval": {"ratios": [1, 16], "samples": 2}, "variants": variants}
    (result,) = run_suite(parse_suite(data), tmp_path, device="cpu", progress=False).computed
    assert result.status == "ok", result.error
    assert all(r["status"] == "ok" for r in result.rows), [r["error"] for r in result.rows if r["error"]]
    keys = {"dynamic@2" if name == "dynamic" else name for name in ROPE_TYPES.names()}
    assert {r["variant"] for r in result.rows if r["ratio"] == 16.0} == {"none", *keys}


@pytest.mark.subprocess
def test_workers_run_cells_in_parallel_with_the_same_rows(tmp_path):
    data = {**TINY, "train": {**TINY["train"], "steps": 20}, "encodings": ["nope", "rope", "alibi", "t5"]}
    path = write_suite(tmp_path, data)
    for workers in ("1", "2"):
        proc = _cli("run", "--suite", str(path), "--out", str(tmp_path / workers), "--device", "cpu",
                    "--workers", workers, "--quiet")
        assert proc.returncode == 0, proc.stderr
        assert "4 cell(s) run, 0 already done, 0 failed" in proc.stdout
    assert metric_rows(tmp_path / "1") == metric_rows(tmp_path / "2")
