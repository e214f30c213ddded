"""The `ray` executor on a real Ray (no mocks): a two-node cluster simulated on this machine
(`ray.cluster_utils.Cluster`, one CPU per node) is shared by the whole module.

Proves: rows identical to a serial run (failed cells included), cells spread over both nodes, the
suite's resources reach the tasks, a worker killed mid-cell is retried (bounded, recorded) and every
row ends up once, Ctrl-C and a killed driver lose nothing finished and a rerun resumes, and
bad input gives one-line errors. Skipped when Ray (the `ray` extra) is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lenbench_testing import default_sigint

from lenbench.config import ResourceSpec, SuiteError, parse_suite
from lenbench.results.cell import CellResult
from lenbench.run.driver import run_suite
from lenbench.run.store import load_cell_results, load_rows

pytestmark = pytest.mark.ray

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason='Ray is not installed (pip install -e ".[ray]")')

TINY = {
    "name": "tiny-ray",
    "model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "ff_mult": 2},
    "train": {"steps": 10, "batch_size": 4, "lr": 0.003, "warmup": 2},
    "eval": {"ratios": [1, 2], "samples": 4},
    "resources": {"num_cpus": 1, "memory_gb": 0.25},
    # copy cells train and evaluate; lm cells raise inside the worker (no such corpus): failed cells
    "tasks": [{"name": "copy", "train_len": 4}, {"name": "lm", "train_len": 8, "params": {"path": "/nonexistent/corpus.txt"}}],
    "encodings": ["nope", "rope"],
    "variants": ["linear"],
}
#: Row fields that legitimately differ between two runs (wall clock).
CLOCK_FIELDS = ("timestamp", "train_seconds")


def comparable_rows(out) -> list[dict]:
    rows = [{k: v for k, v in r.items() if k not in CLOCK_FIELDS} for r in load_rows(out)]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


def statuses(out) -> dict[str, tuple[str, str]]:
    return {r.title: (r.status, r.error) for r in load_cell_results(out)}


# --- the suite's resources section (no Ray needed) -----------------------------------------------


def test_resources_section_is_typed_and_optional():
    assert parse_suite({k: v for k, v in TINY.items() if k != "resources"}).resources == ResourceSpec()
    spec = parse_suite({**TINY, "resources": {"num_cpus": 2, "num_gpus": 0.25, "memory_gb": 1.5}}).resources
    assert spec == ResourceSpec(num_cpus=2.0, num_gpus=0.25, memory_gb=1.5)
    # resources never change what a cell computes, so never its id
    assert [c.cell_id for c in parse_suite(TINY).cells()] == \
           [c.cell_id for c in parse_suite({**TINY, "resources": {"num_cpus": 4}}).cells()]


@pytest.mark.parametrize("resources, message", [
    ({"num_cpu": 1}, "unknown key resources.num_cpu; did you mean 'num_cpus'?"),
    ({"num_cpus": 0}, "resources.num_cpus must be > 0, got 0.0"),
    ({"num_gpus": -1}, "resources.num_gpus must be >= 0, got -1.0"),
    ({"memory_gb": "lots"}, "resources.memory_gb must be float, got 'lots'"),
])
def test_bad_resources_name_the_key(resources, message):
    with pytest.raises(SuiteError, match=message.replace("?", r"\?").replace("(", r"\(").replace(")", r"\)")):
        parse_suite({**TINY, "resources": resources})


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lenbench.cli", *args], capture_output=True, text=True, **kw)


@pytest.mark.subprocess
def test_ray_address_needs_the_ray_executor(tmp_path):
    proc = _cli("run", "--suite", "smoke", "--out", str(tmp_path), "--ray-address", "auto")
    assert proc.returncode == 2 and proc.stderr == "lenbench: error: --ray-address needs --executor ray\n"


# --- a shared two-node cluster -------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    if not HAVE_RAY:
        pytest.skip('Ray is not installed (pip install -e ".[ray]")')
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False, configure_logging=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serial")
    run_suite(parse_suite(TINY), out, device="cpu", progress=False)
    return out


@pytest.fixture(scope="module")
def ray_run(cluster, tmp_path_factory) -> tuple[Path, list[CellResult]]:
    out = tmp_path_factory.mktemp("ray")
    results = run_suite(parse_suite(TINY), out, device="cpu", executor="ray", progress=False).computed
    return out, results


@needs_ray
def test_rows_identical_to_a_serial_run(serial_run, ray_run):
    out, results = ray_run
    assert len(results) == 4
    assert comparable_rows(out) == comparable_rows(serial_run)
    models = {(r["encoding"], r["variant"]) for r in load_rows(out) if not r["encoding"].startswith("baseline:")}
    assert models == {("nope", "none"), ("rope", "none"), ("rope", "linear")}
    assert statuses(out) == statuses(serial_run)
    assert statuses(out)["lm-rope-L8-s0"] == ("failed", "ValueError: task 'lm': corpus path '/nonexistent/corpus.txt' is not a file")
    assert {r.status for r in results if r.title.startswith("copy")} == {"ok"}


@needs_ray
def test_cells_run_on_both_nodes(cluster, ray_run):
    import ray

    _, results = ray_run
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(nodes) == 2
    assert {r.executor["node_id"] for r in results} == nodes


@needs_ray
def test_suite_resources_reach_the_tasks(ray_run):
    out, results = ray_run
    for r in results:
        assert r.executor["resources"] == {"CPU": 1.0, "memory": 0.25 * 2**30}
        assert r.executor["attempts"] == 1 and r.executor["lost"] == []
    # the notes are stored beside the rows in the cell file, never in them
    stored = load_cell_results(out)
    assert all(s.executor for s in stored) and not any("node_id" in row for s in stored for row in s.rows)


def exit_once(markers: Path):
    """A Ray task that kills its own worker process (`os._exit`) on each cell's first attempt, after
    leaving a marker file in `markers`, as a lost worker would; later attempts run the cell."""
    def task(job):
        marker = markers / job.cell.cell_id
        if not marker.exists():
            marker.touch()
            os._exit(1)  # a lost worker, as far as Ray can tell
        from lenbench.run.executors.ray import run_on_worker

        return run_on_worker(job)
    return task


@needs_ray
def test_worker_killed_mid_cell_is_retried_and_every_row_stored_once(cluster, serial_run, tmp_path):
    (tmp_path / "markers").mkdir()
    results = run_suite(parse_suite(TINY), tmp_path / "out", device="cpu", executor="ray", max_retries=2,
                        task=exit_once(tmp_path / "markers"), progress=False).computed
    assert len(results) == 4 and len(list((tmp_path / "markers").iterdir())) == 4
    for r in results:
        assert r.executor["attempts"] == 2 and r.executor["retries"] == 1
        assert r.executor["lost"][0].startswith("WorkerCrashedError")
    assert comparable_rows(tmp_path / "out") == comparable_rows(serial_run)
    assert statuses(tmp_path / "out") == statuses(serial_run)


@needs_ray
def test_retries_are_bounded_and_the_cell_fails_with_the_reason(cluster, tmp_path):
    (tmp_path / "markers").mkdir()
    suite = parse_suite({**TINY, "tasks": TINY["tasks"][:1]})
    results = run_suite(suite, tmp_path / "out", device="cpu", executor="ray", max_retries=0,
                        task=exit_once(tmp_path / "markers"), progress=False).computed
    assert len(results) == 2
    for r in results:
        assert r.status == "failed" and r.rows == [] and r.executor["attempts"] == 1
        assert r.error.startswith("RayWorkerLost: the cell lost its worker 1 time(s) (max_retries=0): "
                                     "WorkerCrashedError")
        assert r.error.endswith("; rerun with --retry-failed")


@pytest.mark.subprocess
@needs_ray
def test_interrupt_and_kill_lose_nothing_and_a_rerun_resumes(cluster, tmp_path):
    # 6 cells, 2 at a time on the cluster; 300 steps (about a second each), so that the interrupt lands
    # before the last cell finishes on a loaded machine too
    data = {**TINY, "train": {**TINY["train"], "steps": 300}, "tasks": TINY["tasks"][:1], "seeds": [0, 1, 2],
            "variants": []}
    path = tmp_path / "suite.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lenbench.cli", "run", "--suite", str(path), "--out", str(out), "--device", "cpu",
           "--quiet", "--executor", "ray", "--ray-address", cluster.address]

    def done() -> int:
        return len(list((out / "cells").glob("*.json")))

    def start_and_wait_for(cells: int) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=default_sigint)
        deadline = time.time() + 600  # generous: on a machine shared with other runs the first cell can take minutes
        while time.time() < deadline and done() < cells and proc.poll() is None:
            time.sleep(0.05)
        assert done() >= cells or proc.poll() is not None, f"no {cells} finished cell(s) within 600 s"
        return proc

    # Ctrl-C: outstanding tasks cancelled, a clean exit, the finished cells kept
    proc = start_and_wait_for(1)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "lenbench: interrupted; finished cells are kept, rerun the same command to resume"
    after_interrupt = {p.name: p.read_bytes() for p in (out / "cells").glob("*.json")}
    assert 1 <= len(after_interrupt) < 6, f"the interrupt landed at {len(after_interrupt)} finished cells"

    # SIGKILL of the driver (and its process group): nothing finished is lost
    proc = start_and_wait_for(len(after_interrupt) + 1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    killed_at = done()
    assert len(after_interrupt) <= killed_at

    # the same command resumes: only unfinished cells run, every cell ends up once
    final = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    assert f"{6 - killed_at} cell(s) run, {killed_at} already done, 0 failed" in final.stdout
    results = load_cell_results(out)
    assert sorted(r.cell_id for r in results) == sorted(c.cell_id for c in parse_suite(data).cells())
    assert all(r.status == "ok" for r in results)
    assert all((out / "cells" / name).read_bytes() == data for name, data in after_interrupt.items())
    assert not list((out / "cells").glob(".*.tmp")), "a temporary file was left behind"


@pytest.mark.subprocess
@needs_ray
def test_no_cluster_at_the_address_is_a_one_line_error(tmp_path):
    proc = _cli("run", "--suite", "smoke", "--out", str(tmp_path), "--device", "cpu", "--quiet",
                "--executor", "ray", "--ray-address", "127.0.0.1:1", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("lenbench: error: no Ray cluster answers at 127.0.0.1:1 (Connection refused); "
                                  "start one with `ray start --head`")
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.subprocess
@needs_ray
def test_pytest_bench_runs_the_cells_on_ray_one_benchmark_each(cluster, serial_run, tmp_path):
    suite = tmp_path / "tiny.yaml"
    suite.write_text(json.dumps({**TINY, "tasks": TINY["tasks"][:1]}))  # copy cells only: all pass
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/test_extrapolation.py", "--suite", str(suite), "--device", "cpu",
         "--results-dir", str(out), "--benchmark-json", str(tmp_path / "bench.json"), "-q", "-p", "no:cacheprovider",
         "--executor", "ray", "--ray-address", cluster.address],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    benches = json.loads((tmp_path / "bench.json").read_text())["benchmarks"]
    assert sorted(b["param"] for b in benches) == ["copy-nope-L4-s0", "copy-rope-L4-s0"]
    cells = [b["extra_info"]["lenbench_cell"] for b in benches]
    assert all(c["computed_by"] == "ray" and not c["reused"] and c["round"] == "cache load" for c in cells)  # on Ray, before the tests
    assert all(r.executor["executor"] == "ray" for r in load_cell_results(out))
    assert comparable_rows(out) == [r for r in comparable_rows(serial_run) if r["task"] == "copy"]


@needs_ray
def test_gpu_cells_without_gpu_resources_are_a_one_line_error(cluster):
    from lenbench.run.cell import CellJob
    from lenbench.run.executors.ray import RayExecutor, RayExecutorError

    suite = parse_suite(TINY)
    with RayExecutor(suite=suite) as executor, pytest.raises(RayExecutorError, match=(
            r"^--device cuda but the suite's resources.num_gpus is 0, so Ray hides the GPUs from every cell; "
            r"set resources.num_gpus \(e.g. 0.25\)$")):
        next(executor.run([CellJob(cell=suite.cells()[0], device="cuda", threads=1)]))
    with RayExecutor(suite=parse_suite({**TINY, "resources": {"num_gpus": 1}})) as executor, \
            pytest.raises(RayExecutorError, match=r"^each cell asks for 1 GPU \(suite resources\) but the Ray cluster has 0"):
        next(executor.run([]))


@needs_ray
def test_plugins_on_the_cluster_match_the_process_executor_and_edits_recompute_their_cells(cluster, tmp_path,
                                                                                            monkeypatch):
    """A file plugin (the encoding, shipped in each job as its source) and an entry-point plugin
    (the task, imported by name on the workers from the directory the driver found it in) on the
    two-node cluster: the same rows as the process executor, both nodes used; an edit of the file
    plugin recomputes exactly its cells there."""
    from lenbench_testing import PLUGIN_SUITE, plugin_sandbox, write_plugin_distribution, write_plugins

    enc, _ = write_plugins(tmp_path / "mine")
    monkeypatch.syspath_prepend(str(write_plugin_distribution(tmp_path / "site")))
    data = {**PLUGIN_SUITE, "plugins": [str(enc)], "tasks": [{"name": "ep-running-max", "train_len": 8}],
            "encodings": ["nope", "alibi-steep"], "seeds": [0, 1]}
    with plugin_sandbox():
        suite = parse_suite(data)
        local, remote = tmp_path / "process", tmp_path / "ray"
        run_suite(suite, local, device="cpu", executor="process", workers=2, progress=False, log=lambda _: None)
        results = run_suite(suite, remote, device="cpu", executor="ray", progress=False, log=lambda _: None).computed
        assert len(results) == 4 and {r.status for r in results} == {"ok"}, [r.error for r in results]
        assert comparable_rows(remote) == comparable_rows(local)
        assert len({r.executor["node_id"] for r in load_cell_results(remote)}) == 2
        enc.write_text(enc.read_text().replace("scale: float = 2.0", "scale: float = 3.0"))
        lines: list[str] = []
        again = run_suite(parse_suite(data), remote, device="cpu", executor="ray", progress=False, log=lines.append).computed
        assert sorted(r.title for r in again) == ["ep-running-max-alibi-steep-L8-s0", "ep-running-max-alibi-steep-L8-s1"]
        assert "lenbench: recomputing 2 stale cell(s): source changed: plugin:steep.py" in lines
