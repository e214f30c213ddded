"""Issue 19, defect 3: a SIGKILLed driver leaves no process behind.

`lenbench run` and `pytest bench` with the process executor are started in their own session
with a marker in their environment (which every worker and multiprocessing's resource tracker
inherit); once both workers are training, the driver alone is SIGKILLed, and every marked
process must be gone, and the driver's output pipes closed, within a few seconds. The
mechanisms of `lenbench.run.executors.parent_watch` are tested one at a time on a plain child process.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from lenbench_testing import TINY_SUITE, pid_running, write_suite

from lenbench.run.executors.parent_watch import ORPHANED_EXIT_CODE

ROOT = Path(__file__).resolve().parents[2]
MARKER = "LENBENCH_TEST_ORPHAN_MARKER"
#: Cells that train far longer than the test waits: the driver is killed mid-cell.
SLOW = {**TINY_SUITE, "train": {**TINY_SUITE["train"], "steps": 100_000}}
#: How long the survivors get to exit after the kill (they take milliseconds; the machine may be busy).
#: A local Ray's too: left to Ray, its two agents would wait a minute on the dead GCS before they
#: exit; lenbench's reaper (`lenbench.run.executors.ray_reaper`) ends them at once.
GRACE_S = 30.0

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(),
                                reason="finds the processes through /proc (Linux)")


alive = pid_running


def marked(marker: str) -> dict[int, str]:
    """Running processes whose environment carries `MARKER=marker`: pid → command line."""
    found = {}
    needle = f"{MARKER}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile, or not ours
            continue
    return {pid: cmd for pid, cmd in found.items() if alive(pid)}


def descendants(root: int) -> dict[int, str]:
    """Running descendants of `root`: pid → start time (a pid reused later has another), found
    through the process tree, since a Ray process that sets its title (``ray::DashboardAgent``)
    blanks its environment as /proc shows it, and so its marker."""
    parents, started = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            parents[int(entry.name)], started[int(entry.name)] = int(fields[1]), fields[19]
    found, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found[child] = started[child]
                frontier.append(child)
    return {pid: start for pid, start in found.items() if alive(pid)}


def still_running(pids: dict[int, str]) -> dict[int, str]:
    """Those of `pids` (pid → start time, `descendants`) that are still the same running process."""
    left = {}
    for pid, start in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[19] == start and alive(pid):
            left[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return left


def wait_for(predicate, timeout: float, what: str):
    """Poll `predicate` until it returns something truthy; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what() if callable(what) else what}")


def kill_all(pids) -> None:
    """SIGKILL the given processes this test started (cleanup; already gone is fine)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def has_torch(pid: int) -> bool:
    """Whether process `pid` has loaded torch (a worker that got its first cell)."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def pool_workers_training(marker: str) -> dict[int, str] | None:
    """The process executor's two marked workers once both have torch loaded, else None."""
    workers = {pid: cmd for pid, cmd in marked(marker).items() if "spawn_main" in cmd}
    return workers if len(workers) == 2 and all(map(has_torch, workers)) else None


def ray_tasks_running(marker: str) -> dict[int, str] | None:
    """The marked Ray workers running a cell (`ray::run_on_worker`) with torch loaded, else None."""
    workers = {pid: cmd for pid, cmd in marked(marker).items() if cmd.startswith("ray::run_on_worker")}
    return workers if workers and all(map(has_torch, workers)) else None


def kill_driver_mid_cell(cmd: list[str], ready) -> dict[int, str]:
    """Start `cmd` (a driver) in its own session, SIGKILL it alone once `ready(marker)` finds its
    workers in a cell, and check that every process it started exits and that its output pipes
    reach end-of-file (no survivor holds them). Returns what ran beside the driver before the kill.

    Args:
        cmd: the driver's command line (run from the checkout, with it on PYTHONPATH).
        ready: marker → the processes running cells, or None while they are not there yet.
    """
    marker = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), MARKER: marker}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    tree: dict[int, str] = {}
    try:
        workers = wait_for(lambda: ready(marker), 300, "the workers to start a cell")
        children = {pid: cmd for pid, cmd in marked(marker).items() if pid != proc.pid}
        assert set(workers) <= set(children)
        tree = descendants(proc.pid)  # also those whose marker /proc no longer shows
        children = {**still_running(tree), **children}

        proc.kill()  # the driver only, not its process group
        try:
            _, err = proc.communicate(timeout=GRACE_S)  # EOF: no survivor holds its stdout / stderr
        except subprocess.TimeoutExpired:
            err = None
        if err is None:
            pytest.fail(f"the driver's output pipes stayed open after its SIGKILL; alive: {marked(marker)}")
        assert proc.returncode == -signal.SIGKILL
        survivors: dict[int, str] = {}

        def none_left() -> bool:
            survivors.clear()
            survivors.update(marked(marker))
            survivors.update(still_running(tree))
            return not survivors

        killed = time.monotonic()
        assert wait_for(none_left, GRACE_S, lambda: f"every process of the driver to exit; alive: {survivors}")
        print(f"every process exited {time.monotonic() - killed:.1f} s after the driver's SIGKILL")
        assert b"Traceback" not in err, err.decode()[-2000:]
        return children
    finally:
        kill_all([proc.pid, *marked(marker), *still_running(tree)])
        proc.wait()


def kinds(children: dict[int, str]) -> list[str]:
    """The process executor's children by kind: ["tracker", "worker", "worker"] for two workers."""
    return sorted("tracker" if "resource_tracker" in c else "worker" if "spawn_main" in c else c
                  for c in children.values())


@pytest.mark.subprocess
def test_sigkilled_lenbench_run_leaves_no_process(tmp_path):
    suite = write_suite(tmp_path, SLOW)
    children = kill_driver_mid_cell(
        [sys.executable, "-m", "lenbench.cli", "run", "--suite", str(suite), "--out", str(tmp_path / "out"),
         "--device", "cpu", "--executor", "process", "--workers", "2", "--quiet"], pool_workers_training)
    assert kinds(children) == ["tracker", "worker", "worker"]


@pytest.mark.subprocess
def test_sigkilled_pytest_bench_leaves_no_process(tmp_path):
    suite = write_suite(tmp_path, SLOW)
    children = kill_driver_mid_cell(
        [sys.executable, "-m", "pytest", "bench/test_extrapolation.py", "--suite", str(suite), "--device", "cpu",
         "--results-dir", str(tmp_path / "results"), "--executor", "process", "--workers", "2",
         "-q", "-p", "no:cacheprovider"], pool_workers_training)
    assert kinds(children) == ["tracker", "worker", "worker"]


@pytest.mark.ray
@pytest.mark.subprocess
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason='Ray is not installed (pip install -e ".[ray]")')
def test_sigkilled_lenbench_run_on_a_local_ray_leaves_no_process(tmp_path):
    """Ray's own fate sharing (the node processes a driver's `ray.init` starts, gcs_server, raylet
    and monitors, die with it, and its workers with the raylet) and lenbench's reaper (the raylet's
    agents, which Ray would leave running for a minute)."""
    suite = write_suite(tmp_path, {**SLOW, "resources": {"num_cpus": 1}})
    children = kill_driver_mid_cell(
        [sys.executable, "-m", "lenbench.cli", "run", "--suite", str(suite), "--out", str(tmp_path / "out"),
         "--device", "cpu", "--executor", "ray", "--quiet"], ray_tasks_running)
    started = " ".join(children.values())
    assert all(name in started for name in ("gcs_server", "raylet", "ray::run_on_worker", "ray::DashboardAgent",
                                            "ray::RuntimeEnvAgent")), children


# --- the mechanisms, one at a time ------------------------------------------------------------

#: A child that arms one mechanism of `lenbench.run.executors.parent_watch`, says so on a file, then would
#: sleep for ten minutes. Arguments: the mechanism, the ready file, its parent's pid.
CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from lenbench.run.executors import parent_watch
    def child(how, ready, parent_pid):
        if how == "signal":
            assert parent_watch.set_parent_death_signal()
        else:
            parent_watch.start_watchdog(parent_pid)
        Path(ready).write_text(str(os.getpid()))
        time.sleep(600)

    if __name__ == "__main__":
        child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
""")
#: Its parent: starts it with multiprocessing's spawn (which gives it a parent sentinel) or, for
#: "poll", as a plain subprocess (no sentinel), then sleeps.
PARENT = textwrap.dedent("""
    import multiprocessing, os, subprocess, sys, time
    from child import child

    if __name__ == "__main__":
        how, ready, script = sys.argv[1:]
        if how == "poll":
            kid = subprocess.Popen([sys.executable, script, how, ready, str(os.getpid())])
        else:
            kid = multiprocessing.get_context("spawn").Process(target=child, args=(how, ready, os.getpid()))
            kid.start()
        time.sleep(600)
""")


@pytest.mark.subprocess
@pytest.mark.parametrize("how", [
    "sentinel",  # everywhere: the watchdog thread on multiprocessing's parent sentinel
    "poll",  # a child outside multiprocessing: the watchdog polls os.getppid()
    pytest.param("signal", marks=pytest.mark.skipif(not sys.platform.startswith("linux"),
                                                    reason="PR_SET_PDEATHSIG is Linux only")),
])
def test_a_child_exits_when_its_parent_is_killed(tmp_path, how):
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "parent.py").write_text(PARENT)
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py"), how, str(ready), str(tmp_path / "child.py")],
                              env=env, start_new_session=True)
    child = None
    try:
        child = int(wait_for(lambda: ready.exists() and ready.read_text(), 120, "the child to arm its watch"))
        assert alive(child)
        parent.kill()
        parent.wait()
        assert wait_for(lambda: not alive(child), GRACE_S, f"child {child} to exit after its parent's SIGKILL")
    finally:
        kill_all([parent.pid] + ([child] if child else []))
        parent.wait()


@pytest.mark.subprocess
def test_a_worker_whose_parent_died_before_it_armed_exits_at_once():
    code = "from lenbench.run.executors.parent_watch import watch_parent; import time; watch_parent(0); time.sleep(600)"
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stderr) == (ORPHANED_EXIT_CODE, "")


@pytest.mark.subprocess
def test_a_watched_process_with_a_live_parent_runs_and_exits_normally():
    code = "import os; from lenbench.run.executors.parent_watch import watch_parent; watch_parent(os.getppid()); print('ran')"
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ran\n", "")
