"""The main command writes under runs/ only; `lenbench publish` is the one way into results/."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lenbench_testing import TINY_SUITE

from lenbench.cli import main
from lenbench.publication import MARKER
from lenbench.publish import publish
from lenbench.report.build import REPORT_FILES, write_report
from lenbench.report.rows import load_results

ROOT = Path(__file__).resolve().parent.parent

TINY = {**{k: v for k, v in TINY_SUITE.items() if k != "variants"},
        "train": {**TINY_SUITE["train"], "steps": 3, "warmup": 1}}  # TINY_SUITE's geometry


def _tree_digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def main_command_run(tmp_path_factory) -> Path:
    """The README's main command, `pytest bench --benchmark-json runs/bench.json`, in a copy of the
    checkout's bench/ and conftest.py (so its default runs/ lands in tmp), on a tiny suite."""
    work = tmp_path_factory.mktemp("checkout")
    shutil.copytree(ROOT / "bench", work / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "conftest.py", work / "conftest.py")
    shutil.copytree(ROOT / "runs", work / "runs", ignore=lambda d, names: [n for n in names if n != ".gitkeep"])
    (work / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    published_before = _tree_digest(ROOT / "results")
    _main_command(work)
    assert _tree_digest(ROOT / "results") == published_before, "the main command modified the published results/"
    return work


def _main_command(work: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/test_extrapolation.py", "--suite", "tiny.yaml",
         "--benchmark-json", "runs/bench.json", "-q", "-p", "no:cacheprovider"],
        cwd=work, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.subprocess
def test_main_command_writes_under_runs_only(main_command_run):
    work = main_command_run
    assert (work / "runs" / "bench.json").is_file()
    assert sorted(p.name for p in (work / "runs" / "tiny" / "cells").glob("*.json")).__len__() == 2
    assert (work / "runs" / "tiny" / "leaderboard.csv").is_file()  # the session's report, in the run directory
    assert not (work / "results").exists()


@pytest.mark.subprocess
def test_publish_copies_cells_and_json_and_rebuilds_the_report(main_command_run, tmp_path):
    run = main_command_run / "runs"
    target = tmp_path / "published"
    target.mkdir()
    (target / MARKER).write_text('{"lenbench_publication": 1, "state": "complete"}')  # an earlier publication
    (target / "extrapolation.png").write_text("from an older publication, with plots")  # a file it writes
    assert main(["publish", str(run / "tiny"), "--benchmark-json", str(run / "bench.json"),
                 "--to", str(target), "--no-plots"]) == 0
    assert not (target / "extrapolation.png").exists()  # the target is replaced as a whole
    assert sorted(p.name for p in (target / "cells").iterdir()) == sorted(p.name for p in (run / "tiny" / "cells").glob("*.json"))
    assert json.loads((target / "bench.json").read_text()) == json.loads((run / "bench.json").read_text())
    # what tests/report/test_published.py checks of results/ holds for the publication
    assert load_results(target).equals(load_results(target / "bench.json"))
    fresh = tmp_path / "fresh"
    write_report(target / "bench.json", fresh, plots=False)
    for name in REPORT_FILES:
        assert (fresh / name).read_bytes() == (target / name).read_bytes(), name
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging directory left behind


@pytest.mark.subprocess
def test_publish_refuses_a_benchmark_json_of_another_run(main_command_run, tmp_path):
    run = main_command_run / "runs"
    data = json.loads((run / "bench.json").read_text())
    data["benchmarks"] = data["benchmarks"][:1]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    target = tmp_path / "published"
    with pytest.raises(ValueError, match=r"hold different rows \(\d+ vs \d+\); publish the benchmark JSON of the same run"):
        publish(run / "tiny", target, benchmark_json=other, plots=False)
    assert not target.exists() and not list(tmp_path.glob(".published*"))


@pytest.mark.subprocess
def test_publish_leaves_out_cells_an_earlier_configuration_left(main_command_run, tmp_path):
    """A suite whose budget changed leaves its older cells in runs/<suite>/cells under other ids: they
    measure what the run's cells measure, so publishing the run's JSON skips them (and says so),
    deletes nothing, and the publication's rows are the run's."""
    run = main_command_run / "runs"
    cells = sorted((run / "tiny" / "cells").glob("*.json"))
    older = json.loads(cells[0].read_text())
    older["cell_id"] = "0000older00000"
    for r in older["rows"]:
        r["cell_id"], r["value"] = older["cell_id"], 0.0
    stale = run / "tiny" / "cells" / "0000older00000.json"
    stale.write_text(json.dumps(older))
    shorter = json.loads(cells[-1].read_text())  # another training length: other rows, the same place in the grid
    shorter["cell_id"] = "0000shorter000"
    for r in shorter["rows"]:
        r["cell_id"], r["train_len"], r["eval_len"] = shorter["cell_id"], r["train_len"] - 1, r["eval_len"] - 1
    stale_shorter = run / "tiny" / "cells" / "0000shorter000.json"
    stale_shorter.write_text(json.dumps(shorter))
    try:
        notes: list[str] = []
        publish(run / "tiny", tmp_path / "published", benchmark_json=run / "bench.json", plots=False, log=notes.append)
        assert sorted(p.name for p in (tmp_path / "published" / "cells").iterdir()) == sorted(p.name for p in cells)
        assert load_results(tmp_path / "published").equals(load_results(run / "bench.json"))
        assert len(notes) == 1 and "not publishing 2 cell(s)" in notes[0] and "0000older00000.json" in notes[0]
        assert stale.is_file() and stale_shorter.is_file()
        with pytest.raises(ValueError, match="both measure .* move the outdated cell files aside"):
            publish(run / "tiny", tmp_path / "cells-only", plots=False)  # no JSON to say which cells are the run's
        # the main command again (its cells are done): its report is the suite's cells, not the older one
        _main_command(main_command_run)
        assert "0000older00000" not in (run / "tiny" / "results.csv").read_text()
        assert load_results(run / "tiny" / "results.csv").equals(load_results(run / "bench.json"))
    finally:
        stale.unlink()
        stale_shorter.unlink()


def test_publish_without_cells_is_a_one_line_error(tmp_path, capsys):
    assert main(["publish", str(tmp_path), "--to", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lenbench: error: {tmp_path} has no cells/*.json; give the results directory")
    assert err.count("\n") == 1
