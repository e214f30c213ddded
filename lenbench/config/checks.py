"""Load-time checks of a suite file that `lenbench.config.parse` runs before any cell: duplicate YAML
keys, alias bombs, seeds the random number generators can hold, and encoding parameters.

- `read_yaml`: safe YAML (`yaml.SafeLoader`: no Python objects) that rejects a key given twice in
  one mapping, at any depth, where PyYAML would silently keep the last value, and a document whose
  aliases expand it past `MAX_VALUES` values (`TooManyValuesError`). PyYAML builds an alias as a
  shared reference, so a 500-byte "billion laughs" file loads in microseconds, but everything that
  walks the suite afterwards (the canonical JSON of a cell's id, an error message) expands it: 5.5 GB
  and two minutes before a `MemoryError`. The expanded size is counted on the composed node graph,
  each distinct node once, before any Python object is built; the largest preset holds about 400
  values, so the bound leaves a dense ratio list or a long plugin parameter ample room.
- `check_seed`: a seed is ``0 <= seed < SEED_LIMIT`` (2**32). A cell seeds
  ``torch.manual_seed(seed)`` and ``torch.Generator().manual_seed(seed)``, a fine-tune
  ``seed + 1`` (torch holds ``[-2**63, 2**64)``); results store the seed in an int64 column
  (pandas, numpy: ``< 2**63``); and numpy's and `random`'s classic seeding, should a task ever use
  it, takes ``[0, 2**32)``. 2**32 fits all of these, with room for the derived ``seed + 1``.
- `probe_encoding`: builds the encoding once for the suite's model width and heads, so a parameter
  out of range (RoPE's ``theta: 0``, a ``scaling`` factor below 1, a non-integer table size …)
  fails at load with the encoding's own one-line message, not later as a diverged training run.
  The range checks live in each encoding's constructor (`lenbench.encodings.params.number_param`).
- `probe_variant`: computes an inference-time variant's RoPE frequencies once for the suite's head
  width, so a pinned ``factor: -2`` (or a string where a number belongs) fails at load with the
  rope type's own one-line message, not as every length of every RoPE cell failing at run time.
  The range checks live in each rope type (`lenbench.encodings.rope_types`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

#: Seeds are 0 <= seed < SEED_LIMIT (module docstring).
SEED_LIMIT = 2**32
#: The most values a suite document may expand to, every scalar, list and mapping counted once per
#: place it appears (an alias counts as everything it repeats).
MAX_VALUES = 100_000


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


class TooManyValuesError(yaml.YAMLError):
    """A YAML document whose aliases expand it past `MAX_VALUES` values, or make a value contain itself.

    Attributes:
        line: the 1-based line of the value where the expansion first passes the bound (or of the
            value that contains itself).
        recursive: an alias inside the value it names.
    """

    def __init__(self, line: int, recursive: bool = False) -> None:
        what = ("holds an alias to itself" if recursive
                else f"expands, through its aliases (*name), past {MAX_VALUES} values")
        super().__init__(f"line {line}: the value here {what}")
        self.line, self.recursive = line, recursive


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_expanded_size(root: yaml.Node, limit: int = MAX_VALUES) -> int:
    """The number of values `root` expands to (each node counted at every place it appears), once it
    is at most `limit`.

    Walks the composed graph iteratively (no recursion on deep documents), each distinct node once,
    so the cost is the file's size, never the expansion's.

    Args:
        root: the composed document.
        limit: the bound.

    Raises:
        TooManyValuesError: past `limit` (at the smallest value past it), or a value that contains itself.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            if sizes[key] > limit:
                raise TooManyValuesError(node.start_mark.line + 1)
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise TooManyValuesError(node.start_mark.line + 1, recursive=True)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


class UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that raises `DuplicateKeyError` for a key repeated within one mapping.

    Keys merged in with ``<<:`` may be overridden, as YAML allows; only the mapping's own keys count.
    The document is refused (`TooManyValuesError`) before construction when its aliases expand it
    past `MAX_VALUES` values.
    """

    def construct_document(self, node: yaml.Node):
        check_expanded_size(node)
        return super().construct_document(node)

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
        TooManyValuesError: aliases that expand the document past `MAX_VALUES` values.
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


#: Training tokens and RoPE base the variant probe assumes (only the variant's parameters decide).
PROBE_TRAIN_TOKENS = 64
PROBE_BASE = 10000.0


def probe_variant(variant, d_model: int, n_heads: int) -> str:
    """"" when a suite variant's RoPE frequencies compute for the suite's head width, else the reason.

    A parameter the rope type's signature types as a number (``factor: float``, ``beta_fast: float |
    None``) must be a finite number (not a string, not .nan); the probe then takes the variant's
    factor as a run would (`scaling_for`: pinned, or the fine-tune ratio, or an oracle ratio of 2, and
    a length-adaptive type without a pinned factor is the factor mode's error) at
    `PROBE_TRAIN_TOKENS` training tokens and twice that length.

    Args:
        variant: a `lenbench.config.schema.VariantSpec`.
        d_model: the suite's model width.
        n_heads: the suite's number of heads.
    """
    import inspect
    import math

    from lenbench.encodings.rope_scaling import rope_parameters, scaling_for
    from lenbench.encodings.rope_types import ROPE_TYPES
    from lenbench.tasks.params import shown

    signature = inspect.signature(ROPE_TYPES.get(variant.rope_type)).parameters
    for key, value in variant.params.items():
        annotation = str(signature[key].annotation) if key in signature else ""
        if annotation.split(" | ")[0] not in ("float", "int") or (value is None and "None" in annotation):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"rope_type {variant.rope_type!r}: {key} = {shown(value)} is out of range (valid: a finite number)"
    # The rotated width: one head's, or the one a list of per-channel-pair factors (longrope's) is
    # written for, since `partial` rotation or a task's own model may rotate fewer channels.
    lists = [len(v) for v in variant.params.values() if isinstance(v, list)]
    dim = 2 * lists[0] if lists else max(2, d_model // n_heads // 2 * 2)
    ratio = variant.finetune_ratio if variant.finetune_steps else 2.0
    try:
        rope_parameters(scaling_for(variant, ratio, PROBE_TRAIN_TOKENS), dim, PROBE_BASE, 2 * PROBE_TRAIN_TOKENS)
    except ValueError as err:
        text = str(err).strip().splitlines()
        return text[0] if text else type(err).__name__
    except (TypeError, ArithmeticError) as err:
        given = ", ".join(f"{k}={shown(v)}" for k, v in variant.params.items())
        return f"rope_type {variant.rope_type!r}: parameters {given} do not compute ({err})"
    return ""
