"""The encoding interface: one class per encoding, up to three hooks.

Every encoding subclasses `PositionalEncoding` and overrides only the hooks it needs:

| hook                                  | family                          | returns                           |
| ------------------------------------- | ------------------------------- | --------------------------------- |
| `positions(pos)`                      | position remapping (randomized) | the positions the other hooks see |
| `embed(h, pos)`                       | absolute (sinusoidal, learned)  | `h` with position information     |
| `rotate(q, k, pos)`                   | rotary (RoPE, its variants)     | rotated `(q, k)`; values untouched |
| `bias(q_pos, k_pos)`                  | additive bias (ALiBi, T5, …)    | `(B|1, H, Tq, Tk)` additive bias  |
| `attention_bias(q, k, q_pos, k_pos)`  | content-dependent bias (CoPE)   | as `bias`, may read q and k       |
| `layer_bias(x, q, k, pos, layer)`     | per-layer bias (FoX, DAPE)      | as `bias`, may read the layer input |
| `layer_rotate(q, k, pos, layer)`      | per-layer rotation (hybrid)     | as `rotate`, for that layer       |
| `attend(q, k, v, mask, p, layer)`     | softmax replaced (stick-breaking, SSMax) | the attention output     |

Positions are always explicit integer tensors `pos` of shape `(B, T)`; no hook builds an
`arange` of its own, so padding, offsets and randomized positions need no special case.

One encoding instance serves every layer of the model (T5 shares its bias table across layers
the same way), and a static bias is computed once per forward pass, not once per layer.

Declare your kernel family. `lenbench.kernels` picks an encoding's fused forward kernels from
what the class declares, never from its name, so a new encoding touches only its own module:

| declaration                       | default  | what it gets                                           |
| --------------------------------- | -------- | ------------------------------------------------------ |
| the hook it overrides             |          | its kind: `replaces_softmax = True` → attend,          |
|                                   |          | `layer_dependent = True` → layer (these two first,     |
|                                   |          | whatever else the class overrides), `content_dependent |
|                                   |          | = True` → content, `rotate` → rotary, `bias` → bias,   |
|                                   |          | `embed` → absolute; none → nothing to fuse (a          |
|                                   |          | wrapper's `inner` is read instead); layer and attend:  |
|                                   |          | eager (one layer's attention as the model runs it) and |
|                                   |          | compiled (the same function through torch.compile)     |
| `relative_only: ClassVar[bool]`   | False    | True: `bias` is a function of k_pos − q_pos alone (per |
|                                   |          | head); then `toeplitz` attention (SDPA over strided    |
|                                   |          | views of a per-distance table) instead of              |
|                                   |          | `cached_blocks`, and a per-distance table in the flex  |
|                                   |          | score modifier instead of the materialised bias        |
| `relative_bias(distances)`        | via bias | (H, R) bias at each k_pos − q_pos: the table those     |
|                                   |          | paths read (override when the `bias` hook is costly)   |
| `closed_form_bias()`              | None     | a `ClosedFormBias` (relative-only biases): the flex    |
|                                   |          | score modifier evaluates it per score, no table        |
| `pair_rotation(pos, dtype)`       | None     | a `PairRotation` (rotary: x1·cos − x2·sin,             |
|                                   |          | x2·cos + x1·sin per channel pair): the one compiled    |
|                                   |          | kernel rotating q and k together; None: `rotate` is    |
|                                   |          | compiled as it is                                      |
| `score_vector(x, layer)`          | None     | a (B, H, T) vector c (layer kind): the layer's whole   |
|                                   |          | bias is c_i − c_j for keys j ≤ i (FoX's cumulative log |
|                                   |          | forget gates; no other bias); then `flex` attention    |
|                                   |          | with the score modifier c[b, h, q] − c[b, h, kv] and a |
|                                   |          | causal block mask, no (T, T) tensor                    |
| `kernel_comparisons()`            | ()       | extra implementations timed beside those: "hf"         |
|                                   |          | (rotary, when `rotate` equals transformers'            |
|                                   |          | rotate_half over the whole head), "flex_gather" (a     |
|                                   |          | closed form, positions always gathered)                |

A wrong declaration shows: the kernel tests (tests/kernels) and every `pytest bench` kernel
benchmark check each fused implementation equal to the eager hooks before timing it.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from lenbench.registry import Registry, check_keywords

# Position rows whose derived tables an encoding keeps across forward passes (`position_tables`).
TABLE_CACHE_SIZE = 256


def shared_rows(pos: torch.Tensor, *, compare_values: bool = True) -> torch.Tensor:
    """`pos[:1]` when every row of the (B, T) positions is the first one, else `pos`.

    A table or bias built from positions alone is then built once and broadcast over the batch
    (the model's default 0 … T−1 in every row, or a batch without per-row offsets). Rows are
    known equal without looking when B = 1 or the rows are one broadcast row (stride 0);
    otherwise they are compared element by element, a host sync on an accelerator, which
    `compare_values=False` skips (then only the two cheap cases collapse).

    Example:
        >>> shared_rows(torch.arange(4).expand(3, 4)).shape
        torch.Size([1, 4])
    """
    if pos.shape[0] == 1 or pos.stride(0) == 0 or (compare_values and bool((pos[1:] == pos[:1]).all())):
        return pos[:1]  # (1, T)
    return pos  # (B, T)


@dataclass(frozen=True)
class EncodingDims:
    """The model geometry an encoding is built for.

    Args:
        d_model: width of the residual stream.
        n_heads: number of attention heads.
        max_len: the longest sequence the model will see (the suite's longest evaluation
            length); tables such as `learned` are sized from it unless told otherwise.
        causal: whether attention is causal (decoder) or bidirectional.
        train_len: the training length in tokens (the longest sequence trained on), or None when
            unknown. Encodings whose papers tie a hyperparameter to it derive their default from it
            (FIRE's threshold, T5's max_distance, RoPE's original_max_position_embeddings).
        n_layers: the number of layers sharing the encoding; encodings with per-layer parameters
            (FoX's forget gates, DAPE's MLPs, SSMax's scales) keep one set per layer.
    """

    d_model: int
    n_heads: int
    max_len: int = 4096
    causal: bool = True
    train_len: int | None = None
    n_layers: int = 1

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.train_len is not None and self.train_len < 1:
            raise ValueError(f"train_len={self.train_len} must be a positive number of tokens (or None when unknown)")
        if isinstance(self.n_layers, bool) or not isinstance(self.n_layers, int) or self.n_layers < 1:
            raise ValueError(f"n_layers={self.n_layers!r} must be a positive integer")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class ClosedFormBias:
    """A relative-only bias in closed form (`PositionalEncoding.closed_form_bias`), for fused kernels.

    Attributes:
        name: the form's name (e.g. "alibi"); fused kernels are compiled once per `score` function.
        score: `score(s, h, rel, *params)` → s plus the bias of head h at distance rel = k_pos − q_pos
            (integer tensors; elementwise torch ops only, as in a flex_attention score modifier).
        params: the tensors `score` reads, each indexed by the head: (H,) float32, detached.
    """

    name: str
    score: Callable[..., torch.Tensor]
    params: tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class PairRotation:
    """What a per-pair rotary `rotate` applies at positions (B, T) (`PositionalEncoding.pair_rotation`):
    channel pairs (x1, x2) of the first R channels become (x1·cos − x2·sin, x2·cos + x1·sin); the
    other Dh − R channels pass through.

    Attributes:
        cos, sin: (B|1, 1, T, R/2) tables of the queries (and of the keys unless `cos_k` is set).
        layout: "half" (channel i pairs with i + R/2) or "interleaved" (2i with 2i + 1).
        cos_k, sin_k: the keys' tables when they differ (xPos scales q and k oppositely), else None.
    """

    cos: torch.Tensor
    sin: torch.Tensor
    layout: str
    cos_k: torch.Tensor | None = None
    sin_k: torch.Tensor | None = None


def additive_bias_planes(n_heads: int, reads_qk: bool = False) -> tuple[float, float]:
    """(shared, per-sequence) float32 (T, T) planes of attention with an additive bias over H heads:
    2H + 3 shared (the (1, H, T, T) bias, the causal mask, their sum, the int64 distances) and 2H per
    sequence (scores and softmax on SDPA's math path), 3H more per sequence when the bias reads q and k.
    `PositionalEncoding.square_planes`' default, and the memory estimate's guess for an encoding it
    cannot build."""
    return 2.0 * n_heads + 3, 2.0 * n_heads + (3.0 * n_heads if reads_qk else 0.0)


class PositionalEncoding(nn.Module):
    """Base class: every hook is the identity / no bias, so an encoding overrides only its own.

    Class attributes describe the encoding for `lenbench list encodings`:
        name: the registry name.
        description: one line saying what it does.
        paper: the citation, "Authors Year, Title".
        causal_only: True when the encoding is defined for causal attention only.
        content_dependent: True when `attention_bias` reads q / k (recomputed per layer).
        variants: inference-time variants, name → one-line description.
        relative_only: True when `bias` depends on k_pos − q_pos alone (kernel dispatch; see
            the module docstring, "Declare your kernel family").
        kernel_family: the performance targets the kernel benchmarks hold the encoding to: "bias"
            (softmax attention with an additive position bias: its best fused attention within
            15 % of unbiased causal SDPA, `lenbench.benchmark.plans.performance_targets`); ""
            (no such target).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    causal_only: ClassVar[bool] = False
    content_dependent: ClassVar[bool] = False
    variants: ClassVar[dict[str, str]] = {}
    relative_only: ClassVar[bool] = False
    kernel_family: ClassVar[str] = ""

    def __init__(self, dims: EncodingDims) -> None:
        super().__init__()
        if self.causal_only and not dims.causal:
            raise ValueError(f"encoding {self.name!r} is defined for causal attention only; set causal: true")
        self.dims = dims

    @classmethod
    def variant_descriptions(cls) -> dict[str, str]:
        """Inference-time variants this encoding can be evaluated with, name → one line."""
        return dict(cls.variants)

    def positions(self, pos: torch.Tensor) -> torch.Tensor:
        """Map input positions (B, T) to the positions every other hook sees; called once per forward."""
        return pos

    def embed(self, h: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Add position information to token embeddings `h` (B, T, D) at positions `pos` (B, T)."""
        return h

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries and keys (B, H, T, Dh) by positions `pos` (B, T); values are never passed."""
        return q, k

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        """Additive attention bias (B|1, H, Tq, Tk) for query positions (B, Tq) and key positions (B, Tk)."""
        return None

    def attention_bias(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """Bias that may read the (rotated) queries and keys; defaults to the static `bias`."""
        return self.bias(q_pos, k_pos)

    # --- memory declaration (read by `lenbench.run.memory` and `lenbench.run.estimate`) ---

    def square_planes(self) -> tuple[float, float]:
        """How many float32 (T, T) planes this encoding's attention holds at its peak in one forward
        at T tokens, beyond the model's (T, D) activations and logits: (shared by the batch, per
        sequence). Evaluation batches are sized with it (`lenbench.run.memory`), so an undercount
        lets an evaluation past the machine's memory; tests/run/test_eval_memory_measured.py holds the
        estimate at or above the measured peak for every registered encoding at the catalog's longest
        evaluation.

        The default, with H heads: an additive bias (`bias` overridden, or `content_dependent`) holds
        2H + 3 shared planes (the (1, H, T, T) bias, the causal mask, their sum, the int64 distances)
        and 2H per sequence (scores and softmax on SDPA's math path), 3H more per sequence when the
        bias reads q and k; an encoding without a bias holds none (SDPA's fused causal kernel). An
        encoding whose attention holds more (an MLP over pairs, a replaced softmax) overrides this.
        """
        content = bool(self.content_dependent)
        if type(self).bias is PositionalEncoding.bias and not content:
            return 0.0, 0.0
        return additive_bias_planes(self.dims.n_heads, reads_qk=content)

    # --- kernel declarations (read by `lenbench.kernels`; see the module docstring) ---

    def relative_bias(self, distances: torch.Tensor) -> torch.Tensor:
        """(H, R) bias at each k_pos − q_pos in `distances` (R,) integers, for a `relative_only`
        encoding. The default reads it off `bias` (the query at −min(distances), keys at
        distances − min(distances), so every position is ≥ 0)."""
        lo = int(distances.min())
        q_pos = torch.full((1, 1), -lo, device=distances.device, dtype=torch.long)  # (1, 1)
        return self.bias(q_pos, (distances - lo)[None])[0, :, 0, :]  # (H, R)

    def closed_form_bias(self) -> ClosedFormBias | None:
        """The bias as a closed form of (head, k_pos − q_pos), or None (relative_only encodings only)."""
        return None

    def pair_rotation(self, pos: torch.Tensor, dtype: torch.dtype) -> PairRotation | None:
        """The per-pair rotation `rotate` applies at positions `pos` (B, T) in `dtype`, or None
        when `rotate` is not one (then fused kernels compile `rotate` itself)."""
        return None

    def kernel_comparisons(self) -> tuple[str, ...]:
        """Extra implementations the kernel benchmarks time for this instance ("hf", "flex_gather")."""
        return ()

    def score_vector(self, x: torch.Tensor, layer: int) -> torch.Tensor | None:
        """For a `layer_dependent` encoding whose bias is a difference of one vector: c (B, H, T),
        float32 at least, such that `layer_bias(x, q, k, pos, layer)[b, h, i, j]` = c[b, h, i] −
        c[b, h, j] for keys j ≤ i (−inf after the query; causal only), and no other bias. None:
        no such form (the layer's bias is materialised). Overriding it declares the `flex` kernel.

        Args:
            x: (B, T, D) the layer's input, as `layer_bias` receives it.
            layer: the layer's index.
        """
        return None

    # --- Hooks beyond a bias from positions, q and k (FoX, DAPE, stick-breaking, SSMax) ---------------
    # Both are off by default (class attributes False): the model calls them only for an encoding
    # that declares them, so every other encoding's attention is untouched. Attention reaches them
    # with the index of its layer, so an encoding can keep parameters per layer (`dims.n_layers`).

    #: How the encoding is evaluated past the training length: a line of `lenbench list encodings` (or "").
    length_behaviour: ClassVar[str] = ""
    #: True when the model should call `layer_bias` in every layer (with that layer's input).
    layer_dependent: ClassVar[bool] = False
    #: True when `attend` replaces the model's softmax attention.
    replaces_softmax: ClassVar[bool] = False
    #: True when the rotation differs between layers: the model then calls `layer_rotate` in place of `rotate`.
    rotates_per_layer: ClassVar[bool] = False
    #: Why its compiled kernels are not timed on a CPU by default, "" when they are (`benchmark.plans.timing_skip`).
    slow_cpu_compile: ClassVar[str] = ""

    def layer_rotate(
        self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor, layer: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`rotate` of layer `layer` (e.g. RoPE in some layers, none in others), called when
        `rotates_per_layer`; arguments as `rotate`, plus the layer's index."""
        return self.rotate(q, k, pos)

    def layer_bias(
        self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor, layer: int
    ) -> torch.Tensor | None:
        """Additive bias (B|1, H|1, T, T) of layer `layer`, or None for no bias in that layer;
        called there when `layer_dependent`.

        Args:
            x: (B, T, D) the attention's input (the normalised residual stream), e.g. FoX's gates.
            q, k: (B, H, T, Dh) the layer's queries and keys after `rotate`.
            pos: (B, T) positions (after `positions`).
            layer: the layer's index, 0 … dims.n_layers − 1.
        """
        return None

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout_p: float,
        layer: int,
    ) -> torch.Tensor:
        """Attention output (B, H, T, Dh) in place of softmax(q·kᵀ/√Dh + mask)·v; called when `replaces_softmax`.

        Args:
            q, k, v: (B, H, T, Dh) after `rotate`.
            mask: additive (B|1, H|1, T, T) mask holding every bias and −inf where attention is
                forbidden, or None: then attention is causal when `dims.causal`, else unmasked.
            dropout_p: dropout on the attention weights (0 outside training).
            layer: the layer's index.
        """
        raise NotImplementedError(f"encoding {self.name!r} sets replaces_softmax but does not implement attend")

    # --- end of the layer hooks -----------------------------------------------------------------------

    def position_tables(self, pos: torch.Tensor, key: tuple, compute: Callable[[torch.Tensor], Any]) -> Any:
        """`compute(p)` for positions `pos` (B, T), cached; p is `pos[:1]` when every row of `pos`
        is the same (the model's default 0 … T−1), else `pos`.

        Tables derived from positions (RoPE's cos/sin, xPos's decay) are then built once per
        forward pass, not once per layer (the model hands one `pos` tensor to every layer: the
        cache compares identity and in-place version, so a new tensor is never mistaken for the
        old one), once for the batch rather than once per row, and, on the CPU, once per distinct
        position row across forward passes (a training run meets each length over and over; the
        rows are compared element by element, at most `TABLE_CACHE_SIZE` are kept). `key` must
        hold everything else the tables depend on (dtype, parameters, scaling).
        """
        # Inference tensors have no version counter: they skip the per-tensor cache.
        full_key = (None if pos.is_inference() else pos._version, pos.device, torch.is_inference_mode_enabled(), *key)
        cached = self.__dict__.get("_per_forward")
        if cached is not None and cached[0] is pos and cached[1] == full_key and full_key[0] is not None:
            return cached[2]
        on_cpu = pos.device.type == "cpu"
        p = shared_rows(pos, compare_values=on_cpu)  # (1|B, T)
        shared = p.shape[0] == 1
        if on_cpu and shared:
            store = self.__dict__.setdefault("_tables_by_row", OrderedDict())
            row_key = (p.shape[1], p.dtype, torch.is_inference_mode_enabled(), *key)
            hit = store.get(row_key)
            if hit is not None and torch.equal(hit[0], p):
                value = hit[1]
                store.move_to_end(row_key)
            else:
                value = compute(p)
                store[row_key] = (p.clone(), value)
                if len(store) > TABLE_CACHE_SIZE:
                    store.popitem(last=False)
        else:
            value = compute(p)
        self.__dict__["_per_forward"] = (pos, full_key, value)
        return value

    def extra_repr(self) -> str:
        return f"name={self.name!r}"


ENCODINGS: Registry[type[PositionalEncoding]] = Registry("encoding", entry_point_group="lenbench.encodings")


def register_encoding(name: str):
    """Class decorator: register an encoding under `name` and set its `name` attribute."""
    return ENCODINGS.register(name, set_name=True)


def encoding_parameters(cls: type[PositionalEncoding]) -> dict[str, inspect.Parameter]:
    """The keyword parameters an encoding accepts besides `dims`."""
    params = inspect.signature(cls.__init__).parameters
    return {n: p for n, p in params.items() if n not in ("self", "dims") and p.kind == p.KEYWORD_ONLY}


def build_encoding(name: str, dims: EncodingDims, **params) -> PositionalEncoding:
    """Instantiate the encoding `name` for `dims`; unknown parameters give a one-line error.

    Example:
        >>> enc = build_encoding("rope", EncodingDims(d_model=64, n_heads=4), theta=500000.0)
    """
    cls = ENCODINGS.get(name)
    check_keywords(f"encoding {name!r}", cls.__init__, params, skip=("dims",))
    return cls(dims, **params)
