"""Positional encodings: one module per family, each registering itself in `ENCODINGS` on import.

Every public module of this package is imported here (`lenbench.registry.import_members`), so a new
encoding is one new file; the report's order and colours are declared by name in
`lenbench.encoding_display` (an encoding not named there sorts after those that are).

    >>> from lenbench.encodings import build_encoding, EncodingDims
    >>> enc = build_encoding("alibi", EncodingDims(d_model=64, n_heads=8))
"""

from lenbench.encodings.base import (
    ENCODINGS,
    EncodingDims,
    PositionalEncoding,
    build_encoding,
    encoding_parameters,
    register_encoding,
)
from lenbench.registry import import_members

__all__ = [
    "ENCODINGS",
    "EncodingDims",
    "PositionalEncoding",
    "build_encoding",
    "encoding_parameters",
    "register_encoding",
]

import_members(__name__, __path__)
