"""Pilot only (not a lenbench change): token embeddings drawn N(0, 1/d_model), the variance-preserving scale (0.125 at d_model 64), instead of
GPT-2's N(0, 0.02); every other weight keeps lenbench's initialisation."""
import torch.nn as nn

from lenbench import model as _model

_gpt2_init = _model.Transformer._init_weights


def _init_weights(self) -> None:
    _gpt2_init(self)
    nn.init.normal_(self.tok.weight, std=self.cfg.d_model ** -0.5)


_model.Transformer._init_weights = _init_weights
