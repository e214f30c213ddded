"""The processes of a local Ray end with the driver that started it, even a SIGKILLed one.

A local Ray that the driver's `ray.init` starts shares its fate mostly on its own: gcs_server,
the raylet and the monitors get the kernel's parent-death signal, and the workers exit with the
raylet. The raylet's two agents, ``ray::DashboardAgent`` and ``ray::RuntimeEnvAgent``, do not:
Ray starts them on every node whatever `ray.init` is given (``include_dashboard=False`` only
leaves out the dashboard's web server), and when they see the raylet gone without a graceful
shutdown they first report its death to the GCS, which is dead too, so they wait out that call's
60 s timeout before exiting (``ray._private.process_watcher.report_raylet_error_logs``, Ray 2.x).

`Reaper` ends them at once: before `ray.init` the driver starts one small process (this file,
run as a script: no lenbench import, no torch) in its own session, whose stdin is a pipe only the
driver writes to. Two things name the processes of the Ray this driver starts: a mark in their
environment (``LENBENCH_RAY_NODE=<uuid>`` while `ray.init` runs; the driver's own environment
stays unmarked), and, once `ray.init` returns, the Ray session's directory, which the driver sends
down the pipe: every Ray process keeps its log files there open. Both are needed: a Ray process
that sets its title (``ray::DashboardAgent``) overwrites its environment as ``/proc`` shows it.
At end-of-file on the pipe (the driver closed the executor, exited, or was killed: the kernel
closes the pipe whatever the cause) the reaper SIGKILLs every process so named, then exits. A
cluster the driver joins (``--ray-address``) or a Ray session the caller opened is never named.

Linux only (``/proc``); elsewhere no reaper starts and the agents exit after Ray's timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

#: The environment variable marking every process of the local Ray one driver started.
MARKER_ENV = "LENBENCH_RAY_NODE"
#: Rounds of looking for marked processes after the driver is gone (a worker may be starting).
ROUNDS = 20


def supported() -> bool:
    """Whether processes can be found by their environment here (Linux's /proc)."""
    return sys.platform.startswith("linux") and Path("/proc/self/environ").exists()


class Reaper:
    """One reaper process for one local Ray (see the module docstring).

    Example:
        >>> reaper = Reaper()                 # doctest: +SKIP
        >>> with reaper.marking():            # doctest: +SKIP
        ...     ray.init()
        >>> ray.shutdown(); reaper.close()    # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.marker = uuid.uuid4().hex
        self._proc: subprocess.Popen | None = None
        if supported():
            self._proc = subprocess.Popen(
                [sys.executable, "-S", __file__, self.marker, str(os.getpid())], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)

    @contextlib.contextmanager
    def marking(self) -> Iterator[None]:
        """Mark the processes started meanwhile (those `ray.init` starts), not the driver's later ones."""
        before = os.environ.get(MARKER_ENV)
        os.environ[MARKER_ENV] = self.marker
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(MARKER_ENV, None)
            else:
                os.environ[MARKER_ENV] = before

    def watch(self, session_dir: str | Path) -> None:
        """Name the processes holding files of `session_dir` open (a Ray session's) as this Ray's."""
        if self._proc is not None:
            with contextlib.suppress(OSError):  # a reaper gone already (killed by hand) names nothing
                self._proc.stdin.write(f"{Path(session_dir).resolve()}\n".encode())
                self._proc.stdin.flush()

    def close(self) -> None:
        """End the marked processes still running (after `ray.shutdown`, stragglers at most)."""
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # it kills a few processes and exits: never expected
            pass


def ours(pid: int, marker: str, sessions: list[str]) -> bool:
    """Whether process `pid` carries ``MARKER_ENV=marker`` or writes a file under one of `sessions`
    (a Ray process's logs; a reader, such as ``tail -f`` of a log, is not one)."""
    proc = Path("/proc") / str(pid)
    try:
        if f"{MARKER_ENV}={marker}".encode() in (proc / "environ").read_bytes().split(b"\0"):
            return True
        return any(_writes_under(proc, fd, sessions) for fd in (proc / "fd").iterdir())
    except OSError:  # gone meanwhile, or another user's
        return False


def _writes_under(proc: Path, fd: Path, sessions: list[str]) -> bool:
    try:
        target = os.readlink(fd)
        if not any(target.startswith(session + os.sep) for session in sessions):
            return False
        flags = next(line for line in (proc / "fdinfo" / fd.name).read_text().splitlines() if line.startswith("flags:"))
    except (OSError, StopIteration):  # closed meanwhile
        return False
    return int(flags.split()[1], 8) & (os.O_WRONLY | os.O_RDWR) != 0


def reap(marker: str, sessions: list[str], exclude: set[int]) -> int:
    """SIGKILL every process of this Ray (again while new ones appear); returns how many were killed."""
    killed = 0
    for _ in range(ROUNDS):
        pids = [int(e.name) for e in Path("/proc").iterdir()
                if e.name.isdigit() and int(e.name) not in exclude and ours(int(e.name), marker, sessions)]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.05)
    return killed


def main(argv: list[str]) -> int:
    """The reaper process (argv: marker, driver pid): read session directories from stdin until
    end-of-file, then reap."""
    marker, driver = argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver's Ctrl-C is the driver's to handle
    sessions = [line.strip() for line in sys.stdin if line.strip()]  # returns at end-of-file
    reap(marker, sessions, {os.getpid(), int(driver)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
