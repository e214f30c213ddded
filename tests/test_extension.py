"""Adding an encoding, a task, a metric, a figure or an executor to lenbench is one file (plus its test).

Each test copies the package, makes exactly one change in the copy (a new module in
`lenbench/encodings/`, `lenbench/tasks/`, `lenbench/report/plots/` or `lenbench/run/executors/`,
one `register_metric` call appended to `lenbench/metrics.py`) and shows, in a fresh interpreter importing the copy, that the addition is
picked up everywhere a user meets it: `lenbench list`, a run of a tiny suite, the rows and the
board. Nothing else in the copy is edited, so no second list has to know about it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lenbench_testing import PLUGIN_ENCODING, PLUGIN_TASK, TINY_SUITE, write_suite

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.subprocess]


def package_copy(tmp_path: Path) -> Path:
    """A copy of the lenbench package under tmp_path/src (the PYTHONPATH of the commands)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "lenbench", src / "lenbench", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def lenbench(src: Path, *args: str, cwd: Path) -> str:
    """`python -m lenbench.cli ARGS` importing the copy; its stdout (fails the test on a non-zero exit)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-m", "lenbench.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def python(src: Path, code: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def run_tiny(src: Path, tmp_path: Path, **suite) -> list[dict]:
    """Run a tiny suite (TINY_SUITE with `suite` replaced) with the copy; every row of its cells."""
    path = write_suite(tmp_path, {**TINY_SUITE, "variants": [], **suite})
    out = tmp_path / "out"
    lenbench(src, "run", "--suite", str(path), "--out", str(out), "--quiet", "--executor", "serial", cwd=tmp_path)
    cells = [json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))]
    assert cells and all(c["status"] == "ok" for c in cells), [(c["title"], c["error"]) for c in cells]
    return [r for c in cells for r in c["rows"]]


def test_a_new_encoding_is_one_module_in_the_encodings_package(tmp_path):
    src = package_copy(tmp_path)
    (src / "lenbench" / "encodings" / "steep.py").write_text(PLUGIN_ENCODING.format(name="alibi-steep", scale=2.0))
    listed = lenbench(src, "list", "encodings", cwd=tmp_path)
    assert "alibi-steep  ALiBi with steeper slopes" in listed and "plugin:" not in listed  # a built-in, listed last
    assert [line.split()[0] for line in listed.splitlines() if line[:1].strip()][-1] == "alibi-steep"
    colour = python(src, "from lenbench.encoding_display import OTHER_COLORS, encoding_color\n"
                         "c = encoding_color('alibi-steep'); print(c, c in OTHER_COLORS)", cwd=tmp_path).split()
    assert colour[1] == "True"  # a declared colour of its own: never the grey of "not learned"
    rows = run_tiny(src, tmp_path, encodings=["nope", "alibi-steep"])
    assert {r["encoding"] for r in rows} >= {"nope", "alibi-steep"}
    lenbench(src, "report", str(tmp_path / "out"), "--out", str(tmp_path / "board"), cwd=tmp_path)
    assert "alibi-steep" in (tmp_path / "board" / "leaderboard.md").read_text()


def test_a_new_task_is_one_module_in_the_tasks_package(tmp_path):
    src = package_copy(tmp_path)
    (src / "lenbench" / "tasks" / "running_max.py").write_text(PLUGIN_TASK.format(name="running-max", vocab=10))
    listed = lenbench(src, "list", "tasks", cwd=tmp_path)
    assert "running-max [digits] the running maximum of a digit string" in listed and "plugin:" not in listed
    rows = run_tiny(src, tmp_path, tasks=[{"name": "running-max", "train_len": 8}])
    assert {r["task"] for r in rows} == {"running-max"}
    assert {r["metric"] for r in rows} >= {"exact_match", "token_accuracy"}  # its kind's metrics, without a list
    lenbench(src, "report", str(tmp_path / "out"), "--out", str(tmp_path / "board"), cwd=tmp_path)
    assert "running-max" in (tmp_path / "board" / "leaderboard.md").read_text()


def test_a_new_metric_is_one_register_metric_call(tmp_path):
    src = package_copy(tmp_path)
    with (src / "lenbench" / "metrics.py").open("a") as f:
        f.write('\nregister_metric("token_error", higher_is_better=False, sums="tokens", recorded_for=("sequence",),\n'
                '                worst=1.0, transform=lambda ratio, xp: 1 - ratio, bounds=(0.0, 1.0),\n'
                '                description="scored answer tokens wrong (a test metric)")\n')
    rows = run_tiny(src, tmp_path)
    value = {(r["encoding"], r["ratio"], r["metric"]): r["value"] for r in rows if not r.get("bucket")}
    errors = {k: v for k, v in value.items() if k[2] == "token_error"}
    assert errors and {k[0] for k in errors} >= {"nope", "rope"}  # computed for every sequence row, baselines too
    for (encoding, ratio, _), err in errors.items():
        assert err == pytest.approx(1 - value[(encoding, ratio, "token_accuracy")], abs=1e-12)


TOY_FIGURE = """
from lenbench.report.figures import FigureSpec
from lenbench.report.plots._style import figure, save_figure

FIGURES = (FigureSpec(stem="toy_bars", title="a toy figure", source="rows", draw="draw_figure", order=45),)
CAPTION = "Rows per encoding (a test figure)."


def draw_figure(inputs, path):
    counts = inputs.rows.groupby("encoding").size()
    fig = figure(4, 3)
    fig.add_subplot().bar(range(len(counts)), counts.to_numpy())
    return save_figure(fig, path)
"""


def test_a_new_figure_is_one_plot_module(tmp_path):
    src = package_copy(tmp_path)
    (src / "lenbench" / "report" / "plots" / "toy.py").write_text(TOY_FIGURE)
    listed = python(src, "from lenbench.report.figures import FIGURES, figure_files\n"
                         "print([s.stem for s in FIGURES]); print(sorted(figure_files()))", cwd=tmp_path)
    stems = eval(listed.splitlines()[0])  # noqa: S307 (a list literal this test printed)
    assert stems.index("toy_bars") == stems.index("needle_depth") + 1  # its declared order (45)
    assert "toy_bars.svg" in listed.splitlines()[1]
    run_tiny(src, tmp_path)
    lenbench(src, "report", str(tmp_path / "out"), "--out", str(tmp_path / "board"), cwd=tmp_path)
    assert (tmp_path / "board" / "toy_bars.png").is_file() and (tmp_path / "board" / "toy_bars.svg").is_file()
    assert "a toy figure" in (tmp_path / "board" / "index.html").read_text()


TOY_EXECUTOR = """
from lenbench.run.executors.base import EXECUTORS, Executor, compute_cell

EXECUTOR_NAMES = ("reversed",)


@EXECUTORS.register("reversed", set_name=True)
class ReversedExecutor(Executor):
    \"\"\"The cells in this process, last first (a test executor).\"\"\"

    def run(self, jobs):
        for job in reversed(list(jobs)):
            yield compute_cell(job)
"""


def test_a_new_executor_is_one_module_in_the_executors_package(tmp_path):
    src = package_copy(tmp_path)
    (src / "lenbench" / "run" / "executors" / "toy.py").write_text(TOY_EXECUTOR)
    path = write_suite(tmp_path, {**TINY_SUITE, "variants": []})
    out = tmp_path / "out"
    lenbench(src, "run", "--suite", str(path), "--out", str(out), "--quiet", "--executor", "reversed", cwd=tmp_path)
    cells = [json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))]
    assert len(cells) == 2 and all(c["status"] == "ok" for c in cells)
    env = {**os.environ, "PYTHONPATH": str(src)}
    wrong = subprocess.run([sys.executable, "-m", "lenbench.cli", "run", "--suite", str(path), "--out", str(out),
                            "--executor", "reverse"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 2 and "did you mean 'reversed'?" in wrong.stderr and "reversed, serial" in wrong.stderr
