"""What the benchmarks of `lenbench.benchmark.bench` share: the session's kernel settings, the
parametrization of every benchmark, the copy floor, the references a benchmark is divided by, and
the memory released after each test.

The test modules import these names (fixtures and the `pytest_generate_tests` hook included), so a
test module is self-contained wherever pytest collects it: from the package
(`pytest --pyargs lenbench.benchmark.bench`) or through a checkout's `bench/` files.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch

from lenbench.benchmark import plans as P
from lenbench.benchmark.cases import (  # noqa: F401  (the test modules import these from here)
    ATTENTION_BATCH,
    DTYPES,
    HEAD_DIM,
    HEADS,
    ROTARY_BATCH,
    CaseSkipped,
    case_id,
    encoding_instance,
    kernel_cases,
    torch_dtype,
)
from lenbench.benchmark.timing import time_fn
from lenbench.config import KernelSpec, load_suite
from lenbench.encodings import ENCODINGS

_SETTINGS = pytest.StashKey[KernelSpec]()


def settings(config: pytest.Config) -> KernelSpec:
    """The `--suite`'s `kernels:` section with the environment's overrides, once per session."""
    if _SETTINGS not in config.stash:
        config.stash[_SETTINGS] = P.kernel_settings(config.getoption("--suite"))
    return config.stash[_SETTINGS]


@pytest.fixture(scope="session")
def spec(request: pytest.FixtureRequest) -> KernelSpec:
    """The session's kernel settings (`settings`)."""
    return settings(request.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    s = settings(metafunc.config)
    off = None if s.enabled else f"suite {metafunc.config.getoption('--suite')!r} has kernels.enabled: false"
    if "impl" in metafunc.fixturenames:  # test_kernel: one parameter each, so --benchmark-group-by=param:T works
        names = ("encoding", "impl", "T", "dtype")
        if off:
            metafunc.parametrize(names, [pytest.param(None, None, None, None, marks=pytest.mark.skip(reason=off))],
                                 ids=["disabled"])
        else:
            cases = kernel_cases(s)
            metafunc.parametrize(names, cases, ids=[_id(c) for c in cases])
        return
    args = {
        "T": (list(s.lengths), lambda t: f"T{t}"),
        "dtype": (list(s.dtypes), str),
        "name": (train_encodings(s), str),
        "task": ([t.name for t in load_suite(metafunc.config.getoption("--suite")).tasks], str),
    }
    for arg, (values, ids) in args.items():
        if arg in metafunc.fixturenames:
            if off:
                metafunc.parametrize(arg, [pytest.param(None, marks=pytest.mark.skip(reason=off))], ids=["disabled"])
            else:
                metafunc.parametrize(arg, values, ids=[ids(v) for v in values])


_id = case_id


def train_encodings(s: KernelSpec) -> list[str]:
    """nope (the reference) first, then the suite's kernel encodings (all registered when empty)."""
    return ["nope", *[n for n in ENCODINGS.names() if n != "nope" and (not s.encodings or n in s.encodings)]]


TRAIN_TASK = os.environ.get("LENBENCH_TRAIN_TASK", "lm")  # a task of the suite: lm (64 tokens in quick), passkey, copy


def SUITE(request) -> str:  # noqa: N802 - the --suite option, as load_suite takes it
    return request.config.getoption("--suite")


@pytest.fixture(scope="session")
def copy_floor(device) -> P.CopyFloor:
    """Copy time per byte count on the device, measured once per size in this session.

    On the CPU, large freed blocks are first kept in the heap (`P.keep_freed_memory`) so kernels
    that allocate their outputs are not timed page-faulting fresh mappings on every call.
    """
    if device.type == "cpu":
        P.keep_freed_memory()
    return P.CopyFloor(device)


@pytest.fixture(autouse=True)
def release_memory_after_each_test():
    """After every test here, the host memory it freed goes back to the OS
    (`P.release_freed_memory`): otherwise the heap that `keep_freed_memory` keeps grows over the
    session and adds to every later test's peak."""
    yield
    P.release_freed_memory()


def rounds_for(seconds_per_call: float, seconds: float) -> int:
    """About `seconds` (the suite's timing budget) of timed rounds, at least 3 and at most 50."""
    return int(min(50, max(3, seconds / max(seconds_per_call, 1e-6))))


class References:
    """Median seconds of the references a benchmark is divided by (an implementation's eager
    reference, transformers' rotate_half, unbiased causal SDPA, nope's training step), per key.

    A reference's own benchmark records its median here when it runs; a benchmark that needs one
    not yet recorded in this process (selected alone with -k, run first in random order, or on
    another xdist worker) times it on the spot, so every benchmark records the same keys
    whatever ran before it.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._seconds: dict[tuple, float] = {}

    def record(self, key: tuple, seconds: float) -> None:
        self._seconds[key] = seconds

    def seconds(self, key: tuple, fn: Callable[[], object], rounds: Callable[[float], int]) -> float:
        """The recorded median of `key`, else `fn` timed now: one warm-up call, then `rounds(once)`
        rounds (as its own benchmark sizes them), the median."""
        if key not in self._seconds:
            _, once = P.call_seconds(fn, self.device)
            self._seconds[key] = time_fn(fn, self.device, rounds=rounds(once), warmup=0)
        return self._seconds[key]


@pytest.fixture(scope="session")
def reference(device) -> References:
    return References(device)


def check_dtype(dt: str, device: torch.device) -> torch.dtype:
    """The torch dtype of `dt`; skips the test where the device has no native bf16."""
    try:
        return torch_dtype(dt, device)
    except CaseSkipped as why:
        pytest.skip(str(why))


def median_seconds(benchmark, fallback: float) -> float:
    """The benchmark's median seconds; `fallback` (one untimed call) under --benchmark-disable."""
    stats = getattr(benchmark, "stats", None)
    return stats.stats.median if stats is not None else fallback
