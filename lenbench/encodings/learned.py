"""Learned absolute position embeddings (a trainable table, as in GPT-2 / BERT)."""

from __future__ import annotations

import torch
from torch import nn

from lenbench.encodings.base import EncodingDims, PositionalEncoding, register_encoding
from lenbench.encodings.params import int_param


@register_encoding("learned")
class Learned(PositionalEncoding):
    """A trainable `nn.Embedding` of `max_len` positions added to the token embedding
    (Gehring et al. 2017, "Convolutional Sequence to Sequence Learning"; Devlin et al. 2019, BERT).

    The table is sized to the suite's longest evaluation length by default, so its failure to
    extrapolate (rows never trained) is measured rather than skipped. Past `max_len` it raises.

    Args:
        dims: model geometry; `dims.max_len` is the default table size.
        max_len: table size override.
    """

    description = "trainable absolute position table (std 0.02); fails past its size"
    paper = "Gehring et al. 2017, Convolutional Sequence to Sequence Learning"

    def __init__(self, dims: EncodingDims, *, max_len: int | None = None):
        super().__init__(dims)
        self.max_len = int(dims.max_len if max_len is None else int_param(self.name, "max_len", max_len))
        self.table = nn.Embedding(self.max_len, dims.d_model)  # (L, D)
        nn.init.normal_(self.table.weight, mean=0.0, std=0.02)

    def embed(self, h: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        if pos.numel():
            need = int(pos.max()) + 1
            if need > self.max_len or int(pos.min()) < 0:
                raise ValueError(
                    f"encoding 'learned' cannot represent length {need}: its table holds "
                    f"max_len={self.max_len} positions (raise max_len to train a larger table)"
                )
        return h + self.table(pos)  # (B, T, D)
