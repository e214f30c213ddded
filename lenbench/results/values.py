"""One stored value as its column's type, whatever the source wrote (JSON, a CSV string, pandas).

Missing values (None, NaN, pandas' NA, "") become the column's empty value; anything else that is
not of the type is a ValueError the frame loader turns into a one-line `ResultsError`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lenbench.metrics import encode_samples


def is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA


def to_float(v: Any) -> float:
    if is_missing(v) or (isinstance(v, str) and v.strip() in ("", "None", "null")):
        return float("nan")
    return float(v)  # exact for repr()-written floats (pandas' own CSV parser is not always)


def to_int(v: Any, default: int | None = None) -> int:
    if is_missing(v) or (isinstance(v, str) and v.strip() == ""):
        if default is None:
            raise ValueError("missing value")
        return default
    f = float(v)
    if f != int(f):
        raise ValueError(f"{v!r} is not an integer")
    return int(f)


def to_bool(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    s = str(v).strip().lower()
    if s in ("true", "1", "1.0"):
        return True
    if s in ("false", "0", "0.0"):
        return False
    raise ValueError(f"{v!r} is not a boolean")


def to_str(v: Any) -> str:
    return "" if is_missing(v) else str(v)


def samples_str(v: Any) -> str:
    """sample_scores as its compact string: a string is kept, a list of numbers or of
    [numerator, denominator] pairs is encoded (`lenbench.metrics.encode_samples`)."""
    if isinstance(v, (list, tuple)):
        pairs = [(x[0], x[1]) if isinstance(x, (list, tuple)) else (x, 1) for x in v]
        return encode_samples([float(n) for n, _ in pairs], [float(d) for _, d in pairs])
    return to_str(v)
