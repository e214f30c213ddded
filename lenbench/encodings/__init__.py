"""Positional encodings: one module per family, all registered in `ENCODINGS`.

    >>> from lenbench.encodings import build_encoding, EncodingDims
    >>> enc = build_encoding("alibi", EncodingDims(d_model=64, n_heads=8))
"""

from lenbench.encodings import (  # noqa: F401  (registers)
    alibi,
    cope,
    fire,
    kerple,
    learned,
    nope,
    randomized,
    rope,
    sandwich,
    sinusoidal,
    t5,
    xpos,
)
from lenbench.encodings.base import (
    ENCODINGS,
    EncodingDims,
    PositionalEncoding,
    build_encoding,
    encoding_parameters,
    register_encoding,
)

__all__ = [
    "ENCODINGS",
    "EncodingDims",
    "PositionalEncoding",
    "build_encoding",
    "encoding_parameters",
    "register_encoding",
]


# The 2024–2025 frontier, listed after the catalog above (`lenbench list encodings` shows them
# last); the report's order and colours are declared by name in `lenbench.encoding_display`.
from lenbench.encodings import fox, stickbreaking, prope, ssmax, dape  # noqa: E402, F401, I001  (registers)
