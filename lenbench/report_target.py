"""Where `lenbench report --out DIR` may write: a directory lenbench owns, or a new or empty one.

A report writes its files under fixed names (``index.html``, ``summary.md``, the figures, …) and
replaces any file of that name, so it writes only where those names are provably its own:

- a new or empty directory, which it first marks as a report directory (`MARKER`,
  ``.lenbench-report``), so the next report into it is recognised;
- a report directory: one holding that marker (a regular file; its content is not read);
- a publication (`lenbench.publication.MARKER`), or the results directory of a run (a ``cells/``,
  ``checkpoints/`` or ``locks/`` directory): lenbench's own, where a report belongs beside its cells.

Any other directory that is not empty (your own ``index.html`` and ``summary.md``, a ``thesis.txt``)
is refused in one line naming it, what it holds and the fix, and nothing in it changes; a report an
earlier version wrote (before the marker) is refused the same way, and ``touch DIR/.lenbench-report``
is how you say it is a report's. In a directory it owns a report rewrites its own files and deletes
nothing: files of yours beside them (``NOTES.md``, a subdirectory) are left as they are. A link or a
directory under a name the report writes (``index.html/``, ``encodings`` linked elsewhere) is in the
way of a report file, and is refused in one line too.

The default output (no ``--out``: the results directory itself, or the directory holding the file
given) is where the user pointed the report, and is not checked here.
"""

from __future__ import annotations

from pathlib import Path

from lenbench.atomic import atomic_write_json, check_writable
from lenbench.publication import published_names, read_marker
from lenbench.report.figures import SUFFIXES
from lenbench.run.store import CELLS, CHECKPOINTS, LOCKS

#: The marker of a directory `lenbench report --out` made.
MARKER = ".lenbench-report"


def claim_report_dir(out: str | Path) -> Path:
    """Make `out` ready for a report, or refuse it (module docstring): check that lenbench owns it
    or it is new or empty, that nothing is in the way of a report file, that it is writable, and
    mark it when it was new or empty.

    Args:
        out: the directory given as ``--out``.

    Returns:
        `out`, as a Path.

    Raises:
        ValueError: one line naming `out`, what it holds and the fix.
        DiskFullError: no space there (`lenbench.atomic.check_writable`).
    """
    out = Path(out)
    new = not out.exists() or (out.is_dir() and not any(out.iterdir()))
    if not new and out.is_dir() and not owned(out):
        held = _listed([e.name + ("/" if e.is_dir() and not e.is_symlink() else "") for e in sorted(out.iterdir())])
        raise ValueError(f"--out {out} is not a directory lenbench made (no {MARKER}) and it holds {held}; a report "
                         "replaces the files it names (index.html, summary.md, …) and so writes only into a new or "
                         f"empty directory or its own: give another --out (or, if a report wrote these, "
                         f"`touch {out / MARKER}`)")
    blocked = in_the_way(out) if out.is_dir() else []
    if blocked:
        raise ValueError(f"--out {out} holds {_listed(blocked)} under a name the report writes (a link or a "
                         "directory, not its file); move it out of the way and rerun")
    check_writable(out, "report directory")
    if new:
        atomic_write_json(out / MARKER, {
            "lenbench_report": 1,
            "note": "written by `lenbench report --out`, which rewrites its own files here and nothing else; "
                    "without this file it writes only into a new or empty directory"})
    return out


def owned(directory: Path) -> bool:
    """Whether `directory` is lenbench's own: a report directory, a publication or a run's
    results directory (module docstring)."""
    marker = directory / MARKER
    if marker.is_file() and not marker.is_symlink():
        return True
    if read_marker(directory) is not None:
        return True
    return any((directory / name).is_dir() and not (directory / name).is_symlink() for name in (CELLS, CHECKPOINTS, LOCKS))


def in_the_way(directory: Path) -> list[str]:
    """The entries of `directory` that stand where a report writes a file: a link or a directory
    under a report file's name, ``encodings`` that is not a real directory, and a link or directory
    in it under a figure's name (relative names, sorted)."""
    blocked = [name for name in sorted(published_names())
               if (directory / name).is_symlink() or (directory / name).exists() and not (directory / name).is_file()]
    encodings = directory / "encodings"
    if encodings.is_symlink() or encodings.exists() and not encodings.is_dir():
        blocked.append("encodings")
    elif encodings.is_dir():
        blocked += [f"encodings/{p.name}" for p in sorted(encodings.iterdir())
                    if p.suffix in SUFFIXES and (p.is_symlink() or not p.is_file())]
    return blocked


def _listed(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
