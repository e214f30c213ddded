"""
    pytest bench -k kernels --benchmark-group-by=group [--device cuda] [--benchmark-json out.json]

One test per (encoding, implementation, length T, dtype), over `lenbench.encodings.ENCODINGS`
(new encodings are picked up automatically; one without a hook of its own is skipped with the
reason). Implementations come from `lenbench.kernels.implementations`:

    rotary    eager (apply_rotary on q, then k), hf (transformers' rotate_half), fused (compiled)
    bias      eager (hook + SDPA), cached (bias materialised once per length), flex (score_mod),
              flex_gather (ALiBi: the score_mod gathering positions even when they are contiguous),
              toeplitz (relative-only biases: SDPA over strided views of a per-distance table),
              cached_blocks (the others: the materialised mask, one SDPA call per causal query block)
    absolute  eager vs compiled embed;  content (CoPE): eager vs compiled attention
    layer     (FoX, DAPE) eager (one layer's attention as the model runs it: layer_bias folded into
              the mask + SDPA), compiled (the same function), flex (FoX: score_mod c[q] − c[kv])
    attend    (stick-breaking, SSMax) eager (rotate + the encoding's attend), compiled

plus `test_attention_baseline` (unbiased causal SDPA, what `nope` runs), `test_training_step`
(one training step of each encoding at the suite's size) and `test_training_mfu` (model FLOPs
utilisation of each suite task's training step, eager and fast path, over the sgemm rate measured
in the same session).

Before timing, each fused implementation is checked equal to the eager reference within the
dtype's tolerance. Compilation and autotuning happen in that check call, never in a timed round.
Rounds adapt to the kernel's duration (about `seconds` of timing, 3 … 50 rounds).

Shapes (fixed across T, so one dynamic-shape compilation serves every length): rotary
(B=8, H=8, T, Dh=64), absolute (8, T, 512), attention (B=1, 8, T, 64); layer and attend kinds
also read the layer input x (1, T, 512).

What is timed comes from the `--suite`'s `kernels:` section (`lenbench.config.kernels.KernelSpec`: enabled,
lengths, dtypes, seconds, encodings, content_max_t, train_rounds), so `--suite smoke` times a
handful of kernels in seconds and quick / standard / paper time more. Each environment variable
that is set replaces its field (environment > suite file > KernelSpec defaults;
`lenbench.benchmark.plans.kernel_settings`):
    LENBENCH_KERNEL_LENGTHS   comma list of T                        (kernels.lengths)
    LENBENCH_KERNEL_DTYPES    comma list of fp32,bf16 (bf16 skipped without native support)  (dtypes)
    LENBENCH_KERNEL_SECONDS   timing budget per benchmark            (kernels.seconds)
    LENBENCH_KERNEL_ENCODINGS comma list of encodings to time        (kernels.encodings)
    LENBENCH_CONTENT_MAX_T    longest T for content-dependent (CoPE), layer and attend kernels on the CPU
                              (their eager references materialise (B, H, T, T) tensors)  (content_max_t)
    LENBENCH_TRAIN_ROUNDS     rounds of the training-step and MFU benchmarks             (train_rounds)
    LENBENCH_TRAIN_TASK       suite task of the training-step benchmark (default lm: T = 64 in quick;
                              passkey trains at T = 32, sort at T = 16)

`benchmark.extra_info` keys (every kernel test):
    encoding, kind (rotary|bias|absolute|content|layer|attend|attention-baseline), impl, T, dtype, shape
    bytes_moved        estimate: rotary read q,k + write q,k; attention q,k,v,out (+ the bias when
                       materialised); absolute read h + write out (+ gathered table rows)
    seconds            median seconds per call;  gb_per_s  bytes_moved / seconds
    copy_seconds, copy_ratio   a plain copy of bytes_moved on this device into a preallocated
                       buffer (measured once per size in this session) and seconds / copy_seconds
                       (1.0 = the copy floor)
    over_eager         seconds / the eager reference's seconds (same encoding, T, dtype)
    speedup_over_hf    rotary (rope): hf seconds / seconds
    over_unbiased      attention: seconds / unbiased causal SDPA seconds (same T, dtype)
                       (these three divide by the reference's median: its own benchmark's when it
                       ran earlier in this process, else timed here on first need; `reference`)
    copy_ratio_interleaved  rotary, fused impls: this call over the copy of the same bytes, the two
                       timed back to back in 16 counterbalanced pairs of rounds
                       (`plans.interleaved_ratio`: kernel-copy, copy-kernel; the median over
                       pairs). The performance target reads it; copy_ratio divides by a copy timed
                       once per session, which drifts with load
    over_unbiased_interleaved  attention, fused impls: this call over an unbiased causal SDPA call on
                       same-shape inputs, timed the same way (3 pairs) in this test, so load from other
                       jobs hits both alike (over_unbiased divides by a benchmark run minutes
                       earlier); the performance target reads this one when present
    max_abs_err        fused vs eager before timing
    bias_query_rows    bias, eager: query rows per bias-hook call of the timed call's mask (T: one call).
                       `lenbench.kernels.folded_bias` builds a bias over `K.BIAS_BLOCK_BYTES` (64 MiB) by
                       blocks of rows: at T = 4096 (8 heads, fp32) 512 rows, 8 calls (FIRE's MLP would
                       otherwise hold 4 GB of intermediates); the mask and the SDPA call are the same

Memory: after every test the host memory it freed goes back to the OS (`plans.release_freed_memory`,
outside any timed round); the fixed shapes above and the bias blocks bound each test's own peak.
Every test measures or fixtures what it divides by, so any selection (`-k`), order
(`-p random_order`) or distribution (`-n 2`, pytest-xdist) records the same keys; no test reads a
value another test left in a module global.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from lenbench import kernels as K
from lenbench.benchmark import cases
from lenbench.benchmark import plans as P
from lenbench.benchmark.bench.common import (  # noqa: F401  (fixtures and the parametrization hook)
    ATTENTION_BATCH,
    HEAD_DIM,
    HEADS,
    ROTARY_BATCH,
    check_dtype,
    copy_floor,
    encoding_instance,
    median_seconds,
    pytest_generate_tests,
    reference,
    release_memory_after_each_test,
    rounds_for,
    spec,
)

TOL = {
    "fp32": {"rotary": (1e-5, 1e-5), "absolute": (1e-5, 1e-5), "bias": (2e-4, 1e-4), "content": (2e-4, 1e-4),
             "layer": (2e-4, 1e-4), "attend": (2e-4, 1e-4)},
    # bf16: the eager reference rounds every product to bf16, the compiled kernel once at the end, so
    # a difference of products (x1·cos − x2·sin) can differ by a few bf16 ulps of the products.
    "bf16": {"rotary": (6e-2, 1.6e-2), "absolute": (3e-2, 1.6e-2), "bias": (3e-2, 2e-2), "content": (3e-2, 2e-2),
             "layer": (3e-2, 2e-2), "attend": (3e-2, 2e-2)},
}
# A compiled kernel that hits dynamo's recompile limit would silently run eagerly (and be timed
# as "fused"): make that an error instead.
if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
    torch._dynamo.config.fail_on_recompile_limit_hit = True

#: Kinds whose kernel is a whole attention (timed against unbiased causal SDPA, grouped as "attention").
ATTENTION_KINDS = cases.ATTENTION_KINDS

@pytest.fixture(scope="session")
def eager_outputs() -> dict[tuple, torch.Tensor]:
    """(encoding, T, dtype) -> the eager reference's output of the last eager benchmark (one kept
    alive at a time); a fused benchmark without it computes the reference itself."""
    return {}


def _record(benchmark, copy_floor, reference, *, name, kind, impl, T, dt, shape, bytes_moved, once, err=None,
            refs: dict[str, Callable[[], object]] | None = None, rounds: Callable[[float], int] = lambda s: 3) -> float:
    """Record the benchmark's extra_info; `refs`: the callables of the references it is divided by
    ("eager", "hf", "sdpa_causal"), timed by `reference` where their own benchmark did not run."""
    seconds = median_seconds(benchmark, once)
    reference.record((name, impl, T, dt), seconds)
    copy_s = copy_floor.seconds(bytes_moved)
    info = benchmark.extra_info
    info.update(encoding=name, kind=kind, impl=impl, T=T, dtype=dt, shape=list(shape), bytes_moved=bytes_moved,
                seconds=seconds, gb_per_s=P.gb_per_s(bytes_moved, seconds), copy_seconds=copy_s,
                copy_ratio=P.copy_ratio(seconds, copy_s), max_abs_err=err)
    refs = refs or {}
    if impl != "eager" and "eager" in refs:
        info["over_eager"] = seconds / reference.seconds((name, "eager", T, dt), refs["eager"], rounds)
    if kind == "rotary" and impl not in ("hf", "eager") and "hf" in refs:
        info["speedup_over_hf"] = reference.seconds((name, "hf", T, dt), refs["hf"], rounds) / seconds
    if kind in ATTENTION_KINDS and "sdpa_causal" in refs:
        base = reference.seconds(("attention-baseline", "sdpa_causal", T, dt), refs["sdpa_causal"], rounds)
        info["over_unbiased"] = seconds / base
    return seconds


def test_attention_baseline(T, dtype, timed, benchmark, device, copy_floor, reference, spec):
    """Unbiased causal SDPA: the attention every bias encoding is compared with (`nope` runs it)."""
    dt, dtype = dtype, check_dtype(dtype, device)  # the parameter's name ("fp32"), the torch dtype
    B = ATTENTION_BATCH
    q, k, v = cases.inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    benchmark.group = f"attention-T{T}-{dt}"
    fn = lambda: K.attention_unbiased(q, k, v)  # noqa: E731
    _, once = P.call_seconds(fn, device)  # the warm-up call
    timed(fn, rounds=rounds_for(once, spec.seconds), warmup_rounds=0)
    _record(benchmark, copy_floor, reference, name="attention-baseline", kind="attention-baseline",
            impl="sdpa_causal", T=T, dt=dt, shape=q.shape, bytes_moved=P.attention_bytes(q, k, v), once=once)


def test_kernel(encoding, impl, T, dtype, timed, benchmark, device, copy_floor, reference, eager_outputs, spec):
    """One (encoding, implementation, length T, dtype): separate parameters, so pytest-benchmark's
    `--benchmark-group-by=param:T` (or `param:encoding`, `param:impl`, `param:dtype`) works. The case
    itself (inputs, skip rules) is `lenbench.benchmark.cases`, which the A/B speed gate times too."""
    name, dt = encoding, dtype
    with torch.no_grad():  # forward kernels: no autograd graph, learned biases need no grad
        try:
            enc, kind, built = cases.ready((name, impl, T, dt), device, spec)
        except cases.CaseSkipped as why:
            pytest.skip(str(why))
        benchmark.group = f"{'attention' if kind in ATTENTION_KINDS else kind}-T{T}-{dt}"
        dtype = cases.DTYPES[dt]
        atol, rtol = TOL[dt][kind]
        fn, eager_fn, shape, bytes_moved, refs = built.fn, built.eager, built.shape, built.bytes_moved, dict(built.refs)
        out, once = P.call_seconds(fn, device)  # compiles here, outside any timed round
        err = None
        if impl != "eager":
            key = (name, T, dt)
            ref = eager_outputs.get(key)
            ref = eager_fn() if ref is None else ref
            err = _check_close(out, ref, atol, rtol, dt, f"{name} {impl} T={T} {dt}")
            del ref  # not alive through the timed rounds
        else:
            eager_outputs.clear()  # keep one reference alive at a time
            eager_outputs[(name, T, dt)] = out
        del out
        if impl in cases.COMPILED_IMPLS:  # the first call compiled: time a second one (the warm-up) to size the rounds
            _, once = P.call_seconds(fn, device)
        timed(fn, rounds=rounds_for(once, spec.seconds), warmup_rounds=0)
        interleaved = _over_unbiased_interleaved(fn, shape, dtype, device) if kind in ATTENTION_KINDS and impl != "eager" else None
        copy_interleaved = (P.interleaved_ratio(fn, copy_floor.copy_fn(bytes_moved), device, rounds=31)
                            if kind == "rotary" and impl != "eager" else None)
        if kind in ATTENTION_KINDS:
            q, k, v = cases.inputs(shape, dtype, device, 3)
            refs["sdpa_causal"] = lambda: K.attention_unbiased(q, k, v)
        _record(benchmark, copy_floor, reference, name=name, kind=kind, impl=impl, T=T, dt=dt, shape=shape,
                bytes_moved=bytes_moved, once=once, err=err, refs={"eager": eager_fn, **refs},
                rounds=lambda once: rounds_for(once, spec.seconds))
    benchmark.extra_info.update(built.info)
    if interleaved is not None:
        benchmark.extra_info["over_unbiased_interleaved"] = interleaved
    if copy_interleaved is not None:
        benchmark.extra_info["copy_ratio_interleaved"] = copy_interleaved


def _check_close(out, ref, atol: float, rtol: float, dt: str, label: str) -> float:
    """assert_close of a fused output and the eager reference's, tensor by tensor (rotary: q and k);
    returns the largest |out − ref|. Tensor by tensor, not concatenated: at T = 4096 (rotary q, k
    of 64 MiB each) the check's temporaries are then those of one tensor, not of copies of both."""
    outs, refs = (x if isinstance(x, tuple) else (x,) for x in (out, ref))
    if dt == "bf16":  # rounding errors scale with the magnitude of the products (xPos: up to e^±5)
        atol *= max(1.0, max(r.float().abs().max().item() for r in refs))
    err = 0.0
    for o, r in zip(outs, refs, strict=True):
        err = max(err, (o.float() - r.float()).abs().max().item())
        torch.testing.assert_close(o, r, atol=atol, rtol=rtol, msg=lambda m: f"{label}: {m}")
    return err


def _over_unbiased_interleaved(fn, shape, dtype, device, rounds: int = 5) -> float:
    """fn's time over unbiased causal SDPA's on inputs of `shape`, by `plans.interleaved_ratio` (the two
    called back to back, so other jobs on the machine slow both alike)."""
    q, k, v = cases.inputs(shape, dtype, device, 3)
    return P.interleaved_ratio(fn, lambda: K.attention_unbiased(q, k, v), device, rounds)
