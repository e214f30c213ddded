"""An encoding plugin: ALiBi with steeper slopes (docs/add-encoding.md walks through it).

    lenbench run --suite examples/plugins/suite.yaml      # the suite lists this file under plugins:
    lenbench list encodings --plugin examples/plugins/alibi_steep.py
"""


from lenbench.encodings import EncodingDims, register_encoding
from lenbench.encodings.alibi import ALiBi, alibi_slopes


@register_encoding("alibi-steep")
class SteepALiBi(ALiBi):
    """ALiBi (Press et al. 2022) with every head's slope multiplied by `scale`: bias = −scale·m_h·(i − j).

    Args:
        dims: model geometry (heads, head size, longest position).
        scale: slope multiplier (> 0); 1 is ALiBi itself.
    """

    description = "ALiBi with slopes multiplied by `scale` (a plugin example)"
    paper = "Press et al. 2022, Train Short, Test Long (slopes scaled)"
    length_behaviour = "as ALiBi: a fixed distance penalty, defined at every length"

    def __init__(self, dims: EncodingDims, *, scale: float = 2.0):
        super().__init__(dims)
        if not scale > 0:
            raise ValueError(f"encoding 'alibi-steep': scale must be > 0, got {scale}")
        self.register_buffer("slopes", scale * alibi_slopes(dims.n_heads).float(), persistent=False)  # (H,)
