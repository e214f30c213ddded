"""`lenbench publish` deletes only its own work, and recovers from a kill at any moment (issue 19,
defects 1 and 2, and `--to .` of defect 8): a user's directory survives, a parent of the run is
refused, and the leftovers a kill leaves (planted, or made by really killing a publish with
SIGKILL at the moment in question) are finished, restored or removed by the next publish or
`lenbench report`, in one line."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from lenbench.cli import main
from lenbench.numerics import cpu_isa, cpu_model
from lenbench.publication import MARKER, foreign_entries, leftovers, report_machine, target_kind
from lenbench.publish import publish
from lenbench.report.build import write_report

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run(tiny_run) -> Path:
    """A finished tiny run (2 cells): what is published in every test."""
    return tiny_run


def digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lenbench: error: "), err
    return err.strip()


def published(run: Path, target: Path) -> Path:
    publish(run, target, plots=False)
    return target


def dead_pid() -> int:
    """The pid of a process that has exited (so a leftover naming it has no live writer)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def dot_entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


# --- defect 1: only absent, empty or publication targets are replaced ----------------------------


def test_a_users_directory_survives_publish(run, tmp_path, capsys):
    thesis = tmp_path / "thesis"
    (thesis / "chapters").mkdir(parents=True)
    (thesis / "thesis.txt").write_text("four years of work")
    (thesis / "chapters" / "1.tex").write_text("\\chapter{One}")
    before = digest(thesis)
    assert main(["publish", str(run), "--to", str(thesis), "--no-plots"]) == 2
    assert one_error_line(capsys) == (
        f"lenbench: error: --to {thesis} is not a lenbench publication (no {MARKER} file, and it holds chapters/, "
        "thesis.txt); publishing replaces the target as a whole and never deletes what it did not make: give a new "
        "or empty directory, or a previous publication")
    assert digest(thesis) == before
    assert dot_entries(tmp_path) == []  # nothing staged


def test_a_parent_of_the_run_is_refused_and_the_run_survives(run, tmp_path, capsys):
    outer = tmp_path / "outer"
    shutil.copytree(run / "cells", outer / "run" / "cells")
    before = digest(outer)
    assert main(["publish", str(outer / "run"), "--to", str(outer), "--no-plots"]) == 2
    assert one_error_line(capsys) == (
        f"lenbench: error: --to {outer} contains the run directory {outer / 'run'}; publishing replaces {outer} as a "
        "whole and would delete the run: publish into a directory outside it (default results)")
    assert digest(outer) == before
    # ... even when the parent is marked as a publication (the run inside it is still not its to delete)
    (outer / MARKER).write_text('{"lenbench_publication": 1}')
    assert main(["publish", str(outer / "run"), "--to", str(outer), "--no-plots"]) == 2
    assert "contains the run directory" in one_error_line(capsys)
    assert (outer / "run" / "cells").is_dir() and len(list((outer / "run" / "cells").glob("*.json"))) == 2


def test_the_run_itself_is_refused(run, capsys):
    assert main(["publish", str(run), "--to", str(run), "--no-plots"]) == 2
    assert one_error_line(capsys).endswith("is the run directory itself; publish into another directory (default results)")


@pytest.mark.parametrize("to", [".", "..", "/"])
def test_the_working_directory_and_its_parents_are_refused_in_one_line(run, tmp_path, monkeypatch, capsys, to):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    monkeypatch.chdir(work)
    assert main(["publish", str(run), "--to", to, "--no-plots"]) == 2
    line = one_error_line(capsys)
    where = "the working directory" if to == "." else f"a parent of the working directory {str(work)!r}"
    assert line == (f"lenbench: error: --to {to} is {where}; publishing replaces the target as a whole, so give a "
                    "directory of its own (default results)")
    assert (work / "notes.txt").read_text() == "mine" and sorted(p.name for p in work.iterdir()) == ["notes.txt"]


def test_a_file_is_refused_as_a_target(run, tmp_path, capsys):
    target = tmp_path / "results"
    target.write_text("not a directory")
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 2
    assert one_error_line(capsys) == (f"lenbench: error: --to {target} is a file, not a directory; give a directory "
                                      "(new, empty or a previous publication)")
    assert target.read_text() == "not a directory"


@pytest.mark.parametrize("start", ["absent", "empty"])
def test_an_absent_or_empty_target_is_published_with_the_marker(run, tmp_path, start):
    target = tmp_path / "results"
    if start == "empty":
        target.mkdir()
    assert target_kind(target) == start
    publish(run, target, plots=False)
    marker = json.loads((target / MARKER).read_text())
    assert marker["lenbench_publication"] == 1 and marker["state"] == "complete"
    assert marker["report_machine"] == report_machine()  # what its report's bytes depend on
    assert {"cpu_model": cpu_model(), "cpu_isa": cpu_isa()}.items() <= marker["report_machine"].items()
    assert marker["report_machine"]["numpy"].startswith(numpy.__version__)
    assert target_kind(target) == "publication"
    assert sorted(p.name for p in (target / "cells").iterdir()) == sorted(p.name for p in (run / "cells").glob("*.json"))
    assert dot_entries(tmp_path) == []


def test_an_older_unmarked_publication_is_replaced_and_gets_the_marker(run, tmp_path):
    target = published(run, tmp_path / "results")
    (target / MARKER).unlink()  # as published before the marker existed
    (target / "encodings").mkdir()
    (target / "encodings" / "rope.png").write_bytes(b"\x89PNG")
    assert target_kind(target) == "older publication"
    publish(run, target, plots=False)
    assert json.loads((target / MARKER).read_text())["state"] == "complete"
    assert not (target / "encodings").exists()  # replaced as a whole
    assert dot_entries(tmp_path) == []


@pytest.mark.parametrize("extra", ["thesis.txt", "notes.md", ".env", "cells/notes.json", "cells/README",
                                   "encodings/data.csv", "drafts/"])
def test_an_unmarked_publication_with_anything_else_in_it_is_refused(run, tmp_path, capsys, extra):
    target = published(run, tmp_path / "results")
    (target / MARKER).unlink()
    path = target / extra.rstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    if extra.endswith("/"):
        path.mkdir()
    else:
        path.write_text("{}" if extra.endswith(".json") else "a user's file")
    before = digest(target)
    assert foreign_entries(target) == [extra]
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 2
    assert f"(no {MARKER} file, and it holds {extra}); publishing replaces" in one_error_line(capsys)
    assert digest(target) == before


# --- nested publications: results/catalog/ inside results/ -----------------------------------------


def test_publishing_the_outer_publication_carries_a_nested_one_over_unchanged(run, tmp_path):
    target = published(run, tmp_path / "results")
    nested = published(run, target / "catalog")
    assert target_kind(target) == "publication" and foreign_entries(target) == []
    before = digest(nested)
    publish(run, target, plots=False)  # replaces results/ as a whole ...
    assert digest(target / "catalog") == before  # ... and results/catalog/ comes with it, byte for byte
    assert dot_entries(tmp_path) == [] and dot_entries(target) == [MARKER]  # no stage left


def test_a_nested_publication_is_replaced_alone(run, tmp_path):
    target = published(run, tmp_path / "results")
    nested = published(run, target / "catalog")
    outer = {k: v for k, v in digest(target).items() if not k.startswith("catalog/")}
    (nested / "summary.md").write_text("stale")
    publish(run, nested, plots=False)
    assert (nested / "summary.md").read_text() != "stale"
    assert {k: v for k, v in digest(target).items() if not k.startswith("catalog/")} == outer
    assert dot_entries(target) == [MARKER]  # no stage left


@pytest.mark.parametrize("state", ["staging", None])
def test_a_subdirectory_that_is_not_a_complete_publication_stays_foreign(run, tmp_path, capsys, state):
    """A nested stage or a user's directory with a copied-in report is not carried over: publishing the
    outer directory is refused, and nothing in it changes."""
    target = published(run, tmp_path / "results")
    nested = published(run, target / "drafts")
    if state is None:
        (nested / MARKER).unlink()
    else:
        (nested / MARKER).write_text(json.dumps({"lenbench_publication": 1, "state": state}))
    (target / MARKER).unlink()  # an unmarked outer directory is judged by what it holds
    before = digest(target)
    assert foreign_entries(target) == ["drafts/"]
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 2
    assert "it holds drafts/); publishing replaces" in one_error_line(capsys)
    assert digest(target) == before


def test_the_checked_in_results_are_a_publication_publish_may_replace():
    assert target_kind(ROOT / "results") in ("publication", "older publication")


def test_a_report_holds_only_what_an_older_publication_may_hold(run, tmp_path):
    """The older-publication rule lists the report's file names; a report with plots stays within them."""
    out = tmp_path / "report"
    shutil.copytree(run / "cells", out / "cells")
    written = write_report(out, out, plots=True)
    assert any(p.suffix == ".png" for p in written) and any(p.parent.name == "encodings" for p in written)
    assert foreign_entries(out) == []


# --- defect 2: kills ------------------------------------------------------------------------------

KILLER = """
import os, shutil, signal, sys
from pathlib import Path
from lenbench import publish as P
moment, run, target = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
real_replace, real_copy, real_rmtree = os.replace, shutil.copy2, shutil.rmtree

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def replace(src, dst, *a, **kw):
    if moment == "between renames" and Path(src).name.startswith(f".{target.name}.publish-") and Path(dst) == target:
        die()
    return real_replace(src, dst, *a, **kw)

def copy2(src, dst, *a, **kw):
    if moment == "staging" and Path(dst).parent.name == "cells":
        real_copy(src, dst, *a, **kw)
        die()
    return real_copy(src, dst, *a, **kw)

def rmtree(path, *a, **kw):
    if moment == "removing the old" and Path(path).parent.name.startswith(f".{target.name}.replaced-"):
        die()
    return real_rmtree(path, *a, **kw)

os.replace, shutil.copy2, shutil.rmtree = replace, copy2, rmtree
P.publish(run, target, plots=False)
"""


def kill_publish(moment: str, run: Path, target: Path) -> None:
    """Run a publish in a child process that SIGKILLs itself at `moment`."""
    proc = subprocess.run([sys.executable, "-c", KILLER, moment, str(run), str(target)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == -9, proc.stderr[-2000:]


def other_run(run: Path, tmp_path: Path) -> Path:
    """A run whose publication differs from `run`'s (one cell of the two)."""
    other = tmp_path / "other"
    (other / "cells").mkdir(parents=True)
    first = sorted((run / "cells").glob("*.json"))[0]
    shutil.copy2(first, other / "cells" / first.name)
    return other


@pytest.mark.subprocess
def test_a_kill_between_the_renames_is_finished_by_the_next_publish(run, tmp_path, capsys):
    target = published(run, tmp_path / "results")
    new = other_run(run, tmp_path)
    kill_publish("between renames", new, target)
    assert not target.exists()  # the window: the old one moved aside, the new one not yet in place
    assert sorted((x.kind, x.state) for x in leftovers(target)) == [("replaced", "complete"), ("stage", "complete")]
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"lenbench: recovered {target} after a killed publish (pid ")
    assert "finished the new publication (.results.publish-" in err[0]
    assert "; removed 1 leftover(s): .results.replaced-" in err[0]
    assert dot_entries(tmp_path) == []
    assert sorted(p.name for p in (target / "cells").iterdir()) == sorted(p.name for p in (run / "cells").glob("*.json"))


@pytest.mark.subprocess
def test_report_finishes_a_publication_a_kill_left_between_the_renames(run, tmp_path, capsys):
    target = published(run, tmp_path / "results")
    new = other_run(run, tmp_path)
    kill_publish("between renames", new, target)
    assert main(["report", str(target), "--no-plots"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "finished the new publication" in err[0]
    assert sorted(p.name for p in (target / "cells").iterdir()) == sorted(p.name for p in (new / "cells").iterdir())
    assert dot_entries(tmp_path) == [] and target_kind(target) == "publication"


@pytest.mark.subprocess
def test_the_previous_publication_is_restored_when_only_it_is_left(run, tmp_path, capsys):
    target = published(run, tmp_path / "results")
    before = digest(target)
    moved = tmp_path / f".results.replaced-{dead_pid()}"
    os.rename(target, moved)  # a kill after the first rename, with the stage already gone
    assert main(["report", str(target), "--no-plots"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"lenbench: recovered {target} after a killed publish (pid {moved.name.rsplit('-', 1)[1]}): "
                   f"restored the previous one ({moved.name} → results)"]
    assert {k: v for k, v in digest(target).items() if k in before and k.startswith("cells")} == \
        {k: v for k, v in before.items() if k.startswith("cells")}
    assert dot_entries(tmp_path) == []


@pytest.mark.subprocess
def test_a_kill_during_staging_leaves_a_stage_the_next_publish_removes(run, tmp_path, capsys):
    target = published(run, tmp_path / "results")
    kill_publish("staging", run, target)
    (stage,) = leftovers(target)
    assert (stage.kind, stage.state) == ("stage", "staging")
    assert target_kind(target) == "publication"  # the old publication is untouched
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"lenbench: recovered {target} after a killed publish (pid {stage.pid}): "
                   f"removed 1 leftover(s): {stage.path.name}"]
    assert dot_entries(tmp_path) == []


@pytest.mark.subprocess
def test_a_kill_while_removing_the_old_publication_leaves_it_provably_ours(run, tmp_path, capsys):
    target = published(run, tmp_path / "results")
    kill_publish("removing the old", run, target)
    (old,) = leftovers(target)
    assert old.kind == "replaced" and (old.path / MARKER).is_file()  # the marker goes last
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"lenbench: recovered {target} after a killed publish (pid {old.pid}): removed 1 leftover(s): {old.path.name}"]
    assert dot_entries(tmp_path) == []


@pytest.mark.subprocess
def test_leftovers_it_cannot_prove_are_its_own_are_left_alone(run, tmp_path, capsys):
    target = published(run, tmp_path / "results")
    pid = dead_pid()
    foreign = tmp_path / f".results.publish-{pid}-abc"  # the pattern, a dead pid, but no marker
    foreign.mkdir()
    (foreign / "thesis.txt").write_text("mine")
    live = tmp_path / f".results.publish-{os.getppid()}-xyz"  # a marked stage of a live process
    live.mkdir()
    (live / MARKER).write_text('{"lenbench_publication": 1, "state": "staging"}')
    empty = tmp_path / f".results.publish-{pid}-e"  # a kill right after mkdtemp: nothing to lose
    empty.mkdir()
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"lenbench: recovered {target} after a killed publish (pid {pid}): removed 1 leftover(s): {empty.name}; "
        f"left {foreign.name} (no {MARKER}: not provably a publication; remove it by hand)"]
    assert (foreign / "thesis.txt").read_text() == "mine" and (live / MARKER).is_file() and not empty.exists()


def test_an_error_mid_swap_puts_the_old_publication_back(run, tmp_path, monkeypatch):
    target = published(run, tmp_path / "results")
    before = digest(target)
    real = os.replace

    def failing(src, dst, *a, **kw):
        if Path(src).name.startswith(".results.publish-") and Path(dst) == target:
            raise OSError(16, "Device or resource busy")
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="busy"):
        publish(other_run(run, tmp_path), target, plots=False)
    assert digest(target) == before and dot_entries(tmp_path) == []


def test_an_interrupt_before_the_swap_leaves_the_old_publication_and_no_stage(run, tmp_path, monkeypatch):
    target = published(run, tmp_path / "results")
    before = digest(target)
    real = shutil.copy2

    def interrupted(src, dst, *a, **kw):
        real(src, dst, *a, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copy2", interrupted)
    with pytest.raises(KeyboardInterrupt):
        publish(run, target, plots=False)
    assert digest(target) == before and dot_entries(tmp_path) == []


# --- nothing of a user's is overwritten (issue 38): tests/test_trust_ownership.py ---------------


def test_a_plugin_encodings_name_never_becomes_a_path_outside_the_report(run, tmp_path, monkeypatch):
    """An encoding named like a path in the rows (data anyone can write; registration refuses such a
    name, tests/test_trust_ownership.py) is left out of the position patterns with its reason; no file
    is written outside `out/encodings/`."""
    from lenbench.names import is_safe_name
    from lenbench.report import geometry

    assert not any(is_safe_name(n) for n in ("../../../../tmp/x", "a/b", ".hidden", "", "a\\b", "x" * 200))
    assert all(is_safe_name(n) for n in ("rope", "fire-relthresh", "ssmax+rope", "rope@4", "a_b.c"))
    alibi = geometry.encoding_pattern("alibi", length=16, d_model=32, n_heads=4)
    monkeypatch.setattr(geometry, "encoding_patterns", lambda *a, **k: {"../../evil": alibi, "a/b": alibi, "alibi": alibi})
    out = tmp_path / "deep" / "report"
    write_report(run, out, plots=True, page=True)
    assert not list(tmp_path.rglob("evil.*")) and not (out / "encodings" / "a").exists()
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "its name is not a safe file name" in page and "../../evil" in page and "a/b" in page
    assert (out / "encodings" / "alibi.png").is_file()  # the others are drawn


def test_an_unwritable_parent_names_publishs_own_option(run, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    assert main(["publish", str(run), "--to", str(blocker / "results"), "--no-plots"]) == 2
    line = one_error_line(capsys)
    assert "(--to DIR)" in line and "--out" not in line


def test_a_cell_file_with_garbage_rows_is_named_by_the_report(run, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run / "cells", copy / "cells")
    bad = sorted((copy / "cells").glob("*.json"))[-1]
    data = json.loads(bad.read_text())
    for row in data["rows"]:
        row["train_len"] = None  # a valid envelope, rows that do not validate
    bad.write_text(json.dumps(data))
    assert main(["report", str(copy), "--out", str(tmp_path / "r"), "--no-plots"]) == 2
    assert one_error_line(capsys) == (f"lenbench: error: {bad}: column 'train_len': missing value; move the cell "
                                      "file aside (its cell is computed again) or fix it")
