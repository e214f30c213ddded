"""Shared fixtures for the unit tests."""

import os
import sys
from pathlib import Path

import pytest
import torch
from lenbench_testing import TINY_RUN

from lenbench.config import parse_suite
from lenbench.run.driver import run_suite

# Tests import the benchmark scripts of bench/ (gpu_check) by name; the plans are `lenbench.benchmark.plans`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

# The README's test command runs on two pytest-xdist workers, whose environment names them
# (PYTEST_XDIST_WORKER, …). A `pytest bench` session a test starts as a subprocess inherits the
# environment, and pytest-benchmark then disables timing "in a parallelized environment": that session
# is not a worker, so the names are dropped here, before any test starts one.
for _name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_name, None)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# A fresh interpreter importing torch, a Ray cluster and a kernel compile each cost seconds on a
# 2-core CPU, so a test that does any of them is slow: the fast tier (-m "not slow") leaves it out.
SLOW_KINDS = ("subprocess", "ray", "compile")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A finished run of `TINY_RUN` (2 cells, 3 steps), trained once per session for the tests that
    only read a run (publish, report, their refusals). Tests must not write into it."""
    out = tmp_path_factory.mktemp("run") / "tiny"
    run_suite(parse_suite(TINY_RUN), out, device="cpu", executor="serial", progress=False, log=lambda _: None)
    return out
