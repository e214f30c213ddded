"""PaTH attention: positions as accumulated data-dependent Householder-like transforms (Yang et al. 2025)."""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding
from lenbench.encodings.params import int_param, number_param

#: fla's `l2_norm` epsilon (fla/modules/l2norm.py: rstd = 1 / sqrt(Σ x² + eps)).
L2_EPS = 1e-6
#: Queries and keys are processed in blocks of this many tokens (fla's naive reference: 64); the
#: block size changes only the order of floating-point operations, never the result.
CHUNK = 32


def path_scores(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, beta: torch.Tensor,
                chunk: int = CHUNK) -> torch.Tensor:
    """S_ij = q_i · (H_i H_{i−1} ⋯ H_{j+1}) k_j with H_t = I − β_t w_t w_tᵀ, for keys j ≤ i.

    Blockwise (the UT transform of Yang et al. 2025 §3.2, as fla's `naive_path_attn` computes it):
    inside a block of C tokens the products are read off one unit-lower-triangular solve,

        M = I + strict_tril(diag(β) W Wᵀ),   U = M⁻¹ strict_tril(diag(β) W Kᵀ),   Tw = M⁻¹ diag(β) W
        S_local = tril(Q Kᵀ) − tril(Q Wᵀ) U

    queries are carried to the start of their block (q̃ = q − tril(Q Wᵀ) Tw), keys to its end
    (k̃ = k − Uᵀ W), and a query walks back over whole blocks by their products G = I − Wᵀ Tw
    (D×D, applied to the row vector q̃ᵀ), one block distance at a time for every block at once.

    Args:
        q, k: (B, H, T, Dh) queries and keys (float32 or float64).
        w: (B, H, T, Dh) the transforms' directions (unit, or 0 for the identity).
        beta: (B, H, T) their strengths β_t (2: a reflection; 0: the identity).
        chunk: the block size C.

    Returns:
        (B, H, T, T) S on and below the diagonal, 0 above it.
    """
    B, H, T, Dh = q.shape
    C = min(chunk, T)
    n = -(-T // C)
    pad = n * C - T
    if pad:  # padded tokens come last: w = β = 0 is the identity, and nothing reads their scores
        q, k, w = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, w))  # (B, H, nC, Dh)
        beta = F.pad(beta, (0, pad))  # (B, H, nC)
    q, k, w = (t.reshape(B, H, n, C, Dh) for t in (q, k, w))  # (B, H, n, C, Dh)
    wb = w * beta.reshape(B, H, n, C, 1)  # (B, H, n, C, Dh): β_t w_t
    strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)  # (C, C): s < t
    incl = strict | torch.eye(C, dtype=torch.bool, device=q.device)  # (C, C): s ≤ t
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    M = eye + (wb @ w.transpose(-1, -2)).masked_fill(~strict, 0.0)  # (B, H, n, C, C) unit lower triangular
    Tw = torch.linalg.solve_triangular(M, wb, upper=False, unitriangular=True)  # (B, H, n, C, Dh)
    U = torch.linalg.solve_triangular(M, (wb @ k.transpose(-1, -2)).masked_fill(~strict, 0.0), upper=False,
                                      unitriangular=True)  # (B, H, n, C, C): U[t, j] = β_t w_t · (H_{t−1}⋯H_{j+1} k_j)
    qw = (q @ w.transpose(-1, -2)).masked_fill(~incl, 0.0)  # (B, H, n, C, C)
    local = (q @ k.transpose(-1, -2)).masked_fill(~incl, 0.0) - qw @ U  # (B, H, n, C, C)
    blocks, rows, cols = [local], [torch.arange(n)], [torch.arange(n)]
    if n > 1:
        q_walk = q - qw @ Tw  # (B, H, n, C, Dh): q̃ᵀ = qᵀ H_i ⋯ H_(block start)
        k_end = k - U.transpose(-1, -2) @ w  # (B, H, n, C, Dh): k̃ = H_(block end) ⋯ H_{j+1} k
        G = torch.eye(Dh, dtype=q.dtype, device=q.device) - w.transpose(-1, -2) @ Tw  # (B, H, n, Dh, Dh)
        for d in range(1, n):  # block distance d: query blocks d … n−1 against key blocks 0 … n−1−d
            blocks.append(q_walk[:, :, d:] @ k_end[:, :, : n - d].transpose(-1, -2))  # (B, H, n−d, C, C)
            rows.append(torch.arange(d, n))
            cols.append(torch.arange(0, n - d))
            if d < n - 1:
                q_walk = torch.cat((q_walk[:, :, :d], q_walk[:, :, d:] @ G[:, :, : n - d]), dim=2)  # (B, H, n, C, Dh)
    grid = q.new_zeros(n, n, B, H, C, C)  # (n, n, B, H, C, C): block (query block, key block)
    grid = grid.index_put((torch.cat(rows).to(q.device), torch.cat(cols).to(q.device)),
                          torch.cat(blocks, dim=2).permute(2, 0, 1, 3, 4))
    S = grid.permute(2, 3, 0, 4, 1, 5).reshape(B, H, n * C, n * C)  # (B, H, nC, nC)
    return S[:, :, :T, :T]  # (B, H, T, T)


class _PaTHBase(PositionalEncoding):
    """PaTH (and PaTH-FoX): see `PaTH`. Not registered; `forget_gate` says which."""

    causal_only = True
    layer_dependent = True
    forget_gate: ClassVar[bool] = False
    slow_cpu_compile = ("torch.compile unrolls the UT transform's chunk loop: its first compiled call took 530 s at "
                        "T = 1024 on a 2-core CPU, and the compiled kernel ran slower than the eager one (path 134 vs "
                        "119 ms, path-fox 161 vs 98 ms; docs/frontier-encodings.md)")

    def __init__(self, dims: EncodingDims, *, w_rank: int | None = 32, short_conv: bool = True, conv_size: int = 3,
                 init_std: float = 0.02):
        super().__init__(dims)
        if w_rank is not None:
            w_rank = int_param(self.name, "w_rank", w_rank)
        if not isinstance(short_conv, bool):
            raise ValueError(f"encoding {self.name!r}: short_conv = {short_conv!r} is out of range (valid: true or false)")
        self.conv_size = int_param(self.name, "conv_size", conv_size)
        self.init_std = number_param(self.name, "init_std", init_std, strict=False)
        self.w_rank, self.short_conv = w_rank, short_conv
        D, H = dims.d_model, dims.n_heads

        def w_proj() -> nn.Module:
            if w_rank is None:
                return nn.Linear(D, D, bias=False)
            return nn.Sequential(nn.Linear(D, w_rank, bias=False), nn.Linear(w_rank, D, bias=False))

        self.w_proj = nn.ModuleList(w_proj() for _ in range(dims.n_layers))
        self.w_conv = nn.ModuleList(nn.Conv1d(D, D, self.conv_size, groups=D, bias=False) for _ in range(dims.n_layers)
                                    ) if short_conv else None
        self.beta_proj = nn.ModuleList(nn.Linear(D, H, bias=True) for _ in range(dims.n_layers))
        self.gates = nn.ModuleList(nn.Linear(D, H, bias=True) for _ in range(dims.n_layers)) if self.forget_gate else None
        for m in self.modules():  # the authors' _init_weights: N(0, initializer_range), biases 0
            if isinstance(m, (nn.Linear, nn.Conv1d)):
                nn.init.normal_(m.weight, std=self.init_std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def square_planes(self) -> tuple[float, float]:
        """(2H + 3, 5H): the Householder products' (B, H, T, T) correction, the scores and their
        softmax (measured ~4.1H per sequence with and without the forget gate,
        tests/run/test_eval_memory_measured.py)."""
        h = self.dims.n_heads
        return 2.0 * h + 3, 5.0 * h

    def _check_layer(self, layer: int) -> None:
        if layer >= len(self.w_proj):
            raise ValueError(f"encoding {self.name!r} has transforms for {len(self.w_proj)} layers, asked for layer "
                             f"{layer} (build it with EncodingDims(n_layers=...))")

    def transforms(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(w, β) of layer `layer` from its input x (B, T, D): w (B, H, T, Dh) unit directions (l2 norm
        with fla's epsilon), β = 2σ(·) (B, H, T); float32 at least (float64 stays)."""
        self._check_layer(layer)
        B, T, D = x.shape
        H = self.dims.n_heads
        work = torch.float64 if x.dtype == torch.float64 else torch.float32
        w = self.w_proj[layer](x)  # (B, T, D)
        if self.w_conv is not None:  # causal depthwise convolution over time, then SiLU
            K = self.conv_size
            w = F.silu(self.w_conv[layer](F.pad(w.transpose(1, 2), (K - 1, 0)))).transpose(1, 2)  # (B, T, D)
        w = w.reshape(B, T, H, D // H).transpose(1, 2).to(work)  # (B, H, T, Dh)
        w = w * torch.rsqrt((w * w).sum(-1, keepdim=True) + L2_EPS)  # (B, H, T, Dh)
        beta = 2 * torch.sigmoid(self.beta_proj[layer](x).to(work)).transpose(1, 2)  # (B, H, T) in (0, 2)
        return w, beta

    def log_forget(self, x: torch.Tensor, layer: int) -> torch.Tensor | None:
        """log f_t (B, H, T) of PaTH-FoX's gate (FoX's, `logsigmoid` in float32 at least); None without a gate."""
        if self.gates is None:
            return None
        logits = self.gates[layer](x)  # (B, T, H)
        work = torch.float64 if logits.dtype == torch.float64 else torch.float32
        return F.logsigmoid(logits.to(work)).transpose(1, 2)  # (B, H, T)

    def layer_bias(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor,
                   layer: int) -> torch.Tensor:
        """(S_ij − q_i·k_j + c_i − c_j) / √Dh for keys j ≤ i, −inf after the query (B, H, T, T): added to
        the model's logits q_i·k_j / √Dh, it leaves the authors' (S_ij + c_i − c_j) / √Dh."""
        w, beta = self.transforms(x, layer)
        work = w.dtype
        q, k = q.to(work), k.to(work)
        S = path_scores(q, k, w, beta)  # (B, H, T, T)
        extra = S - q @ k.transpose(-1, -2)  # (B, H, T, T): what the transforms change
        log_f = self.log_forget(x, layer)
        if log_f is not None:
            c = log_f.cumsum(-1)  # (B, H, T)
            extra = extra + (c[..., :, None] - c[..., None, :])  # (B, H, T, T)
        T = q.shape[-2]
        future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)  # (T, T)
        return (extra / math.sqrt(q.shape[-1])).masked_fill(future, float("-inf"))  # (B, H, T, T)

    def extra_repr(self) -> str:
        return (f"name={self.name!r}, layers={len(self.w_proj)}, w_rank={self.w_rank}, short_conv={self.short_conv}, "
                f"conv_size={self.conv_size}")


@register_encoding("path")
class PaTH(_PaTHBase):
    """PaTH attention (Yang et al. 2025, "PaTH Attention: Position Encoding via Accumulating Householder
    Transformations", NeurIPS 2025, eq. 2–3): instead of RoPE's fixed rotations, every token t of
    every layer emits a Householder-like transform H_t = I − β_t w_t w_tᵀ (per head), read from the
    layer's input x_t, and a key is carried to its query through the transforms of the tokens after it:

        w_t = l2norm(SiLU(causal_conv(W_up W_down x)))_h     β_t = 2 σ(b_h · x_t + b0_h) ∈ (0, 2)
        logits_ij = q_iᵀ (H_i H_{i−1} ⋯ H_{j+1}) k_j / √Dh       for j ≤ i (the diagonal: q_i·k_i / √Dh)

    β = 2 makes H_t an exact reflection (orthogonal: norms preserved); β = 0 or w = 0 is the
    identity (NoPE attention); β ∈ (1, 2) gives negative eigenvalues, which the authors allow.

    Checked against the authors' code (flash-linear-attention, commit bc3b101, fla/layers/path_attn.py):
    - w: the low-rank `w_proj = Sequential(Linear(d, 32), Linear(32, d))` (l. 62–66; `w_rank: null`
      is their full `Linear(d, d)`, l. 70), a `ShortConvolution` of size 3 with SiLU and no bias
      (l. 80–81, 117–118), l2-normalised per head in float32 (l. 124; eps 1e-6, fla/modules/l2norm.py);
    - β: `bt_proj = Linear(d, H, bias=True)` (l. 83), `sigmoid() * 2` in float32 (l. 111);
    - every weight N(0, initializer_range = 0.02), biases 0 (fla/models/path_attn/modeling_path_attention.py,
      `_init_weights`); no other positional encoding (the layer has no rotary embedding);
    - the transforms act between key and query in this order: their decoding step updates every
      cached key by the new token's H before appending its key (`rank_one_update`, l. 149–157);
    - the attention equals fla's `naive_path_attn` (fla/ops/path_attn/naive.py, fla-core 0.6.0) run in
      float64 — tests/encodings/test_frontier_authors.py, where fla-core is installed.
    Computed blockwise by the UT transform (`path_scores`) as the (B, H, T, T) logits, and entered
    through `layer_bias` as their difference from q_i·k_j / √Dh.

    Length behaviour: evaluated past the training length exactly as trained (no inference-time
    variant): the transform between key and query depends on the tokens between them, not on
    positions, so a longer input only multiplies more transforms of the kind seen in training.

    Args:
        dims: model geometry (causal only); one set of projections per layer (`dims.n_layers`).
        w_rank: rank of w's projection (32, the authors' `use_low_rank_w`); null: a full d × d projection.
        short_conv: the causal convolution (with SiLU) on w (true, the authors' `use_w_shortconv`).
        conv_size: its kernel size (3, the authors' `conv_size`).
        init_std: standard deviation of the projections' normal initialisation (0.02).
    """

    description = "data-dependent Householder-like transforms I − βwwᵀ accumulated between key and query"
    paper = "Yang et al. 2025, PaTH Attention: Position Encoding via Accumulating Householder Transformations"
    length_behaviour = "evaluated as trained: the transforms between key and query depend on the tokens, not on positions"


@register_encoding("path-fox")
class PaTHFoX(_PaTHBase):
    """PaTH-FoX (Yang et al. 2025, "PaTH Attention: Position Encoding via Accumulating Householder
    Transformations", NeurIPS 2025, §3.4): PaTH's transforms (`PaTH`) with FoX's data-dependent forget
    gate (Lin et al. 2025, `fox`) added to the logits,

        f_t = σ(g_h · x_t + g0_h)      c_t = Σ_{l ≤ t} log f_l
        logits_ij = (q_iᵀ (H_i ⋯ H_{j+1}) k_j + c_i − c_j) / √Dh      for j ≤ i

    Checked against the authors' code (flash-linear-attention, commit bc3b101): the gate is
    `g_proj = Linear(d, H, bias=True)` with `logsigmoid` in float32 (fla/layers/path_attn.py l. 85–86,
    112); the cumulative log gates are added to the raw scores **before** the 1/√Dh scale, as both
    their kernel (fla/ops/path_attn/parallel_path_fwd.py l. 106–107: `(b_s + g_q − g_k) * sm_scale`)
    and their `naive_path_attn` (`(A * scale).softmax` after `A + g_cumsum`, naive.py l. 94–95) do —
    unlike `fox`, whose decay is added after it. Initialised as PaTH (N(0, 0.02), bias 0).

    Length behaviour: evaluated past the training length exactly as trained (no inference-time
    variant): transforms and decay both depend on the tokens between key and query, not on positions.

    Args:
        dims: model geometry (causal only); one set of projections and one gate per layer.
        w_rank: rank of w's projection (32); null: a full d × d projection.
        short_conv: the causal convolution (with SiLU) on w (true).
        conv_size: its kernel size (3).
        init_std: standard deviation of the projections' and the gate's initialisation (0.02).
    """

    description = "PaTH's transforms I − βwwᵀ between key and query plus FoX's forget gate Σ log f"
    paper = "Yang et al. 2025, PaTH Attention: Position Encoding via Accumulating Householder Transformations"
    length_behaviour = "evaluated as trained: transforms and decay depend on the tokens between key and query, not on positions"
    forget_gate = True
