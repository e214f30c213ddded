"""Greedy generation of a batch's answers, for every model the evaluation can run.

A sequence task is scored on the answer the model writes itself from the prompt (greedy decoding),
as the length-generalisation suites score it (McGill-NLP's generated answers; DeepMind's Chomsky
tasks without feeding targets back), and not only under teacher forcing, where each answer token is
predicted from the true previous ones and a copy-the-previous-token rule scores well on `sort`.

Decoding is a fixed-point (Jacobi) iteration over whole forwards, so it needs nothing from an
encoding beyond its forward pass: no KV cache, which the bias, content and layer kinds of
encodings would each have to implement. Start from the teacher-forced inputs; put each position's
prediction into the next position wherever the batch feeds answers back (`Batch.fed_back`); run
the model again; stop when no input changes. Because the model is causal, the k-th fed-back
position is final after k rounds (its prediction depends on earlier inputs only), so the iteration
ends after at most (fed-back positions + 1) forwards and its fixed point is exactly the greedy
decode. An example that settles leaves the batch, so each forward runs on the examples still
changing; a model that answers right under teacher forcing changes nothing in the first round, and
its generation costs no forward beyond the teacher-forced one.

By induction over the answer, generated exact match equals teacher-forced exact match (every
answer token right under teacher forcing ⇔ greedy decoding writes the whole answer); token
accuracy is where they differ.

A model that draws at evaluation (randomized positions, `eval_positions="sampled"`) is a
different function on every forward, so the iteration would compare forwards under different
draws and need not settle. `HeldDraws` gives every forward of one batch the draw of its first:
the fixed point is then the greedy decode under that draw, which is what one forward of the
authors' evaluation scores; the global RNG advances by one forward's draw per batch. A model that
draws nothing is unaffected, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from lenbench.tasks.base import Batch


@dataclass
class Decoded:
    """The predictions of one batch.

    Attributes:
        teacher_forced: (B, T) long, the argmax at each position with the true inputs.
        generated: (B, T) long, the argmax at each position with the model's own answers fed back
            (equal to `teacher_forced` where the batch feeds no answer back).
        forwards: forward passes made beyond the teacher-forced one (each on the examples still
            changing).
    """

    teacher_forced: torch.Tensor
    generated: torch.Tensor
    forwards: int


@dataclass
class HeldDraws:
    """`fn` whose every call after the first replays the random state the first call started from
    (torch's CPU generator and `device`'s), so a model that samples at evaluation draws the same
    on each forward of a batch; the global state after a call is what the first call left.

    Args:
        fn: the forward, e.g. ``lambda x: model(x)``; one instance per batch.
        device: where the forward draws (its generator is held beside the CPU's).
    """

    fn: Callable[[torch.Tensor], torch.Tensor]
    device: torch.device
    _start: tuple | None = field(default=None, init=False, repr=False)

    def _module(self):
        return None if self.device.type == "cpu" else torch.get_device_module(self.device.type)

    def _state(self) -> tuple:
        module = self._module()
        return torch.get_rng_state(), None if module is None else module.get_rng_state(self.device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self._start is None:
            self._start = self._state()
            return self.fn(x)
        module = self._module()
        devices = [] if module is None else [self.device]
        with torch.random.fork_rng(devices=devices, device_type=self.device.type):
            torch.set_rng_state(self._start[0])
            if module is not None:
                module.set_rng_state(self._start[1], self.device)
            return self.fn(x)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """The argmax of the call: `generate`'s `predict`."""
        return self(x).argmax(-1)


class NonFiniteLogits(ValueError):
    """A model's logits hold NaN or ±inf at an evaluation length: its scores there are not numbers
    (argmax of NaN picks index 0, a NaN nll averages to NaN), so the length fails with this reason."""


def finite_logits(logits: torch.Tensor, length: int, context: int | None = None) -> torch.Tensor:
    """`logits` of a forward at evaluation length `length` (`context`: the context it was cut to),
    checked to hold only finite values.

    Raises:
        NonFiniteLogits: one line with the length and how many values are NaN or infinite.
    """
    bad = ~torch.isfinite(logits)
    if bool(bad.any()):
        cut = "" if context is None else f" (context cut to {context})"
        raise NonFiniteLogits(f"non-finite logits at length {length}{cut}: {int(bad.sum())} of {bad.numel()} values are "
                              "NaN or infinite (the model's activations overflowed or it was handed a NaN); "
                              "this length is failed, not scored")
    return logits


def generate(predict: Callable[[torch.Tensor], torch.Tensor], batch: Batch,
             teacher_forced: torch.Tensor | None = None) -> Decoded:
    """Greedy-decode the answers of `batch`.

    Args:
        predict: inputs (B, T) long → predictions (B, T) long, e.g. ``model(x).argmax(-1)``; causal
            (position t reads inputs up to t), as every model of the suite is.
        batch: the examples; `Batch.fed_back` says which inputs are answers fed back.
        teacher_forced: ``predict(batch.inputs)`` when the caller already has it (from the same
            forward that gave its logits).

    Returns:
        the teacher-forced and generated predictions and the extra forwards made.

    Raises:
        RuntimeError: the iteration did not settle in the bound a causal `predict` guarantees
            (a `predict` that reads later positions).
    """
    first = predict(batch.inputs) if teacher_forced is None else teacher_forced  # (B, T)
    fed = batch.fed_back  # (B, T) bool
    if not bool(fed.any()):
        return Decoded(first, first, 0)
    inputs, pred, forwards = batch.inputs.clone(), first.clone(), 0
    active = torch.arange(len(inputs), device=inputs.device)  # (A,) the examples still changing
    bound = int(fed.sum(1).max())  # the k-th fed-back position is final after k rounds
    for _ in range(2 * (bound + 1)):  # twice the bound: room for a near-tie argmax that a batch of another size flips
        proposal = torch.where(fed[active], pred[active].roll(1, dims=1), batch.inputs[active])  # (A, T): t ← pred t-1
        moving = (proposal != inputs[active]).any(dim=1)  # (A,)
        if not bool(moving.any()):
            return Decoded(first, pred, forwards)
        active = active[moving]  # a settled example is at its fixed point: it leaves the batch
        inputs[active] = proposal[moving]
        pred[active] = predict(inputs[active])
        forwards += 1
    raise RuntimeError(f"greedy decoding did not settle after {forwards} forwards on {bound} fed-back positions; "
                       "is the model causal?")
