"""lenbench: how far past its training length does each positional encoding hold up?"""

__version__ = "0.1.0"
