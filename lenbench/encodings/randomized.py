"""Randomized positional encodings: any encoding fed sorted random positions (Ruoss et al. 2023)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Literal

import torch

from lenbench.encodings.base import EncodingDims, PositionalEncoding, build_encoding, register_encoding
from lenbench.encodings.params import int_param, number_param, one_of


def relative_max_position(factor: float, max_len: int) -> int:
    """L = ⌈factor × max_len⌉ (at least 1), the factor taken as the decimal it is written as
    (0.1 × 30 = 3, not the 4 that ⌈0.1 × 30⌉ in binary floating point gives).

    Example:
        >>> relative_max_position(4.0, 500), relative_max_position(0.1, 30), relative_max_position(1.5, 7)
        (2000, 3, 11)
    """
    return max(1, math.ceil(Fraction(str(float(factor))) * max_len))


def sample_sorted_positions(batch: int, n: int, max_position: int, device: torch.device | str) -> torch.Tensor:
    """For each of `batch` rows, `n` distinct positions from range(max_position), in increasing order.

    Uses torch's global RNG (one uniform draw per candidate, the n largest kept), so the result is
    reproducible under `torch.manual_seed`.

    Returns:
        int64 tensor (batch, n).
    """
    if n > max_position:
        raise ValueError(f"cannot sample {n} distinct positions from max_position={max_position}")
    keys = torch.rand(batch, max_position, device=device)  # (B, L)
    return keys.topk(n, dim=-1).indices.sort(dim=-1).values  # (B, n)


@register_encoding("randomized")
class Randomized(PositionalEncoding):
    """Randomized positional encodings (Ruoss et al. 2023, "Randomized Positional Encodings Boost
    Length Generalization of Transformers"): wrap another encoding and, instead of positions
    0 … N−1, give it an increasing random subset of a larger range [0, L), L = `max_position`,
    so that at training length N the model already meets the positions (and distances) of lengths
    up to L.

    `positions(pos)` draws n = max(pos) + 1 sorted distinct positions s_0 < s_1 < … < s_{n−1}
    from range(L), once for the batch (as the paper's code: `noisy_fixed_positional_encodings`
    and the noisy rotary encoding draw one subset per call) or once per row
    (`sampling="row"`), and maps every position p to s_p; every other hook (embed / rotate /
    bias / attention_bias) is the wrapped encoding's, applied to the mapped positions. Sampling
    uses torch's global RNG, so it is deterministic under `torch.manual_seed` and re-drawn on
    each forward pass. One subset per batch also keeps the wrapped encoding's per-batch work
    (RoPE's tables, a bias) at one row instead of B.

    At evaluation the paper's code samples in the same way (its noisy encodings draw a fresh
    subset on every call, evaluation included); that is the default, `eval_positions="sampled"`.
    Greedy decoding runs several forwards per batch, each under the first one's draw
    (`lenbench.tasks.decoding.HeldDraws`), so a generated answer is decoded under one draw.
    `eval_positions="plain"` instead uses the input positions unchanged outside training (a
    deterministic evaluation, at the cost of a train/test mismatch in the position distribution).

    The wrapped encoding is built for max_len = max(dims.max_len, L), so that e.g. a `learned`
    table covers every position that can be drawn, whichever way L is set; its `causal_only` and
    `content_dependent` carry over. It is built at the model's geometry and training length, its
    `max_len` raised to L: a length-relative parameter of the wrapped encoding (FIRE's
    `threshold_fraction`, xPos's `scale_base_fraction`) reads the training length, as unwrapped.

    Args:
        dims: model geometry.
        base: registered name of the wrapped encoding ("rope" by default).
        base_params: keyword parameters of the wrapped encoding.
        max_position: L, the range positions are drawn from; must be at least the longest
            sequence. None: max(2048, dims.max_len), the paper's 2048 (its test lengths reach 500).
        max_position_factor: instead of `max_position`, L = ⌈max_position_factor × dims.max_len⌉,
            relative to the suite's longest evaluation length. The paper draws from L = 2048 for
            test lengths up to 500, about 4× (4.096); the absolute 2048 is that ratio only for a
            suite whose longest length is near 500. A factor below 1 leaves L under the longest
            length, which sampled evaluation refuses.
        eval_positions: "sampled" (the paper's code) or "plain" (0 … T−1 at evaluation).
        sampling: "batch" (one subset per forward pass, the paper's code; default) or "row" (one
            subset per batch row; with `eval_positions="plain"` only: greedy decoding runs each
            batch's later forwards on the examples still changing, so a per-row draw could not be
            held for its example, `lenbench.tasks.decoding.HeldDraws`).
    """

    description = "wraps an encoding; positions are sorted random draws from a larger range [0, L)"
    paper = "Ruoss et al. 2023, Randomized Positional Encodings Boost Length Generalization of Transformers"

    def __init__(
        self,
        dims: EncodingDims,
        *,
        base: str = "rope",
        base_params: dict | None = None,
        max_position: int | None = None,
        max_position_factor: float | None = None,
        eval_positions: Literal["sampled", "plain"] = "sampled",
        sampling: Literal["batch", "row"] = "batch",
    ):
        super().__init__(dims)
        if base == self.name:
            raise ValueError("encoding 'randomized' cannot wrap itself")
        if eval_positions not in ("sampled", "plain"):
            raise ValueError(f"randomized eval_positions must be 'sampled' or 'plain', got {eval_positions!r}")
        if sampling not in ("batch", "row"):
            raise ValueError(f"randomized sampling must be 'batch' or 'row', got {sampling!r}")
        if sampling == "row" and eval_positions == "sampled":
            raise ValueError("randomized sampling='row' needs eval_positions='plain': greedy decoding re-runs a batch's "
                             "forwards on the examples still changing, so a per-row draw cannot be held for its "
                             "example (use sampling='batch', the paper's, or eval_positions='plain')")
        if base_params is not None and not isinstance(base_params, dict):
            raise ValueError(f"encoding {self.name!r}: base_params = {base_params!r} is out of range (valid: a mapping of "
                             f"the {base!r} encoding's parameters)")
        self.sampling = sampling
        if max_position is not None:
            int_param(self.name, "max_position", max_position)
        if max_position_factor is not None:
            factor = number_param(self.name, "max_position_factor", max_position_factor)
            one_of(self.name, "the range positions are drawn from", max_position=max_position,
                   max_position_factor=max_position_factor)
            self.max_position = relative_max_position(factor, dims.max_len)
        else:
            self.max_position = max_position if max_position is not None else max(2048, dims.max_len)
        if eval_positions == "sampled" and self.max_position < dims.max_len:
            raise ValueError(
                f"randomized max_position={self.max_position} is below the longest length "
                f"max_len={dims.max_len}; sampled evaluation positions could not be drawn"
            )
        self.eval_positions = eval_positions
        self.base_name = base
        # The wrapped encoding sees positions up to L, at the model's geometry and training length (its
        # length-relative parameters, e.g. FIRE's threshold_fraction, read the training length in tokens).
        inner_dims = dataclasses.replace(dims, max_len=max(dims.max_len, self.max_position))
        self.inner = build_encoding(base, inner_dims, **(base_params or {}))
        if self.inner.layer_dependent or self.inner.replaces_softmax:
            raise ValueError(f"encoding 'randomized' cannot wrap {base!r}: it replaces the attention itself "
                             f"(layer_bias / attend hooks), which randomized does not forward")
        # Instance attributes shadow the class defaults: the model reads them on the instance.
        self.causal_only = self.inner.causal_only
        self.content_dependent = self.inner.content_dependent

    def positions(self, pos: torch.Tensor) -> torch.Tensor:
        if not self.training and self.eval_positions == "plain":
            return self.inner.positions(pos)
        if pos.numel() == 0:
            return pos
        n = int(pos.max()) + 1
        if n > self.max_position or int(pos.min()) < 0:
            raise ValueError(
                f"encoding 'randomized' cannot represent length {n}: it draws positions from "
                f"max_position={self.max_position} (raise max_position)"
            )
        rows = 1 if self.sampling == "batch" else pos.shape[0]
        sampled = sample_sorted_positions(rows, n, self.max_position, pos.device)  # (1|B, n)
        return self.inner.positions(sampled.expand(pos.shape[0], n).gather(1, pos.long()))  # (B, T)

    def embed(self, h: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.inner.embed(h, pos)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inner.rotate(q, k, pos)

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        return self.inner.bias(q_pos, k_pos)

    def attention_bias(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        return self.inner.attention_bias(q, k, q_pos, k_pos)

    def extra_repr(self) -> str:
        return (f"name={self.name!r}, base={self.base_name!r}, max_position={self.max_position}, "
                f"eval_positions={self.eval_positions!r}, sampling={self.sampling!r}")
