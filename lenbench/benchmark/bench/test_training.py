"""Training-step and training-MFU benchmarks of the suite's model.

test_training_step extra_info: encoding, seconds (this benchmark's median), ratio_to_nope (median
    over rounds of per-round ratios, every encoding timed round-robin in one loop once per
    session, so other load on the machine hits all alike; ratio_to_nope_interleaved is the same
    number), ratio_to_nope_sequential (this benchmark over nope's median step, timed the same
    way: sensitive to load drifting between tests), tokens, model_params, geometry.
"""

from __future__ import annotations

import statistics

import pytest
import torch

from lenbench import kernels as K
from lenbench.benchmark import plans as P
from lenbench.benchmark.bench.common import (  # noqa: F401  (fixtures and the parametrization hook)
    SUITE,
    TRAIN_TASK,
    median_seconds,
    pytest_generate_tests,
    reference,
    release_memory_after_each_test,
    spec,
    train_encodings,
)
from lenbench.benchmark.timing import time_fn
from lenbench.device import synchronize


@pytest.fixture(scope="session")
def interleaved_step_ratios(device, request, spec) -> dict[str, float]:
    """Every encoding's quick-suite training step timed round-robin in one loop; per encoding the
    median over rounds of (its step / nope's step in the same round). Other load on the machine
    then hits every encoding alike."""
    steps = {name: P.quick_training_step(name, device, suite=SUITE(request), task=TRAIN_TASK).step
             for name in train_encodings(spec)}
    times = {name: [] for name in steps}
    with P.cell_threads(device):
        for step in steps.values():
            for _ in range(3):
                step()
        synchronize(device)
        for _ in range(spec.train_rounds):
            for name, step in steps.items():
                times[name].append(P.call_seconds(step, device)[1])
    return {name: statistics.median(t / n for t, n in zip(times[name], times["nope"], strict=True)) for name in steps}


def test_training_step(name, timed, benchmark, device, interleaved_step_ratios, request, reference, spec):
    """One training step (forward, backward, clip, AdamW) of the suite's lm model."""
    ts = P.quick_training_step(name, device, suite=SUITE(request), task=TRAIN_TASK)
    benchmark.group = f"training-step-{ts.geometry['suite']}-{TRAIN_TASK}"
    with P.cell_threads(device) as threads:
        timed(ts.step, rounds=spec.train_rounds, warmup_rounds=3)
        stats = getattr(benchmark, "stats", None)  # None under --benchmark-disable
        seconds = stats.stats.median if stats is not None else time_fn(ts.step, device, rounds=3, warmup=0)
        reference.record((name, "train-step"), seconds)
        nope = seconds if name == "nope" else reference.seconds(
            ("nope", "train-step"),
            P.quick_training_step("nope", device, suite=SUITE(request), task=TRAIN_TASK).step,
            lambda once: spec.train_rounds)
    benchmark.extra_info.update(
        encoding=name, kind="training-step", seconds=seconds, ratio_to_nope=interleaved_step_ratios[name],
        ratio_to_nope_interleaved=interleaved_step_ratios[name],
        ratio_to_nope_sequential=seconds / nope, tokens=ts.tokens, model_params=ts.model_params,
        geometry=ts.geometry, threads=threads,
    )


# --- training MFU ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def matmul_rates(device) -> dict[str, float]:
    """The device's dense matmul rate (FLOP/s, fastest of a few square products: 2048² on the CPU,
    8192² on an accelerator; `lenbench.benchmark.flops.matmul_rate`) in fp32, and in
    bf16 where native, measured once in this session."""
    from lenbench.benchmark.flops import matmul_rate

    rates = {"fp32": matmul_rate(device, torch.float32)}
    if K.bf16_support(device.type)[0]:
        rates["bf16"] = matmul_rate(device, torch.bfloat16)
    return rates


def test_training_mfu(task, timed, benchmark, device, matmul_rates, request, spec):
    """Model FLOPs utilisation of one training step of the suite's `task` (encoding nope: the model's
    own FLOPs), fast path (what `lenbench.train` runs) and eager reference, timed round-robin.

    extra_info: task, impl ("fast-<task>": a distinct key for `lenbench compare`), flops (analytic
    forward + backward, `lenbench.benchmark.flops`), seconds (median of the fast step), seconds_eager, speedup
    (median over rounds of eager / fast in the same round), threads (the cells' intra-op thread
    count, `plans.cell_threads`: everything here runs with it), sgemm_flops_per_s (fp32,
    the fastest 2048² sgemm of the rounds at those threads), sgemm_flops_per_s_all_threads (at
    session start with every thread; bf16_flops_per_s where native), mfu and mfu_eager (median
    over rounds of the step's FLOP/s over the sgemm's timed in the same round), mfu_session_peak
    (median step over sgemm_flops_per_s), mfu_best (fastest fast round over it), geometry.
    """
    from lenbench.benchmark.flops import mfu

    suite = SUITE(request)
    fast = P.quick_training_step("nope", device, suite=suite, task=task, fast=True)
    eager = P.quick_training_step("nope", device, suite=suite, task=task, fast=False)
    benchmark.group = f"training-mfu-{fast.geometry['suite']}"
    n = 2048
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)  # (n, n) each
    c = torch.empty(n, n, device=device)
    sgemm = lambda: torch.mm(a, b, out=c)  # noqa: E731
    # Round-robin: each round times one sgemm, one eager step and one fast step back to back, so
    # load from other jobs on the machine hits the step and the peak it is divided by alike. All
    # at the thread count a cell trains with (one on the CPU): the sgemm on the same cores.
    times = {"sgemm": [], "eager": [], "fast": []}
    with P.cell_threads(device) as threads:
        for _ in range(3):
            eager.step(), fast.step(), sgemm()
        for _ in range(spec.train_rounds):
            for label, fn in (("sgemm", sgemm), ("eager", eager.step), ("fast", fast.step)):
                times[label].append(P.call_seconds(fn, device)[1])
        timed(fast.step, rounds=spec.train_rounds, warmup_rounds=1)
        peak = max(2 * n**3 / g for g in times["sgemm"])  # the fastest sgemm of the rounds, these threads
    seconds = median_seconds(benchmark, statistics.median(times["fast"]))
    seconds_eager = statistics.median(times["eager"])
    per_round = {label: [mfu(fast.flops, t, 2 * n**3 / g) for t, g in zip(times[label], times["sgemm"], strict=True)]
                 for label in ("eager", "fast")}
    benchmark.extra_info.update(
        kind="training-mfu", task=task, encoding="nope", impl=f"fast-{task}", flops=fast.flops, seconds=seconds,
        seconds_eager=seconds_eager,
        speedup=statistics.median(e / f for e, f in zip(times["eager"], times["fast"], strict=True)),
        sgemm_flops_per_s=peak, sgemm_flops_per_s_all_threads=matmul_rates["fp32"],
        bf16_flops_per_s=matmul_rates.get("bf16"), threads=threads,
        mfu=statistics.median(per_round["fast"]), mfu_eager=statistics.median(per_round["eager"]),
        mfu_session_peak=mfu(fast.flops, seconds, peak), mfu_best=mfu(fast.flops, min(times["fast"]), peak),
        tokens=fast.tokens, geometry=fast.geometry,
    )
