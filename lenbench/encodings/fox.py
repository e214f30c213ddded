"""FoX: the Forgetting Transformer, softmax attention with a forget gate (Lin et al. 2025)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding
from lenbench.encodings.params import number_param


@register_encoding("fox")
class ForgettingAttention(PositionalEncoding):
    """Forgetting Attention (Lin et al. 2025, "Forgetting Transformer: Softmax Attention with a
    Forget Gate", ICLR 2025, eq. 4–6): every head h of every layer has a scalar forget gate per
    token, computed from the layer's input x_t (the normalised residual stream the attention reads),

        f_t = σ(w_h · x_t + b_h)                      in (0, 1)
        c_t = Σ_{l ≤ t} log f_l                        cumulative log-forget, (B, H, T)
        D_ij = Σ_{l=j+1}^{i} log f_l = c_i − c_j       ≤ 0 for keys j ≤ i (0 on the diagonal)

    and the logits become q_i · k_j / √Dh + D_ij: a key's weight decays by the product of the
    gates of the tokens after it. The diagonal is kept (D_ii = 0: a token attends to itself).

    Checked against the authors' code (github.com/zhixuan-lin/forgetting-transformer, commit
    883f260, src/forgetting_transformer/model/forgetting_transformer/modeling_forgetting_transformer.py):
    - the gate is their "full" (data-dependent) forget gate, `fgate_proj = nn.Linear(d_model,
      n_heads, bias=True)` per layer (l. 204–206), whose logits go through `logsigmoid` in float32
      (l. 343–346; float64 inputs stay float64 here);
    - initialised like every other linear layer of their model, weights N(0, initializer_range =
      0.02) and bias 0 (`_init_weights`, l. 641–651), so f ≈ σ(0) = 1/2 at the start;
    - no other positional encoding: their FoX (LLaMA) configs set `use_rope: false`
      (configs/experiment/longcrawl64/forgetting_transformer/llama_125m_2b.yaml l. 43);
    - the attention given log f equals flash-linear-attention's `naive_forgetting_attn`
      (fla/ops/forgetting_attn/naive.py, the implementation their README points to): the
      cumulative sum, D = c_i − c_j, causal mask with the diagonal, scale 1/√Dh —
      tests/encodings/test_frontier_authors.py, where fla-core is installed.
    The "Pro" block's extras (output gate, QK-norm, key/value shift) are architecture changes
    outside the encoding and are not included.

    Length behaviour: evaluated past the training length exactly as trained (no inference-time
    variant); nothing to extrapolate beyond the gates. D depends on the tokens between key and
    query, not on positions, so a longer input only adds more gate factors of the kind seen in
    training; how far back a head can see is whatever decay its gates learned.

    The bias is a difference of cumulative sums (c_i − c_j) of a (B, H, T) vector: a fused kernel
    needs only that vector as a score modifier, never a (T, T) table. Here it is materialised as a
    (B, H, T, T) additive bias (the eager reference); `score_vector` declares c for the fused
    flex kernel (`lenbench.kernels.layer`). Causal only: the cumulative sum runs forward.

    Args:
        dims: model geometry; one gate per layer (`dims.n_layers`).
        init_std: standard deviation of the gate weights' normal initialisation (the authors'
            `initializer_range`, 0.02).
    """

    description = "per-head data-dependent forget gate f = σ(w·x + b); logits += Σ log f between key and query"
    paper = "Lin et al. 2025, Forgetting Transformer: Softmax Attention with a Forget Gate"
    length_behaviour = "evaluated as trained: the decay is a product of the gates in between, not of positions; nothing to rescale"
    causal_only = True
    layer_dependent = True

    def __init__(self, dims: EncodingDims, *, init_std: float = 0.02):
        super().__init__(dims)
        self.init_std = number_param(self.name, "init_std", init_std, strict=False)
        self.gates = nn.ModuleList(nn.Linear(dims.d_model, dims.n_heads, bias=True) for _ in range(dims.n_layers))
        for gate in self.gates:
            nn.init.normal_(gate.weight, std=self.init_std)  # (H, D)
            nn.init.zeros_(gate.bias)  # (H,)

    def square_planes(self) -> tuple[float, float]:
        """(2H + 3, 3H): the layer's (B, H, T, T) decay bias beside the scores (measured ~2.1H per
        sequence, tests/run/test_eval_memory_measured.py)."""
        h = self.dims.n_heads
        return 2.0 * h + 3, 3.0 * h

    def log_forget(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """log f_t per head, (B, H, T), from the layer input x (B, T, D): float32 at least (float64 stays)."""
        logits = self.gates[layer](x)  # (B, T, H)
        work = torch.float64 if logits.dtype == torch.float64 else torch.float32
        return F.logsigmoid(logits.to(work)).transpose(1, 2)  # (B, H, T)

    def decay(self, log_f: torch.Tensor) -> torch.Tensor:
        """D_ij = c_i − c_j for log-forget values (B, H, T): (B, H, Tq, Tk) with queries aligned to the
        last keys; −inf for keys after the query."""
        c = log_f.cumsum(-1)  # (B, H, T)
        T = c.shape[-1]
        d = c[..., :, None] - c[..., None, :]  # (B, H, T, T)
        future = torch.ones(T, T, dtype=torch.bool, device=c.device).triu(1)  # (T, T): key after query
        return d.masked_fill(future, float("-inf"))  # (B, H, T, T)

    def _check_layer(self, layer: int) -> None:
        if layer >= len(self.gates):
            raise ValueError(f"encoding 'fox' has gates for {len(self.gates)} layers, asked for layer {layer} "
                             f"(build it with EncodingDims(n_layers=...))")

    def layer_bias(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor,
                   layer: int) -> torch.Tensor:
        self._check_layer(layer)
        return self.decay(self.log_forget(x, layer))  # (B, H, T, T)

    def score_vector(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """c_t = Σ_{l ≤ t} log f_l (B, H, T): the kernel declaration (D_ij = c_i − c_j), for the flex path."""
        self._check_layer(layer)
        return self.log_forget(x, layer).cumsum(-1)  # (B, H, T)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, layers={len(self.gates)}"
