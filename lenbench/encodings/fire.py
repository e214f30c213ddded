"""FIRE: functional interpolation for relative positions (Li et al. 2023), with the authors'
reference initialisation by default and a length-relative threshold as a parameter."""

from __future__ import annotations

import torch
from torch import nn

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding, shared_rows
from lenbench.encodings.params import int_param, number_param, one_of

#: The initial threshold L of the authors' reference implementation (positions).
PAPER_THRESHOLD = 512.0
#: The initial log-transform scale c of the authors' reference implementation.
PAPER_C = 0.1
#: Added to the normaliser ψ(max(L, i)), as in the authors' code.
EPS = 1e-6


def initial_threshold(threshold: float | None, threshold_fraction: float | None, train_len: int | None) -> float:
    """The initial threshold L0 (positions) of a FIRE encoding.

    Args:
        threshold: the initial threshold given, or None for `PAPER_THRESHOLD`.
        threshold_fraction: None, or L0 = threshold_fraction × `train_len` (at least 1): the
            length-relative threshold. Ignored, for `threshold`, when `train_len` is unknown.
        train_len: the training length in tokens, or None when unknown (a suite's load-time probe).
    """
    if threshold_fraction is not None and train_len is not None:
        return max(1.0, threshold_fraction * train_len)
    return PAPER_THRESHOLD if threshold is None else float(threshold)


@register_encoding("fire")
class Fire(PositionalEncoding):
    """FIRE, Functional Interpolation for Relative Positions (Li et al. 2023, "Functional
    Interpolation for Relative Positions Improves Long Context Transformers", ICLR 2024).

    Section 3.1 (progressive interpolation): the bias of query i and key j ≤ i is a learned
    function of the relative distance normalised by the query position,

        b(i, j) = f_θ( (i − j) / i ),

    so every query's whole context maps onto [0, 1] and longer contexts reuse the inputs f_θ was
    trained on. Section 3.2 adds a log transform that amplifies differences between nearby
    positions and a threshold L below which the normaliser is constant:

        b(i, j) = f_θ( ψ(i − j) / ψ(max(L, i)) ),     ψ(x) = log(c·x + 1).

    For queries before the threshold (i < L) the bias depends on i − j alone, like any relative
    bias; past it, on the query's own ψ(i). f_θ is an MLP 1 → `hidden` → H with a ReLU, one bias
    per head; c and L are learned.

    The authors' reference implementation (the paper's code) fixes the parametrisation used here:
    c starts at 0.1 and enters as |c|; the threshold is L = |m · L0| with L0 = 512 a constant and
    the multiplier m learned from 1 (so an optimiser step moves L by a fraction of L0, not by a
    constant); ε = 1e-6 is added to ψ(max(L, i)). That initialisation is the default here. The
    length-relative threshold (`threshold_fraction`, e.g. 0.25: L0 = a quarter of the training
    length) is a variant: the suites list it as `fire-relthresh`. With L0 = 512 above the training
    length the normaliser is the constant ψ(L) on everything seen in training, and past the
    training length it grows only once queries pass L.

    FIRE is defined for causal attention (keys j ≤ i); keys after the query (masked by the model)
    get the bias of distance 0.

    Args:
        dims: model geometry (`dims.train_len`: the training length in tokens, for `threshold_fraction`).
        hidden: width of the MLP's hidden layer (32 in the paper).
        c: initial value of the learned log-transform scale c (0.1 in the paper's code).
        threshold: initial threshold L0 in positions (512 in the paper's code); None: 512.
        threshold_fraction: instead of `threshold`, L0 = threshold_fraction × the training length
            in tokens (at least 1). When the training length is unknown (a suite's load-time
            probe), L0 = `threshold`.
    """

    description = "learned MLP of the log-distance normalised by the query position (progressive interpolation)"
    paper = "Li et al. 2023, Functional Interpolation for Relative Positions Improves Long Context Transformers"
    kernel_family = "bias"  # held to the fused-attention target (lenbench.benchmark.plans)
    causal_only = True

    def __init__(self, dims: EncodingDims, *, hidden: int = 32, c: float = PAPER_C, threshold: float | None = None,
                 threshold_fraction: float | None = None):
        super().__init__(dims)
        int_param(self.name, "hidden", hidden)
        number_param(self.name, "c", c)
        if threshold is not None:
            number_param(self.name, "threshold", threshold)
        if threshold_fraction is not None:
            number_param(self.name, "threshold_fraction", threshold_fraction)
        one_of(self.name, "the initial threshold", threshold=threshold, threshold_fraction=threshold_fraction)
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, dims.n_heads))
        self.c = nn.Parameter(torch.tensor(float(c)))
        # L = |m · L0|: L0 a constant of the checkpoint, the multiplier m learned (the authors' parametrisation).
        self.register_buffer("threshold_init", torch.tensor(initial_threshold(
            None if threshold is None else float(threshold),
            None if threshold_fraction is None else float(threshold_fraction), dims.train_len)))
        self.threshold_scale = nn.Parameter(torch.tensor(1.0))
        self.eps = EPS

    def square_planes(self) -> tuple[float, float]:
        """(2·hidden + 2H + 3, 2H): the MLP over the (T, T) normalised distances is shared by the
        batch and holds its hidden activations before and after the ReLU (measured ~2·hidden + H,
        tests/run/test_eval_memory_measured.py)."""
        h = self.dims.n_heads
        return 2.0 * self.mlp[0].out_features + 2.0 * h + 3, 2.0 * h

    @property
    def threshold(self) -> torch.Tensor:
        """The current threshold L = |m · L0| (a 0-d tensor, differentiable in m)."""
        return (self.threshold_scale * self.threshold_init).abs()

    def psi(self, x: torch.Tensor) -> torch.Tensor:
        """ψ(x) = log(|c|·x + 1), elementwise."""
        return torch.log1p(self.c.abs() * x)

    def normalized_distance(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """The MLP's input ψ(i − j) / (ψ(max(L, i)) + ε), (B, Tq, Tk), in the parameters' dtype."""
        dtype = self.c.dtype
        rel = (q_pos[:, :, None] - k_pos[:, None, :]).clamp(min=0).to(dtype)  # (B, Tq, Tk), i − j ≥ 0
        norm = torch.maximum(q_pos.to(dtype), self.threshold.to(dtype))  # (B, Tq): max(L, i), query position i
        return self.psi(rel) / (self.psi(norm) + self.eps)[:, :, None]  # (B, Tq, Tk)

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        q_one, k_one = shared_rows(q_pos), shared_rows(k_pos)  # (1|B, Tq), (1|B, Tk)
        if q_one.shape[0] == k_one.shape[0] == 1:  # the bias is evaluated once and broadcast over the batch
            q_pos, k_pos = q_one, k_one  # (1, Tq), (1, Tk)
        x = self.normalized_distance(q_pos, k_pos)  # (B|1, Tq, Tk)
        return self.mlp(x[..., None]).permute(0, 3, 1, 2)  # (B|1, Tq, Tk, H) -> (B|1, H, Tq, Tk)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, threshold_init={float(self.threshold_init):g}"
