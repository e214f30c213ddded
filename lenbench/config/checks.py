"""Load-time checks of a suite file that `lenbench.config.parse` runs before any cell: duplicate YAML
keys, seeds the random number generators can hold, and encoding parameters.

- `read_yaml`: safe YAML (`yaml.SafeLoader`: no Python objects) that rejects a key given twice in
  one mapping, at any depth, where PyYAML would silently keep the last value.
- `check_seed`: a seed is ``0 <= seed < SEED_LIMIT`` (2**32). A cell seeds
  ``torch.manual_seed(seed)`` and ``torch.Generator().manual_seed(seed)``, a fine-tune
  ``seed + 1`` (torch holds ``[-2**63, 2**64)``); results store the seed in an int64 column
  (pandas, numpy: ``< 2**63``); and numpy's and `random`'s classic seeding, should a task ever use
  it, takes ``[0, 2**32)``. 2**32 fits all of these, with room for the derived ``seed + 1``.
- `probe_encoding`: builds the encoding once for the suite's model width and heads, so a parameter
  out of range (RoPE's ``theta: 0``, a ``scaling`` factor below 1, a non-integer table size …)
  fails at load with the encoding's own one-line message, not later as a diverged training run.
  The range checks live in each encoding's constructor (`lenbench.encodings.base.number_param`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

#: Seeds are 0 <= seed < SEED_LIMIT (module docstring).
SEED_LIMIT = 2**32


class DuplicateKeyError(yaml.YAMLError):
    """A mapping of a YAML file gives one key twice.

    Attributes:
        key: the repeated key.
        line: the 1-based line of the repeat.
        first: the 1-based line of the first occurrence.
    """

    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(f"line {line}: duplicate key {key!r} (first given on line {first})")
        self.key, self.line, self.first = key, line, first


class UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that raises `DuplicateKeyError` for a key repeated within one mapping.

    Keys merged in with ``<<:`` may be overridden, as YAML allows; only the mapping's own keys count.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeLoader itself reports it
                continue
            if first is not None:
                raise DuplicateKeyError(key, key_node.start_mark.line + 1, first)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> Any:
    """The YAML document of `path`, read safely, rejecting duplicate keys.

    Args:
        path: a UTF-8 YAML file.

    Raises:
        DuplicateKeyError: a key given twice in one mapping.
        yaml.YAMLError: not valid YAML.
        UnicodeDecodeError: not UTF-8 text.
    """
    return yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)


def check_seed(seed: int) -> str:
    """"" for a valid seed, else the range in words for the one-line error.

    Args:
        seed: an integer seed of the suite.
    """
    if seed < 0:
        return ">= 0"
    if seed >= SEED_LIMIT:
        return f"0 <= seed < 2**32 = {SEED_LIMIT}"
    return ""


def probe_encoding(name: str, params: dict, d_model: int, n_heads: int) -> str:
    """"" when encoding `name` builds with `params` for the suite's model, else the reason (one line).

    The probe uses the model's width and heads with the shortest possible length (``max_len`` 1)
    and an unknown training length (the encodings' paper defaults), so that only the parameters,
    not the lengths of a particular cell, decide. The global random state is left as it was.

    Args:
        name: a registered encoding.
        params: its parameters from the suite.
        d_model: the suite's model width.
        n_heads: the suite's number of heads.
    """
    import torch

    from lenbench.encodings import EncodingDims, build_encoding

    try:
        with torch.random.fork_rng(devices=[]):
            build_encoding(name, EncodingDims(d_model=d_model, n_heads=n_heads, max_len=1, causal=True), **params)
    except (ValueError, TypeError, KeyError) as err:
        text = str(err).strip().splitlines()
        return text[0] if text else type(err).__name__
    return ""
