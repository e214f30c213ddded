"""The evaluation examples of (task, length, seed): the one generator every encoding, variant and
baseline is scored on, below both the tasks' own measurements and `lenbench.evaluate`."""

from __future__ import annotations

import zlib

import torch

from lenbench.tasks.base import Task


def eval_generator(task: Task, length: int, seed: int) -> torch.Generator:
    """The generator of evaluation data: a function of (task, length, seed) only, so every
    encoding and variant is scored on exactly the same examples.

    A task that declares `eval_scope_without_length` (`lm`) gets a scope without the length: it
    then scores the same held-out tokens at every length, so a change of perplexity with length is
    the context's effect, not other text's.
    """
    scope = f"eval/{task.name}/{seed}" if task.eval_scope_without_length else f"eval/{task.name}/{length}/{seed}"
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


def eval_batches_on(task: Task, length: int, samples: int, tokens_per_batch: int, seed: int, device: torch.device):
    """The batches `lenbench.evaluate.evaluate_length` scores at `length` (`eval_batches`), on `device`: the same
    examples (and for `lm` the same target bytes at every length)."""
    for batch in eval_batches(task, length, samples=samples, tokens_per_batch=tokens_per_batch, seed=seed):
        yield batch.to(device)
