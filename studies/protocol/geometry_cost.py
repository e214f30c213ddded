"""Training cost per step of the protocol's candidate geometries, interleaved in one process.

    OMP_NUM_THREADS=1 python studies/protocol/geometry_cost.py

Each geometry trains the same task and encoding for `STEPS` steps, three rounds interleaved, timed by
this thread's CPU time (one intra-op thread, as cells train: time the machine gives other jobs is not
counted); the fastest round per geometry is reported, and its ratio to the published geometry's
(d_model 64, 2 layers, 4 heads: head_dim 16). Beside it, forward FLOPs per token by Kaplan et al.
(2020)'s count, 2N + 2·n_layers·T·d_model with N = 12·n_layers·d_model² (ff_mult 4; embeddings left
out), at the task's training length T in tokens: the scale check needs a model at least 8× larger.
"""

from __future__ import annotations

import time

import torch

from lenbench.config import TrainSpec
from lenbench.model import ModelConfig, Transformer
from lenbench.tasks import build_task
from lenbench.train import train_model

GEOMETRIES = {"d64 L2 h4 (head_dim 16)": {"d_model": 64, "n_layers": 2, "n_heads": 4},
              "d64 L2 h2 (head_dim 32)": {"d_model": 64, "n_layers": 2, "n_heads": 2},
              "d128 L2 h4 (head_dim 32)": {"d_model": 128, "n_layers": 2, "n_heads": 4},
              "d128 L5 h4 (head_dim 32)": {"d_model": 128, "n_layers": 5, "n_heads": 4}}
TASKS = {"sort": 8, "lm": 64}  # task: training length
ENCODINGS = ("rope", "alibi")
STEPS, ROUNDS = 60, 3


def flops_per_token(d_model: int, n_layers: int, context: int) -> int:
    """Forward FLOPs per token (Kaplan et al. 2020, table 1): 2N + 2·n_layers·context·d_model."""
    return 2 * 12 * n_layers * d_model**2 + 2 * n_layers * context * d_model


def main() -> None:
    torch.set_num_threads(1)
    seconds: dict[tuple, list[float]] = {}
    for _ in range(ROUNDS):
        for name, train_len in TASKS.items():
            task = build_task(name)
            for encoding in ENCODINGS:
                for geometry, dims in GEOMETRIES.items():
                    torch.manual_seed(0)
                    model = Transformer(ModelConfig(vocab_size=task.vocab_size, ff_mult=4, encoding=encoding,
                                                    max_len=task.seq_len(4 * train_len),
                                                    train_len=task.seq_len(train_len), **dims))
                    spec = TrainSpec(steps=STEPS, batch_size=32, lr=2e-3, warmup=10)
                    start = time.thread_time()
                    train_model(model, task, train_len, spec, seed=0, device=torch.device("cpu"), progress=False)
                    seconds.setdefault((name, encoding, geometry), []).append((time.thread_time() - start) / STEPS)
    base = next(iter(GEOMETRIES))
    print("ms per training step (ratio to the first; forward FLOPs per token, ratio to the first)\n")
    print("| task | encoding | " + " | ".join(GEOMETRIES) + " |")
    print("|---|---|" + "---|" * len(GEOMETRIES))
    for name in TASKS:
        for encoding in ENCODINGS:
            ref = min(seconds[(name, encoding, base)])
            context = build_task(name).seq_len(TASKS[name])
            flops = {g: flops_per_token(d["d_model"], d["n_layers"], context) for g, d in GEOMETRIES.items()}
            cells = [f"{1000 * min(seconds[(name, encoding, g)]):.1f} ms ({min(seconds[(name, encoding, g)]) / ref:.2f}x; "
                     f"FLOPs {flops[g] / flops[base]:.1f}x)" for g in GEOMETRIES]
            print(f"| {name} | {encoding} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
