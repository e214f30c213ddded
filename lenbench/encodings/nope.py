"""NoPE: no positional information at all."""

from __future__ import annotations

from lenbench.encodings.base import PositionalEncoding, register_encoding


@register_encoding("nope")
class NoPE(PositionalEncoding):
    """No positional encoding (Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length
    Generalization in Transformers"; Haviv et al. 2022, "Transformer Language Models without
    Positional Encodings Still Learn Positional Information").

    Every hook is the identity. A bidirectional NoPE model is permutation-equivariant; a causal one
    still infers order from the causal mask (each token sees a different number of predecessors).
    """

    description = "no positional information; a causal mask alone carries order"
    paper = "Kazemnejad et al. 2023, The Impact of Positional Encoding on Length Generalization in Transformers"
