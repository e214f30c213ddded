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
