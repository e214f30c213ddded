"""Chance and trivial baselines, scored on exactly the evaluation samples the models see.

Every baseline is a predictor that needs no training; it is scored on the batches of
`lenbench.evaluate.eval_batches` (same task, length and seed, so the same examples as every
encoding) and reported as tidy rows of its own, with encoding ``baseline:<name>`` and variant
``none``, the task's metrics and per-sample scores. The leaderboard shows them next to the models
and never ranks them; the not-learned rule of `lenbench.report.stats` compares an lm against ``unigram``.

Baselines (`BASELINES`):

- ``chance`` (every task with a chance level, and lm): a uniform guess over the answer vocabulary,
  analytic. Sequence tasks: token accuracy = ``task.chance`` (1 / answer vocabulary), exact match
  = chance ** (answer tokens) per sample; lm: uniform over the 256 byte values, nll = ln 256 per
  byte (perplexity 256, 8 bits per byte).
- ``repeat-previous`` (sequence tasks): predict at each answer position the token just read (the
  previous token of the sequence). For `sort` / `copy` this is the answer's own previous token.
- ``unigram`` (lm): the byte frequencies of the training split (add-one smoothed), so an lm that
  does no better has learned nothing about context.
"""

from __future__ import annotations

import functools
import math

import torch

from lenbench.evaluate import (
    METRICS,
    encode_samples,
    eval_batches,
    metric_transform,
    sample_sums,
    task_metrics,
)
from lenbench.labels import BASELINE_PREFIX as PREFIX
from lenbench.labels import is_baseline  # noqa: F401 (re-exported)
from lenbench.tasks import Task

#: Baseline names by task kind.
BASELINES = {"sequence": ("chance", "repeat-previous"), "lm": ("chance", "unigram")}


@functools.lru_cache(maxsize=4)
def _unigram_logp(data_id: int, data: torch.Tensor, train_size: int) -> torch.Tensor:
    counts = torch.bincount(data[:train_size].long(), minlength=256).double() + 1.0  # (256,) add-one smoothing
    return (counts / counts.sum()).log()  # (256,)


def _scores(task: Task, name: str, batch) -> dict[str, tuple[list, list]] | None:
    """Per-sample (numerators, denominators) of each metric of baseline `name` on one batch."""
    mask = batch.loss_mask  # (B, T)
    if task.kind == "lm":
        if name == "chance":
            nll = torch.full(mask.shape, math.log(256.0), dtype=torch.float64)  # (B, T)
        else:
            corpus = task.corpus
            logp = _unigram_logp(id(corpus), corpus.data, corpus.train_size)  # (256,)
            nll = -logp[batch.targets]  # (B, T)
        return sample_sums(torch.zeros_like(mask), nll, mask)
    if name == "repeat-previous":
        return sample_sums(batch.inputs == batch.targets, None, mask)
    if task.chance is None:
        return None
    scored = mask.sum(1).double()  # (B,)
    exact = torch.tensor(float(task.chance), dtype=torch.float64) ** scored  # (B,): P(all answer tokens guessed)
    return {"token_accuracy": ((scored * task.chance).tolist(), scored.tolist()),
            "exact_match": (exact.tolist(), [1.0] * len(exact))}


def baseline_rows(task: Task, train_len: int, ratios, *, samples: int, tokens_per_batch: int, seed: int,
                  base: dict) -> list[dict]:
    """Tidy rows of every baseline of `task` at each evaluation ratio.

    Args:
        task: the built task.
        train_len: training length (task units); eval_len = max(1, round(ratio · train_len)).
        ratios: evaluation ratios of the cell.
        samples, tokens_per_batch, seed: the cell's evaluation settings (same examples as the model).
        base: identity and provenance fields copied into every row (cell_id, suite, task, seed, …).
    """
    rows: list[dict] = []
    metrics = task_metrics(task)
    for name in BASELINES[task.kind]:
        for ratio in ratios:
            eval_len = max(1, round(ratio * train_len))
            row_base = {**base, "encoding": PREFIX + name, "variant": "none", "eval_len": eval_len, "ratio": float(ratio)}
            num: dict[str, list] = {m: [] for m in metrics}
            den: dict[str, list] = {m: [] for m in metrics}
            try:
                for batch in eval_batches(task, eval_len, samples=samples, tokens_per_batch=tokens_per_batch, seed=seed):
                    scores = _scores(task, name, batch)
                    if scores is None:
                        break
                    for m in metrics:
                        num[m] += scores[m][0]
                        den[m] += scores[m][1]
            except ValueError:  # a length the task cannot make: the models' rows record it as failed
                continue
            if not num[metrics[0]]:
                continue
            rows += [{**row_base, "metric": m, "value": metric_transform(m, math.fsum(num[m]) / math.fsum(den[m])),
                      "n_samples": len(num[m]), "higher_is_better": METRICS[m], "status": "ok", "error": "",
                      "sample_scores": encode_samples(num[m], den[m])} for m in metrics]
    return rows
