"""lenbench: how far past its training length does each positional encoding hold up?"""

__version__ = "0.1.0"

# Pin the CPU's numeric code paths before torch computes anything in this process (see
# lenbench.numerics; LENBENCH_NUMERICS=native turns it off). A bad value is reported, in one
# line, where the mode is read (`numerics_tag`), not as an import error.
from lenbench import numerics as _numerics  # noqa: E402

try:
    _numerics.apply()
except _numerics.NumericsError:
    pass
