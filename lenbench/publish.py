"""Publishing a run as the tracked baseline: `lenbench publish RUN_DIR [--benchmark-json FILE] [--to results]`.

The main command (`pytest bench --benchmark-json runs/bench.json`) and `lenbench run` write only
under `runs/` (ignored by git); a user's run never touches the published `results/`. Maintainers
publish a finished run explicitly:

    lenbench publish runs/quick --benchmark-json runs/bench.json --to results

which stages a new directory beside the target (the run's finished cell files ``cells/*.json``,
the benchmark JSON as ``bench.json``, the report rebuilt from them by
`lenbench.report.build.write_report`, and the marker file ``.lenbench-publication``, which lists the
files it wrote), then swaps it in place of the target with renames: a reader (or a kill at any
moment) sees the old published directory or the complete new one, never a mix. Every file the old
publication wrote is replaced, so a stale plot or cell of an older publication never survives;
what it did not write is carried over (below).

One numeric kind. A publication's cells are computed on one numeric kind (the mode and CPU vendor,
`lenbench.numerics.numeric_kind`): a run whose cells mix kinds is refused in one line, and the
marker names the kind (``numeric_kind``), so the board's identity says which machines can
reproduce it bit for bit.

What it replaces. Publishing deletes the old target, so it only ever replaces its own work. The
target (``--to``, symlinks resolved) must be

- absent, or an empty directory; or
- a publication: a directory holding the marker ``.lenbench-publication`` (a JSON object with the
  key ``lenbench_publication``) that every publication carries; or
- an *older publication*, written before the marker existed (the published ``results/`` of
  earlier versions): a directory holding ``cells/`` with at least one cell file, and
  ``bench.json`` or ``summary.md``, and nothing a publication would not contain: no hidden or
  linked entry; top-level files only among the report's names (`lenbench.report.build.REPORT_FILES`,
  `COST_FILES`, ``bench.json``, ``index.html``, the figures of `lenbench.report.figures.FIGURES` as ``<stem>.{png,svg,pdf}``);
  ``cells/`` only cell files (``<cell_id>.json`` holding a JSON object with that ``cell_id`` and
  its ``rows``); ``encodings/`` only ``*.png`` / ``*.svg`` / ``*.pdf``. Publishing over it writes the marker
  into it first, so the next publish (and any leftover of this one) is recognised by the marker.

A publication may hold other publications as direct subdirectories (the catalog's
``results/catalog/`` inside the quick board's ``results/``): a directory whose own marker says
``"state": "complete"``. Publishing into it replaces it alone; publishing the outer one copies each
of them into the stage unchanged, so replacing ``results/`` never loses ``results/catalog/``.

What a user put into a (marked) publication is kept (`lenbench.publication.user_entries`): a
``NOTES.md``, a directory of their own (a publication nested in it keeps its own files too), a
hidden file or a symlink at its top level is copied unchanged into the new publication (a link as
the link). Only what stands where the publication writes is refused, in one line naming it, before
anything is staged: a file in ``cells/`` or ``encodings/`` (which it rewrites whole) that it does
not write, or a link, a directory or a user's file under a name it writes (``summary.md/``).
Anything else (a user's directory with a ``thesis.txt`` in it, say) is refused in one line, as is
a target that is the working directory or one of its parents (``--to .``), that equals or contains
the run directory, or that is a file.

Kills. The stage is ``.<name>.publish-<pid>-<random>`` and the moved-aside old publication
``.<name>.replaced-<pid>``, both beside the target; the stage's marker says ``"state": "staging"``
until it is complete (then ``"complete"``), and a publication is deleted marker last. A kill can
leave such directories; the next `publish` to that target, and `lenbench report` on it, first
recover (`recover`): when the target is missing (a kill between the two renames) they finish the
new publication if its stage is complete, else restore the old one; then they remove the
leftovers they can prove are their own (that name pattern, a writer pid that is no longer alive on
this machine, and a marker, the older-publication form above, or nothing at all inside), and say
so in one line. Leftovers they cannot prove are left alone and named in that line.

A staging publication (`lenbench.run.staging`: the committed cells of a run that outlasts one
machine) is published like a run directory, but only when complete: every cell of its suite staged with
the fingerprint this checkout computes, all of one numeric kind; otherwise one line says what is
missing and the target is untouched. Only its suite's cells are published.

A full disk is refused before staging when the free space beside the target is below what the
publication needs (the run's cells and benchmark JSON plus the old report's size), and otherwise
ends the staging with one line; either way the old publication is left as it was.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from lenbench.atomic import DiskFullError, check_writable, format_bytes, free_bytes, is_disk_full
from lenbench.publication import (
    MARKER,
    check_one_kind,
    check_target_path,
    nested_publications,
    recover,
    remove_publication,
    target_kind,
    user_entries,
    write_marker,
)
from lenbench.run.staging import check_complete
from lenbench.run.staging import read_marker as read_staging_marker
from lenbench.run.store import CELLS, cell_files, cell_path, cells_dir

DEFAULT_TARGET = Path("results")

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish(run_dir: str | Path, to: str | Path = DEFAULT_TARGET, *, benchmark_json: str | Path | None = None,
            plots: bool = True, log: Log = _stderr) -> list[Path]:
    """Copy a run's cells (and benchmark JSON) into `to` and rebuild the report there, atomically.

    Args:
        run_dir: a results directory of `lenbench run` / `pytest bench` (with ``cells/*.json``).
        to: the published directory (default ``results``): absent, empty or a publication, whose
            own files are replaced and whose user's files are kept (module docstring).
        benchmark_json: the run's pytest-benchmark JSON (``--benchmark-json``); its extrapolation
            rows must be the rows of ``run_dir/cells`` (the published tests check that), less cells
            an earlier configuration of the suite left there (`_run_cells`: not published, one line
            says so), and its kernel timings become the published speed baseline. None: cells only,
            and the report is built from them.
        plots: also write the figures (`write_report`'s `plots`).
        log: where the one-line note of a recovery from a killed publish goes (default stderr).

    Returns:
        The published paths, under `to`.

    Raises:
        ValueError: one line naming the problem and the fix (no cells, rows that differ between
            the benchmark JSON and the cells, a target that is not a publication, holds a user's
            entry where the publication writes, is the working directory, equals or contains
            `run_dir`, or is not writable).
        DiskFullError: not enough space beside `to` (one line; the old publication is unchanged).
    """
    run_dir, shown = Path(run_dir), Path(to)
    if not cell_files(run_dir):
        raise ValueError(f"{run_dir} has no cells/*.json; give the results directory of a finished run "
                         "(e.g. runs/quick after `pytest bench --benchmark-json runs/bench.json`)")
    to = check_target_path(shown, run_dir)
    files = cell_files(run_dir)  # finished cells only: no locks, checkpoints, *.corrupt
    if read_staging_marker(run_dir) is not None:  # only complete, one code version, one kind; its suite's cells
        from lenbench.run.driver import expected_fingerprint

        files = [cell_path(run_dir, cid) for cid in check_complete(run_dir, expected_fingerprint)]
    if benchmark_json is not None:
        files, benchmark_json = _run_cells(run_dir, files, Path(benchmark_json), log)
    kind = check_one_kind(run_dir, files)
    parent = check_writable(to.parent, "publish target's parent directory", option="--to")
    note = recover(to)
    if note:
        log(note)
    target = target_kind(to, shown)
    kept, blocked = user_entries(to) if target == "publication" else ([], [])
    if blocked:  # a user's file where the publication writes: replacing it would delete or overwrite it
        listed = ", ".join(blocked[:5]) + (f" and {len(blocked) - 5} more" if len(blocked) > 5 else "")
        raise ValueError(f"--to {shown} holds {listed} where a publication writes its own files (in cells/ or "
                         "encodings/, which it rewrites whole, or under a name it writes); publishing would delete "
                         f"them: move them out of {shown} first (other files of yours there are kept)")
    needed = _space_needed([*files, *([benchmark_json] if benchmark_json is not None else [])], to)
    _check_space(parent, needed, run_dir, shown)
    stage = Path(tempfile.mkdtemp(dir=parent, prefix=f".{to.name}.publish-{os.getpid()}-"))
    os.chmod(stage, 0o777 & ~_umask())
    old = parent / f".{to.name}.replaced-{os.getpid()}"
    try:
        _fill_stage(stage, files, benchmark_json, plots, nested_publications(to), kept, kind)
        if to.exists():
            if target == "older publication":
                write_marker(to, "complete")  # its leftover, if killed from here on, is provably ours
            os.replace(to, old)
        os.replace(stage, to)
    except BaseException as err:
        staged = _tree_size(stage) if is_disk_full(err) else 0
        _discard(stage)
        if old.exists() and not to.exists():
            os.replace(old, to)  # put the previous publication back
        if is_disk_full(err):
            raise _staging_disk_full(parent, staged, needed, run_dir, shown) from None
        raise
    try:
        remove_publication(old)
    except OSError as err:
        log(f"lenbench: warning: published {shown}, but could not remove the previous publication {old} "
            f"({err.strerror or err}); the next publish removes it")
    return sorted(p for p in to.rglob("*") if p.is_file())


def _fill_stage(stage: Path, cells: list[Path], benchmark_json: Path | None, plots: bool,
                nested: list[Path], kept: list[Path], kind: str = "") -> None:
    """Write a complete publication into `stage`: marker (staging), cells, benchmark JSON, report,
    copies of the nested publications and of the user's entries, then the marker again (complete,
    listing the files the publication wrote).

    Args:
        stage: the new, empty staging directory beside the target.
        cells: the run's finished cell files.
        benchmark_json: the run's benchmark JSON, or None.
        plots: also write the figures.
        nested: the publications inside the old target (`nested_publications`), carried over unchanged.
        kept: the user's entries of the old target (`user_entries`), carried over unchanged.
        kind: the numeric kind the cells were computed on (`check_one_kind`), named in the marker.
    """
    from lenbench.report.build import write_report

    write_marker(stage, "staging", kind=kind)
    cells_dir(stage).mkdir()
    for path in cells:
        shutil.copy2(path, cells_dir(stage) / path.name)
    if benchmark_json is not None:
        shutil.copy2(benchmark_json, stage / "bench.json")
    write_report(stage / "bench.json" if benchmark_json is not None else stage, stage, plots=plots)
    written = [p.name for p in stage.iterdir() if p.name != MARKER]
    for publication in nested:  # e.g. results/catalog/ when publishing results/
        shutil.copytree(publication, stage / publication.name, symlinks=True)
    for entry in kept:  # copied, never moved: until the swap the old publication holds the originals
        if os.path.lexists(stage / entry.name):
            raise ValueError(f"{entry} is in the way of the publication's {entry.name}; move it out first")
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, stage / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, stage / entry.name, follow_symlinks=False)
    write_marker(stage, "complete", files=written, kind=kind)


def _run_cells(run_dir: Path, files: list[Path], benchmark_json: Path, log: Log) -> tuple[list[Path], Path]:
    """The cell files of the run `benchmark_json` records, and that file, once it is shown to hold
    those cells' rows.

    Cells an earlier configuration of the suite left in `run_dir` (the same suite, task, encoding and
    seed as a cell of the run, under another cell id: `lenbench.report.cells.superseded_cells`) are
    not published, and one line says so; they stay where they are. Any other difference (a benchmark
    JSON of a ``-k`` subset or of another run) is refused.
    """
    import pandas as pd

    from lenbench.report.cells import cell_rows, check_one_cell_per_measurement, superseded_cells
    from lenbench.report.rows import load_results
    from lenbench.results.frame import normalize

    if not benchmark_json.is_file():
        raise ValueError(f"--benchmark-json {benchmark_json}: no such file; give the file written by "
                         "`pytest bench --benchmark-json FILE`")
    from_json = load_results(benchmark_json)
    by_cell = cell_rows(files)
    ran = set(from_json["cell_id"])
    kept = {path: rows for path, rows in by_cell.items() if path.stem in ran}
    older = superseded_cells(kept, {path: rows for path, rows in by_cell.items() if path not in kept})
    if older:
        log(f"lenbench: not publishing {len(older)} cell(s) of {cells_dir(run_dir)} that an earlier configuration "
            f"of the suite left (same task, encoding and seed as a cell of the run), e.g. {older[0].name}")
        by_cell = {path: rows for path, rows in by_cell.items() if path not in older}
    check_one_cell_per_measurement(by_cell, run_dir)
    from_cells = normalize(pd.DataFrame([row for rows in by_cell.values() for row in rows]), str(run_dir))
    if not from_cells.equals(from_json):
        raise ValueError(f"{benchmark_json} and {cells_dir(run_dir)} hold different rows ({len(from_json)} vs "
                         f"{len(from_cells)}); publish the benchmark JSON of the same run (same --suite and "
                         "--results-dir, no -k)")
    return list(by_cell), benchmark_json


def _discard(stage: Path) -> None:
    try:
        remove_publication(stage)
    except OSError:
        shutil.rmtree(stage, ignore_errors=True)


# --- a full disk ---------------------------------------------------------------------------------


def _tree_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and not p.is_symlink()) \
        if directory.is_dir() else 0


def _space_needed(files: list[Path], target: Path) -> int:
    """Bytes a publication of `files` needs beside `target`: the files, plus the report, estimated
    by the old publication's report (its files outside cells/ and bench.json)."""
    report = 0
    if target.is_dir():
        report = sum(p.stat().st_size for p in target.rglob("*") if p.is_file() and not p.is_symlink()
                     and p.relative_to(target).parts[0] not in (CELLS, "bench.json"))
    return sum(p.stat().st_size for p in files) + report


def _check_space(parent: Path, needed: int, run_dir: Path, shown: Path) -> None:
    free = free_bytes(parent)
    if free is not None and free < needed:
        raise DiskFullError(f"disk full: not enough space in {str(parent)!r} to publish {run_dir} to {shown}: it needs "
                            f"about {format_bytes(needed)} (cells, benchmark JSON and report), {format_bytes(free)} free "
                            f"there; free space there and rerun ({shown} is unchanged)", parent)


def _staging_disk_full(parent: Path, staged: int, needed: int, run_dir: Path, shown: Path) -> DiskFullError:
    free = free_bytes(parent)
    need = f"about {format_bytes(needed)}" if needed > staged else "more than that"
    return DiskFullError(f"disk full: ran out of space in {str(parent)!r} while publishing {run_dir} to {shown} "
                         f"({format_bytes(staged)} staged when the disk filled; it needs {need}, "
                         f"{'unknown space' if free is None else format_bytes(free)} free now that the stage is "
                         f"removed); {shown} is unchanged: free space there and rerun", parent)
