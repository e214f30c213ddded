"""Fused forward kernels of the positional encodings, chosen by what an encoding declares.

Each encoding family has a readable eager reference (the code in `lenbench.encodings`) and one
or more fused implementations that `bench/test_kernels.py` times and `tests/kernels` hold equal to it:

| kind      | encodings                       | eager reference                          | fused                                                   |
| --------- | ------------------------------- | ---------------------------------------- | ------------------------------------------------------- |
| rotary    | rope, xpos (randomized → inner) | `apply_rotary` on q, then on k           | one `torch.compile`d function rotating q and k together |
|           |                                 | `rotary_hf`: transformers' rotate_half   | (C++/OpenMP on the CPU, Triton on CUDA / XPU)           |
| bias      | alibi, t5, kerple, sandwich,    | bias from the hook + SDPA (`attention_   | `cached`: the folded bias materialised once per length; |
|           | fire, and any other `bias` hook | eager`)                                  | `flex`: `flex_attention` with a score modifier built    |
|           |                                 |                                          | from the position tensors and a causal block mask;      |
|           |                                 |                                          | `toeplitz` (`relative_only` biases, contiguous          |
|           |                                 |                                          | positions): SDPA reading a per-distance table through   |
|           |                                 |                                          | strided mask views, one call per block of queries;      |
|           |                                 |                                          | `cached_blocks` (the others): the materialised mask,    |
|           |                                 |                                          | read by causal query blocks                             |
| absolute  | sinusoidal, learned             | `enc.embed`                              | `torch.compile(enc.embed)`                              |
| content   | cope                            | `enc.attention_bias` + SDPA              | the same function compiled                              |
| layer     | fox, dape (`layer_dependent`)   | one layer's attention as the model runs  | `compiled`: the same function compiled; `flex` (a       |
|           |                                 | it (`attention_layer`: rotate,           | `score_vector` declaration, FoX): flex_attention adding |
|           |                                 | layer_bias folded into the mask, SDPA)   | c[b,h,q] − c[b,h,kv] from a (B, H, T) vector            |
| attend    | stickbreaking, ssmax            | `attention_layer`: rotate, the           | the same function compiled                              |
|           | (`replaces_softmax`, whatever   | encoding's `attend`                      |                                                         |
|           | it wraps)                       |                                          |                                                         |

An encoding without a hook of its own (nope) has nothing to fuse. Which paths an encoding gets
comes from its declarations (`relative_only`, `closed_form_bias`, `pair_rotation`,
`score_vector`, `kernel_comparisons`: "Declare your kernel family" in `lenbench.encodings.base`),
never from its name: a new encoding touches only its own module.

Modules: `dispatch` (kind and implementations per encoding), `support` (compile / flex / bf16
checks, lazily compiled wrappers), `rotary`, `bias` (eager, cached, flex, toeplitz,
cached_blocks), `content` (CoPE-like), `layer` (per-layer biases and replaced softmax:
FoX, DAPE, stick-breaking, SSMax), `_inductor_patch` (a torch inductor fix). The package holds
ops only: what the benchmarks time, the timer and the targets are `lenbench.benchmark`.

This package re-exports the ops of those modules (`__all__`): the benchmarks and tests address
them as one namespace (`from lenbench import kernels as K`), and code moving between the
submodules then breaks no caller.
"""

from lenbench.kernels.bias import (
    BIAS_BLOCK_BYTES,
    FlexPlan,
    ToeplitzPlan,
    attention_cached,
    attention_cached_blocks,
    attention_eager,
    attention_flex,
    attention_toeplitz,
    attention_unbiased,
    bias_query_rows,
    causal_additive_mask,
    causal_block_mask,
    flex_block_size,
    folded_bias,
    prepare_flex,
    prepare_toeplitz,
    relative_range,
    relative_table,
    row_offsets,
    toeplitz_block,
)
from lenbench.kernels.content import attention_content, attention_content_compiled
from lenbench.kernels.dispatch import (
    Kind,
    base_encoding,
    declares_score_vector,
    implementations,
    kernel_kind,
    nothing_to_fuse_reason,
)
from lenbench.kernels.layer import (
    attention_layer,
    attention_layer_compiled,
    attention_score_vector,
    layer_mask,
)
from lenbench.kernels.rotary import (
    ROTARY_COMPILE_OPTIONS,
    RotaryInputs,
    hf_rotate_half,
    hf_tables,
    rotary_eager,
    rotary_fused,
    rotary_hf,
    rotary_inputs,
)
from lenbench.kernels.support import bf16_support, compile_support, compiled_hook, flex_support

__all__ = [
    "BIAS_BLOCK_BYTES", "FlexPlan", "Kind", "ROTARY_COMPILE_OPTIONS", "RotaryInputs", "ToeplitzPlan", "attention_cached",
    "attention_cached_blocks", "attention_content", "attention_content_compiled", "attention_eager",
    "attention_flex", "attention_layer", "attention_layer_compiled", "attention_score_vector", "attention_toeplitz",
    "attention_unbiased", "base_encoding", "bf16_support", "bias_query_rows", "causal_additive_mask", "causal_block_mask",
    "compile_support", "compiled_hook", "declares_score_vector", "flex_block_size", "flex_support", "folded_bias",
    "hf_rotate_half", "hf_tables", "implementations", "kernel_kind", "layer_mask", "nothing_to_fuse_reason",
    "prepare_flex", "prepare_toeplitz", "relative_range", "relative_table", "rotary_eager", "rotary_fused", "rotary_hf",
    "rotary_inputs", "row_offsets", "toeplitz_block",
]
