"""Chance and trivial baselines, scored on exactly the evaluation samples the models see.

Every baseline is a predictor that needs no training; it is scored on the batches of
`lenbench.evaluate.eval_batches` (same task, length and seed, so the same examples as every
encoding) and reported as tidy rows of its own, with encoding ``baseline:<name>`` and variant
``none``, the task's metrics and per-sample scores. The leaderboard shows them next to the models
and never ranks them; the not-learned rule of `lenbench.report.stats` compares an lm against ``unigram``.

Baselines (each a `register_baseline` call below, for the task kinds it declares):

- ``chance`` (every task with a chance level, and lm): a uniform guess over the answer vocabulary,
  analytic. Sequence tasks: token accuracy = ``task.chance`` (1 / answer vocabulary), exact match
  = chance ** (answer tokens) per sample; lm: uniform over the 256 byte values, nll = ln 256 per
  byte (perplexity 256, 8 bits per byte).
- ``repeat-previous`` (sequence tasks): predict at each answer position the token just read (the
  previous token of the sequence), generating like the models (`lenbench.tasks.decoding`): it
  repeats the separator or its own previous answer. Under teacher forcing (its
  ``tf_token_accuracy``) it reads the true previous answer token, which on `sort` scores well.
- ``unigram`` (lm): the byte frequencies of the training split (add-one smoothed), so an lm that
  does no better has learned nothing about context.
- a task's own heuristics (`Task.heuristics`): ``most-frequent`` (the most frequent answer symbol
  read so far: the shortcut of recall with repeated values), ``copy-input`` (reverse and sort: the
  prompt's items in order) and count's ``the-length``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import torch

from lenbench import metrics
from lenbench.evaluate import (
    METRICS,
    decoded_sums,
    encode_samples,
    eval_batches,
    metric_transform,
    sample_sums,
    task_metrics,
)
from lenbench.results.build import measured_row
from lenbench.results.labels import BASELINE_PREFIX as PREFIX
from lenbench.results.labels import is_baseline  # noqa: F401 (re-exported)
from lenbench.tasks import Task
from lenbench.tasks.decoding import generate


@dataclasses.dataclass(frozen=True)
class Baseline:
    """One baseline: a predictor that needs no training, for the task kinds it declares.

    Attributes:
        name: its rows' encoding is ``baseline:<name>``.
        kinds: the task kinds (`Task.kind`) it is scored for.
        scores: ``scores(task, batch)`` → {metric: (per-sample numerators, denominators)} for every
            metric of the task, or None where the task gives it nothing to predict.
    """

    name: str
    kinds: tuple[str, ...]
    scores: Callable[[Task, Any], dict[str, tuple[list, list]] | None]


_REGISTRY: list[Baseline] = []


def register_baseline(name: str, *, kinds: tuple[str, ...]):
    """Register the decorated ``scores(task, batch)`` as baseline `name` for the task `kinds`; a task
    is scored by its kind's baselines in registration order."""
    def register(scores):
        for kind in kinds:
            if name in baseline_names(kind):
                raise ValueError(f"baseline {name!r} is registered twice for task kind {kind!r}")
        _REGISTRY.append(Baseline(name, tuple(kinds), scores))
        return scores
    return register


def baselines_for(kind: str) -> list[Baseline]:
    """The baselines of task kind `kind`, in registration order."""
    return [b for b in _REGISTRY if kind in b.kinds]


def baseline_names(kind: str) -> tuple[str, ...]:
    return tuple(b.name for b in baselines_for(kind))


def task_baselines(task: Task) -> list[Baseline]:
    """The baselines `task` is scored with: its kind's, then its own `Task.heuristics`.

    Raises:
        ValueError: a heuristic named like one of its kind's baselines.
    """
    own = task.heuristics()
    clash = sorted(set(own) & set(baseline_names(task.kind)))
    if clash:
        raise ValueError(f"task {task.name!r}: heuristic {clash[0]!r} has the name of a {task.kind} baseline; rename it")
    return [*baselines_for(task.kind), *(Baseline(name, (task.kind,), functools.partial(_predictor_scores, predict))
                                        for name, predict in own.items())]


def _predictor_scores(predict, task: Task, batch) -> dict[str, tuple[list, list]]:
    """A trivial predictor scored as a model is: its generated and its teacher-forced answers."""
    return decoded_sums(generate(predict, batch), batch)


@functools.lru_cache(maxsize=4)
def _unigram_logp(data_id: int, data: torch.Tensor, train_size: int) -> torch.Tensor:
    counts = torch.bincount(data[:train_size].long(), minlength=256).double() + 1.0  # (256,) add-one smoothing
    return (counts / counts.sum()).log()  # (256,)


@register_baseline("chance", kinds=("sequence",))
def _chance(task: Task, batch) -> dict[str, tuple[list, list]] | None:
    """A uniform guess over the answer vocabulary: token accuracy ``task.chance``, exact match
    chance ** (answer tokens) per sample; nothing for a task without a chance level."""
    if task.chance is None:
        return None
    scored = batch.loss_mask.sum(1).double()  # (B,)
    exact = torch.tensor(float(task.chance), dtype=torch.float64) ** scored  # (B,): P(all answer tokens guessed)
    guessed = ((scored * task.chance).tolist(), scored.tolist())
    sums = {"tokens": guessed, "teacher_forced_tokens": guessed,  # lenbench.metrics.SUMS
            "examples": (exact.tolist(), [1.0] * len(exact))}
    return {m.name: sums[m.sums] for m in metrics.registered() if m.sums in sums}


@register_baseline("chance", kinds=("lm",))
def _uniform_bytes(task: Task, batch) -> dict[str, tuple[list, list]]:
    """Uniform over the 256 byte values: nll ln 256 per byte."""
    mask = batch.loss_mask  # (B, T)
    nll = torch.full(mask.shape, math.log(256.0), dtype=torch.float64)  # (B, T)
    return sample_sums(torch.zeros_like(mask), nll, mask)


@register_baseline("repeat-previous", kinds=("sequence",))
def _repeat_previous(task: Task, batch) -> dict[str, tuple[list, list]]:
    """At each answer position, the token just read: under generation its own previous answer."""
    return _predictor_scores(lambda x: x, task, batch)


@register_baseline("unigram", kinds=("lm",))
def _unigram(task: Task, batch) -> dict[str, tuple[list, list]]:
    """The byte frequencies of the training split, add-one smoothed."""
    mask = batch.loss_mask  # (B, T)
    corpus = task.corpus
    logp = _unigram_logp(id(corpus), corpus.data, corpus.train_size)  # (256,)
    nll = -logp[batch.targets]  # (B, T)
    return sample_sums(torch.zeros_like(mask), nll, mask)


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
    for baseline in task_baselines(task):
        for ratio in ratios:
            eval_len = max(1, round(ratio * train_len))
            row_base = {**base, "encoding": PREFIX + baseline.name, "variant": "none", "eval_len": eval_len, "ratio": float(ratio)}
            num: dict[str, list] = {m: [] for m in metrics}
            den: dict[str, list] = {m: [] for m in metrics}
            try:
                for batch in eval_batches(task, eval_len, samples=samples, tokens_per_batch=tokens_per_batch, seed=seed):
                    scores = baseline.scores(task, batch)
                    if scores is None:
                        break
                    for m in metrics:
                        num[m] += scores[m][0]
                        den[m] += scores[m][1]
            except ValueError:  # a length the task cannot make: the models' rows record it as failed
                continue
            if not num[metrics[0]]:
                continue
            rows += [measured_row(row_base, {"metric": m, "value": metric_transform(m, math.fsum(num[m]) / math.fsum(den[m])),
                                             "n_samples": len(num[m])},
                                  METRICS[m], sample_scores=encode_samples(num[m], den[m])) for m in metrics]
    return rows
