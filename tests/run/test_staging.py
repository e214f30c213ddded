"""A staging publication (`lenbench.run.staging`): a run killed midway resumes on a fresh machine (an
empty runs/ directory, a fresh clone of the git repository) from the committed cells and computes
only the rest, with the rows of an uninterrupted run; cells of another numeric kind or other code
are never reused; `publish` takes it only when complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lenbench_testing import TINY_SUITE, metric_rows, write_suite

from lenbench.config import parse_suite
from lenbench.run.driver import expected_fingerprint, run_suite
from lenbench.run.staging import MARKER, StagingError, open_staging, stage_cell, stage_status

ROOT = Path(__file__).resolve().parents[2]
SUITE = {**TINY_SUITE, "train": {**TINY_SUITE["train"], "steps": 150}, "encodings": ["nope", "rope", "alibi", "t5"]}


def cli(*args: str, cwd: Path = ROOT, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "lenbench.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)
    assert not check or done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def staging_for(path: Path, suite_file: Path, suite, **kw):
    from lenbench.numerics import numerics_tag

    return open_staging(path, str(suite_file), suite.name, [c.cell_id for c in suite.cells()], kind=numerics_tag(),
                        device="cpu", threads=1, **kw)


@pytest.mark.subprocess
def test_a_killed_run_resumes_on_a_fresh_clone_from_the_committed_cells(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    write_suite(repo, SUITE)
    (repo / "mine.txt").write_text("a user's change, staged but not to be committed by lenbench\n")
    git(repo, "add", "tiny.yaml", "mine.txt")
    git(repo, "commit", "-q", "-m", "suite", "--", "tiny.yaml")  # mine.txt stays staged, uncommitted
    ref = tmp_path / "ref"
    run_suite(parse_suite(SUITE), ref, device="cpu", progress=False)

    def run_args(out: Path) -> list[str]:
        return ["run", "--suite", "tiny.yaml", "--out", str(out), "--device", "cpu", "--executor", "serial", "--quiet",
                "--no-report", "--stage", "staging/tiny", "--stage-commit", "0"]

    cmd = [sys.executable, "-m", "lenbench.cli", *run_args(tmp_path / "runs1")]
    proc = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and "cell(s) of suite" not in subprocess.run(
            ["git", "-C", str(repo), "log", "-1", "--format=%s"], capture_output=True, text=True).stdout:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # after the first commit of a finished cell, before the last
    proc.wait()
    committed = [p for p in git(repo, "ls-files", "staging/tiny/cells").split() if p.endswith(".json")]
    assert 1 <= len(committed) < 4, committed
    assert "mine.txt" not in git(repo, "log", "--name-only", "--format=")  # --only: the staging directory alone
    assert "mine.txt" in git(repo, "diff", "--cached", "--name-only")

    clone = tmp_path / "clone"  # a fresh machine: the committed files only, no runs/
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "config", "user.email", "t@example.org")
    git(clone, "config", "user.name", "t")
    status = cli("stage", "staging/tiny", "--check", cwd=clone, check=False)
    assert status.returncode == 1 and f"{len(committed)} of 4 cell(s) done" in status.stdout, status.stdout
    done = cli(*run_args(tmp_path / "runs2"), cwd=clone)
    assert f"{4 - len(committed)} cell(s) run, {len(committed)} already done, 0 failed" in done.stdout, done.stdout
    assert f"{len(committed)} finished cell(s) taken from the staging publication" in done.stderr
    assert metric_rows(tmp_path / "runs1") != [] and metric_rows(clone / "staging" / "tiny") == metric_rows(ref)
    assert "4 of 4 cell(s) done" in cli("stage", "staging/tiny", "--check", cwd=clone).stdout
    assert not git(clone, "status", "--porcelain", "staging")  # the last cells were committed at the end


def test_cells_of_another_numeric_kind_or_other_code_are_never_reused(tmp_path):
    suite_file = write_suite(tmp_path, TINY_SUITE)
    suite = parse_suite(TINY_SUITE)
    stage = tmp_path / "stage"
    first = run_suite(suite, tmp_path / "a", device="cpu", progress=False, staging=staging_for(stage, suite_file, suite))
    assert len(first.computed) == 2 and stage_status(stage, expected_fingerprint).complete
    status = stage_status(stage, expected_fingerprint)  # where it stands per task, with a cell's measured cost
    (task,) = [t.key for t in suite.tasks]
    seconds = [r.seconds for r in first.computed]
    assert status.tasks == {task: (2, 2, pytest.approx(sum(seconds) / 2))}, status.tasks
    assert f"  {task}: 2 of 2 done, {sum(seconds) / 2:.0f} s a cell" in status.lines()

    marker = json.loads((stage / MARKER).read_text())
    (stage / MARKER).write_text(json.dumps({**marker, "numeric_kind": "pinned:x86-avx2@other"}))
    with pytest.raises(StagingError, match="holds cells of numeric kind 'pinned:x86-avx2@other'.*machine of that kind"):
        staging_for(stage, suite_file, suite)
    (stage / MARKER).write_text(json.dumps(marker))

    # a staged cell computed by other code: recomputed, never reused, and its fresh file replaces it
    path = next((stage / "cells").glob("*.json"))
    data = json.loads(path.read_text())
    data["fingerprint"]["sources"]["model.py"] = "0" * 64
    path.write_text(json.dumps(data))
    status = stage_status(stage, expected_fingerprint)
    assert not status.complete and list(status.stale.values()) == [["source changed: model.py"]]
    again = run_suite(suite, tmp_path / "b", device="cpu", progress=False, staging=staging_for(stage, suite_file, suite))
    assert [r.cell_id for r in again.computed] == [path.stem] and stage_status(stage, expected_fingerprint).complete
    assert json.loads(path.read_text())["fingerprint"]["sources"]["model.py"] != "0" * 64


def test_a_cell_that_failed_outside_itself_is_not_staged(tmp_path):
    suite_file = write_suite(tmp_path, TINY_SUITE)
    suite = parse_suite(TINY_SUITE)
    staging = staging_for(tmp_path / "stage", suite_file, suite)
    (tmp_path / "out" / "cells").mkdir(parents=True)
    (tmp_path / "out" / "cells" / "x.json").write_text("{}")
    assert stage_cell(staging, tmp_path / "out", "x", outside="out of memory") is False
    assert not (tmp_path / "stage" / "cells" / "x.json").exists()


@pytest.mark.parametrize("what", ["file", "foreign directory", "other suite"])
def test_a_stage_that_is_not_ours_is_refused_in_one_line(tmp_path, what):
    suite_file = write_suite(tmp_path, TINY_SUITE)
    suite = parse_suite(TINY_SUITE)
    stage = tmp_path / "stage"
    if what == "file":
        stage.write_text("mine")
    elif what == "foreign directory":
        stage.mkdir()
        (stage / "thesis.txt").write_text("mine")
    else:
        staging_for(stage, suite_file, suite)
        other = parse_suite({**TINY_SUITE, "name": "other"})
        suite = other
    with pytest.raises(StagingError) as err:
        staging_for(stage, suite_file, suite)
    assert "\n" not in str(err.value) and "--stage" in str(err.value)
    if what != "other suite":
        assert not (stage / MARKER).exists()  # nothing written into what lenbench did not make


@pytest.mark.subprocess
def test_publish_takes_a_staging_publication_only_when_complete(tmp_path):
    """Every cell computed by the command line, so the cells and the publish check share one process
    state (numeric mode, threads) whatever the test process did before."""
    def run(out: str) -> None:
        cli("run", "--suite", "tiny.yaml", "--out", out, "--device", "cpu", "--executor", "serial", "--quiet",
            "--no-report", "--stage", "stage", cwd=tmp_path)

    write_suite(tmp_path, {**TINY_SUITE, "encodings": ["nope"]})
    run("a")  # the staging publication holds nope's cell; the suite then grows by rope's
    write_suite(tmp_path, TINY_SUITE)
    refused = cli("publish", "stage", "--to", "board", "--no-plots", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "is not complete (1 cell(s) to compute)" in refused.stderr and "lenbench run --suite" in refused.stderr
    assert not (tmp_path / "board").exists()

    run("a")
    cli("publish", "stage", "--to", "board", "--no-plots", cwd=tmp_path)
    published = sorted(p.name for p in (tmp_path / "board" / "cells").glob("*.json"))
    assert published == sorted(f"{c.cell_id}.json" for c in parse_suite(TINY_SUITE).cells())
    assert metric_rows(tmp_path / "board") == metric_rows(tmp_path / "a")

    # the suite drops nope: its staged cell stays (never deleted), is listed for `git rm`, and is not published
    write_suite(tmp_path, {**TINY_SUITE, "encodings": ["rope"]})
    (nope,) = (c.cell_id for c in parse_suite({**TINY_SUITE, "encodings": ["nope"]}).cells())
    assert "1 staged cell(s) not in the suite" in cli("stage", "stage", cwd=tmp_path).stdout
    listed = cli("stage", "stage", "--not-in-suite", cwd=tmp_path).stdout
    assert listed == f"{Path('stage', 'cells', nope + '.json')}\n" and (tmp_path / listed.strip()).is_file()


def test_a_stale_cell_left_out_by_only_is_not_staged(tmp_path):
    """`only` (a `pytest -k` selection) leaves a cell out of this run; that does not make its stale
    file valid, so it is not copied into the staging publication."""
    suite_file = write_suite(tmp_path, TINY_SUITE)
    suite = parse_suite(TINY_SUITE)
    first, second = (c.cell_id for c in suite.cells())
    run_suite(suite, tmp_path / "out", device="cpu", progress=False)
    path = tmp_path / "out" / "cells" / f"{second}.json"
    data = json.loads(path.read_text())
    data["fingerprint"]["sources"]["model.py"] = "0" * 64
    path.write_text(json.dumps(data))
    run_suite(suite, tmp_path / "out", device="cpu", progress=False, only=[first],
              staging=staging_for(tmp_path / "stage", suite_file, suite))
    assert sorted(p.stem for p in (tmp_path / "stage" / "cells").glob("*.json")) == [first]
