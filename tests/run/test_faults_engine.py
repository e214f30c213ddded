"""Fault injection on the engine (issue 9, items 1, 2, 4, 5, 6, 8): stale code, thread counts,
unwritable directories, damaged files, memory budgets and concurrent runs, all on tiny real runs."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from lenbench_testing import TINY_SUITE, write_suite

from lenbench.config import parse_suite
from lenbench.model import Transformer
from lenbench.results.bench_rows import cell_rows
from lenbench.run.cell import compute_cell, default_threads, model_config
from lenbench.run.checkpoint import checkpoint_bytes, load_checkpoint_bytes
from lenbench.run.driver import ensure_cell, make_job, run_cell, run_suite
from lenbench.run.executors.base import WORKER_MEMORY_BYTES, plan_execution, usable_cores
from lenbench.run.memory import ENV_VAR, GIB, estimate, memory_budget
from lenbench.run.store import checkpoint_path, claim_cell, load_cell_results, load_rows
from lenbench.tasks import build_task

ROOT = Path(__file__).resolve().parents[2]

TINY = {**{k: v for k, v in TINY_SUITE.items() if k != "variants"},
        "train": {**TINY_SUITE["train"], "steps": 8}, "encodings": ["nope", "alibi", "rope"]}  # TINY_SUITE's geometry

KEYS = ("cell_id", "encoding", "variant", "eval_len", "metric", "value", "status", "threads", "code_fingerprint",
        "data_fingerprint", "python_version")


def rows_of(out) -> list[tuple]:
    return sorted(tuple(repr(r[k]) for k in KEYS) for r in load_rows(out))


def cli(*args, pythonpath: Path = ROOT, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    # cwd too: `python -m` puts the working directory first on sys.path
    return subprocess.run([sys.executable, "-m", "lenbench.cli", *args], capture_output=True, text=True, env=env,
                          cwd=pythonpath, **kw)


def run(suite: dict, out: Path, **kw):
    log: list[str] = []
    result = run_suite(parse_suite(suite), out, device="cpu", progress=False, log=log.append, **kw)
    return result, log


# --- item 1: cache keys ---------------------------------------------------------------------------


@pytest.mark.subprocess
def test_editing_an_encoding_reruns_exactly_its_cells(tmp_path):
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "lenbench", pkg / "lenbench", ignore=shutil.ignore_patterns("__pycache__"))
    suite = write_suite(tmp_path, TINY)
    out = tmp_path / "out"
    args = ("run", "--suite", str(suite), "--out", str(out), "--device", "cpu", "--quiet")
    first = cli(*args, pythonpath=pkg)
    assert first.returncode == 0, first.stderr
    assert "3 cell(s) run, 0 already done" in first.stdout
    before = {r.config["encoding"]: r for r in load_cell_results(out)}

    alibi = pkg / "lenbench" / "encodings" / "alibi.py"
    source = alibi.read_text()
    needle = "return -slopes[None, :, None, None]"
    assert needle in source
    alibi.write_text(source.replace(needle, "return -4 * slopes[None, :, None, None]"))  # the edit

    second = cli(*args, pythonpath=pkg)
    assert second.returncode == 0, second.stderr
    assert "1 cell(s) run, 2 already done" in second.stdout
    assert "recomputing 1 stale cell(s): source changed: encodings/alibi.py" in second.stderr
    after = {r.config["encoding"]: r for r in load_cell_results(out)}
    for enc in ("nope", "rope"):
        assert after[enc] == before[enc], f"{enc} was recomputed"
    new_fp = after["alibi"].provenance["code_fingerprint"]
    assert new_fp != before["alibi"].provenance["code_fingerprint"]
    assert {r["code_fingerprint"] for r in after["alibi"].rows} == {new_fp}
    # the checkpoint was retrained under the new code, not reloaded
    meta = torch.load(checkpoint_path(out, after["alibi"].train_id), weights_only=True)["meta"]
    assert meta["fingerprint"]["code_fingerprint"] == new_fp

    alibi.write_text(source)  # back to the original: stale again, but --keep-stale keeps it
    kept = cli(*args, "--keep-stale", pythonpath=pkg)
    assert "0 cell(s) run, 3 already done" in kept.stdout, kept.stdout + kept.stderr
    assert {r.config["encoding"]: r for r in load_cell_results(out)}["alibi"] == after["alibi"]


def test_fingerprint_covers_the_cells_code_and_nothing_else():
    from lenbench.run.fingerprint import source_files

    data = {**TINY, "encodings": ["rope", {"name": "randomized", "params": {"base": "alibi"}}]}
    rope, randomized = parse_suite(data).cells()
    core = {"run/cell.py", "model.py", "train.py", "evaluate.py", "tasks/base.py", "tasks/_common.py",
            "tasks/copying.py", "encodings/base.py"}
    assert core | {"encodings/rope.py", "encodings/rope_scaling.py"} <= set(source_files(rope))
    assert "encodings/alibi.py" not in source_files(rope)
    assert {"encodings/randomized.py", "encodings/alibi.py"} <= set(source_files(randomized))
    assert "encodings/rope_scaling.py" in source_files(rope)  # factor_at computes the RoPE factor (issue 19)
    for unrelated in ("cli.py", "report/rows.py", "report/plots/_style.py", "compare/gate.py",
                      "tasks/lm.py", "encodings/t5.py"):
        assert unrelated not in source_files(rope) + source_files(randomized)


def test_cells_of_an_older_lenbench_are_stale_and_rerun(tmp_path):
    run(TINY, tmp_path)
    path = next((tmp_path / "cells").glob("*.json"))
    old = json.loads(path.read_text())
    del old["fingerprint"]
    path.write_text(json.dumps(old))
    again, log = run(TINY, tmp_path)
    assert [r.cell_id for r in again.computed] == [old["cell_id"]]
    assert log == ["lenbench: recomputing 1 stale cell(s): no code fingerprint (made by an older lenbench)"]


@pytest.mark.subprocess
@pytest.mark.parametrize("executor", ["serial", "auto"])
def test_pytest_bench_marks_reused_cells_and_passes_threads(tmp_path, executor):
    """Serial: the first session's timed round trains the cell. auto (the default; this machine has
    several cores): the process executor computes it before the tests, which then read it. Either
    way a second session reuses it, and `--threads` reaches the rows."""
    suite = write_suite(tmp_path, {**TINY, "encodings": ["nope"]})

    def bench(name: str) -> dict:
        cmd = [sys.executable, "-m", "pytest", "bench/test_extrapolation.py", "--suite", str(suite), "--device", "cpu",
               "--results-dir", str(tmp_path / "results"), "--threads", "2", "--executor", executor,
               "--benchmark-json", str(tmp_path / name), "-q", "-p", "no:cacheprovider"]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        (b,) = json.loads((tmp_path / name).read_text())["benchmarks"]
        return b["extra_info"]

    first, second = bench("a.json"), bench("b.json")
    parallel = executor == "auto" and usable_cores() > 1
    cell = first["lenbench_cell"]
    assert (cell["reused"], cell["computed_by"]) == (False, "process" if parallel else "serial")
    assert cell["round"] == ("cache load" if parallel else "compute")
    assert (second["lenbench_cell"]["reused"], second["lenbench_cell"]["round"]) == (True, "cache load")
    assert second["lenbench_cell"]["seconds"] == cell["seconds"] > 0  # the stats: the compute time, either way
    assert second["lenbench_cell"]["computed_by"] is None
    assert second["lenbench_cell"]["train_seconds"] == first["lenbench_cell"]["train_seconds"] > 0
    assert {r["threads"] for r in cell_rows(second)} == {2}


def test_plan_execution_defaults(monkeypatch):
    """auto: CPU cells one process per core (capped by pending cells and memory), accelerators and
    one-core machines serial; explicit choices are kept; the default thread count is 1."""
    from lenbench.run.executors import base as executors
    monkeypatch.setattr(executors, "usable_cores", lambda: 8)
    assert plan_execution("auto", None, "cpu") == executors.ExecutionPlan("process", 8, "auto: CPU cells, one process per core")
    assert plan_execution("process", None, "cpu") == executors.ExecutionPlan("process", 8)
    assert plan_execution("auto", None, "cpu", pending=3).workers == 3
    assert plan_execution("auto", None, "cpu", available_memory=2 * WORKER_MEMORY_BYTES + 1).workers == 2
    assert plan_execution("auto", None, "cpu", available_memory=1).workers == 1
    assert plan_execution("auto", 4, "cpu", pending=1).workers == 4  # an explicit count is kept
    assert plan_execution("auto", 1, "cpu").executor == "serial"
    assert plan_execution("auto", None, "cuda").executor == "serial"
    assert plan_execution("auto", 3, "cuda") == executors.ExecutionPlan("process", 3, "auto: 3 processes as asked (--workers) on cuda")
    assert plan_execution("serial", None, "cpu") == executors.ExecutionPlan("serial", 1)
    assert plan_execution("serial", 3, "cpu").executor == "process"
    assert plan_execution("ray", None, "cpu").executor == "ray"
    monkeypatch.setattr(executors, "usable_cores", lambda: 1)
    assert plan_execution("auto", None, "cpu").executor == "serial"
    with pytest.raises(ValueError, match="--workers must be at least 1, got 0"):
        plan_execution("auto", 0, "cpu")
    assert default_threads() == 1


# --- item 2: threads -------------------------------------------------------------------------------


LM = {**TINY, "tasks": [{"name": "lm", "train_len": 16}], "encodings": ["nope", "alibi"],
      "train": {**TINY["train"], "steps": 10}}


@pytest.mark.slow
def test_serial_and_process_workers_give_bit_identical_lm_rows(tmp_path):
    serial, _ = run(LM, tmp_path / "serial")
    pooled, _ = run(LM, tmp_path / "pool", executor="process", workers=2)
    assert len(serial.computed) == len(pooled.computed) == 2
    assert rows_of(tmp_path / "serial") == rows_of(tmp_path / "pool")  # perplexity compared exactly (repr)
    rows = load_rows(tmp_path / "serial")
    assert {"perplexity", "nll"} <= {r["metric"] for r in rows}
    assert {r["threads"] for r in rows} == {1}  # the default: one intra-op thread per cell
    corpus = build_task("lm").fingerprint()["corpus_sha256"]
    assert {r["data_fingerprint"] for r in rows} == {corpus}
    assert all(r["python_version"] == sys.version.split()[0] for r in rows)


def test_thread_count_is_part_of_the_fingerprint(tmp_path):
    data = {**TINY, "encodings": ["nope"]}
    run(data, tmp_path, threads=2)
    again, log = run(data, tmp_path, threads=1)
    (again,) = again.computed
    assert log == ["lenbench: recomputing 1 stale cell(s): threads 2 → 1"]
    assert {r["threads"] for r in again.rows} == {1}
    assert again.fingerprint["threads"] == 1


# --- item 4: unwritable output ----------------------------------------------------------------------


def _no_training(monkeypatch):
    import lenbench.run.cell as cell_module

    def refuse(*a, **kw):
        raise AssertionError("trained although the output directory is not writable")

    monkeypatch.setattr(cell_module, "train_model", refuse)


def _unwritable_dirs(tmp_path: Path) -> list[Path]:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    dirs = [blocker / "out"]  # cannot be created, even by root
    if os.geteuid() != 0:  # root writes through permission bits
        ro = tmp_path / "read-only"
        ro.mkdir()
        ro.chmod(0o555)
        dirs.append(ro)
    return dirs


def test_unwritable_output_is_one_line_before_anything_trains(tmp_path, monkeypatch):
    _no_training(monkeypatch)
    cell = parse_suite(TINY).cells()[0]
    for out in _unwritable_dirs(tmp_path):
        for call in (lambda out=out: run_suite(parse_suite(TINY), out, device="cpu", progress=False),
                     lambda out=out: run_suite(parse_suite(TINY), out, device="cpu", progress=False, workers=2),
                     lambda out=out: run_cell(cell, out, "cpu", progress=False),
                     lambda out=out: ensure_cell(cell, out, "cpu", progress=False)):
            with pytest.raises(ValueError) as err:
                call()
            message = str(err.value)
            assert "\n" not in message and "is not writable" in message and str(out) in message


@pytest.mark.subprocess
def test_cli_run_and_report_refuse_an_unwritable_directory_in_one_line(tmp_path):
    suite = write_suite(tmp_path, TINY)
    run({**TINY, "encodings": ["nope"]}, tmp_path / "done")
    for out in _unwritable_dirs(tmp_path):
        for args in (("run", "--suite", str(suite), "--out", str(out), "--device", "cpu", "--quiet", "--workers", "2"),
                     ("report", str(tmp_path / "done"), "--out", str(out), "--no-plots")):
            proc = cli(*args)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 2 and len(lines) == 1, proc.stderr
            assert f"'{out}' is not writable" in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "read-only" / "cells").exists()


# --- item 5: damaged state ----------------------------------------------------------------------------


def test_truncated_cell_json_is_named_moved_aside_and_recomputed(tmp_path):
    run(TINY, tmp_path)
    reference = rows_of(tmp_path)
    path = sorted((tmp_path / "cells").glob("*.json"))[1]
    path.write_text(path.read_text()[:100])  # a write torn by a crash (or a disk-full copy)
    with pytest.raises(ValueError, match=f"cell file {path} is damaged"):
        load_cell_results(tmp_path)
    again, log = run(TINY, tmp_path)
    assert len(again.computed) == 1 and again.computed[0].cell_id == path.stem
    assert log[0].startswith(f"lenbench: {path} is damaged (JSONDecodeError") and len(log) == 1
    assert (tmp_path / "cells" / f"{path.name}.corrupt").is_file()
    assert rows_of(tmp_path) == reference


def test_corrupt_or_old_checkpoints_are_moved_aside_and_retrained(tmp_path):
    data = {**TINY, "encodings": ["nope", "rope"]}
    run(data, tmp_path)
    reference = rows_of(tmp_path)
    cells = {r.config["encoding"]: r for r in load_cell_results(tmp_path)}
    garbage = checkpoint_path(tmp_path, cells["nope"].train_id)
    garbage.write_bytes(garbage.read_bytes()[:200])  # truncated
    old = checkpoint_path(tmp_path, cells["rope"].train_id)
    state = torch.load(old, weights_only=True)["state_dict"]
    buf = io.BytesIO()
    torch.save(state, buf)  # the old format: a bare state dict
    old.write_bytes(buf.getvalue())
    for r in cells.values():  # the cells must be recomputed from their checkpoints
        (tmp_path / "cells" / f"{r.cell_id}.json").unlink()
    again, log = run(data, tmp_path)
    assert len(again.computed) == 2 and all(r.status == "ok" for r in again.computed)
    assert len(log) == 2 and all("is damaged" in line and "moved it aside" in line for line in log)
    assert garbage.with_name(garbage.name + ".corrupt").is_file() and old.with_name(old.name + ".corrupt").is_file()
    assert rows_of(tmp_path) == reference  # retrained deterministically
    assert torch.load(garbage, weights_only=True)["format"] == 1


def test_compute_cell_retrains_a_bad_checkpoint_handed_in(tmp_path):
    cell = parse_suite({**TINY, "encodings": ["nope"]}).cells()[0]
    good = compute_cell(make_job(cell, tmp_path, "cpu"))
    job = make_job(cell, tmp_path, "cpu")
    bad = dataclasses.replace(job, checkpoints={cell.train_id: b"\x00junk"})
    outcome = compute_cell(bad)
    assert outcome.result.status == "ok" and cell.train_id in outcome.notes["rejected_checkpoints"]
    assert cell.train_id in outcome.checkpoints
    values = lambda o: [(r["metric"], r["value"]) for r in o.result.rows]  # noqa: E731
    assert values(outcome) == values(good)
    # current fingerprint but a tensor of the wrong shape: the load fails after copying the others,
    # which must not leak into the retrained model
    state, meta = load_checkpoint_bytes(good.checkpoints[cell.train_id], torch.device("cpu"))
    state = {k: torch.zeros_like(v) for k, v in state.items()}
    state["head.weight"] = torch.zeros(3, 3)
    mismatched = dataclasses.replace(job, checkpoints={cell.train_id: checkpoint_bytes(state, meta)})
    outcome = compute_cell(mismatched)
    assert "Error(s) in loading state_dict" in outcome.notes["rejected_checkpoints"][cell.train_id]
    assert values(outcome) == values(good)


def test_leftover_temporary_files_are_cleaned(tmp_path):
    data = {**TINY, "encodings": ["nope"]}
    run(data, tmp_path)
    leftovers = [tmp_path / "cells" / ".abc.json.x1.tmp", tmp_path / "checkpoints" / ".abc.pt.x2.tmp"]
    for p in leftovers:
        p.write_text("partial")
    again, log = run(data, tmp_path)
    assert again.computed == [] and not any(p.exists() for p in leftovers)
    assert log == [f"lenbench: removed 2 temporary file(s) left by a killed run in {tmp_path}"]


# --- item 6: memory --------------------------------------------------------------------------------


def _model(data: dict) -> tuple[Transformer, object]:
    cell = parse_suite(data).cells()[0]
    task = build_task(cell.task.name, **cell.task.params)
    return Transformer(model_config(cell, task)), task


def test_memory_budget_shrinks_the_batch_with_the_same_metrics(tmp_path):
    data = {**TINY, "encodings": ["alibi"], "eval": {"ratios": [1, 2], "samples": 8}}
    model, task = _model(data)
    tokens = task.seq_len(8)
    budget = estimate(model, tokens).peak(3)  # 3 sequences of 2× fit, 8 do not
    tight = {**data, "eval": {**data["eval"], "memory_budget_gb": budget / GIB}}
    (free,) = run(data, tmp_path / "free")[0].computed
    (shrunk,) = run(tight, tmp_path / "tight")[0].computed
    assert free.memory["batch"] == {}
    assert shrunk.memory["batch"]["none@8"] in (2, 3)
    assert shrunk.cell_id == free.cell_id  # the budget is not part of the cell id
    assert [(r["eval_len"], r["metric"], r["value"], r["n_samples"]) for r in shrunk.rows] == \
           [(r["eval_len"], r["metric"], r["value"], r["n_samples"]) for r in free.rows]


def test_a_length_that_cannot_fit_fails_only_its_rows(tmp_path):
    data = {**TINY, "encodings": ["alibi"], "eval": {"ratios": [1, 64], "samples": 2}}
    model, task = _model(data)
    long = estimate(model, task.seq_len(256))
    budget = long.peak(1) - long.per_sequence // 2  # 1× fits, one sequence at 64× does not
    (result,) = run({**data, "eval": {**data["eval"], "memory_budget_gb": budget / GIB}}, tmp_path)[0].computed
    assert result.status == "ok"
    model_rows = [r for r in result.rows if not r["encoding"].startswith("baseline:")]  # baselines need no model
    ok = [r for r in model_rows if r["status"] == "ok"]
    failed = [r for r in model_rows if r["status"] == "failed"]
    assert {r["ratio"] for r in ok} == {1.0} and {r["ratio"] for r in failed} == {64.0}
    for r in failed:
        assert r["error"].startswith("MemoryBudgetExceeded: evaluating 512 tokens needs ~")
        assert "raise eval.memory_budget_gb" in r["error"] and "\n" not in r["error"]


def test_memory_budget_sources(monkeypatch):
    cpu = torch.device("cpu")
    assert memory_budget(cpu, 0.5) == GIB // 2
    monkeypatch.setenv(ENV_VAR, "0.25")
    assert memory_budget(cpu) == GIB // 4 and memory_budget(cpu, 1.0) == GIB
    monkeypatch.setenv(ENV_VAR, "lots")
    with pytest.raises(ValueError, match=f"{ENV_VAR}='lots' is not a positive number of GiB"):
        memory_budget(cpu)
    monkeypatch.delenv(ENV_VAR)
    assert 0 < memory_budget(cpu)


def test_available_accelerator_memory_counts_what_the_caching_allocator_holds_unused(monkeypatch):
    """The driver's free memory plus reserved − allocated of this process (no GPU needed: the
    backend's three counters are scripted)."""
    from lenbench.run.memory import available_bytes

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10 * GIB, 80 * GIB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 6 * GIB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 2 * GIB)
    assert available_bytes(torch.device("cuda")) == 14 * GIB
    assert available_bytes(torch.device("meta")) is None


def test_estimate_grows_with_the_square_of_the_length_for_a_bias():
    def weights(m):
        return sum(t.numel() * t.element_size() for t in (*m.parameters(), *m.buffers()))

    model, _ = _model({**TINY, "encodings": ["alibi"]})  # H = 2 heads
    a, b = estimate(model, 100), estimate(model, 200)
    assert a.fixed - weights(model) == (2 * 2 + 3) * 100**2 * 4  # bias, causal mask, sum, distances
    assert b.fixed - weights(model) == 4 * (a.fixed - weights(model))
    nope, _ = _model({**TINY, "encodings": ["nope"]})
    assert estimate(nope, 200).fixed == weights(nope)  # no mask at all: SDPA's causal kernel


# --- item 8: concurrency ---------------------------------------------------------------------------


@pytest.mark.subprocess
def test_a_cell_claimed_by_a_live_process_is_skipped_then_taken_over(tmp_path):
    data = {**TINY, "encodings": ["nope", "alibi"]}
    cells = parse_suite(data).cells()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = tmp_path / "locks" / f"{cells[1].cell_id}.lock"
        lock.parent.mkdir(parents=True)
        lock.write_text(json.dumps({"pid": sleeper.pid, "host": os.uname().nodename, "started": "now"}))
        first, log = run(data, tmp_path)
        assert [r.cell_id for r in first.computed] == [cells[0].cell_id]
        assert first.busy == [(cells[1].title, json.loads(lock.read_text()))]
        assert log == [f"lenbench: skipped {cells[1].title}: another run (pid {sleeper.pid} on "
                       f"{os.uname().nodename}) is computing it"]
        with pytest.raises(ValueError, match=f"cell {cells[1].title} is still held by pid {sleeper.pid} on .* "
                           f"after 0.2 s; if that run is gone, delete {lock}"):
            ensure_cell(cells[1], tmp_path, "cpu", progress=False, poll=0.05, wait_s=0.2)
    finally:
        sleeper.kill()
        sleeper.wait()
    second, _ = run(data, tmp_path)  # the holder died: its lock is taken over
    assert [r.cell_id for r in second.computed] == [cells[1].cell_id] and not lock.exists()
    assert isinstance(claim_cell(tmp_path, cells[1]), Path)


@pytest.mark.subprocess
def test_two_concurrent_runs_compute_each_cell_once(tmp_path):
    data = {**TINY, "train": {**TINY["train"], "steps": 60}, "encodings": ["nope", "alibi", "rope", "t5"]}
    suite = write_suite(tmp_path, data)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lenbench.cli", "run", "--suite", str(suite), "--out", str(out), "--device", "cpu",
           "--quiet", "--threads", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)]
    time.sleep(0.5)
    procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    ran = [int(stdout.split(" cell(s) run")[0].split()[-1]) for stdout, _ in outputs]
    assert sum(ran) == 4, outputs
    assert len(load_cell_results(out)) == 4 and not list((out / "locks").glob("*.lock"))
    assert len({r["cell_id"] for r in load_rows(out)}) == 4
