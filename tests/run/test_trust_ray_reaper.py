"""The reaper of a local Ray (`lenbench.run.executors.ray_reaper`) ends exactly that Ray's processes
when its driver dies, however it dies, without Ray: a stand-in driver starts the reaper, one
process while marking (as `ray.init` would start gcs_server and the raylet) and one unmarked
that writes a log under the session directory it then names (as a Ray agent that has retitled
itself, which blanks its environment in /proc). A process that only reads a log of the session
(``tail -f``), one started after the marking, and everything after a normal close are left alone
or ended as the docstring says. End to end with Ray: tests/run/test_trust_orphans.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from lenbench_testing import pid_running

from lenbench.run.executors import ray_reaper

ROOT = Path(__file__).resolve().parents[2]
#: Seconds the reaped processes get to disappear (they take milliseconds; the machine may be busy).
GRACE_S = 30.0

pytestmark = pytest.mark.skipif(not ray_reaper.supported(), reason="finds processes through /proc (Linux)")

#: A process that lives ten minutes and ignores SIGTERM, like an agent waiting on a dead GCS;
#: with a path argument it first opens that file (for writing, or reading with "r").
SLEEPER = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
          "f = open(sys.argv[1], sys.argv[2]) if len(sys.argv) > 2 else None; print('up', flush=True); time.sleep(600)"

#: The stand-in driver: argv session directory, "kill" (wait to be SIGKILLed) or "close" (close
#: the reaper once a line arrives on stdin, so the test sees every process alive first). Prints
#: the pids it started as JSON.
DRIVER = textwrap.dedent("""
    import json, subprocess, sys, time
    from lenbench.run.executors.ray_reaper import Reaper

    session, how, sleeper = sys.argv[1:]
    def start(*args):
        proc = subprocess.Popen([sys.executable, "-c", sleeper, *args], stdout=subprocess.PIPE)
        proc.stdout.readline()
        return proc.pid
    reaper = Reaper()
    with reaper.marking():
        marked = start()
    agent = start(f"{session}/logs/agent.out", "w")
    reaper.watch(session)
    later = start()  # neither marked nor writing the session's files: not Ray's
    print(json.dumps({"marked": marked, "agent": agent, "later": later}), flush=True)
    if how == "close":
        sys.stdin.readline()
        reaper.close()
    time.sleep(600)
""")


alive = pid_running


def wait_gone(pids: list[int]) -> list[int]:
    """Wait until none of `pids` runs (at most GRACE_S); returns those still running."""
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(map(alive, pids)):
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.subprocess
@pytest.mark.parametrize("how", ["kill", "close"])
def test_the_reaper_ends_the_marked_and_the_session_writing_processes_only(tmp_path, how):
    session = tmp_path / "session_1"
    (session / "logs").mkdir(parents=True)
    (session / "logs" / "raylet.out").write_text("")
    reader = subprocess.Popen([sys.executable, "-c", SLEEPER, str(session / "logs" / "raylet.out"), "r"],
                              stdout=subprocess.PIPE)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(session), how, SLEEPER], stdout=subprocess.PIPE,
                              stdin=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              start_new_session=True)
    pids: dict[str, int] = {}
    try:
        reader.stdout.readline()
        pids = json.loads(driver.stdout.readline())
        assert all(map(alive, pids.values()))
        if how == "kill":
            driver.kill()
            driver.wait()
        else:
            driver.stdin.write(b"close\n")
            driver.stdin.flush()
        assert wait_gone([pids["marked"], pids["agent"]]) == []
        assert alive(pids["later"]) and alive(reader.pid)
        if how == "close":
            assert alive(driver.pid)  # the driver itself is never the reaper's
    finally:
        kill([driver.pid, reader.pid, *pids.values()])
        driver.wait()
        reader.wait()
        driver.stdin.close()


def test_no_process_is_started_where_processes_cannot_be_found(monkeypatch):
    monkeypatch.setattr(ray_reaper, "supported", lambda: False)
    reaper = ray_reaper.Reaper()
    with reaper.marking():
        assert os.environ[ray_reaper.MARKER_ENV] == reaper.marker
    assert ray_reaper.MARKER_ENV not in os.environ
    reaper.watch("/nowhere")
    reaper.close()


class FakeReaper:
    """Records what the Ray executor asks of its reaper."""

    made: list[FakeReaper] = []

    def __init__(self) -> None:
        self.watched, self.closed = [], False
        FakeReaper.made.append(self)

    def marking(self):
        import contextlib

        return contextlib.nullcontext()

    def watch(self, session_dir) -> None:
        self.watched.append(session_dir)

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("head", [True, False])
def test_the_ray_executor_reaps_only_a_ray_its_init_started(monkeypatch, head):
    """`ray.init` without an address joins a Ray already running here (`ray start`, RAY_ADDRESS)
    when there is one: that Ray is not the driver's, and its session is never named to the reaper."""
    ray_executor = pytest.importorskip("lenbench.run.executors.ray")
    ray = pytest.importorskip("ray")

    class Node:
        def __init__(self) -> None:
            self.head = head

        def get_session_dir_path(self) -> str:
            return "/tmp/ray/session_x"

    FakeReaper.made.clear()
    monkeypatch.setattr(ray_executor, "Reaper", FakeReaper)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **_: None)
    monkeypatch.setattr(ray._private.worker, "_global_node", Node(), raising=False)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    executor = ray_executor.RayExecutor()
    executor._connect()
    [reaper] = FakeReaper.made
    assert (reaper.watched, reaper.closed) == ((["/tmp/ray/session_x"], False) if head else ([], True))
    executor.close()
    assert reaper.closed
