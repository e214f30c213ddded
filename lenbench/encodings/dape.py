"""DAPE: data-adaptive positional encoding, a bias adapted by an MLP over the logits (Zheng et al. 2024)."""

from __future__ import annotations

import math

import torch
from torch import nn

from lenbench.encodings.base import (
    EncodingDims,
    PositionalEncoding,
    build_encoding,
    register_encoding,
    shared_rows,
)
from lenbench.encodings.params import int_param
from lenbench.encodings.ssmax import check_base, refuse_layer_hooks


@register_encoding("dape")
class DAPE(PositionalEncoding):
    """Data-Adaptive Positional Encoding (Zheng et al. 2024, "DAPE: Data-Adaptive Positional
    Encoding for Length Extrapolation", NeurIPS 2024, eq. 5): a base additive bias B (one value
    per head and (i, j)) is adapted by a small MLP f that reads, at each (i, j), the attention
    logits and the base bias of *all* heads,

        f: [z_ij^(1…H), B_ij^(1…H)] (2H) → Linear(2H, hidden) → LeakyReLU → Linear(hidden, H)
        logits_ij = z_ij + B_ij + f(z_ij, B_ij)             z = q·k/√Dh (unmasked)

    so the positional bias becomes a function of content as well as of distance. The residual
    form (B kept, f added) makes a zeroed last layer of f the base encoding exactly. One MLP per
    layer (as each attention layer of the paper's model has its own), nn.Linear's default
    initialisation; the base bias is shared by the layers as lenbench's bias encodings are. The
    causal / padding mask is added after f, so f never reads −inf and keys after the query never
    influence earlier outputs (f acts per (i, j)).

    The default base is KERPLE (log), the paper's main DAPE (Kerple-DAPE) results; `base: alibi`
    or `base: fire` are the paper's other bases.

    Checked against the authors' code (github.com/chuanyang-Zheng/DAPE, commit bde344a):
    - `ParallelKerpleLog_DAPE` and `AliBi_DAPE` (DAPE.py l. 295–401 and 96–195) return
      `x + bias + mlp2(cat(x, bias))` over the heads, `mlp2 = Linear(2H, mlp_width) → LeakyReLU →
      Linear(mlp_width, H)` (l. 337–340, 113–116) with PyTorch's default initialisation and
      slope 0.01; `mlp_width` is 32 in every config (configs/125M/512/125M_kerple_c.yml l. 24);
    - x is the attention scores q·k/√Dh before the mask (megatron/model/transformer.py: the
      scores l. 626–631, the DAPE call l. 666–667, the mask and softmax after it, l. 696);
    - one module per attention layer (transformer.py l. 471–472), so each layer has its own MLP,
      and also its own KERPLE (p, a). Here the base bias is shared by the layers, as lenbench's
      bias encodings are (`kerple` alone shares it too): the one deliberate difference. Their
      bias is 0 above the diagonal (a lower-triangular distance), ours |i − j|: those entries
      are masked either way.
    tests/encodings/test_frontier_authors.py holds `layer_bias` equal to both modules on the
    attended entries (where DAPE.py is importable); test_frontier.py holds it to a float64 loop.

    Length behaviour: evaluated past the training length exactly as trained (no inference-time
    variant). The base bias extrapolates as it does alone (KERPLE's log decay); f sees logit / bias
    pairs at the new distances, inside the value range of training when the base bias saturates
    slowly (KERPLE-log) — the MLP is applied per pair, never per position.

    Args:
        dims: model geometry; one MLP per layer.
        base: registered name of a bias encoding ("kerple").
        base_params: keyword parameters of the base encoding.
        hidden: the MLP's hidden width (32, the paper's D_DAPE).
    """

    description = "base bias + MLP across heads of [logits, bias] per (i, j); base kerple by default"
    paper = "Zheng et al. 2024, DAPE: Data-Adaptive Positional Encoding for Length Extrapolation"
    length_behaviour = "evaluated as trained: the base bias extrapolates as alone; the MLP is applied per (i, j) at the new distances"
    layer_dependent = True

    def __init__(self, dims: EncodingDims, *, base: str = "kerple", base_params: dict | None = None,
                 hidden: int = 32):
        super().__init__(dims)
        check_base(self.name, base, base_params)
        self.hidden = int_param(self.name, "hidden", hidden)
        self.base_name = base
        self.base_enc = build_encoding(base, dims, **(base_params or {}))
        refuse_layer_hooks(self.name, self.base_enc)
        kind = type(self.base_enc)
        if (self.base_enc.content_dependent or kind.bias is PositionalEncoding.bias
                or kind.rotate is not PositionalEncoding.rotate or kind.embed is not PositionalEncoding.embed):
            raise ValueError(f"encoding {self.name!r}: base = {base!r} is out of range (valid: an additive bias "
                             f"encoding such as kerple, alibi, t5, fire, sandwich)")
        self.causal_only = self.base_enc.causal_only  # instance attribute: FIRE is causal only
        H = dims.n_heads
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(2 * H, self.hidden), nn.LeakyReLU(), nn.Linear(self.hidden, H))
            for _ in range(dims.n_layers)
        )

    def square_planes(self) -> tuple[float, float]:
        """(2H + 3, 2·hidden + 4H): the MLP over every (query, key) pair's 2H features holds its
        input, its hidden activations before and after the LeakyReLU and its H outputs per sequence
        (measured ~2·hidden + 3H, tests/run/test_eval_memory_measured.py)."""
        h = self.dims.n_heads
        return 2.0 * h + 3, 2.0 * self.hidden + 4.0 * h

    def positions(self, pos: torch.Tensor) -> torch.Tensor:
        return self.base_enc.positions(pos)

    def adapt(self, logits: torch.Tensor, base_bias: torch.Tensor, layer: int) -> torch.Tensor:
        """B + f([logits, B]) for logits (B, H, Tq, Tk) and base bias (B|1, H, Tq, Tk): (B, H, Tq, Tk)."""
        base_bias = base_bias.to(logits.dtype).expand_as(logits)  # (B, H, Tq, Tk)
        feats = torch.cat((logits, base_bias), dim=1).permute(0, 2, 3, 1)  # (B, Tq, Tk, 2H)
        mlp = self.mlps[layer]
        adapted = mlp(feats.to(mlp[0].weight.dtype)).to(logits.dtype)  # (B, Tq, Tk, H)
        return base_bias + adapted.permute(0, 3, 1, 2)  # (B, H, Tq, Tk)

    def layer_bias(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor,
                   layer: int) -> torch.Tensor:
        if layer >= len(self.mlps):
            raise ValueError(f"encoding 'dape' has MLPs for {len(self.mlps)} layers, asked for layer {layer} "
                             f"(build it with EncodingDims(n_layers=...))")
        logits = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, T, T), as softmax sees them
        rows = shared_rows(pos)  # (1|B, T): one base bias for identical rows
        return self.adapt(logits, self.base_enc.bias(rows, rows), layer)  # (B, H, T, T)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, base={self.base_name!r}, hidden={self.hidden}, layers={len(self.mlps)}"
