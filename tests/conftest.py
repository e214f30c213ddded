"""Shared fixtures for the unit tests."""

import sys
from pathlib import Path

import pytest
import torch

# Tests import the benchmark scripts of bench/ (gpu_check) by name; the plans are `lenbench.benchmark.plans`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))


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
