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
    "bits_per_byte": False,  # nll / ln 2: bits per scored byte (byte-level lm: one token = one byte)
}

#: The metric each task kind is ranked by on the leaderboard. Sequence tasks: exact match (the
#: whole answer right; under teacher forcing this equals greedy decoding being entirely right),
#: token accuracy secondary (it gives partial credit).
PRIMARY_METRIC = {"sequence": "exact_match", "lm": "perplexity"}


def task_metrics(task: Task) -> list[str]:
    """Metrics recorded for a task, primary first."""
    return ["exact_match", "token_accuracy"] if task.kind == "sequence" else ["perplexity", "nll", "bits_per_byte"]


# --- per-sample scores ---------------------------------------------------------------------------
#
# Every metric is f(sum of per-sample numerators / sum of per-sample denominators): exact match
# (hit 0/1 over 1), token accuracy (correct over scored tokens), nll / bits per byte / perplexity
# (summed nll over scored tokens, then identity, / ln 2 or exp). A row stores its samples in that
# form, so a bootstrap over samples (lenbench.stats) reproduces the metric exactly without a rerun.
# Stored form (compact, the same string in cell JSON, benchmark JSON and results.csv): entries
# separated by spaces in generator order, each "num" (denominator 1) or "num/den"; nll sums are
# written with 7 significant digits.


def metric_transform(metric: str, ratio: float) -> float:
    """The metric's value from the ratio of summed numerators to summed denominators."""
    if metric == "perplexity":
        return math.exp(min(ratio, 700.0))
    if metric == "bits_per_byte":
        return ratio / math.log(2)
    return ratio


def encode_samples(num: list[float], den: list[float]) -> str:
    """The compact string of per-sample (numerator, denominator) pairs (see above)."""

    def fmt(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:.7g}"

    return " ".join(fmt(n) if d == 1 else f"{fmt(n)}/{fmt(d)}" for n, d in zip(num, den, strict=True))


def decode_samples(text: str) -> tuple[list[float], list[float]]:
    """(numerators, denominators) of a string written by `encode_samples`; ("") gives ([], [])."""
    num, den = [], []
    for entry in text.split():
        n, _, d = entry.partition("/")
        num.append(float(n))
        den.append(float(d) if d else 1.0)
    return num, den


def eval_generator(task: Task, length: int, seed: int) -> torch.Generator:
    """The generator of evaluation data: a function of (task, length, seed) only, so every
    encoding and variant is scored on exactly the same examples.

    For `lm` it leaves out the length: the task then scores the same held-out tokens at every
    length, so a change of perplexity with length is the context's effect, not other text's.
    """
    scope = f"eval/{task.name}/{seed}" if task.kind == "lm" else f"eval/{task.name}/{length}/{seed}"
    key = zlib.crc32(scope.encode())
    return torch.Generator().manual_seed(key)


def eval_batches(task: Task, length: int, *, samples: int, tokens_per_batch: int, seed: int):
    """The evaluation batches of (task, length, seed), in generator order: the model and every
    baseline (lenbench.baselines) are scored on exactly these examples."""
    gen = eval_generator(task, length, seed)
    per_batch = max(1, tokens_per_batch // max(1, task.seq_len(length)))
    done = 0
    while done < samples:
        n = min(per_batch, samples - done)
        yield task.sample(n, length, gen, split="eval")
        done += n


def sample_sums(pred_hit: torch.Tensor, nll: torch.Tensor | None, mask: torch.Tensor) -> dict[str, tuple[list, list]]:
    """Per-sample (numerators, denominators) of each metric from one batch.

    Args:
        pred_hit: (B, T) bool, the prediction equals the target.
        nll: (B, T) float negative log-likelihood per position, or None (no nll metrics).
        mask: (B, T) bool, scored positions.
    """
    scored = mask.sum(1).double()  # (B,)
    correct = (pred_hit & mask).sum(1).double()  # (B,)
    exact = (pred_hit | ~mask).all(dim=1).double()  # (B,): unscored positions count as hits
    ones = torch.ones_like(exact)  # (B,)
    out = {"token_accuracy": (correct.tolist(), scored.tolist()), "exact_match": (exact.tolist(), ones.tolist())}
    if nll is not None:
        nll_sum = torch.where(mask, nll.double(), 0.0).sum(1)  # (B,)
        for metric in ("nll", "perplexity", "bits_per_byte"):
            out[metric] = (nll_sum.tolist(), scored.tolist())
    return out


@torch.no_grad()
def evaluate_length(
    model: Transformer, task: Task, length: int, *, samples: int, tokens_per_batch: int, seed: int,
    device: torch.device,
) -> tuple[dict[str, float], int, dict[str, str]]:
    """Score `model` on `samples` fresh examples of `length` (task units).

    Returns:
        ({metric: value}, n_samples, {metric: sample_scores}) for the metrics of
        `task_metrics(task)`; sample_scores is the compact per-sample string of `encode_samples`
        (one entry per evaluation sample, generator order), from which the value is
        `metric_transform(metric, sum(num) / sum(den))`.
    """
    model.eval()
    num: dict[str, list] = {m: [] for m in METRICS}
    den: dict[str, list] = {m: [] for m in METRICS}
    for batch in eval_batches(task, length, samples=samples, tokens_per_batch=tokens_per_batch, seed=seed):
        batch = batch.to(device)
        logits = model(batch.inputs).float()  # (B, T, V)
        nll = F.cross_entropy(logits.transpose(1, 2), batch.targets, reduction="none")  # (B, T)
        for metric, (n, d) in sample_sums(logits.argmax(-1) == batch.targets, nll, batch.loss_mask).items():
            num[metric] += n
            den[metric] += d
    values = {m: metric_transform(m, math.fsum(num[m]) / math.fsum(den[m])) for m in task_metrics(task)}
    return values, len(num["exact_match"]), {m: encode_samples(num[m], den[m]) for m in task_metrics(task)}
