"""Worker processes that die with their driver.

A SIGKILLed driver runs no cleanup, and a `concurrent.futures` worker waits on its job pipe
forever: every worker holds the write end of that pipe too (a `multiprocessing.Queue` pickles
both ends), so no worker ever reads end-of-file. The workers then keep multiprocessing's
resource tracker alive as well (they hold the write end of its pipe; it exits once they are
gone), and the driver's stdout / stderr stay open in all of them, so a caller reading the
driver's output waits forever.

`watch_parent` is the worker initializer that prevents this, two ways:

* on Linux the kernel kills the worker when its parent dies (``prctl(PR_SET_PDEATHSIG,
  SIGKILL)``), immediately and even while the worker is busy in native code. The kernel counts
  the *thread* that started the worker as its parent: `lenbench.run.executors.base.ProcessExecutor`
  starts its workers from the thread that runs the cells, which lives as long as the pool;
* everywhere (macOS has no parent-death signal) a daemon thread waits on the sentinel that
  `multiprocessing` gives every child (`multiprocessing.parent_process().sentinel`: the read end
  of a pipe whose write end only the parent holds, readable at end-of-file once the parent has
  died) and ends the process with `os._exit`. Outside `multiprocessing` the thread polls
  `os.getppid()` instead (a dead parent's children are reparented).

A worker killed this way loses nothing: workers never write the results directory (the driver
alone does, `lenbench.run.executors.base`), so the rerun recomputes only the unfinished cells.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time

#: Exit status of a worker that found its parent gone (no one reads it: the parent is dead).
ORPHANED_EXIT_CODE = 3
#: Seconds between two parent checks where there is no sentinel to wait on.
POLL_S = 0.5
#: prctl option number from <linux/prctl.h>.
PR_SET_PDEATHSIG = 1


def watch_parent(parent_pid: int) -> None:
    """Make this process die with `parent_pid`, its parent (use as a pool's worker initializer).

    Args:
        parent_pid: the pid of the process that started this one (the driver's `os.getpid()`,
            passed in the initializer's arguments). If this process's parent is already another
            one, the driver died before the worker got here, and the worker exits at once.
    """
    set_parent_death_signal()
    if os.getppid() != parent_pid:  # died between our start and the prctl: no signal will come
        os._exit(ORPHANED_EXIT_CODE)
    start_watchdog(parent_pid)


def set_parent_death_signal(signum: int = signal.SIGKILL) -> bool:
    """Ask the Linux kernel to send `signum` to this process when its parent thread exits.

    Args:
        signum: the signal to receive (default SIGKILL: nothing to clean up in a worker).

    Returns:
        True when the kernel took it; False elsewhere (macOS, …) or when prctl failed, where
        the watchdog thread alone does the job.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def start_watchdog(parent_pid: int) -> threading.Thread:
    """Start the daemon thread that ends this process (`os._exit`) once `parent_pid` is gone.

    Args:
        parent_pid: this process's parent; used where `multiprocessing` gives no parent sentinel.

    Returns:
        The started thread (it never returns while the parent lives).
    """
    parent = multiprocessing.parent_process()
    sentinel = parent.sentinel if parent is not None and parent.pid == parent_pid else None
    thread = threading.Thread(target=_watch, args=(parent_pid, sentinel), name="lenbench-parent-watch", daemon=True)
    thread.start()
    return thread


def _watch(parent_pid: int, sentinel: int | None) -> None:
    """Block until the parent is gone, then exit the whole process without cleanup.

    Args:
        parent_pid: the parent's pid, polled against `os.getppid()` when there is no sentinel.
        sentinel: multiprocessing's parent sentinel (readable once the parent died), or None.
    """
    if sentinel is not None:
        multiprocessing.connection.wait([sentinel])
    else:
        while os.getppid() == parent_pid:
            time.sleep(POLL_S)
    os._exit(ORPHANED_EXIT_CODE)
