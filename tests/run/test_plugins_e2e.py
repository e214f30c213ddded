"""A plugin encoding and a plugin task, written outside the package, on the board through every way
in (the suite's `plugins:`, `--plugin`, an installed entry point), with the process executor: rows
ok, ranked, on the page, timed by the kernel benchmarks; an edit of a plugin recomputes exactly
its cells. (The Ray executor: tests/run/test_ray.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from lenbench_testing import PLUGIN_SUITE, write_plugin_distribution, write_plugins, write_suite

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "lenbench.cli", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def run(suite: Path, out: Path, *extra: str, env: dict | None = None, executor: str = "process") -> subprocess.CompletedProcess:
    workers = ["--workers", "2"] if executor == "process" else []
    return cli("run", "--suite", str(suite), "--out", str(out), "--device", "cpu", "--quiet", "--executor", executor,
               *workers, *extra, env=env)


def check_board(out: Path, encoding: str, task: str, *plugin_args: str, env: dict | None = None) -> None:
    """Every cell ok; the plugin task's entries learned and ranked; both names on the page."""
    cells = [json.loads(p.read_text()) for p in (out / "cells").glob("*.json")]
    assert len(cells) == 4 and {c["status"] for c in cells} == {"ok"}, [c["error"] for c in cells]
    assert {(c["config"]["task"], c["config"]["encoding"]) for c in cells} == {
        (t, e) for t in (task, "copy") for e in ("nope", encoding)}
    cli("report", str(out), *plugin_args, env=env)
    board = pd.read_csv(out / "leaderboard_wide.csv")
    mine = board[(board["task"] == task) & (board["metric"] == "exact_match") & board["encoding"].isin(["nope", encoding])]
    assert len(mine) == 2 and not mine["not_learned"].any() and mine["rank"].notna().all(), mine.to_string()
    assert mine["1x_ci_low"].notna().all()  # with its interval
    copy = board[(board["task"] == "copy") & (board["encoding"] == encoding) & (board["metric"] == "exact_match")]
    assert len(copy) == 1 and copy["not_learned"].all()  # a built-in task at this budget: flagged, not ranked
    page = (out / "index.html").read_text()
    assert encoding in page and task in page


@pytest.mark.subprocess
def test_suite_yaml_then_an_edit_recomputes_exactly_the_plugins_cells(tmp_path):
    """Way 1: the suite's `plugins:` (relative to the suite file); a rerun reuses every cell until a
    plugin's source changes, then recomputes exactly the cells that use it, saying why."""
    write_plugins(tmp_path / "mine")
    suite = write_suite(tmp_path / "mine", {**PLUGIN_SUITE, "plugins": ["steep.py", "runmax.py"]})
    out = tmp_path / "out"
    run(suite, out)
    check_board(out, "alibi-steep", "running-max", "--plugin", str(tmp_path / "mine" / "steep.py"),
                "--plugin", str(tmp_path / "mine" / "runmax.py"))
    assert (out / "encodings" / "alibi-steep.png").is_file()  # its encoding-geometry figure

    # the reruns decide in the driver what is stale; the serial executor spares spawning workers
    assert "0 cell(s) run, 4 already done" in run(suite, out, executor="serial").stdout
    write_plugins(tmp_path / "mine", scale=3.0)  # edit the encoding: its two cells, nothing else
    proc = run(suite, out, executor="serial")
    assert "2 cell(s) run, 2 already done, 0 failed" in proc.stdout
    assert "lenbench: recomputing 2 stale cell(s): source changed: plugin:steep.py" in proc.stderr
    write_plugins(tmp_path / "mine", scale=3.0, vocab=9)  # edit the task: its two cells
    proc = run(suite, out, executor="serial")
    assert "2 cell(s) run, 2 already done, 0 failed" in proc.stdout
    assert "lenbench: recomputing 2 stale cell(s): source changed: plugin:runmax.py" in proc.stderr


@pytest.mark.subprocess
def test_cli_plugin_option(tmp_path):
    """Way 2: `lenbench run --plugin PATH` (repeatable) with a suite that names no plugin."""
    enc, task = write_plugins(tmp_path / "mine")
    suite = write_suite(tmp_path, PLUGIN_SUITE)
    out = tmp_path / "out"
    run(suite, out, "--plugin", str(enc), "--plugin", str(task))
    check_board(out, "alibi-steep", "running-max", "--plugin", str(enc), "--plugin", str(task))
    same = cli("compare", str(out), str(out))  # regression tracking reads rows: no plugin needed
    assert same.stdout.rstrip().endswith("OK: no regression.") and " 0 regression(s)" in same.stdout, same.stdout

    # the kernel benchmarks of `pytest bench --lenbench-plugin`: the fused paths its declaration
    # (inherited from ALiBi) allows, each checked against its eager hook, and its training step
    bench_json = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/test_kernels.py", "--suite", str(suite), "--device", "cpu",
         "--lenbench-plugin", str(enc), "--lenbench-plugin", str(task), "--benchmark-json", str(bench_json), "-q", "-p", "no:cacheprovider",
         "-k", "not mfu"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    benches = json.loads(bench_json.read_text())["benchmarks"]
    impls = {b["params"]["impl"] for b in benches if (b["params"] or {}).get("encoding") == "alibi-steep"}
    assert {"eager", "cached", "toeplitz"} <= impls and "flex" not in impls, impls  # flex: CPU only when asked
    assert "LENBENCH_CPU_FLEX=1 times it" in proc.stdout
    assert {b["name"] for b in benches if b["name"].startswith("test_training_step")} == {
        "test_training_step[nope]", "test_training_step[alibi-steep]"}


@pytest.mark.subprocess
def test_entry_points_of_an_installed_distribution(tmp_path):
    """Way 3: a distribution declaring `lenbench.encodings` / `lenbench.tasks` entry points; no
    option at all — the names load on demand, in the driver and in every worker."""
    site = write_plugin_distribution(tmp_path / "site")
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    suite = write_suite(tmp_path, {**PLUGIN_SUITE, "tasks": [{"name": "ep-running-max", "train_len": 8},
                                                               {"name": "copy", "train_len": 4}],
                                   "encodings": ["nope", "ep-steep"], "kernels": {"enabled": False}})
    out = tmp_path / "out"
    run(suite, out, env=env)
    cells = [json.loads(p.read_text()) for p in (out / "cells").glob("*.json")]
    assert all(c["fingerprint"]["sources"].get("plugin:steep_dist/enc.py") for c in cells if c["config"]["encoding"] == "ep-steep")
    check_board(out, "ep-steep", "ep-running-max", env=env)
    assert (out / "encodings" / "ep-steep.png").is_file()
