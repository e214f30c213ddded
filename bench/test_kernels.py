"""Forward-kernel timings of every registered encoding, eager reference vs fused, on `--device`.

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
test_training_step extra_info: encoding, seconds (this benchmark's median), ratio_to_nope (median
    over rounds of per-round ratios, every encoding timed round-robin in one loop once per
    session, so other load on the machine hits all alike; ratio_to_nope_interleaved is the same
    number), ratio_to_nope_sequential (this benchmark over nope's median step, timed the same
    way: sensitive to load drifting between tests), tokens, model_params, geometry.

Every test measures or fixtures what it divides by, so any selection (`-k`), order
(`-p random_order`) or distribution (`-n 2`, pytest-xdist) records the same keys; no test reads a
value another test left in a module global.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from functools import cache

import pytest
import torch

from lenbench import kernels as K
from lenbench.benchmark import plans as P
from lenbench.benchmark.timing import time_fn
from lenbench.config import KernelSpec, load_suite
from lenbench.device import synchronize
from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding
from lenbench.encodings.base import shared_rows

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
_SETTINGS = pytest.StashKey[KernelSpec]()


def settings(config: pytest.Config) -> KernelSpec:
    """The `--suite`'s `kernels:` section with the environment's overrides, once per session."""
    if _SETTINGS not in config.stash:
        config.stash[_SETTINGS] = P.kernel_settings(config.getoption("--suite"))
    return config.stash[_SETTINGS]


@pytest.fixture(scope="session")
def spec(request: pytest.FixtureRequest) -> KernelSpec:
    """The session's kernel settings (`settings`)."""
    return settings(request.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    s = settings(metafunc.config)
    off = None if s.enabled else f"suite {metafunc.config.getoption('--suite')!r} has kernels.enabled: false"
    if "impl" in metafunc.fixturenames:  # test_kernel: one parameter each, so --benchmark-group-by=param:T works
        names = ("encoding", "impl", "T", "dtype")
        if off:
            metafunc.parametrize(names, [pytest.param(None, None, None, None, marks=pytest.mark.skip(reason=off))],
                                 ids=["disabled"])
        else:
            cases = kernel_cases(s)
            metafunc.parametrize(names, cases, ids=[_id(c) for c in cases])
        return
    args = {
        "T": (list(s.lengths), lambda t: f"T{t}"),
        "dtype": (list(s.dtypes), str),
        "name": (train_encodings(s), str),
        "task": ([t.name for t in load_suite(metafunc.config.getoption("--suite")).tasks], str),
    }
    for arg, (values, ids) in args.items():
        if arg in metafunc.fixturenames:
            if off:
                metafunc.parametrize(arg, [pytest.param(None, marks=pytest.mark.skip(reason=off))], ids=["disabled"])
            else:
                metafunc.parametrize(arg, values, ids=[ids(v) for v in values])


HEADS, HEAD_DIM = 8, 64
ROTARY_BATCH, ATTENTION_BATCH = 8, 1
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
ATTENTION_KINDS = ("bias", "content", "layer", "attend")

@cache
def encoding_instance(name: str, device: str, max_len: int):
    """One instance per (encoding, device, longest length) for the process, built from seed 0
    whichever test asks first (compiled hooks are cached per instance)."""
    torch.manual_seed(0)
    dims = EncodingDims(d_model=HEADS * HEAD_DIM, n_heads=HEADS, max_len=max_len, causal=True)
    return build_encoding(name, dims).to(device).train()  # train: randomized draws positions


def kernel_cases(s: KernelSpec) -> list[tuple[str, str, int, str]]:
    """(encoding, impl, T, dtype) in run order: eager before the implementations compared to it."""
    cases = []
    for name in ENCODINGS.names():
        if s.encodings and name not in s.encodings:
            continue
        impls = K.implementations(encoding_instance(name, "cpu", max(s.lengths))) or ["none"]
        for T in s.lengths:
            for dt in s.dtypes:
                cases += [(name, impl, T, dt) for impl in impls]
    return cases


def _id(case) -> str:
    name, impl, T, dt = case
    return f"{name}-{impl}-T{T}-{dt}"


@pytest.fixture(scope="session")
def copy_floor(device) -> P.CopyFloor:
    """Copy time per byte count on the device, measured once per size in this session.

    On the CPU, large freed blocks are first kept in the heap (`P.keep_freed_memory`) so kernels
    that allocate their outputs are not timed page-faulting fresh mappings on every call.
    """
    if device.type == "cpu":
        P.keep_freed_memory()
    return P.CopyFloor(device)


@pytest.fixture(autouse=True)
def _release_memory_after_each_test():
    """After every test here, the host memory it freed goes back to the OS
    (`P.release_freed_memory`): otherwise the heap that `keep_freed_memory` keeps grows over the
    session and adds to every later test's peak."""
    yield
    P.release_freed_memory()


def _rounds(seconds_per_call: float, seconds: float) -> int:
    """About `seconds` (the suite's timing budget) of timed rounds, at least 3 and at most 50."""
    return int(min(50, max(3, seconds / max(seconds_per_call, 1e-6))))


class References:
    """Median seconds of the references a benchmark is divided by (an implementation's eager
    reference, transformers' rotate_half, unbiased causal SDPA, nope's training step), per key.

    A reference's own benchmark records its median here when it runs; a benchmark that needs one
    not yet recorded in this process (selected alone with -k, run first in random order, or on
    another xdist worker) times it on the spot, so every benchmark records the same keys
    whatever ran before it.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._seconds: dict[tuple, float] = {}

    def record(self, key: tuple, seconds: float) -> None:
        self._seconds[key] = seconds

    def seconds(self, key: tuple, fn: Callable[[], object], rounds: Callable[[float], int]) -> float:
        """The recorded median of `key`, else `fn` timed now: one warm-up call, then `rounds(once)`
        rounds (as its own benchmark sizes them), the median."""
        if key not in self._seconds:
            _, once = P.call_seconds(fn, self.device)
            self._seconds[key] = time_fn(fn, self.device, rounds=rounds(once), warmup=0)
        return self._seconds[key]


@pytest.fixture(scope="session")
def reference(device) -> References:
    return References(device)


@pytest.fixture(scope="session")
def eager_outputs() -> dict[tuple, torch.Tensor]:
    """(encoding, T, dtype) -> the eager reference's output of the last eager benchmark (one kept
    alive at a time); a fused benchmark without it computes the reference itself."""
    return {}


def _check_dtype(dt: str, device: torch.device) -> torch.dtype:
    if dt == "bf16":
        ok, reason = K.bf16_support(device.type)
        if not ok:
            pytest.skip(reason)
    return DTYPES[dt]


def _median(benchmark, fallback: float) -> float:
    """The benchmark's median seconds; `fallback` (one untimed call) under --benchmark-disable."""
    stats = getattr(benchmark, "stats", None)
    return stats.stats.median if stats is not None else fallback


def _record(benchmark, copy_floor, reference, *, name, kind, impl, T, dt, shape, bytes_moved, once, err=None,
            refs: dict[str, Callable[[], object]] | None = None, rounds: Callable[[float], int] = lambda s: 3) -> float:
    """Record the benchmark's extra_info; `refs`: the callables of the references it is divided by
    ("eager", "hf", "sdpa_causal"), timed by `reference` where their own benchmark did not run."""
    seconds = _median(benchmark, once)
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


def _inputs(shape, dtype, device, n: int, seed: int = 0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(shape, generator=gen).to(device, dtype) for _ in range(n)]


def _positions(enc, B: int, T: int, device) -> torch.Tensor:
    pos = torch.arange(T, device=device).expand(B, T)  # (B, T)
    torch.manual_seed(T)  # randomized draws positions: the same ones for every implementation
    return enc.positions(pos)  # (B, T)


def test_attention_baseline(T, dtype, timed, benchmark, device, copy_floor, reference, spec):
    """Unbiased causal SDPA: the attention every bias encoding is compared with (`nope` runs it)."""
    dt, dtype = dtype, _check_dtype(dtype, device)  # the parameter's name ("fp32"), the torch dtype
    B = ATTENTION_BATCH
    q, k, v = _inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    benchmark.group = f"attention-T{T}-{dt}"
    fn = lambda: K.attention_unbiased(q, k, v)  # noqa: E731
    _, once = P.call_seconds(fn, device)  # the warm-up call
    timed(fn, rounds=_rounds(once, spec.seconds), warmup_rounds=0)
    _record(benchmark, copy_floor, reference, name="attention-baseline", kind="attention-baseline",
            impl="sdpa_causal", T=T, dt=dt, shape=q.shape, bytes_moved=P.attention_bytes(q, k, v), once=once)


def test_kernel(encoding, impl, T, dtype, timed, benchmark, device, copy_floor, reference, eager_outputs, spec):
    """One (encoding, implementation, length T, dtype): separate parameters, so pytest-benchmark's
    `--benchmark-group-by=param:T` (or `param:encoding`, `param:impl`, `param:dtype`) works."""
    name, dt = encoding, dtype
    enc = encoding_instance(name, str(device), max(spec.lengths))
    if impl == "none":
        pytest.skip(K.nothing_to_fuse_reason(enc))
    dtype = _check_dtype(dt, device)
    kind = K.kernel_kind(enc)
    benchmark.group = f"{'attention' if kind in ATTENTION_KINDS else kind}-T{T}-{dt}"
    if why := P.timing_skip(impl, device.type):
        pytest.skip(why)
    compiled = impl in ("fused", "compiled", "flex", "flex_gather")
    if compiled:
        ok, reason = K.flex_support(device.type) if impl.startswith("flex") else K.compile_support(device.type)
        if not ok:
            pytest.skip(reason)
    atol, rtol = TOL[dt][kind]
    build = {"rotary": _rotary, "bias": _bias, "absolute": _absolute, "content": _content, "layer": _layer,
             "attend": _layer}[kind]
    with torch.no_grad():  # forward kernels: no autograd graph, learned biases need no grad
        fn, eager_fn, shape, bytes_moved, build_info, refs = build(enc, impl, T, dtype, device, spec)
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
        if compiled:  # the first call compiled: time a second one (the warm-up) to size the rounds
            _, once = P.call_seconds(fn, device)
        timed(fn, rounds=_rounds(once, spec.seconds), warmup_rounds=0)
        interleaved = _over_unbiased_interleaved(fn, shape, dtype, device) if kind in ATTENTION_KINDS and impl != "eager" else None
        copy_interleaved = (P.interleaved_ratio(fn, copy_floor.copy_fn(bytes_moved), device, rounds=31)
                            if kind == "rotary" and impl != "eager" else None)
        if kind in ATTENTION_KINDS:
            q, k, v = _inputs(shape, dtype, device, 3)
            refs["sdpa_causal"] = lambda: K.attention_unbiased(q, k, v)
        _record(benchmark, copy_floor, reference, name=name, kind=kind, impl=impl, T=T, dt=dt, shape=shape,
                bytes_moved=bytes_moved, once=once, err=err, refs={"eager": eager_fn, **refs},
                rounds=lambda once: _rounds(once, spec.seconds))
    benchmark.extra_info.update(build_info)
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
    q, k, v = _inputs(shape, dtype, device, 3)
    return P.interleaved_ratio(fn, lambda: K.attention_unbiased(q, k, v), device, rounds)


# --- per-kind setup: returns (fn, eager_fn, shape, bytes_moved, info: extra_info entries, ---------
# --- refs: other references on the same inputs that `_record` divides by, e.g. "hf") ---------------


def _rotary(enc, impl, T, dtype, device, s: KernelSpec):
    B = ROTARY_BATCH
    q, k = _inputs((B, HEADS, T, HEAD_DIM), dtype, device, 2)
    pos = _positions(enc, B, T, device)
    tables = K.rotary_inputs(enc, pos, dtype)
    if tables is None:  # an unknown rotary encoding: its own hook, eager vs compiled
        eager = lambda: enc.rotate(q, k, pos)  # noqa: E731
        fns = {"eager": eager, "fused": lambda: K.compiled_hook(enc, "rotate")(q, k, pos)}
    else:
        eager = lambda: tables.eager(q, k)  # noqa: E731
        cos_full, sin_full = K.hf_tables(tables.cos, tables.sin)
        fns = {"eager": eager, "fused": lambda: tables.fused(q, k), "hf": lambda: K.rotary_hf(q, k, cos_full, sin_full)}
    refs = {"hf": fns["hf"]} if "hf" in fns else {}
    return fns[impl], eager, q.shape, P.rotary_bytes(q, k), {}, refs


def _bias(enc, impl, T, dtype, device, s: KernelSpec):
    B = ATTENTION_BATCH
    q, k, v = _inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    pos = _positions(enc, B, T, device)
    eager = lambda: K.attention_eager(q, k, v, enc, pos)  # noqa: E731
    if impl == "eager":
        p = shared_rows(pos)
        bias = torch.empty(p.shape[0], HEADS, T, T, dtype=dtype, device="meta")
        # the timed call builds its mask by blocks of query rows past K.BIAS_BLOCK_BYTES (FIRE's hook at T = 4096 would
        # hold 4 GB of intermediates in one call): record the rows per hook call (T: one call)
        info = {"bias_query_rows": K.bias_query_rows(p.shape[0], enc.dims.n_heads, T, dtype)}
        return eager, eager, q.shape, P.attention_bytes(q, k, v, bias=bias), info, {}
    if impl == "cached":
        mask = K.folded_bias(enc, pos, dtype)  # (B|1, H, T, T), built once for this length
        return lambda: K.attention_cached(q, k, v, mask), eager, q.shape, P.attention_bytes(q, k, v, bias=mask), {}, {}
    if impl == "cached_blocks":
        mask = K.folded_bias(enc, pos, dtype)  # (B|1, H, T, T), built once for this length
        read = P.attention_bytes(q, k, v) + P.nbytes(mask) // 2  # the causal half of the mask
        return lambda: K.attention_cached_blocks(q, k, v, mask), eager, q.shape, read, {}, {}
    if impl == "toeplitz":
        tplan = K.prepare_toeplitz(enc, pos, dtype)  # (H, 2T−1) diagonals, once per length
        bytes_moved = P.attention_bytes(q, k, v) + P.nbytes(tplan.diagonals)
        return lambda: K.attention_toeplitz(q, k, v, tplan), eager, q.shape, bytes_moved, {}, {}
    plan = K.prepare_flex(enc, pos, dtype, gather=impl == "flex_gather")  # once per position pattern
    return lambda: K.attention_flex(q, k, v, plan), eager, q.shape, P.attention_bytes(q, k, v) + plan.extra_bytes, {}, {}


def _absolute(enc, impl, T, dtype, device, s: KernelSpec):
    B = ROTARY_BATCH
    (h,) = _inputs((B, T, HEADS * HEAD_DIM), dtype, device, 1)
    pos = _positions(enc, B, T, device)
    eager = lambda: enc.embed(h, pos)  # noqa: E731
    fn = eager if impl == "eager" else (lambda: K.compiled_hook(enc, "embed")(h, pos))
    table_rows = h if hasattr(K.base_encoding(enc), "table") else None  # learned: one table row read per token
    return fn, eager, h.shape, 2 * P.nbytes(h) + P.nbytes(table_rows), {}, {}


def _content(enc, impl, T, dtype, device, s: KernelSpec):
    if device.type == "cpu" and T > s.content_max_t:
        pytest.skip(f"{enc.name}: content-dependent attention materialises several (B, H, T, T) tensors; "
                    f"CPU runs stop at T={s.content_max_t} (kernels.content_max_t or LENBENCH_CONTENT_MAX_T raises it)")
    B = ATTENTION_BATCH
    q, k, v = _inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    pos = _positions(enc, B, T, device)
    enc = P.in_dtype(enc, dtype)  # a per-dtype copy: the session's instance stays as built
    eager = lambda: K.attention_content(q, k, v, enc, pos)  # noqa: E731
    fn = eager if impl == "eager" else (lambda: K.attention_content_compiled(q, k, v, enc, pos))
    bias = torch.empty(B, HEADS, T, T, dtype=dtype, device="meta")
    return fn, eager, q.shape, P.attention_bytes(q, k, v, bias=bias), {}, {}


def _layer(enc, impl, T, dtype, device, s: KernelSpec):
    """layer (FoX, DAPE) and attend (stick-breaking, SSMax): one layer's attention after its
    projections, from the layer input x and q, k, v (`lenbench.kernels.layer`)."""
    if device.type == "cpu" and T > s.content_max_t:
        pytest.skip(f"{enc.name}: its eager attention materialises (B, H, T, T) tensors; CPU runs stop at "
                    f"T={s.content_max_t} (kernels.content_max_t or LENBENCH_CONTENT_MAX_T raises it)")
    B = ATTENTION_BATCH
    q, k, v = _inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    (x,) = _inputs((B, T, HEADS * HEAD_DIM), dtype, device, 1, seed=1)
    pos = _positions(enc, B, T, device)
    enc = P.in_dtype(enc, dtype)  # a per-dtype copy (FoX's gates, DAPE's MLPs read x / the logits in dtype)
    mask = K.layer_mask(enc, pos, dtype)  # (B|1, H|1, T, T) or None: built once per forward in the model
    eager = lambda: K.attention_layer(x, q, k, v, enc, pos, mask)  # noqa: E731
    fns = {"eager": eager, "compiled": lambda: K.attention_layer_compiled(x, q, k, v, enc, pos, mask),
           "flex": lambda: K.attention_score_vector(x, q, k, v, enc, pos)}
    # bytes: q, k, v, out, x, plus the bias read where one is materialised (the layer bias; a wrapped bias's mask)
    if K.kernel_kind(enc) == "layer":
        materialised = None if impl == "flex" else torch.empty(B, HEADS, T, T, dtype=dtype, device="meta")
    else:
        materialised = mask
    return fns[impl], eager, q.shape, P.attention_bytes(q, k, v, bias=materialised) + P.nbytes(x), {}, {}


# --- training step --------------------------------------------------------------------------------



def train_encodings(s: KernelSpec) -> list[str]:
    """nope (the reference) first, then the suite's kernel encodings (all registered when empty)."""
    return ["nope", *[n for n in ENCODINGS.names() if n != "nope" and (not s.encodings or n in s.encodings)]]


TRAIN_TASK = os.environ.get("LENBENCH_TRAIN_TASK", "lm")  # a task of the suite: lm (64 tokens in quick), passkey, copy


def SUITE(request) -> str:  # noqa: N802 - the --suite option, as load_suite takes it
    return request.config.getoption("--suite")


@pytest.fixture(scope="session")
def interleaved_step_ratios(device, request, spec) -> dict[str, float]:
    """Every encoding's quick-suite training step timed round-robin in one loop; per encoding the
    median over rounds of (its step / nope's step in the same round). Other load on the machine
    then hits every encoding alike."""
    steps = {name: P.quick_training_step(name, device, suite=SUITE(request), task=TRAIN_TASK).step
             for name in train_encodings(spec)}
    times = {name: [] for name in steps}
    with P.cell_threads(device):
        for step in steps.values():
            for _ in range(3):
                step()
        synchronize(device)
        for _ in range(spec.train_rounds):
            for name, step in steps.items():
                times[name].append(P.call_seconds(step, device)[1])
    return {name: statistics.median(t / n for t, n in zip(times[name], times["nope"], strict=True)) for name in steps}


def test_training_step(name, timed, benchmark, device, interleaved_step_ratios, request, reference, spec):
    """One training step (forward, backward, clip, AdamW) of the suite's lm model."""
    ts = P.quick_training_step(name, device, suite=SUITE(request), task=TRAIN_TASK)
    benchmark.group = f"training-step-{ts.geometry['suite']}-{TRAIN_TASK}"
    with P.cell_threads(device) as threads:
        timed(ts.step, rounds=spec.train_rounds, warmup_rounds=3)
        stats = getattr(benchmark, "stats", None)  # None under --benchmark-disable
        seconds = stats.stats.median if stats is not None else time_fn(ts.step, device, rounds=3, warmup=0)
        reference.record((name, "train-step"), seconds)
        nope = seconds if name == "nope" else reference.seconds(
            ("nope", "train-step"),
            P.quick_training_step("nope", device, suite=SUITE(request), task=TRAIN_TASK).step,
            lambda once: spec.train_rounds)
    benchmark.extra_info.update(
        encoding=name, kind="training-step", seconds=seconds, ratio_to_nope=interleaved_step_ratios[name],
        ratio_to_nope_interleaved=interleaved_step_ratios[name],
        ratio_to_nope_sequential=seconds / nope, tokens=ts.tokens, model_params=ts.model_params,
        geometry=ts.geometry, threads=threads,
    )


# --- training MFU ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def matmul_rates(device) -> dict[str, float]:
    """The device's dense matmul rate (FLOP/s, fastest of a few square products: 2048² on the CPU,
    8192² on an accelerator; `lenbench.benchmark.flops.matmul_rate`) in fp32, and in
    bf16 where native, measured once in this session."""
    from lenbench.benchmark.flops import matmul_rate

    rates = {"fp32": matmul_rate(device, torch.float32)}
    if K.bf16_support(device.type)[0]:
        rates["bf16"] = matmul_rate(device, torch.bfloat16)
    return rates


def test_training_mfu(task, timed, benchmark, device, matmul_rates, request, spec):
    """Model FLOPs utilisation of one training step of the suite's `task` (encoding nope: the model's
    own FLOPs), fast path (what `lenbench.train` runs) and eager reference, timed round-robin.

    extra_info: task, impl ("fast-<task>": a distinct key for `lenbench compare`), flops (analytic
    forward + backward, `lenbench.benchmark.flops`), seconds (median of the fast step), seconds_eager, speedup
    (median over rounds of eager / fast in the same round), threads (the cells' intra-op thread
    count, `plans.cell_threads`: everything here runs with it), sgemm_flops_per_s (fp32,
    the fastest 2048² sgemm of the rounds at those threads), sgemm_flops_per_s_all_threads (at
    session start with every thread; bf16_flops_per_s where native), mfu and mfu_eager (median
    over rounds of the step's FLOP/s over the sgemm's timed in the same round), mfu_session_peak
    (median step over sgemm_flops_per_s), mfu_best (fastest fast round over it), geometry.
    """
    from lenbench.benchmark.flops import mfu

    suite = SUITE(request)
    fast = P.quick_training_step("nope", device, suite=suite, task=task, fast=True)
    eager = P.quick_training_step("nope", device, suite=suite, task=task, fast=False)
    benchmark.group = f"training-mfu-{fast.geometry['suite']}"
    n = 2048
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)  # (n, n) each
    c = torch.empty(n, n, device=device)
    sgemm = lambda: torch.mm(a, b, out=c)  # noqa: E731
    # Round-robin: each round times one sgemm, one eager step and one fast step back to back, so
    # load from other jobs on the machine hits the step and the peak it is divided by alike. All
    # at the thread count a cell trains with (one on the CPU): the sgemm on the same cores.
    times = {"sgemm": [], "eager": [], "fast": []}
    with P.cell_threads(device) as threads:
        for _ in range(3):
            eager.step(), fast.step(), sgemm()
        for _ in range(spec.train_rounds):
            for label, fn in (("sgemm", sgemm), ("eager", eager.step), ("fast", fast.step)):
                times[label].append(P.call_seconds(fn, device)[1])
        timed(fast.step, rounds=spec.train_rounds, warmup_rounds=1)
        peak = max(2 * n**3 / g for g in times["sgemm"])  # the fastest sgemm of the rounds, these threads
    seconds = _median(benchmark, statistics.median(times["fast"]))
    seconds_eager = statistics.median(times["eager"])
    per_round = {label: [mfu(fast.flops, t, 2 * n**3 / g) for t, g in zip(times[label], times["sgemm"], strict=True)]
                 for label in ("eager", "fast")}
    benchmark.extra_info.update(
        kind="training-mfu", task=task, encoding="nope", impl=f"fast-{task}", flops=fast.flops, seconds=seconds,
        seconds_eager=seconds_eager,
        speedup=statistics.median(e / f for e, f in zip(times["eager"], times["fast"], strict=True)),
        sgemm_flops_per_s=peak, sgemm_flops_per_s_all_threads=matmul_rates["fp32"],
        bf16_flops_per_s=matmul_rates.get("bf16"), threads=threads,
        mfu=statistics.median(per_round["fast"]), mfu_eager=statistics.median(per_round["eager"]),
        mfu_session_peak=mfu(fast.flops, seconds, peak), mfu_best=mfu(fast.flops, min(times["fast"]), peak),
        tokens=fast.tokens, geometry=fast.geometry,
    )
