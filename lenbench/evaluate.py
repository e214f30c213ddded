"""Evaluation of a trained model at one length: the metrics of DESIGN.md's results schema."""

from __future__ import annotations

import math
import zlib

import torch
import torch.nn.functional as F

from lenbench.model import Transformer
from lenbench.tasks import Task

#: Every metric lenbench reports, and whether a higher value is better.
METRICS: dict[str, bool] = {
    "token_accuracy": True,  # fraction of scored tokens predicted exactly (argmax)
    "exact_match": True,  # fraction of examples whose scored tokens are all correct
    "nll": False,  # mean negative log-likelihood (nats) of scored tokens
    "perplexity": False,  # exp(nll)
}

#: The metric each task kind is ranked by on the leaderboard.
PRIMARY_METRIC = {"sequence": "token_accuracy", "lm": "perplexity"}


def task_metrics(task: Task) -> list[str]:
    """Metrics recorded for a task, primary first."""
    return ["token_accuracy", "exact_match"] if task.kind == "sequence" else ["perplexity", "nll"]


def eval_generator(task: Task, length: int, seed: int) -> torch.Generator:
    """The generator of evaluation data: a function of (task, length, seed) only, so every
    encoding and variant is scored on exactly the same examples.

    For `lm` it leaves out the length: the task then scores the same held-out tokens at every
    length, so a change of perplexity with length is the context's effect, not other text's.
    """
    scope = f"eval/{task.name}/{seed}" if task.kind == "lm" else f"eval/{task.name}/{length}/{seed}"
    key = zlib.crc32(scope.encode())
    return torch.Generator().manual_seed(key)


@torch.no_grad()
def evaluate_length(
    model: Transformer, task: Task, length: int, *, samples: int, tokens_per_batch: int, seed: int,
    device: torch.device,
) -> tuple[dict[str, float], int]:
    """Score `model` on `samples` fresh examples of `length` (task units).

    Returns:
        ({metric: value}, n_samples) for the metrics of `task_metrics(task)`.
    """
    model.eval()
    gen = eval_generator(task, length, seed)
    per_batch = max(1, tokens_per_batch // max(1, task.seq_len(length)))
    correct = scored = exact = nll_sum = 0.0
    done = 0
    while done < samples:
        n = min(per_batch, samples - done)
        batch = task.sample(n, length, gen, split="eval").to(device)
        logits = model(batch.inputs).float()  # (B, T, V)
        mask = batch.loss_mask  # (B, T)
        hit = (logits.argmax(-1) == batch.targets) | ~mask  # (B, T): unscored positions count as hits
        correct += (hit & mask).sum().item()
        scored += mask.sum().item()
        exact += hit.all(dim=1).sum().item()
        nll_sum += F.cross_entropy(logits[mask], batch.targets[mask], reduction="sum").item()
        done += n
    nll = nll_sum / scored
    values = {"token_accuracy": correct / scored, "exact_match": exact / done, "nll": nll,
              "perplexity": math.exp(min(nll, 700.0))}
    return {m: values[m] for m in task_metrics(task)}, done
