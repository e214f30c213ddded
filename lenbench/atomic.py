"""Atomic file writes: a temporary file in the target's directory, then `os.replace`.

A reader (or a rerun after a kill) sees either the old file or the complete new one, never a
partial write; temporary files are named `.<name>.*.tmp` and removed on failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is fsynced and renamed onto `path`.

    The file gets the permissions an ordinary new file would (0666 & ~umask), not mkstemp's 0600.

    Example:
        >>> with atomic_path("out/plot.png") as tmp:
        ...     fig.savefig(tmp, format="png")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    return Path(path)


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True, allow_nan=True) + "\n")


def check_writable(directory: str | Path, what: str = "results directory") -> Path:
    """Create `directory` if needed and prove a file can be written in it (a real write, so it also
    holds for root and read-only file systems); else a one-line ValueError naming it and the fix.

    Called up front by the engine and `lenbench report`, before anything is trained or computed.
    """
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory, prefix=".write-check-"):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ValueError(f"{what} {str(directory)!r} is not writable ({reason}); "
                         "fix its permissions or choose another output directory (--out)") from None
    return directory
