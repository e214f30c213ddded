"""A full disk (issue 19, defect 6) during `lenbench run`, `report` and `publish`: one line naming
the directory, the free space there and what the write needs, exit 2, no traceback; nothing
partial is left or reused: a rerun with space gives the rows of an undisturbed run. Simulated by a
write that raises ENOSPC, and for real on a small tmpfs in a private mount namespace
(`unshare -r -m`; skipped, with the reason, where one cannot be made). Also: `--out FILE` says
the path is a file."""

from __future__ import annotations

import errno
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lenbench_testing import TINY_RUN, write_suite

from lenbench.atomic import DiskFullError, atomic_path, atomic_write_bytes, atomic_write_json, check_writable
from lenbench.cli import main
from lenbench.publish import publish
from lenbench.run.store import load_rows

ROOT = Path(__file__).resolve().parent.parent

TINY = TINY_RUN
ROW_KEYS = ("cell_id", "encoding", "eval_len", "metric", "value", "status")


@pytest.fixture(scope="module")
def run(tiny_run) -> Path:
    return tiny_run


def rows_of(out: Path) -> list[tuple]:
    return sorted(tuple(repr(r[k]) for k in ROW_KEYS) for r in load_rows(out))


def digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def temporary_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob(".*") if p.name.endswith(".tmp") or ".publish-" in p.name)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lenbench: error: disk full: "), err
    return err.strip()


def fill_disk_when(monkeypatch, condition) -> None:
    """Make `Path.write_bytes` (every atomic write's) write 3 bytes, then fail with ENOSPC, for
    paths matching `condition`."""
    real = pathlib.Path.write_bytes

    def write_bytes(self, data):
        if not condition(self):
            return real(self, data)
        with open(self, "wb") as f:
            f.write(bytes(data[:3]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pathlib.Path, "write_bytes", write_bytes)


# --- the atomic writes ----------------------------------------------------------------------------


def test_a_full_disk_mid_write_keeps_the_old_file_and_names_the_size(tmp_path, monkeypatch):
    path = tmp_path / "cells" / "a.json"
    atomic_write_json(path, {"old": True})
    fill_disk_when(monkeypatch, lambda p: True)
    monkeypatch.setattr("lenbench.atomic.free_bytes", lambda d: 2048)
    with pytest.raises(DiskFullError) as err:
        atomic_write_bytes(path, b"x" * 5000)
    assert str(err.value) == (f"disk full: no space left in {str(path.parent)!r} while writing a.json (needs 5.0 KB, "
                              "2.0 KB free there); free space there or choose another directory, then rerun the same "
                              "command (files already written are complete and kept)")
    assert err.value.errno == errno.ENOSPC and isinstance(err.value, OSError)
    assert path.read_text() == '{\n "old": true\n}\n' and temporary_files(tmp_path) == []


def test_a_full_disk_in_a_streamed_write_names_what_was_written(tmp_path, monkeypatch):
    monkeypatch.setattr("lenbench.atomic.free_bytes", lambda d: 0)
    with pytest.raises(DiskFullError, match=r"while writing plot\.png \(needs more than the 1\.5 KB written before "
                                            r"the disk filled, 0 B free there\)"):
        with atomic_path(tmp_path / "plot.png") as tmp:
            tmp.write_bytes(b"p" * 1500)
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_found_before_anything_runs(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFullError, match=rf"^disk full: no space left in {re.escape(repr(str(tmp_path)))} while "
                                            r"writing a first byte into the report directory \(needs more space, "):
        check_writable(tmp_path, "report directory")


def test_out_naming_a_file_says_it_is_a_file(tmp_path, capsys):
    file = tmp_path / "results.csv"
    file.write_text("a,b\n")
    assert main(["run", "--suite", str(write_suite(tmp_path, TINY)), "--out", str(file), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"lenbench: error: results directory {str(file)!r} is a file, not a directory; "
                                       "give a directory (--out DIR), new or existing\n")
    assert main(["report", str(tmp_path), "--out", str(file / "sub"), "--no-plots"]) == 2
    assert capsys.readouterr().err == (f"lenbench: error: report directory {str(file / 'sub')!r} is not writable "
                                       f"({str(file)!r} is a file, not a directory); choose another output directory "
                                       "(--out)\n")
    assert file.read_text() == "a,b\n"


# --- the commands ---------------------------------------------------------------------------------


def test_run_on_a_full_disk_is_one_line_and_the_rerun_matches_an_undisturbed_run(run, tmp_path, monkeypatch, capsys):
    out = tmp_path / "tiny"
    suite = str(write_suite(tmp_path, TINY))
    fill_disk_when(monkeypatch, lambda p: p.parent.name == "cells")
    assert main(["run", "--suite", suite, "--out", str(out), "--executor", "serial", "--quiet"]) == 2
    line = one_error_line(capsys)
    assert re.fullmatch(rf"lenbench: error: disk full: no space left in {re.escape(repr(str(out / 'cells')))} while "
                        r"writing [0-9a-f]{16}\.json \(needs \d+\.\d KB, .+ free there\); free space there or choose "
                        r"another directory, then rerun the same command \(files already written are complete and "
                        r"kept\)", line), line
    assert list((out / "cells").iterdir()) == [] and temporary_files(out) == []
    monkeypatch.undo()  # space again
    assert main(["run", "--suite", suite, "--out", str(out), "--executor", "serial", "--quiet"]) == 0
    assert rows_of(out) == rows_of(run)


def test_report_on_a_full_disk_is_one_line_and_leaves_complete_files(run, tmp_path, monkeypatch, capsys):
    out = tmp_path / "report"
    fill_disk_when(monkeypatch, lambda p: p.name.startswith(".summary.md."))
    assert main(["report", str(run), "--out", str(out), "--no-plots"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"lenbench: error: disk full: no space left in {str(out)!r} while writing summary.md (needs ")
    assert sorted(p.name for p in out.iterdir()) == [".lenbench-report", "leaderboard.csv", "leaderboard.md",
                                                     "leaderboard_wide.csv", "results.csv", "samples.csv.gz"]  # the marker first
    monkeypatch.undo()
    assert main(["report", str(run), "--out", str(out), "--no-plots"]) == 0
    assert (out / "summary.md").stat().st_size > 0


@pytest.mark.parametrize("where", ["report", "cells"])
def test_publish_on_a_full_disk_keeps_the_old_publication(run, tmp_path, monkeypatch, capsys, where):
    target = tmp_path / "results"
    publish(run, target, plots=False)
    before = digest(target)
    if where == "report":
        fill_disk_when(monkeypatch, lambda p: p.name.startswith(".leaderboard.md."))
    else:
        def copy2(src, dst, *a, **kw):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(shutil, "copy2", copy2)
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 2
    line = one_error_line(capsys)
    assert re.fullmatch(rf"lenbench: error: disk full: ran out of space in {re.escape(repr(str(tmp_path)))} while "
                        rf"publishing {re.escape(str(run))} to {re.escape(str(target))} \(.+ staged when the disk "
                        rf"filled; it needs about .+, .+ free now that the stage is removed\); "
                        rf"{re.escape(str(target))} is unchanged: free space there and rerun", line), line
    assert digest(target) == before and temporary_files(tmp_path) == []


def test_publish_is_refused_up_front_without_the_space_it_needs(run, tmp_path, monkeypatch, capsys):
    target = tmp_path / "results"
    publish(run, target, plots=False)
    before = digest(target)
    monkeypatch.setattr("lenbench.publish.free_bytes", lambda d: 1000)
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 2
    needed = sum(p.stat().st_size for p in (run / "cells").glob("*.json")) + sum(
        p.stat().st_size for p in target.iterdir() if p.is_file())
    kb = f"{needed / 1e3:.1f} KB"
    assert one_error_line(capsys) == (
        f"lenbench: error: disk full: not enough space in {str(tmp_path)!r} to publish {run} to {target}: it needs "
        f"about {kb} (cells, benchmark JSON and report), 1.0 KB free there; free space there and rerun "
        f"({target} is unchanged)")
    assert digest(target) == before and temporary_files(tmp_path) == []


# --- a real full disk: a small tmpfs ---------------------------------------------------------------


def _tmpfs_reason() -> str | None:
    """Why a private tmpfs cannot be mounted here, or None when it can."""
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return "needs Linux with unshare(1) for a private tmpfs"
    proc = subprocess.run(["unshare", "-r", "-m", "sh", "-c", "mount -t tmpfs -o size=8k tmpfs /mnt"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return f"cannot mount a private tmpfs (unshare -r -m: {proc.stderr.strip()[:120] or proc.returncode})"
    return None


TMPFS_SKIP = _tmpfs_reason()


def on_tmpfs(mountpoint: Path, size: str, script: str) -> tuple[list[str], list[str]]:
    """Run the shell `script` with a tmpfs of `size` mounted at `mountpoint` (private to it, gone
    when it ends); its (stdout, stderr) lines."""
    mountpoint.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "L": f"{sys.executable} -m lenbench.cli"}
    proc = subprocess.run(["unshare", "-r", "-m", "sh", "-c",
                           f'mount -t tmpfs -o size={size} tmpfs "{mountpoint}" || exit 99\n{script}'],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.splitlines(), proc.stderr.splitlines()


#: tmpfs allocates whole pages: a file of n bytes takes ceil(n / PAGE) of them.
PAGE = os.sysconf("SC_PAGE_SIZE")


def tmpfs_pages(directory: Path) -> int:
    """Bytes the files under `directory` take on a tmpfs."""
    return sum(-(-p.stat().st_size // PAGE) * PAGE for p in directory.rglob("*") if p.is_file())


@pytest.mark.subprocess
@pytest.mark.skipif(TMPFS_SKIP is not None, reason=TMPFS_SKIP or "")
def test_run_fills_a_real_tmpfs_then_resumes_with_space(run, tmp_path):
    """40 KB: the first cell's checkpoint and cell file fit, the second cell's do not."""
    disk, suite = tmp_path / "disk", write_suite(tmp_path, TINY)
    out, err = on_tmpfs(disk, "40k", f"""
$L run --suite {suite} --out {disk}/tiny --executor serial --quiet; echo "rc=$?"
ls -A {disk}/tiny/cells {disk}/tiny/checkpoints
mount -o remount,size=1m "{disk}"
$L run --suite {suite} --out {disk}/tiny --executor serial --quiet > /dev/null; echo "rc=$?"
mkdir {tmp_path}/kept && cp -r {disk}/tiny/cells {tmp_path}/kept/
""")
    errors = [x for x in err if x.startswith("lenbench: error:")]
    assert len(errors) == 1, err
    assert re.fullmatch(rf"lenbench: error: disk full: no space left in '{re.escape(str(disk))}/tiny/"
                        r"(checkpoints|cells)' while writing [0-9a-f]{16}\.(pt|json) \(needs \d+\.\d KB, "
                        r"\d+(\.\d)? (B|KB) free there\); free space there or choose another directory, then rerun "
                        r"the same command \(files already written are complete and kept\)", errors[0]), errors
    assert out[0] == "rc=2" and out[-1] == "rc=0", out
    assert not [x for x in out if x.endswith(".tmp")], out  # no partial file left in either directory
    assert rows_of(tmp_path / "kept") == rows_of(run)  # the resumed run's rows are an undisturbed run's


@pytest.mark.subprocess
@pytest.mark.skipif(TMPFS_SKIP is not None, reason=TMPFS_SKIP or "")
def test_report_and_publish_fill_a_real_tmpfs_in_one_line(run, tmp_path):
    """A disk one page larger than the run's cells (so publish's own check lets it start) and smaller
    than its report: sized from this run's files, whose bytes vary with the machine's floats."""
    disk = tmp_path / "disk"
    report = tmp_path / "report-on-disk"
    subprocess.run([sys.executable, "-m", "lenbench.cli", "report", str(run), "--out", str(report), "--no-plots"],
                   check=True, capture_output=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    size = tmpfs_pages(run / "cells") + PAGE
    assert tmpfs_pages(report) > size, "the report must not fit the disk, or this test shows nothing"
    out, err = on_tmpfs(disk, str(size), f"""
$L report {run} --out {disk}/report --no-plots; echo "report rc=$?"
rm -r {disk}/report
$L publish {run} --to {disk}/results --no-plots; echo "publish rc=$?"
ls -A {disk}
""")
    assert len(err) == 2, err
    assert err[0].startswith(f"lenbench: error: disk full: no space left in '{disk}/report' while writing ")
    assert err[1].startswith(f"lenbench: error: disk full: ran out of space in '{disk}' while publishing "
                             f"{run} to {disk}/results (")
    # "about N KB" when the up-front estimate exceeds what was staged, else "more than that"
    assert re.search(r" staged when the disk filled; it needs (about \d+(\.\d)? (B|KB)|more than that), ", err[1]), err[1]
    assert out == ["report rc=2", "publish rc=2"]  # and nothing left on the disk: no target, no stage
