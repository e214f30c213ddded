"""Atomic file writes: a temporary file in the target's directory, then `os.replace`.

A reader (or a rerun after a kill) sees either the old file or the complete new one, never a
partial write; temporary files are named `.<name>.*.tmp` and removed on failure.

A full disk (ENOSPC, or EDQUOT: over quota) while writing is a `DiskFullError`: one line naming
the directory, the free space there and what the file needs (its size when known, else what was
written before the disk filled). The partial temporary file is removed, so nothing truncated is
ever renamed into place or reused by a rerun.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()

#: errno values meaning "no room left here" (EDQUOT: the user's quota, where the platform has it).
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


class DiskFullError(OSError):
    """No space left where a file was being written; `str()` is the one-line message."""

    def __init__(self, message: str, filename: str | Path | None = None):
        super().__init__(errno.ENOSPC, message, None if filename is None else str(filename))
        self.message = message

    def __str__(self) -> str:
        return self.message


def is_disk_full(err: BaseException) -> bool:
    """Whether `err` is an OSError saying the disk (or the user's quota) is full."""
    return isinstance(err, OSError) and err.errno in DISK_FULL_ERRNOS


def format_bytes(n: int | float) -> str:
    """A byte count for a message: '512 B', '3.2 KB', '41.4 MB', '1.50 GB' (powers of 1000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}" if unit == "GB" else f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def free_bytes(directory: str | Path) -> int | None:
    """Bytes free for this user on the file system of `directory` (its nearest existing ancestor);
    None when it cannot be asked."""
    directory = Path(directory).absolute()
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def disk_full_error(path: str | Path, *, needed: int | None = None, written: int | None = None,
                    what: str | None = None) -> DiskFullError:
    """The one-line `DiskFullError` for a write into `path` that found the disk full.

    Args:
        path: the file (or directory) being written.
        needed: bytes the write needs, when known.
        written: bytes written before the disk filled (a lower bound of `needed`), when `needed` is not known.
        what: what was being written, for the message (default: the file's name).
    """
    path = Path(path)
    directory = path.parent
    free = free_bytes(directory)
    free_text = "unknown space" if free is None else format_bytes(free)
    if needed is not None:
        need = f"needs {format_bytes(needed)}"
    elif written is not None:
        need = f"needs more than the {format_bytes(written)} written before the disk filled"
    else:
        need = "needs more space"
    return DiskFullError(f"disk full: no space left in {str(directory)!r} while writing {what or path.name} "
                         f"({need}, {free_text} free there); free space there or choose another directory, "
                         "then rerun the same command (files already written are complete and kept)", path)


def disk_full_message(err: OSError) -> str:
    """The one line for a full disk: a `DiskFullError`'s own message, else one built from the
    error's file name (its directory and the free space there) when it has one."""
    if isinstance(err, DiskFullError):
        return err.message
    if err.filename:
        return disk_full_error(err.filename).message
    return (f"disk full: {err.strerror or 'no space left on device'}; free space where the output goes or choose "
            "another directory, then rerun the same command (files already written are complete and kept)")


@contextlib.contextmanager
def atomic_path(path: str | Path, *, size: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is fsynced and renamed onto `path`.

    The file gets the permissions an ordinary new file would (0666 & ~umask), not mkstemp's 0600.
    A full disk raises `DiskFullError` (the partial file removed).

    Args:
        path: the file to write.
        size: the bytes that will be written, when known (for the disk-full message).

    Example:
        >>> with atomic_path("out/plot.png") as tmp:
        ...     fig.savefig(tmp, format="png")
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        if is_disk_full(err):  # not even an empty file (no inodes left)
            raise disk_full_error(path, needed=size) from None
        raise
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except OSError as err:
        if not is_disk_full(err) or isinstance(err, DiskFullError):
            tmp.unlink(missing_ok=True)
            raise
        written = tmp.stat().st_size if tmp.exists() else None
        tmp.unlink(missing_ok=True)  # before measuring the free space: the partial file is not kept
        raise disk_full_error(path, needed=size, written=written) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    with atomic_path(path, size=len(data)) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True, allow_nan=True) + "\n")


def check_writable(directory: str | Path, what: str = "results directory", option: str = "--out") -> Path:
    """Create `directory` if needed and prove a file can be written in it (a real write of one
    byte, so it also holds for root, read-only file systems and a full disk).

    Called up front by the engine and `lenbench report`, before anything is trained or computed.

    Args:
        directory: the directory to check (created with its parents when missing).
        what: what it is, for the messages (e.g. "report directory").
        option: the command-line option that chooses it, for the fix the messages name.

    Raises:
        ValueError: one line naming the directory and the fix: a file where the directory should
            be, or no permission / a read-only file system.
        DiskFullError: no space left there (one line with the free space).
    """
    directory = Path(directory)
    blocker = _file_in_the_way(directory)
    if blocker == directory:
        raise ValueError(f"{what} {str(directory)!r} is a file, not a directory; "
                         f"give a directory ({option} DIR), new or existing")
    if blocker is not None:
        raise ValueError(f"{what} {str(directory)!r} is not writable ({str(blocker)!r} is a file, not a directory); "
                         f"choose another output directory ({option})")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory, prefix=".write-check-") as f:
            f.write(b"x")
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        if is_disk_full(err):
            raise disk_full_error(directory / ".write-check", what=f"a first byte into the {what}") from None
        reason = err.strerror or type(err).__name__
        raise ValueError(f"{what} {str(directory)!r} is not writable ({reason}); "
                         f"fix its permissions or choose another output directory ({option})") from None
    return directory


def _file_in_the_way(directory: Path) -> Path | None:
    """`directory` itself or the first of its ancestors that exists and is not a directory, or None."""
    for candidate in (directory, *directory.parents):
        if candidate.exists() or candidate.is_symlink():
            return None if candidate.is_dir() else candidate
    return None
