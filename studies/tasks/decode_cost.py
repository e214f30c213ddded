"""Time greedy decoding on a quick run's trained sort models: every example forwarded each round
(the first version of `lenbench.tasks.decoding.generate`, reproduced below) against settled examples
leaving the batch (the current one), on the same evaluation batches; asserts the same answers.

    python studies/tasks/decode_cost.py runs/quick     # a run of the current quick preset, with checkpoints
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from lenbench.config import load_suite
from lenbench.model import Transformer
from lenbench.run.cell import model_config
from lenbench.run.checkpoint import load_checkpoint_bytes
from lenbench.tasks import build_task, decoding
from lenbench.tasks.decoding import Decoded
from lenbench.tasks.eval_data import eval_batches


def every_example_each_round(predict, batch) -> Decoded:
    """The fixed-point iteration forwarding the whole batch every round."""
    first = predict(batch.inputs)
    fed = batch.fed_back
    inputs, pred, forwards = batch.inputs, first, 0
    for _ in range(int(fed.sum(1).max()) + 1):
        proposal = torch.where(fed, pred.roll(1, dims=1), batch.inputs)
        if torch.equal(proposal, inputs):
            return Decoded(first, pred, forwards)
        inputs, pred, forwards = proposal, predict(proposal), forwards + 1
    raise RuntimeError("did not settle")


def main(run: Path) -> None:
    torch.set_num_threads(1)
    cells = {c.cell_id: c for c in load_suite("quick").cells()}
    totals = {"every example": 0.0, "active set": 0.0}
    ways = {"every example": every_example_each_round, "active set": decoding.generate}
    for path in sorted((run / "cells").glob("*.json")):
        result = json.loads(path.read_text())
        cell = cells.get(result["cell_id"])
        if cell is None or cell.task.name != "sort":
            continue
        task = build_task("sort")
        checkpoint = (run / "checkpoints" / f"{result['train_id']}.pt").read_bytes()
        state, _ = load_checkpoint_bytes(checkpoint, torch.device("cpu"))
        net = Transformer(model_config(cell, task))
        net.load_state_dict(state)
        net.eval()

        def predict(x: torch.Tensor, net: Transformer = net) -> torch.Tensor:
            return net(x).argmax(-1)

        for ratio in (2, 4, 8, 16):
            batches = list(eval_batches(task, cell.train_len * ratio, samples=cell.eval.samples,
                                        tokens_per_batch=cell.eval.tokens_per_batch, seed=cell.seed))
            answers = {}
            for name, way in ways.items():
                start = time.perf_counter()
                with torch.no_grad():
                    answers[name] = [way(predict, b).generated[b.loss_mask] for b in batches]
                totals[name] += time.perf_counter() - start
            assert all(torch.equal(a, b) for a, b in zip(*answers.values(), strict=True))
        print(cell.title, {k: round(v, 1) for k, v in totals.items()}, flush=True)
    print(f"total {totals}; active set / every example {totals['active set'] / totals['every example']:.2f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
