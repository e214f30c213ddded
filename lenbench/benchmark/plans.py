"""Benchmark plans of `bench/test_kernels.py`: what to time, how to measure it, the targets.

The fused ops themselves are `lenbench.kernels`; this module holds:

- `kernel_settings`: the suite's `kernels:` section overridden by `LENBENCH_KERNEL_*` variables;
- bytes moved per kernel, achieved GB/s, the copy floor (`CopyFloor`) and the counterbalanced
  ratio of two calls timed back to back (`interleaved_ratio`);
- `release_freed_memory`: freed heap memory back to the OS between benchmarks;
- `quick_training_step`: one training step at a suite's size;
- `performance_targets`: every performance target read from a benchmark JSON, printed by
  ``python -m lenbench.benchmark BENCH.json`` (or ``python bench/kernel_plans.py BENCH.json``).

It is part of the package, so `python -m lenbench.benchmark` works from a wheel install (which has
no bench/). `bench/test_kernels.py`, `bench/gpu_check.py` and the tests import it as
`lenbench.benchmark.plans`.
"""

from __future__ import annotations

import contextlib
import copy
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from lenbench.benchmark.timing import call_seconds, calls_per_round, time_fn
from lenbench.device import keep_freed_memory

# --------------------------------------------------------------------------------------------
# What to time: the suite's `kernels:` section, overridden by environment variables
# --------------------------------------------------------------------------------------------

# environment variable -> (KernelSpec field, parser); each one, when set, replaces that field.
KERNEL_ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "LENBENCH_KERNEL_LENGTHS": ("lengths", lambda v: [int(x) for x in v.split(",") if x.strip()]),
    "LENBENCH_KERNEL_DTYPES": ("dtypes", lambda v: [x.strip() for x in v.split(",") if x.strip()]),
    "LENBENCH_KERNEL_SECONDS": ("seconds", float),
    "LENBENCH_KERNEL_ENCODINGS": ("encodings", lambda v: [x.strip() for x in v.split(",") if x.strip()]),
    "LENBENCH_CONTENT_MAX_T": ("content_max_t", int),
    "LENBENCH_TRAIN_ROUNDS": ("train_rounds", int),
}


#: Set to 1 to time flex_attention on the CPU too (`timing_skip`).
CPU_FLEX_ENV = "LENBENCH_CPU_FLEX"
#: Set to 1 to time on the CPU the compiled kernels an encoding declares slow to compile there
#: (`PositionalEncoding.slow_cpu_compile`; `timing_skip`).
CPU_SLOW_COMPILE_ENV = "LENBENCH_CPU_SLOW_COMPILE"


def timing_skip(impl: str, device_type: str, environ: dict[str, str] | None = None,
                encoding: Any = None) -> str | None:
    """Why `bench/test_kernels.py` does not time implementation `impl` on `device_type` by default
    (None: it does). A policy of what is worth the session's minutes, not a capability check
    (that is `lenbench.kernels.flex_support`).

    flex_attention on the CPU (inductor's C++ template) compiles for 7-30 s per shape and was slower
    than the cached / Toeplitz kernel of every bias encoding at T = 1024 and 4096 in the catalog's
    timings (results/catalog/cost.md) but ALiBi at T = 1024 (5 % faster), so skipping it moves the best
    fused time a target reads by at most that (FoX, which has no such kernel, is timed compiled);
    `LENBENCH_CPU_FLEX=1` times it anyway. An `encoding` (instance or class) that declares
    `slow_cpu_compile` is not timed compiled on the CPU, for the reason it gives;
    `LENBENCH_CPU_SLOW_COMPILE=1` times it anyway.
    """
    import os

    environ = os.environ if environ is None else environ
    slow = getattr(encoding, "slow_cpu_compile", "")
    if (slow and impl != "eager" and device_type == "cpu"
            and environ.get(CPU_SLOW_COMPILE_ENV, "").strip() != "1"):
        return f"{encoding.name}'s compiled kernel is not timed on the CPU by default: {slow}; {CPU_SLOW_COMPILE_ENV}=1 times it"
    if impl.startswith("flex") and device_type == "cpu" and environ.get(CPU_FLEX_ENV, "").strip() != "1":
        return (f"flex_attention on the CPU is not timed by default (it compiles for 7-30 s per shape and was slower "
                f"than, or within 10 % of, every bias encoding's best cached / Toeplitz kernel in "
                f"results/catalog/cost.md); {CPU_FLEX_ENV}=1 times it")
    return None


def kernel_settings(suite: Any, environ: dict[str, str] | None = None):
    """The kernel benchmarks' settings: the suite's `kernels:` section with each environment
    variable of `KERNEL_ENV` that is set replacing its field (environment > suite file > defaults).

    Args:
        suite: a `Suite`, or a preset name / YAML path for `load_suite`.
        environ: the environment (default `os.environ`).

    Returns:
        A validated `lenbench.config.KernelSpec`; a malformed variable raises `SuiteError` naming it.
    """
    import dataclasses
    import os

    from lenbench.config import SuiteError, load_suite, parse_kernels

    if not hasattr(suite, "kernels"):
        suite = load_suite(suite)
    environ = os.environ if environ is None else environ
    data = dataclasses.asdict(suite.kernels)
    for var, (key, parse) in KERNEL_ENV.items():
        if environ.get(var, "").strip():
            try:
                data[key] = parse(environ[var])
            except ValueError:
                raise SuiteError(f"{var}={environ[var]!r} is not valid for kernels.{key}; unset it or fix it "
                                 f"(e.g. LENBENCH_KERNEL_LENGTHS=256,1024)") from None
    return parse_kernels(data, source=f"{suite.source or suite.name} + environment")


# --------------------------------------------------------------------------------------------
# Bytes moved, bandwidth, copy floor
# --------------------------------------------------------------------------------------------


def nbytes(*tensors: torch.Tensor | None) -> int:
    """Total bytes of the given tensors (None counts 0)."""
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def rotary_bytes(q: torch.Tensor, k: torch.Tensor) -> int:
    """Bytes a rotary apply must move at least: read q and k, write q and k (tables ignored)."""
    return 2 * nbytes(q, k)


def attention_bytes(q, k, v, out=None, bias: torch.Tensor | None = None) -> int:
    """Read q, k, v, write out (same shape as q when not given), plus a materialised bias read."""
    return nbytes(q, k, v, q if out is None else out, bias)


def gb_per_s(bytes_moved: int, seconds: float) -> float:
    """Achieved bandwidth in GB/s (10⁹ bytes per second)."""
    return bytes_moved / seconds / 1e9 if seconds > 0 else float("nan")


def copy_ratio(seconds: float, copy_seconds: float) -> float:
    """Kernel time over the time of copying the same bytes (1.0 = at the copy floor)."""
    return seconds / copy_seconds if copy_seconds > 0 else float("nan")


def interleaved_ratio(fn: Callable[[], Any], base: Callable[[], Any], device: torch.device, rounds: int) -> float:
    """fn's time over base's, the two called back to back, in counterbalanced pairs of rounds:
    fn then base, then base then fn (ABBA). Per pair, (fn's two times) / (base's two times); the
    median over ⌈rounds / 2⌉ pairs. Load from other jobs on the machine then slows both alike.

    The order matters on its own: whichever call runs second finds the caches as the first left
    them (measured for fused RoPE at T = 1024 over a copy of q, k: 1.20–1.22 with the kernel always
    first, 1.12–1.14 with the copy first), so a fixed order biases the ratio; the pairs cancel it.
    On an accelerator each of the four times is `calls_per_round` calls and one synchronise.
    """
    base()
    n_fn, n_base = calls_per_round(fn, device), calls_per_round(base, device)  # 1, 1 on the CPU
    ratios = []
    for _ in range((rounds + 1) // 2):
        (_, f1), (_, b1) = call_seconds(fn, device, n_fn), call_seconds(base, device, n_base)
        (_, b2), (_, f2) = call_seconds(base, device, n_base), call_seconds(fn, device, n_fn)
        ratios.append((f1 + f2) / (b1 + b2))
    return statistics.median(ratios)


def release_freed_memory() -> bool:
    """Hand the memory freed since the last call back to the OS: `gc.collect()`, then glibc's
    `malloc_trim(0)` (free pages anywhere in the heap, not only at its top).

    `keep_freed_memory` makes the heap keep up to 1 GiB of freed blocks so that timed calls do
    not page-fault; across a benchmark session that kept memory grows with every large kernel
    (T = 4096 masks of 512 MiB, fragmented): in the quick suite's kernels the resident memory
    between tests rose to 3.4 GB, against 0.4–0.6 GB with this call after each test.
    `bench/test_kernels.py` makes that call after every test: nothing it
    frees is timed (each test makes untimed warm-up calls before its timed rounds, which fault
    the pages back in). Returns False where there is no glibc (only the collection ran).
    """
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True


_DTYPE_COPIES: dict[tuple[int, torch.dtype], tuple[torch.nn.Module, torch.nn.Module]] = {}


def in_dtype(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A copy of `module` with its parameters in `dtype`, one per (instance, dtype) for the session
    (so a compiled function that takes it sees one module per dtype, not a new one per call).

    `Module.to` converts in place: calling it on the session's shared encoding, as the content
    benchmark did, left the bf16 parameters in place for every later fp32 case.
    """
    key = (id(module), dtype)
    if key not in _DTYPE_COPIES:
        _DTYPE_COPIES[key] = (module, copy.deepcopy(module).to(dtype))  # the original kept alive: its id stays its own
    return _DTYPE_COPIES[key][1]


class CopyFloor:
    """Copy time of N bytes on a device, measured once per size and cached (one per session).

    A copy of N bytes reads N/2 and writes N/2 (`dst.copy_(src)` into a preallocated buffer), so
    a kernel that reads and writes N bytes in total has the ratio `kernel / copy(N)` with floor
    1.0. The kernel also allocates its outputs; on the CPU, fresh allocations that the C library
    hands back to the OS between calls (large blocks) page-fault on every call, which can show
    up as a higher ratio at large sizes.
    """

    def __init__(self, device: torch.device, rounds: int = 15) -> None:
        self.device = device
        self.rounds = rounds
        self._seconds: dict[int, float] = {}

    def copy_fn(self, bytes_moved: int) -> Callable[[], Any]:
        """A call that copies `bytes_moved` bytes (reads half, writes half) into a preallocated buffer."""
        n = max(1, bytes_moved // 2 // 4)  # float32 elements per side
        src = torch.randn(n, device=self.device)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    def seconds(self, bytes_moved: int) -> float:
        if bytes_moved not in self._seconds:
            self._seconds[bytes_moved] = time_fn(self.copy_fn(bytes_moved), self.device, rounds=self.rounds, warmup=3)
        return self._seconds[bytes_moved]

    def gb_per_s(self, bytes_moved: int) -> float:
        return gb_per_s(bytes_moved, self.seconds(bytes_moved))


# --------------------------------------------------------------------------------------------
# One training step of the quick suite's model
# --------------------------------------------------------------------------------------------


@dataclass
class TrainingStep:
    """A ready training step: `step()` runs forward, backward, clipping and one AdamW update
    (`lenbench.train.TrainStep`, fast or eager) on a fixed batch and returns the loss tensor.

    `flops`: the step's analytic model FLOPs (`lenbench.benchmark.flops`, forward + backward).
    """

    encoding: str
    step: Callable[[], Any]
    batch_size: int
    tokens: int
    model_params: int
    geometry: dict
    flops: int = 0
    train_step: Any = None  # the `lenbench.train.TrainStep` (its `.model` can be swapped for a compiled one)


@contextlib.contextmanager
def cell_threads(device: torch.device) -> Iterator[int]:
    """On the CPU, run as a suite cell trains: with its intra-op thread count
    (`lenbench.run.cell.default_threads`, one; restored afterwards) and with freed memory kept for
    reuse (`keep_freed_memory`, as every cell process does; process-wide, not undone). The
    training-step and MFU benchmarks thus time what the cells run. Elsewhere nothing changes.
    Yields the thread count in effect."""
    from lenbench.run.cell import default_threads

    before = torch.get_num_threads()
    if device.type == "cpu":
        keep_freed_memory()
        torch.set_num_threads(default_threads())
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def quick_training_step(
    encoding: str, device: torch.device, *, suite: Any = "quick", task: str = "lm", length: int | None = None,
    encoding_params: dict | None = None, seed: int = 0, fast: bool = True, batch_size: int | None = None,
) -> TrainingStep:
    """One training step at a suite's size (model, batch size, optimiser as `lenbench.train`).

    The batch is sampled once (sampling is the same for every encoding and not what is compared),
    at `length` (default: the suite's training length of `task`, 64 tokens for the quick suite's lm).

    Args:
        suite: a preset name, a YAML path or a `Suite`.
        fast: `lenbench.train.TrainStep`'s fast path (what training runs) or its eager reference.
        batch_size: override of the suite's batch size (the GPU check's packing measurement).
    """
    import dataclasses

    from lenbench.benchmark.flops import model_step_flops
    from lenbench.config import load_suite
    from lenbench.model import ModelConfig, Transformer
    from lenbench.tasks import build_task
    from lenbench.train import TrainStep

    s = suite if hasattr(suite, "tasks") else load_suite(suite)
    spec = next((t for t in s.tasks if t.name == task), None)
    the_task = build_task(task, **(dict(spec.params) if spec else {}))
    length = length or (max(spec.train_len) if spec else 64)
    longest = max(s.eval.ratios)
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=the_task.vocab_size, **dataclasses.asdict(s.model), causal=True, encoding=encoding,
                      encoding_params=dict(encoding_params or {}), max_len=the_task.seq_len(longest * length))
    model = Transformer(cfg).to(device).train()
    train_step = TrainStep(model, s.train, s.train.lr, s.train.steps, fast=fast)
    gen = torch.Generator().manual_seed(seed)
    batch_size = batch_size or s.train.batch_size
    batch = the_task.sample(batch_size, length, gen, split="train").to(device)

    def step() -> torch.Tensor:
        return train_step(batch)  # scalar loss, on the device

    B, T = batch.inputs.shape
    geometry = {**dataclasses.asdict(s.model), "batch_size": B, "T": T,
                "vocab_size": the_task.vocab_size, "suite": s.name, "task": task, "fast": fast}
    return TrainingStep(encoding, step, B, batch.inputs.numel(), model.num_params(), geometry,
                        flops=model_step_flops(model, B, T).total, train_step=train_step)


# --------------------------------------------------------------------------------------------
# Performance targets from a benchmark JSON
# --------------------------------------------------------------------------------------------

BUDGETS = {"smoke": 60.0, "quick": 900.0}  # seconds of a whole `pytest bench --suite NAME` session


def bias_family() -> list[str]:
    """The registered encodings that declare `kernel_family = "bias"`, in registry order: those
    held to the fused-attention target (plugins included, once loaded)."""
    from lenbench.encodings import ENCODINGS

    return [name for name, cls in ENCODINGS.items() if getattr(cls, "kernel_family", "") == "bias"]


def performance_targets(data: dict) -> list[dict]:
    """The performance targets of `pytest bench`, read from its benchmark JSON.

    Rows: metric, value (None when the benchmark did not run), target, ok. Every ratio is the one
    recorded in `extra_info` within that one session (numerator and denominator measured in the
    same run): training MFU of the suite's lm step (`test_training_mfu[lm]`, fast path, median
    step over the fp32 sgemm rate), each encoding's training step over nope's (interleaved), each
    bias-family encoding's best fused attention (flex, cached, cached_blocks or toeplitz; CoPE: compiled) over unbiased
    causal SDPA at T = 1024 and 4096 in fp32, fused RoPE / xPos over a copy of q,k at T = 1024, and
    the session's wall time against the budget of its suite (smoke 60 s, quick 15 min; only when
    the whole suite ran, no -k).
    """
    benches = data.get("benchmarks", [])
    by_name = {b["name"]: b.get("extra_info", {}) for b in benches}

    def info(name: str, key: str):
        return by_name.get(name, {}).get(key)

    def best(encoding: str, T: int, key: str):
        values = [info(f"test_kernel[{encoding}-{impl}-T{T}-fp32]", key) for impl in ("flex", "cached", "cached_blocks", "toeplitz", "compiled", "fused")]
        values = [v for v in values if v is not None]
        return min(values) if values else None

    def copy_ratio(encoding: str):  # the round-robin ratio when recorded, else the session's copy floor
        name = f"test_kernel[{encoding}-fused-T1024-fp32]"
        interleaved = info(name, "copy_ratio_interleaved")
        return interleaved if interleaved is not None else info(name, "copy_ratio")

    rows = [("training MFU, suite lm step (fast path; median step / fp32 sgemm of the run)", info("test_training_mfu[lm]", "mfu"), ">=", 0.60)]
    mfu_tasks = sorted({b["name"][len("test_training_mfu["):-1] for b in benches if b["name"].startswith("test_training_mfu[")},
                       key=lambda t: (t != "lm", t))  # every suite task's, lm first
    for task in mfu_tasks:
        if (v := info(f"test_training_mfu[{task}]", "mfu_eager")) is not None:
            rows.append((f"  (before: {task} eager-path MFU; fast path {info(f'test_training_mfu[{task}]', 'mfu'):.3f})", v, "info", None))
    steps = sorted((b["extra_info"]["encoding"], b["extra_info"]) for b in benches
                   if b.get("extra_info", {}).get("kind") == "training-step" and b["extra_info"]["encoding"] != "nope")
    rows += [(f"training step {name} / nope (interleaved rounds)", extra.get("ratio_to_nope_interleaved"), "<=", 1.10)
             for name, extra in steps]
    for name in bias_family():
        for T in (1024, 4096):
            ratio = best(name, T, "over_unbiased_interleaved")  # round-robin in one test; older JSON: sequential
            rows.append((f"fused attention {name} (best fused impl, T={T}, fp32) / unbiased causal SDPA", ratio if ratio is not None else best(name, T, "over_unbiased"), "<=", 1.15))
    rows += [
        ("fused RoPE q,k (B=8,H=8,T=1024,Dh=64,fp32): time / copy of q,k", copy_ratio("rope"), "<=", 1.15),
        ("fused xPos q,k (same shape): time / copy of q,k", copy_ratio("xpos"), "<=", 1.3),
        ("fused RoPE q,k (same): speed-up over transformers rotate_half", info("test_kernel[rope-fused-T1024-fp32]", "speedup_over_hf"), ">=", 4.0),
    ]
    meta = data.get("machine_info", {}).get("lenbench", {})
    suite, seconds = meta.get("suite"), meta.get("session_seconds")
    for name, budget in BUDGETS.items():
        whole = suite == name and not meta.get("selection")
        rows.append((f"pytest bench --suite {name} (whole session, seconds)", seconds if whole else None, "<=", budget))
    out = []
    for metric, value, op, target in rows:
        if op == "info":
            out.append({"metric": metric, "value": value, "target": "", "ok": None})
            continue
        ok = None if value is None else (value <= target if op == "<=" else value >= target)
        out.append({"metric": metric, "value": value, "target": f"{op} {target:g}", "ok": ok})
    return out


def main(argv: list[str] | None = None, prog: str = "python -m lenbench.benchmark") -> int:
    """`python -m lenbench.benchmark BENCH.json [MORE.json …]` (or `python bench/kernel_plans.py …`):
    print every performance target with ok / MISS ("-": not measured in those JSONs)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog=prog, description=main.__doc__)
    parser.add_argument("json", nargs="+", help="output of pytest bench -k kernels --benchmark-json FILE; several "
                        "files (e.g. the GPU check's kernels_train.json and kernels.json) are read as one")
    args = parser.parse_args(argv)
    data: dict = {"benchmarks": []}
    for path in args.json:
        with open(path) as fh:
            part = json.load(fh)
        data["benchmarks"] += part.get("benchmarks", [])
        data.setdefault("machine_info", part.get("machine_info", {}))  # the first file's (budgets: whole sessions only)
    for row in performance_targets(data):
        value = "not run" if row["value"] is None else f"{row['value']:.3f}"
        mark = {True: "ok", False: "MISS", None: "-"}[row["ok"]]
        print(f"{row['metric']:<84} {value:>8}  target {row['target']:<7} {mark}")
    return 0
