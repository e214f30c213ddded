"""Shared fixtures for the unit tests."""

import sys
from pathlib import Path

import pytest
import torch

# The benchmark plans live beside the benchmarks (bench/kernel_plans.py); tests import them as `kernel_plans`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
