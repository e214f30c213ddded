"""CoPE: contextual position encoding (Golovneva et al. 2024)."""

from __future__ import annotations

import math

import torch
from torch import nn

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding
from lenbench.encodings.params import int_param, number_param, one_of

#: Position vectors by default, whatever the training length: contextual positions clamp at 63. (The paper
#: clips them at a p_max below the context; the authors' code defaults to the context + 1, `npos_fraction` 1.)
DEFAULT_NPOS_MAX = 64


def cope_npos_max(npos_max: int | None, npos_fraction: float | None, train_len: int | None) -> int:
    """The number of learned position vectors P of a CoPE encoding.

    Args:
        npos_max: the P given, or None for `DEFAULT_NPOS_MAX`.
        npos_fraction: None, or P = round(npos_fraction × `train_len`) + 1 (at least 2): the
            length-relative count (1.0 is the authors' code, P = block size + 1). Ignored, for
            `npos_max`, when `train_len` is unknown.
        train_len: the training length in tokens, or None when unknown (a suite's load-time probe).
    """
    if npos_fraction is not None and train_len is not None:
        return max(2, round(npos_fraction * train_len) + 1)
    return DEFAULT_NPOS_MAX if npos_max is None else npos_max


@register_encoding("cope")
class CoPE(PositionalEncoding):
    """Contextual Position Encoding (Golovneva et al. 2024, "Contextual Position Encoding: Learning
    to Count What's Important"):

        g_ij = σ(q_i · k_j / √Dh)                 gates, for keys j ≤ i (0 for keys after the query)
        p_ij = Σ_{t=j}^{i} g_it                   contextual position: how many gated keys lie in [j, i]
        z_ij = (1 − w) · q_i · e[⌊p_ij⌋] + w · q_i · e[⌈p_ij⌉],  w = p_ij − ⌊p_ij⌋   (added to the logit)

    p is clamped to npos_max − 1, and e is a learned table of `npos_max` vectors of the head
    dimension, shared by all heads (and, here, by all layers) and initialised to zero, as in the
    paper's code. The gates read the same scaled logits q·k/√Dh that attention uses (the paper's
    code computes them from the scaled, masked logits); the position logit q_i · e[p] is not
    scaled, as in the paper's code. With every gate at 1, p_ij = i − j + 1, the ordinary relative
    position counted from 1.

    Length extrapolation: contextual positions saturate at npos_max − 1, so a model trained with
    counts below npos_max sees no new position embeddings at longer lengths; counts that exceed it
    (gates rarely closed, long inputs) are indistinguishable from each other. `npos_fraction = 1`
    keeps token-level distances distinct in-distribution: contextual positions then cover the
    training length, as in the authors' code.

    The returned bias is −inf for keys after the query: CoPE is causal by definition, and the
    bias then masks correctly on its own. The gate sum runs over sequence indices j … i of the (B, H, Tq, Tk) score matrix, so keys
    after the query never count (causal), and right padding leaves real tokens untouched. The hook
    does not see the pad mask, so padded keys *between* a key and its query (left padding) would
    be counted: pad on the right with CoPE.

    Args:
        dims: model geometry (`dims.train_len`: the training length in tokens, for `npos_fraction`).
        npos_max: number of learned position vectors; contextual positions are clamped to
            npos_max − 1. None: 64, whatever the training length.
        npos_fraction: instead of `npos_max`, npos_max = round(npos_fraction × the training length
            in tokens) + 1 (at least 2), so contextual positions reach that fraction of it. The
            authors' code ties it to the training length: its `--cope-npos` defaults to the block
            size (the training context) + 1, "because position 0 is possible", i.e. 1.0 here.
            When the training length is unknown (a suite's load-time probe), `npos_max`.
    """

    description = "counts gated keys σ(q·k) between key and query; interpolated learned position logits"
    paper = "Golovneva et al. 2024, Contextual Position Encoding: Learning to Count What's Important"
    kernel_family = "bias"  # held to the fused-attention target (lenbench.benchmark.plans)
    causal_only = True
    content_dependent = True

    def __init__(self, dims: EncodingDims, *, npos_max: int | None = None, npos_fraction: float | None = None):
        super().__init__(dims)
        if npos_max is not None:
            int_param(self.name, "npos_max", npos_max, low=2)
        fraction = None if npos_fraction is None else number_param(self.name, "npos_fraction", npos_fraction)
        one_of(self.name, "the number of position vectors", npos_max=npos_max, npos_fraction=npos_fraction)
        self.npos_max = cope_npos_max(npos_max, fraction, dims.train_len)
        self.pos_emb = nn.Parameter(torch.zeros(self.npos_max, dims.head_dim))  # (P, Dh)

    def square_planes(self) -> tuple[float, float]:
        """(2H + 3, 9H): the default's content-dependent bias holds 5H per sequence; CoPE's gates,
        their cumulative sums, the interpolated position embeddings and their bias hold ~8H (measured
        at the catalog's longest evaluation, tests/run/test_eval_memory_measured.py)."""
        h = self.dims.n_heads
        return 2.0 * h + 3, 9.0 * h

    def contextual_positions(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """p_ij = Σ_{t=j}^{i} σ(q_i · k_t / √Dh), unclamped, (B, H, Tq, Tk); 0 for keys after the query."""
        logits = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
        gates = torch.sigmoid(logits) * self._causal(q, k)  # (B, H, Tq, Tk)
        return gates.flip(-1).cumsum(-1).flip(-1)  # (B, H, Tq, Tk): sum over t ≥ j, zero past i

    def attention_bias(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor:
        pos = self.contextual_positions(q, k).clamp(max=self.npos_max - 1)  # (B, H, Tq, Tk)
        floor = pos.floor()  # (B, H, Tq, Tk)
        w = pos - floor  # (B, H, Tq, Tk): weight of the ceiling, in [0, 1)
        logits_int = q @ self.pos_emb.to(q.dtype).T  # (B, H, Tq, P): q_i · e[p] for every integer p
        lo = logits_int.gather(-1, floor.long())  # (B, H, Tq, Tk)
        hi = logits_int.gather(-1, pos.ceil().long())  # (B, H, Tq, Tk)
        bias = lo * (1 - w) + hi * w  # (B, H, Tq, Tk)
        # CoPE is causal by definition, so its bias carries the causal mask itself (−inf after the
        # query): correct even where the caller adds no causal mask next to a content-dependent bias.
        return bias.masked_fill(~self._causal(q, k), float("-inf"))  # (B, H, Tq, Tk)

    @staticmethod
    def _causal(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(Tq, Tk) bool, True where key j ≤ query i (queries aligned to the last keys)."""
        Tq, Tk = q.shape[-2], k.shape[-2]
        return torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)  # (Tq, Tk)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, npos_max={self.npos_max}"
