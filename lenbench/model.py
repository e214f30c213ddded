"""The small decoder Transformer that every positional encoding plugs into.

Pre-LN blocks (LayerNorm → attention → residual, LayerNorm → MLP → residual) on
`torch.nn.functional.scaled_dot_product_attention`. The encoding enters through its hooks:
`embed` on the token embeddings, `rotate` on queries and keys, `attention_bias` as an additive
attention mask. One encoding instance is shared by all layers; the layer hooks (`layer_bias`,
`layer_rotate`, `attend`), called only for an encoding that declares them, receive the layer's index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from lenbench.encodings import EncodingDims, PositionalEncoding, build_encoding
from lenbench.encodings.attention import attend
from lenbench.encodings.base import shared_rows


@dataclass
class ModelConfig:
    """Model geometry and its positional encoding.

    Args:
        vocab_size: number of token ids.
        d_model: residual width.
        n_layers: number of Transformer blocks.
        n_heads: attention heads (d_model must divide evenly).
        ff_mult: feed-forward hidden width as a multiple of d_model.
        dropout: dropout on attention weights and residual branches while training.
        causal: causal (decoder) or bidirectional attention.
        encoding: registered encoding name.
        encoding_params: keyword parameters of the encoding.
        max_len: longest sequence the model will be evaluated at (sizes tables such as `learned`).
        train_len: training length in tokens (None: unknown); length-relative encoding defaults
            derive from it (see `EncodingDims`).
        embedding_std: standard deviation of the token embeddings' normal initialisation.
    """

    vocab_size: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    ff_mult: int = 4
    dropout: float = 0.0
    causal: bool = True
    encoding: str = "rope"
    encoding_params: dict = field(default_factory=dict)
    max_len: int = 4096
    train_len: int | None = None
    embedding_std: float = 0.02

    def dims(self) -> EncodingDims:
        return EncodingDims(d_model=self.d_model, n_heads=self.n_heads, max_len=self.max_len, causal=self.causal,
                            train_len=self.train_len, n_layers=self.n_layers)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int = 0) -> None:
        super().__init__()
        self.layer = layer  # the index the encoding's layer hooks (`layer_bias`, `attend`) receive
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.dropout = cfg.dropout

    def forward(
        self,
        x: torch.Tensor,
        pos: torch.Tensor,
        enc: PositionalEncoding,
        mask: torch.Tensor | None,
        is_causal: bool,
    ) -> torch.Tensor:
        """`mask`: the additive (B|1, H|1, T, T) mask with the static bias already folded in, or None."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)  # 3 × (B, T, D)
        q, k, v = (t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
        if enc.rotates_per_layer:  # a rotation of this layer (the NoPE/RoPE hybrid)
            q, k = enc.layer_rotate(q, k, pos, self.layer)  # (B, H, T, Dh)
        else:
            q, k = enc.rotate(q, k, pos)  # (B, H, T, Dh) (PoPE: 2Dh); values are never rotated
        if enc.content_dependent:
            bias = enc.attention_bias(q, k, pos, pos).to(q.dtype)  # (B|1, H, T, T), recomputed per layer
            mask = bias if mask is None else bias + mask  # (B|1, H, T, T)
        if enc.layer_dependent:  # FoX, DAPE: a bias of this layer, read from its input x
            bias = enc.layer_bias(x, q, k, pos, self.layer)  # (B|1, H|1, T, T), or None: none in this layer
            if bias is not None:
                bias = bias.to(q.dtype)
                mask = bias if mask is None else bias + mask  # (B|1, H, T, T)
        if enc.replaces_softmax:  # stick-breaking, SSMax
            y = enc.attend(q, k, v, mask, self.dropout if self.training else 0.0, self.layer)  # (B, H, T, Dh)
        else:
            y = attend(q, k, v, mask, is_causal and mask is None, self.dropout if self.training else 0.0)  # (B, H, T, Dh)
        return self.out(y.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int = 0) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg, layer)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.ff_mult * cfg.d_model),
            nn.GELU(),
            nn.Linear(cfg.ff_mult * cfg.d_model, cfg.d_model),
        )
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, pos, enc, mask, is_causal) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), pos, enc, mask, is_causal))  # (B, T, D)
        return x + self.drop(self.mlp(self.ln2(x)))  # (B, T, D)


class Transformer(nn.Module):
    """Decoder-only (or bidirectional) pre-LN Transformer with a pluggable positional encoding.

    Example:
        >>> model = Transformer(ModelConfig(vocab_size=16, encoding="alibi"))
        >>> logits = model(torch.randint(0, 16, (2, 10)))  # (2, 10, 16)
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_enc = build_encoding(cfg.encoding, cfg.dims(), **cfg.encoding_params)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self) -> None:
        """Normal(0, 0.02) linear weights, Normal(0, `embedding_std`) token embeddings (0.02 by
        default, as GPT-2 / nanoGPT), zero biases.

        The encoding's own parameters (FIRE's MLP, the `learned` table …) keep the initialisation
        their encoding chose.
        """
        for name, m in self.named_modules():
            if name.startswith("pos_enc"):
                continue
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=self.cfg.embedding_std if m is self.tok else 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(
        self, tokens: torch.Tensor, pos: torch.Tensor | None = None, pad_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Next-token logits.

        Args:
            tokens: (B, T) token ids.
            pos: (B, T) integer positions; defaults to 0 … T−1 in every row.
            pad_mask: (B, T) bool, True at real tokens; padded keys are never attended to.

        Returns:
            (B, T, vocab_size) logits.
        """
        B, T = tokens.shape
        assert T >= 1, f"empty sequence (T={T})"
        if pos is None:
            pos = torch.arange(T, device=tokens.device).expand(B, T)  # (B, T)
        assert pos.shape == (B, T), f"pos has shape {tuple(pos.shape)}, expected {(B, T)}"
        enc = self.pos_enc
        pos = enc.positions(pos)  # (B, T), e.g. randomized positions while training
        x = self.drop(enc.embed(self.tok(tokens), pos))  # (B, T, D)
        mask = self._mask(pad_mask, B, T, tokens.device, x.dtype)  # (B, 1, T, T) or None
        is_causal = self.cfg.causal
        static_bias = None
        if not enc.content_dependent:
            # Rows with the same positions (the default 0 … T−1, or a batch without per-row offsets)
            # share one bias: computed once as (1, H, T, T) and broadcast over the batch.
            bias_pos = shared_rows(pos)  # (1|B, T)
            static_bias = enc.bias(bias_pos, bias_pos)  # (B|1, H, T, T) or None
        if mask is None and is_causal and (static_bias is not None or enc.content_dependent or enc.layer_dependent):
            mask = self._causal_mask(T, tokens.device, x.dtype)  # (1, 1, T, T)
        if static_bias is not None:
            # Folded into the mask once per forward, not once per layer.
            mask = static_bias.to(x.dtype) if mask is None else static_bias.to(x.dtype) + mask  # (B|1, H, T, T)
        for block in self.blocks:
            x = block(x, pos, enc, mask, is_causal)  # (B, T, D)
        return self.head(self.ln_f(x))  # (B, T, V)

    def _causal_mask(self, T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The additive causal mask (1, 1, T, T), cached for the last (T, device, dtype) seen."""
        key = (T, device, dtype, self.cfg.causal, torch.is_inference_mode_enabled())
        cached = getattr(self, "_causal_cache", None)
        if cached is None or cached[0] != key:
            cached = (key, self._mask(None, 1, T, device, dtype, force=True))  # (1, 1, T, T)
            self._causal_cache = cached
        return cached[1]

    def _mask(self, pad_mask, B, T, device, dtype, force: bool = False) -> torch.Tensor | None:
        """Additive float mask (B|1, 1, T, T): −inf where attention is forbidden, 0 elsewhere."""
        if pad_mask is None and not force:
            return None
        allowed = torch.ones(1, 1, T, T, dtype=torch.bool, device=device)  # (1, 1, T, T)
        if self.cfg.causal:
            allowed = allowed.tril()  # (1, 1, T, T)
        if pad_mask is not None:
            assert pad_mask.shape == (B, T), f"pad_mask has shape {tuple(pad_mask.shape)}, expected {(B, T)}"
            eye = torch.eye(T, dtype=torch.bool, device=device)  # (T, T): a padded query still sees itself, so no row is empty
            allowed = allowed & (pad_mask[:, None, None, :] | eye)  # (B, 1, T, T)
        zero = torch.zeros((), dtype=dtype, device=device)
        return torch.where(allowed, zero, torch.tensor(float("-inf"), dtype=dtype, device=device))  # (B|1, 1, T, T)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
