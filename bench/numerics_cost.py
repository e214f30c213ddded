"""What the pinned CPU numerics cost: the quick suite's training step, pinned and native, in one run.

    python bench/numerics_cost.py [--steps 60] [--pairs 4] [--cells lm:rope,copy:alibi] [--against native]

`--against compatible` times instead the candidate vendor-independent path: the pinned variables
with MKL's `COMPATIBLE` branch (`MKL_CBWR=COMPATIBLE`, the one MKL honours as asked on AMD too).

Each measurement is a fresh process (the numeric mode is fixed when torch starts), one intra-op
thread as in the cells, timed over `--steps` training steps after 5 warm-up steps. Modes alternate
in counterbalanced pairs (pinned-native, native-pinned, …) so a machine that slows down during the
run weighs on both; the ratio is the median of per-pair ratios. Also prints whether the two modes
trained the same bits on this machine (they need not: the pin changes MKL's blocking even where
the CPU's own choice is AVX2 too).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import hashlib, json, sys, time, torch
import lenbench
from lenbench.run.cell import model_config
from lenbench.model import Transformer
from lenbench.numerics import machine_facts
from lenbench.config import load_suite
from lenbench.tasks import build_task
from lenbench.train import train_model
torch.set_num_threads(1)
task_name, encoding, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
cell = next(c for c in load_suite("quick").cells() if c.task.name == task_name and c.encoding.key == encoding)
task = build_task(cell.task.name, **cell.task.params)
torch.manual_seed(0)
net = Transformer(model_config(cell, task))
cpu = torch.device("cpu")
train_model(net, task, cell.train_len, cell.train, seed=0, device=cpu, steps=5, progress=False)  # warm-up
start = time.perf_counter()
train_model(net, task, cell.train_len, cell.train, seed=0, device=cpu, steps=steps, progress=False)
seconds = (time.perf_counter() - start) / steps
digest = hashlib.sha256(b"".join(v.numpy().tobytes() for v in net.state_dict().values())).hexdigest()[:12]
print(json.dumps({"step_ms": seconds * 1e3, "digest": digest, **machine_facts()}))
"""


#: The environment of each mode timed: lenbench's two, and the candidate vendor-independent path.
MODES = {
    "pinned": {"LENBENCH_NUMERICS": "pinned"},
    "native": {"LENBENCH_NUMERICS": "native"},
    "compatible": {"LENBENCH_NUMERICS": "native", "ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE",
                   "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}


def measure(mode: str, task: str, encoding: str, steps: int) -> dict:
    env = {**{k: v for k, v in os.environ.items() if k not in MODES["compatible"]}, **MODES[mode],
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE, task, encoding, str(steps)], capture_output=True,
                          text=True, env=env, cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--cells", default="lm:rope,copy:alibi", help="task:encoding of the quick suite, comma-separated")
    parser.add_argument("--against", default="native", choices=["native", "compatible"],
                        help="the mode timed against pinned (compatible: MKL's COMPATIBLE branch)")
    args = parser.parse_args()
    other = args.against
    num, den = ("pinned", "native") if other == "native" else ("compatible", "pinned")  # the pin's cost / the candidate's
    for spec in args.cells.split(","):
        task, encoding = spec.split(":")
        ratios, runs = [], {"pinned": [], other: []}
        for i in range(args.pairs):
            order = ("pinned", other) if i % 2 == 0 else (other, "pinned")
            got = {mode: measure(mode, task, encoding, args.steps) for mode in order}
            for mode in order:
                runs[mode].append(got[mode])
            ratios.append(got[num]["step_ms"] / got[den]["step_ms"])
        med = {m: statistics.median(r["step_ms"] for r in rs) for m, rs in runs.items()}
        same = runs["pinned"][0]["digest"] == runs[other][0]["digest"]
        print(f"{task} × {encoding}: pinned {med['pinned']:.2f} ms/step ({runs['pinned'][0]['numerics']}), "
              f"{other} {med[other]:.2f} ms/step; {num} ÷ {den} "
              f"{statistics.median(ratios):.3f} (pairs: {', '.join(f'{r:.3f}' for r in ratios)}); "
              f"same bits: {'yes' if same else 'no'}; CPU {runs[other][0]['cpu_model']} "
              f"({runs[other][0]['cpu_isa']})")


if __name__ == "__main__":
    main()
