"""A task plugin: predict the running maximum of a digit string (docs/add-task.md walks through it)."""

import torch

from lenbench.tasks import Batch, Task, register_task
from lenbench.tasks.params import Param


@register_task("running-max")
class RunningMax(Task):
    """After each of `length` random digits, predict the largest digit so far.

    Every position is scored; the answer depends on content, not on where it is, so an encoding
    that generalises must keep attending to the maximum as the string grows.

    Args:
        vocab: digits are 0 … vocab − 1.
    """

    description = "predict the running maximum of a random digit string (a plugin example)"
    length_unit = "digits"

    PARAMS = {"vocab": Param(int, low=2)}

    def __init__(self, vocab: int = 10):
        self.vocab = self.param("vocab", vocab)

    @property
    def vocab_size(self) -> int:
        return self.vocab

    def seq_len(self, length: int) -> int:
        return length

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        digits = torch.randint(0, self.vocab, (batch_size, length), generator=generator)  # (B, T)
        running = digits.cummax(dim=1).values  # (B, T): max of digits[:, :t + 1]
        return Batch(inputs=digits, targets=running, loss_mask=torch.ones_like(digits, dtype=torch.bool))
