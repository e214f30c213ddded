"""Training-step variants on one device, for `bench/gpu_check.sh` (runs on the CPU too).

For each task of the suite (quick by default), one training step of the quick model (encoding
`nope`, and `rope`), measured on `--device`:

    eager        `lenbench.train.TrainStep(fast=False)`: the readable reference
    fast         the fast path `lenbench.train` runs (fused AdamW, no host sync per step)
    compile      fast, with the model under `torch.compile` (inductor; Triton on CUDA / XPU)
    cudagraphs   fast, `torch.compile(mode="reduce-overhead")`: forward and backward replayed as
                 CUDA graphs (CUDA only; the step's launches are then one graph each)

Each variant starts from the same weights and trains 20 steps on the same batches as `eager`;
`max_loss_diff` is the largest difference of the 20 losses (the variant is only worth having
when it is within float tolerance). Then it is timed: median step seconds over `--rounds`,
`mfu` over the device's fp32 matmul rate measured here (bf16's is recorded too), and the first
call's seconds (`compile_seconds`: tracing, compilation, autotuning, graph capture).

`packing`: the fast step at 1×, 4× and 16× the batch size. When 16× the work takes far less
than 16× the time, the step is launch-bound (the GPU idles between small kernels), and running
several cells at once on one GPU (or larger batches) raises throughput.

Order: eager and fast for every task and encoding, with each task's packing rows, first; then
the compiled variants, only for `--compile-tasks` (default lm) and `--compile-encodings`
(default nope: each compile of forward + backward costs tens of seconds, and RoPE's forward
has graph breaks, so its compiled rows would time a fragmented graph). The JSON is rewritten
(atomically) after every row, so a stage stopped by its time limit (SIGINT from `timeout`)
keeps what it measured and says `"interrupted": true`.

    python bench/gpu_check.py --device cuda --out OUT/train_step.json
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from collections.abc import Callable

import torch

from lenbench.atomic import atomic_write_text
from lenbench.benchmark.flops import matmul_rate, mfu
from lenbench.benchmark.plans import quick_training_step
from lenbench.benchmark.timing import time_fn
from lenbench.config import load_suite
from lenbench.device import resolve_device, synchronize

COMPILED = ("compile", "cudagraphs")  # the variants that compile (slow first call)


def _variant(name: str, encoding: str, task: str, device, args, reference: list[float] | None, peak: float) -> dict:
    ts = quick_training_step(encoding, device, suite=args.suite, task=task, fast=name != "eager")
    if name == "compile":
        ts.train_step.model = torch.compile(ts.train_step.model, dynamic=False)
    step = ts.step
    if name == "cudagraphs":
        ts.train_step.model = torch.compile(ts.train_step.model, mode="reduce-overhead", dynamic=False)

        def step():  # a new iteration: the graphs' previous outputs may be overwritten from here on
            torch.compiler.cudagraph_mark_step_begin()
            return ts.step().clone()  # the loss outlives the next replay

    start = time.perf_counter()
    losses = [step()]
    synchronize(device)
    first = time.perf_counter() - start
    losses += [step() for _ in range(args.steps - 1)]
    losses = torch.stack(losses).float().cpu().tolist()
    seconds = time_fn(step, device, rounds=args.rounds, warmup=0)
    out = {"variant": name, "encoding": encoding, "task": task, "seconds": seconds, "compile_seconds": first,
           "flops": ts.flops, "mfu": mfu(ts.flops, seconds, peak), "losses": losses, "geometry": ts.geometry}
    if reference is not None:
        out["max_loss_diff"] = max(abs(a - b) for a, b in zip(losses, reference, strict=True))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--tasks", default="lm,copy,passkey", help="comma list of the suite's tasks")
    parser.add_argument("--encodings", default="nope,rope")
    parser.add_argument("--variants", default="eager,fast,compile,cudagraphs")
    parser.add_argument("--compile-tasks", default="lm", help="tasks that also get the compiled variants")
    parser.add_argument("--compile-encodings", default="nope", help="encodings that get the compiled variants")
    parser.add_argument("--steps", type=int, default=20, help="steps compared with eager")
    parser.add_argument("--rounds", type=int, default=30, help="timed steps per variant")
    parser.add_argument("--packing", default="1,4,16", help="batch-size multiples of the packing measurement")
    parser.add_argument("--matmul-n", type=int, default=None,
                        help="size of the square matmul of the peak rate (default: 2048 on the CPU, 8192 on an accelerator)")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 in the rate and in the steps
    result = {"device": str(device), "torch": torch.__version__, "matmul_flops_per_s": {}, "steps": [], "packing": [],
              "errors": [], "interrupted": False}

    def save() -> None:  # after every row: a time limit never loses what was measured
        atomic_write_text(args.out, json.dumps(result, indent=1))

    try:
        measure(args, device, result, save)
    except KeyboardInterrupt:  # `timeout --signal=INT` of gpu_check.sh
        result["interrupted"] = True
        save()
        print(f"gpu_check.py: interrupted; the rows measured so far are in {args.out}", flush=True)
        return 130
    save()
    return 1 if result["errors"] and not result["steps"] else 0


def measure(args: argparse.Namespace, device: torch.device, result: dict, save: Callable[[], None]) -> None:
    """Fill `result` row by row (matmul rates, variants, packing), calling `save` after each."""
    rates = result["matmul_flops_per_s"]
    rates["fp32"] = matmul_rate(device, torch.float32, n=args.matmul_n)
    try:
        rates["bf16"] = matmul_rate(device, torch.bfloat16, n=args.matmul_n)
    except RuntimeError as err:  # no bf16 matmul on this device
        rates["bf16_error"] = str(err).splitlines()[0]
    save()
    variants = [v for v in args.variants.split(",") if v]
    tasks = [t for t in args.tasks.split(",") if t]
    encodings = [e for e in args.encodings.split(",") if e]
    references: dict[tuple[str, str], list[float]] = {}  # (task, encoding) -> eager losses

    def run(name: str, encoding: str, task: str) -> None:
        if name == "cudagraphs" and device.type != "cuda":
            return
        try:
            row = _variant(name, encoding, task, device, args, references.get((task, encoding)), rates["fp32"])
        except Exception as err:  # noqa: BLE001 - a variant that fails is a finding, the check goes on
            result["errors"].append({"variant": name, "encoding": encoding, "task": task,
                                     "error": f"{type(err).__name__}: {err}"[:2000], "trace": traceback.format_exc()[-4000:]})
            save()
            return
        if name == "eager":
            references[(task, encoding)] = row["losses"]
        result["steps"].append(row)
        save()
        print(f"{task:8} {encoding:6} {name:10} {row['seconds'] * 1e3:9.3f} ms  mfu {row['mfu']:.3f}  "
              f"first call {row['compile_seconds']:.1f} s  max loss diff {row.get('max_loss_diff', 0):.2e}", flush=True)

    for task in tasks:  # the cheap rows of every task first
        for name in (v for v in variants if v not in COMPILED):
            for encoding in encodings:
                run(name, encoding, task)
        _packing(task, device, args, rates["fp32"], result, save)
    compile_tasks = [t for t in args.compile_tasks.split(",") if t in tasks]
    compile_encodings = [e for e in args.compile_encodings.split(",") if e]
    for task in compile_tasks:  # then the compiles, tens of seconds each
        for name in (v for v in variants if v in COMPILED):
            for encoding in compile_encodings:
                run(name, encoding, task)


def _packing(task: str, device: torch.device, args: argparse.Namespace, peak: float, result: dict,
             save: Callable[[], None]) -> None:
    """The fast `nope` step at each `--packing` multiple of the suite's batch size."""
    base, batch_size = None, load_suite(args.suite).train.batch_size
    for mult in (int(m) for m in args.packing.split(",")):
        bs = batch_size * mult
        ts = quick_training_step("nope", device, suite=args.suite, task=task, batch_size=bs)
        for _ in range(3):
            ts.step()
        seconds = time_fn(ts.step, device, rounds=args.rounds, warmup=0)
        base = base or seconds
        result["packing"].append({"task": task, "batch_size": bs, "seconds": seconds, "time_over_1x": seconds / base,
                                  "mfu": mfu(ts.flops, seconds, peak)})
        save()
        print(f"{task:8} packing batch {bs:5}: {seconds * 1e3:9.3f} ms ({seconds / base:.2f}x the time for {mult}x the work)",
              flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
