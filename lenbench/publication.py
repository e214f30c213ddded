"""What a publication is, and recovering what a killed `lenbench publish` left (the rules are in
`lenbench.publish`'s docstring: which targets may be replaced, the marker, the older-publication
form, the leftovers' names and when they are provably a publish's own)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

from lenbench.atomic import atomic_write_json
from lenbench.numerics import cpu_isa, cpu_model, numeric_kind
from lenbench.report.figures import SUFFIXES
from lenbench.run.store import CELLS, cell_files, pid_alive

#: The marker every publication carries (written first into a stage, removed last from a deleted one).
MARKER = ".lenbench-publication"
MARKER_FORMAT = 1


# --- the target: what publishing may replace ----------------------------------------------------


def check_target_path(to: str | Path, run_dir: str | Path) -> Path:
    """The resolved target, once it is shown not to be the working directory (or a parent of it),
    the run directory or a parent of it, or a file; else a one-line ValueError.

    Args:
        to: the target as given (``--to``).
        run_dir: the run being published.
    """
    shown, target = Path(to), Path(to).resolve()
    cwd, run = Path.cwd().resolve(), Path(run_dir).resolve()
    if target == cwd or target in cwd.parents:
        where = "the working directory" if target == cwd else f"a parent of the working directory {str(cwd)!r}"
        raise ValueError(f"--to {shown} is {where}; publishing replaces the target as a whole, so give a "
                         "directory of its own (default results)")
    if target == run:
        raise ValueError(f"--to {shown} is the run directory itself; publish into another directory (default results)")
    if target in run.parents:
        raise ValueError(f"--to {shown} contains the run directory {run_dir}; publishing replaces {shown} as a whole "
                         "and would delete the run: publish into a directory outside it (default results)")
    if target.exists() and not target.is_dir():
        raise ValueError(f"--to {shown} is a file, not a directory; give a directory (new, empty or a previous "
                         "publication)")
    return target


def target_kind(target: Path, shown: str | Path | None = None) -> str:
    """What `target` is: "absent", "empty", "publication" (it has the marker) or "older publication"
    (module docstring); anything else is refused with a one-line ValueError naming what is in it."""
    if not target.exists():
        return "absent"
    if not any(target.iterdir()):
        return "empty"
    if read_marker(target) is not None:
        return "publication"
    foreign = foreign_entries(target)
    if not foreign and _has_report_and_cells(target):
        return "older publication"
    shown = shown if shown is not None else target
    held = f"it holds {', '.join(foreign[:3])}{', …' if len(foreign) > 3 else ''}" if foreign else \
        "it has no cells/ with bench.json or summary.md"
    raise ValueError(f"--to {shown} is not a lenbench publication (no {MARKER} file, and {held}); publishing replaces "
                     "the target as a whole and never deletes what it did not make: give a new or empty directory, "
                     "or a previous publication")


def read_marker(directory: Path) -> dict | None:
    """The publication marker in `directory` (a dict with key ``lenbench_publication``), or None."""
    try:
        data = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "lenbench_publication" in data else None


def report_machine() -> dict[str, str]:
    """The machine a report is built on, as far as its numbers depend on it: numpy's and pandas' own
    SIMD paths are not pinned (`lenbench.numerics` pins torch's), so the same rows give the same report
    bytes with the same numpy and pandas running the same SIMD kernels, and may differ in a last digit
    elsewhere. The CPU's model and widest ISA do not settle that (two "AMD EPYC" machines with AVX-512
    differ), so numpy's own dispatch targets on this CPU are part of it."""
    import numpy
    import pandas

    return {"cpu_model": cpu_model(), "cpu_isa": cpu_isa(),
            "numpy": f"{numpy.__version__} {numpy_simd()}".strip(), "pandas": pandas.__version__}


def numpy_simd() -> str:
    """The SIMD targets numpy dispatches to on this CPU: those of its build's dispatch list the CPU
    supports (e.g. "X86_V3 X86_V4 AVX512_ICL"), as `numpy.show_runtime` reads them; "" where this
    numpy does not say."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy < 2
        try:
            from numpy.core import _multiarray_umath as umath
        except ImportError:
            return ""
    features = getattr(umath, "__cpu_features__", {})
    return " ".join(t for t in getattr(umath, "__cpu_dispatch__", ()) if features.get(t))


def numeric_kinds(cells: list[Path]) -> dict[str, int]:
    """Numeric kind (`lenbench.numerics.numeric_kind`: mode and CPU vendor) → how many of the cell
    files `cells` were computed on it; a board is computed on one kind (cells without a recorded
    mode, or unreadable, are not counted)."""
    kinds: dict[str, int] = {}
    for path in cells:
        try:
            provenance = json.loads(path.read_text()).get("provenance") or {}
        except (OSError, ValueError, AttributeError):
            continue
        kind = numeric_kind(str(provenance.get("numerics") or ""), str(provenance.get("cpu_model") or ""))
        if kind:
            kinds[kind] = kinds.get(kind, 0) + 1
    return dict(sorted(kinds.items(), key=lambda item: (-item[1], item[0])))


def check_one_kind(run_dir: Path, cells: list[Path]) -> str:
    """The one numeric kind of a run's `cells` ("" when none records one); a one-line ValueError
    when they mix kinds: seeds and encodings of one board would then be trained on different CPUs."""
    kinds = numeric_kinds(cells)
    if len(kinds) > 1:
        listed = ", ".join(f"{kind} ({n} cells)" for kind, n in kinds.items())
        raise ValueError(f"{run_dir} holds cells of {len(kinds)} numeric kinds ({listed}); a board is computed on one "
                         "kind: rerun `lenbench run` into it on one kind of machine (cells of another kind are "
                         "recomputed) and publish again")
    return next(iter(kinds), "")


def write_marker(directory: Path, state: str, files: list[str] | None = None, kind: str | None = None) -> None:
    """Write (atomically) the marker of a publication in `directory`, in `state` ("staging" or
    "complete"), with the `report_machine` that builds its report, the numeric `kind` its cells
    were computed on (`check_one_kind`) and, once complete, the `files` it wrote at its top level
    (what the next publish replaces: `user_entries`)."""
    atomic_write_json(directory / MARKER, {
        "lenbench_publication": MARKER_FORMAT, "state": state, "report_machine": report_machine(),
        **({"numeric_kind": kind} if kind is not None else {}),
        **({"files": sorted(files)} if files is not None else {}),
        "note": "written by `lenbench publish`, which replaces the files it wrote here and keeps the others; "
                "without this file it refuses to"})


def published_names() -> frozenset[str]:
    """The names of the top-level files a report (and so a publication) may hold."""
    from lenbench.report.build import COST_FILES, REPORT_FILES
    from lenbench.report.figures import figure_files

    return frozenset({"bench.json", "index.html", *REPORT_FILES, *COST_FILES, *figure_files()})


def foreign_entries(directory: Path) -> list[str]:
    """The entries of `directory` a publication would not contain (relative names, sorted); the
    marker aside."""
    names = published_names()
    foreign = []
    for entry in sorted(directory.iterdir()):
        if entry.name == MARKER and entry.is_file() and not entry.is_symlink():
            continue
        if entry.is_symlink() or entry.name.startswith("."):
            foreign.append(entry.name)
        elif entry.name in REWRITTEN and entry.is_dir():
            foreign += _foreign_inside(entry)
        elif entry.is_dir() and is_nested_publication(entry):
            continue
        elif not (entry.is_file() and entry.name in names):
            foreign.append(entry.name + ("/" if entry.is_dir() else ""))
    return foreign


#: The directories a publication rewrites whole: anything in them that it does not write is in the way.
REWRITTEN = (CELLS, "encodings")


def _foreign_inside(directory: Path) -> list[str]:
    """The entries of a publication's ``cells/`` or ``encodings/`` it would not contain."""
    suffixes = (".json",) if directory.name == CELLS else SUFFIXES
    return [f"{directory.name}/{p.name}" for p in sorted(directory.iterdir())
            if p.is_symlink() or not p.is_file() or p.name.startswith(".") or p.suffix not in suffixes
            or (directory.name == CELLS and not _is_cell_file(p))]


def user_entries(target: Path) -> tuple[list[Path], list[str]]:
    """What a republish of the publication `target` must keep, and what stands in its way.

    The publication's own files are the top-level names its marker lists (`write_marker`; every name
    a report may hold, `published_names`, for one marked before the list existed), its ``cells/``
    and ``encodings/``, and the marker. Nested publications are carried over apart
    (`nested_publications`). Everything else at the top level (a user's ``NOTES.md``, directory,
    hidden file or symlink) is kept: copied unchanged (links as links) into the new publication.
    In the way, and so refused, is what the new publication would delete or overwrite: anything in
    ``cells/`` or ``encodings/`` it does not write, and a link, a directory, or a user's file, under
    a name it writes.

    Returns:
        (kept: the top-level entries to carry over, sorted; in the way: relative names, sorted).
    """
    names, marker = published_names(), read_marker(target) or {}
    own = set(marker["files"]) if isinstance(marker.get("files"), list) else names
    kept: list[Path] = []
    blocked: list[str] = []
    for entry in sorted(target.iterdir()):
        plain = entry.is_file() and not entry.is_symlink()
        real_dir = entry.is_dir() and not entry.is_symlink()
        if (entry.name == MARKER and plain) or is_nested_publication(entry):
            continue
        if entry.name in REWRITTEN:
            blocked += _foreign_inside(entry) if real_dir else [entry.name]
        elif entry.name in own and plain:
            continue  # the previous publication's own file: replaced
        elif entry.name in names | own | {MARKER} or not (plain or real_dir or entry.is_symlink()):
            blocked.append(entry.name + ("/" if real_dir else ""))  # where it writes, or no file to copy
        else:
            kept.append(entry)
    return kept, blocked


def is_nested_publication(entry: Path) -> bool:
    """Whether `entry` (a direct child of a publication) is a complete publication of its own, such
    as ``results/catalog/``: a real directory whose marker says ``"state": "complete"``. Publishing
    the outer directory carries it over unchanged (`nested_publications`)."""
    if entry.is_symlink() or not entry.is_dir() or entry.name.startswith("."):
        return False
    marker = read_marker(entry)
    return marker is not None and marker.get("state") == "complete"


def nested_publications(target: Path) -> list[Path]:
    """The complete publications directly inside the publication `target` (none when it is absent),
    sorted by name."""
    if not target.is_dir():
        return []
    return [entry for entry in sorted(target.iterdir()) if is_nested_publication(entry)]


def _is_cell_file(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("cell_id") == path.stem and isinstance(data.get("rows"), list)


def is_older_publication(directory: Path) -> bool:
    """Whether `directory` is an unmarked publication of an earlier version (module docstring)."""
    return _has_report_and_cells(directory) and not foreign_entries(directory)


def _has_report_and_cells(directory: Path) -> bool:
    return (bool(cell_files(directory))
            and ((directory / "bench.json").is_file() or (directory / "summary.md").is_file()))


# --- kills: recovering what a killed publish left -----------------------------------------------


@dataclasses.dataclass(frozen=True)
class Leftover:
    """A directory a publish writes beside its target: its stage or the moved-aside old publication."""

    path: Path
    kind: str  # "stage" or "replaced"
    pid: int
    state: str | None  # "staging", "complete", "empty", or None: not provably a publication


def leftovers(target: Path) -> list[Leftover]:
    """The stages (``.<name>.publish-<pid>-*``) and moved-aside publications (``.<name>.replaced-<pid>``)
    beside `target`, with their state (`Leftover.state`)."""
    prefixes = (("stage", f".{target.name}.publish-"), ("replaced", f".{target.name}.replaced-"))
    found = []
    try:
        entries = sorted(target.parent.iterdir())
    except OSError:
        return []
    for entry in entries:
        for kind, prefix in prefixes:
            if not entry.name.startswith(prefix) or entry.is_symlink() or not entry.is_dir():
                continue
            rest = entry.name[len(prefix):]
            pid = rest.split("-", 1)[0] if kind == "stage" else rest
            if pid.isdigit() and (kind == "replaced" or "-" in rest):
                found.append(Leftover(entry, kind, int(pid), _state(entry)))
    return found


def _state(directory: Path) -> str | None:
    marker = read_marker(directory)
    if marker is not None:
        return "staging" if marker.get("state") == "staging" else "complete"
    if not any(directory.iterdir()):
        return "empty"
    return "complete" if is_older_publication(directory) else None


def recover(target: str | Path) -> str | None:
    """Recover what killed publishes left beside `target` (module docstring, "Kills").

    Args:
        target: the published directory (present or, after a kill between the renames, absent).

    Returns:
        One line saying what was restored, finished, removed and left, or None when there was nothing.
    """
    target = Path(target).absolute()
    dead = [x for x in leftovers(target) if not pid_alive(x.pid)]
    if not dead:
        return None
    ours = [x for x in dead if x.state is not None]
    done = []
    if not target.exists() and not target.is_symlink():
        finished = _newest([x for x in ours if x.kind == "stage" and x.state == "complete"])
        previous = _newest([x for x in ours if x.kind == "replaced" and x.state == "complete"])
        pick = finished or previous
        if pick is not None:
            os.replace(pick.path, target)
            ours.remove(pick)
            done.append(f"{'finished the new publication' if pick is finished else 'restored the previous one'} "
                        f"({pick.path.name} → {target.name})")
    for x in ours:
        remove_publication(x.path)
    pids = ", ".join(sorted({str(x.pid) for x in dead}))
    if ours:
        done.append(f"removed {len(ours)} leftover(s): {', '.join(x.path.name for x in ours)}")
    foreign = [x.path.name for x in dead if x.state is None]
    if foreign:
        done.append(f"left {', '.join(foreign)} (no {MARKER}: not provably a publication; remove it by hand)")
    return f"lenbench: recovered {target} after a killed publish (pid {pids}): {'; '.join(done)}"


def _newest(candidates: list[Leftover]) -> Leftover | None:
    return max(candidates, key=lambda x: x.path.stat().st_mtime, default=None)


def remove_publication(directory: Path) -> None:
    """Delete a publication (or stage) directory, its marker last, so a kill midway leaves one the
    next publish can still prove is its own. A missing directory is fine."""
    if not directory.exists():
        return
    for entry in directory.iterdir():
        if entry.name == MARKER:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    (directory / MARKER).unlink(missing_ok=True)
    directory.rmdir()
