"""Forward-kernel timings of every registered encoding, eager reference vs fused, on `--device`.

    pytest bench -k kernels --benchmark-group-by=group [--device cuda] [--benchmark-json out.json]

One test per (encoding, implementation, length T, dtype), over `lenbench.encodings.ENCODINGS`
(new encodings are picked up automatically; one without a hook of its own is skipped with the
reason). Implementations come from `lenbench.kernels.implementations`:

    rotary    eager (apply_rotary on q, then k), hf (transformers' rotate_half), fused (compiled)
    bias      eager (hook + SDPA), cached (bias materialised once per length), flex (score_mod),
              flex_gather (ALiBi: the score_mod gathering positions even when they are contiguous)
    absolute  eager vs compiled embed;  content (CoPE): eager vs compiled attention

plus `test_attention_baseline` (unbiased causal SDPA, what `nope` runs) and `test_training_step`
(one training step of each encoding at the quick suite's size).

Before timing, each fused implementation is checked equal to the eager reference within the
dtype's tolerance. Compilation and autotuning happen in that check call, never in a timed round.
Rounds adapt to the kernel's duration (about LENBENCH_KERNEL_SECONDS of timing, 3 … 50 rounds).

Shapes (fixed across T, so one dynamic-shape compilation serves every length): rotary
(B=8, H=8, T, Dh=64), absolute (8, T, 512), attention (B=1, 8, T, 64).

Environment (all optional):
    LENBENCH_KERNEL_LENGTHS   comma list of T (default 256,512,1024,2048,4096)
    LENBENCH_KERNEL_DTYPES    comma list of fp32,bf16 (default both; bf16 skipped without native support)
    LENBENCH_KERNEL_SECONDS   timing budget per benchmark (default 0.25)
    LENBENCH_CONTENT_MAX_T    longest T for content-dependent (CoPE) kernels on the CPU (default 1024)
    LENBENCH_TRAIN_TASK       quick-suite task of the training-step benchmark (default lm: T = 64;
                              passkey and copy train at T = 32)
    LENBENCH_TRAIN_ROUNDS     rounds of the training-step benchmarks (default 20)

`benchmark.extra_info` keys (every kernel test):
    encoding, kind (rotary|bias|absolute|content|attention-baseline), impl, T, dtype, shape
    bytes_moved        estimate: rotary read q,k + write q,k; attention q,k,v,out (+ the bias when
                       materialised); absolute read h + write out (+ gathered table rows)
    seconds            median seconds per call;  gb_per_s  bytes_moved / seconds
    copy_seconds, copy_ratio   a plain copy of bytes_moved on this device into a preallocated
                       buffer (measured once per size in this session) and seconds / copy_seconds
                       (1.0 = the copy floor)
    over_eager         seconds / the eager reference's seconds (same encoding, T, dtype), when measured
    speedup_over_hf    rotary (rope): hf seconds / seconds
    over_unbiased      attention: seconds / unbiased causal SDPA seconds (same T, dtype)
    max_abs_err        fused vs eager before timing
test_training_step extra_info: encoding, seconds (this benchmark's median), ratio_to_nope (median
    over rounds of per-round ratios, every encoding timed round-robin in one loop once per
    session, so other load on the machine hits all alike; ratio_to_nope_interleaved is the same
    number), ratio_to_nope_sequential (this benchmark over nope's benchmark: sensitive to load
    drifting between tests), tokens, model_params, geometry.
"""

from __future__ import annotations

import os
import statistics
import time

import pytest
import torch

from lenbench import kernels as K
from lenbench.device import synchronize
from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding


def _env_list(name: str, default: str) -> list[str]:
    return [x.strip() for x in os.environ.get(name, default).split(",") if x.strip()]


LENGTHS = [int(x) for x in _env_list("LENBENCH_KERNEL_LENGTHS", "256,512,1024,2048,4096")]
DTYPE_NAMES = _env_list("LENBENCH_KERNEL_DTYPES", "fp32,bf16")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SECONDS = float(os.environ.get("LENBENCH_KERNEL_SECONDS", "0.25"))
CONTENT_MAX_T = int(os.environ.get("LENBENCH_CONTENT_MAX_T", "1024"))
HEADS, HEAD_DIM = 8, 64
ROTARY_BATCH, ATTENTION_BATCH = 8, 1
TOL = {
    "fp32": {"rotary": (1e-5, 1e-5), "absolute": (1e-5, 1e-5), "bias": (2e-4, 1e-4), "content": (2e-4, 1e-4)},
    # bf16: the eager reference rounds every product to bf16, the compiled kernel once at the end, so
    # a difference of products (x1·cos − x2·sin) can differ by a few bf16 ulps of the products.
    "bf16": {"rotary": (6e-2, 1.6e-2), "absolute": (3e-2, 1.6e-2), "bias": (3e-2, 2e-2), "content": (3e-2, 2e-2)},
}
# A compiled kernel that hits dynamo's recompile limit would silently run eagerly (and be timed
# as "fused"): make that an error instead.
if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
    torch._dynamo.config.fail_on_recompile_limit_hit = True
for _name in DTYPE_NAMES:
    if _name not in DTYPES:
        raise ValueError(f"LENBENCH_KERNEL_DTYPES: unknown dtype {_name!r}; choose from {', '.join(DTYPES)}")

_ENCODINGS: dict[tuple[str, str], object] = {}
_SECONDS: dict[tuple, float] = {}  # (encoding, impl, T, dtype) -> median seconds, this session
_EAGER_OUT: dict[tuple, torch.Tensor] = {}  # (encoding, T, dtype) -> the eager reference's output


def encoding(name: str, device: torch.device | str = "cpu"):
    """One instance per (encoding, device) for the session (compiled hooks are cached per instance)."""
    key = (name, str(device))
    if key not in _ENCODINGS:
        torch.manual_seed(0)
        dims = EncodingDims(d_model=HEADS * HEAD_DIM, n_heads=HEADS, max_len=max(LENGTHS), causal=True)
        _ENCODINGS[key] = build_encoding(name, dims).to(device).train()  # train: randomized draws positions
    return _ENCODINGS[key]


def kernel_cases() -> list[tuple[str, str, int, str]]:
    """(encoding, impl, T, dtype) in run order: eager before the implementations compared to it."""
    cases = []
    for name in ENCODINGS.names():
        impls = K.implementations(encoding(name)) or ["none"]
        for T in LENGTHS:
            for dt in DTYPE_NAMES:
                cases += [(name, impl, T, dt) for impl in impls]
    return cases


def _id(case) -> str:
    name, impl, T, dt = case
    return f"{name}-{impl}-T{T}-{dt}"


@pytest.fixture(scope="session")
def copy_floor(device) -> K.CopyFloor:
    """Copy time per byte count on the device, measured once per size in this session."""
    return K.CopyFloor(device)


def _call_seconds(fn, device) -> tuple[object, float]:
    start = time.perf_counter()
    out = fn()
    synchronize(device)
    return out, time.perf_counter() - start


def _rounds(seconds_per_call: float) -> int:
    """About SECONDS of timed rounds, at least 3 and at most 50."""
    return int(min(50, max(3, SECONDS / max(seconds_per_call, 1e-6))))


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


def _record(benchmark, copy_floor, *, name, kind, impl, T, dt, shape, bytes_moved, once, err=None) -> float:
    seconds = _median(benchmark, once)
    _SECONDS[(name, impl, T, dt)] = seconds
    copy_s = copy_floor.seconds(bytes_moved)
    info = benchmark.extra_info
    info.update(encoding=name, kind=kind, impl=impl, T=T, dtype=dt, shape=list(shape), bytes_moved=bytes_moved,
                seconds=seconds, gb_per_s=K.gb_per_s(bytes_moved, seconds), copy_seconds=copy_s,
                copy_ratio=K.copy_ratio(seconds, copy_s), max_abs_err=err)
    eager = _SECONDS.get((name, "eager", T, dt))
    if eager and impl != "eager":
        info["over_eager"] = seconds / eager
    if kind == "rotary" and impl != "hf" and (hf := _SECONDS.get((name, "hf", T, dt))):
        info["speedup_over_hf"] = hf / seconds
    if kind in ("bias", "content") and (base := _SECONDS.get(("attention-baseline", "sdpa_causal", T, dt))):
        info["over_unbiased"] = seconds / base
    return seconds


def _inputs(shape, dtype, device, n: int, seed: int = 0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(shape, generator=gen).to(device, dtype) for _ in range(n)]


def _positions(enc, B: int, T: int, device) -> torch.Tensor:
    pos = torch.arange(T, device=device).expand(B, T)  # (B, T)
    torch.manual_seed(T)  # randomized draws positions: the same ones for every implementation
    return enc.positions(pos)  # (B, T)


@pytest.mark.parametrize("T", LENGTHS, ids=[f"T{t}" for t in LENGTHS])
@pytest.mark.parametrize("dt", DTYPE_NAMES)
def test_attention_baseline(T, dt, timed, benchmark, device, copy_floor):
    """Unbiased causal SDPA: the attention every bias encoding is compared with (`nope` runs it)."""
    dtype = _check_dtype(dt, device)
    B = ATTENTION_BATCH
    q, k, v = _inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    benchmark.group = f"attention-T{T}-{dt}"
    fn = lambda: K.attention_unbiased(q, k, v)  # noqa: E731
    _, once = _call_seconds(fn, device)  # the warm-up call
    timed(fn, rounds=_rounds(once), warmup_rounds=0)
    _record(benchmark, copy_floor, name="attention-baseline", kind="attention-baseline", impl="sdpa_causal", T=T,
            dt=dt, shape=q.shape, bytes_moved=K.attention_bytes(q, k, v), once=once)


@pytest.mark.parametrize("case", kernel_cases(), ids=_id)
def test_kernel(case, timed, benchmark, device, copy_floor):
    name, impl, T, dt = case
    enc = encoding(name, device)
    if impl == "none":
        pytest.skip(K.nothing_to_fuse_reason(enc))
    dtype = _check_dtype(dt, device)
    kind = K.kernel_kind(enc)
    benchmark.group = f"{'attention' if kind in ('bias', 'content') else kind}-T{T}-{dt}"
    compiled = impl in ("fused", "compiled", "flex", "flex_gather")
    if compiled:
        ok, reason = K.flex_support(device.type) if impl.startswith("flex") else K.compile_support(device.type)
        if not ok:
            pytest.skip(reason)
    atol, rtol = TOL[dt][kind]
    build = {"rotary": _rotary, "bias": _bias, "absolute": _absolute, "content": _content}[kind]
    with torch.no_grad():  # forward kernels: no autograd graph, learned biases need no grad
        fn, eager_fn, shape, bytes_moved = build(enc, impl, T, dtype, device)
        out, once = _call_seconds(fn, device)  # compiles here, outside any timed round
        err = None
        if impl != "eager":
            key = (name, T, dt)
            ref = _EAGER_OUT.get(key)
            ref = eager_fn() if ref is None else ref
            out_t, ref_t = (torch.cat([o.flatten() for o in x]) if isinstance(x, tuple) else x for x in (out, ref))
            err = (out_t.float() - ref_t.float()).abs().max().item()
            if dt == "bf16":  # rounding errors scale with the magnitude of the products (xPos: up to e^±5)
                atol *= max(1.0, ref_t.float().abs().max().item())
            torch.testing.assert_close(out_t, ref_t, atol=atol, rtol=rtol, msg=lambda m: f"{name} {impl} T={T} {dt}: {m}")
        else:
            _EAGER_OUT.clear()  # keep one reference alive at a time
            _EAGER_OUT[(name, T, dt)] = out
        del out
        if compiled:  # the first call compiled: time a second one (the warm-up) to size the rounds
            _, once = _call_seconds(fn, device)
        timed(fn, rounds=_rounds(once), warmup_rounds=0)
    _record(benchmark, copy_floor, name=name, kind=kind, impl=impl, T=T, dt=dt, shape=shape, bytes_moved=bytes_moved,
            once=once, err=err)


# --- per-kind setup: returns (fn, eager_fn, shape, bytes_moved) ------------------------------------


def _rotary(enc, impl, T, dtype, device):
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
    return fns[impl], eager, q.shape, K.rotary_bytes(q, k)


def _bias(enc, impl, T, dtype, device):
    B = ATTENTION_BATCH
    q, k, v = _inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    pos = _positions(enc, B, T, device)
    eager = lambda: K.attention_eager(q, k, v, enc, pos)  # noqa: E731
    if impl == "eager":
        p = K.shared_rows(pos)
        return eager, eager, q.shape, K.attention_bytes(q, k, v, bias=torch.empty(p.shape[0], HEADS, T, T, dtype=dtype, device="meta"))
    if impl == "cached":
        mask = K.folded_bias(enc, pos, dtype)  # (B|1, H, T, T), built once for this length
        return lambda: K.attention_cached(q, k, v, mask), eager, q.shape, K.attention_bytes(q, k, v, bias=mask)
    plan = K.prepare_flex(enc, pos, dtype, gather=impl == "flex_gather")  # once per position pattern
    return lambda: K.attention_flex(q, k, v, plan), eager, q.shape, K.attention_bytes(q, k, v) + plan.extra_bytes


def _absolute(enc, impl, T, dtype, device):
    B = ROTARY_BATCH
    (h,) = _inputs((B, T, HEADS * HEAD_DIM), dtype, device, 1)
    pos = _positions(enc, B, T, device)
    eager = lambda: enc.embed(h, pos)  # noqa: E731
    fn = eager if impl == "eager" else (lambda: K.compiled_hook(enc, "embed")(h, pos))
    table_rows = h if hasattr(K.base_encoding(enc), "table") else None  # learned: one table row read per token
    return fn, eager, h.shape, 2 * K.nbytes(h) + K.nbytes(table_rows)


def _content(enc, impl, T, dtype, device):
    if device.type == "cpu" and T > CONTENT_MAX_T:
        pytest.skip(f"{enc.name}: content-dependent attention materialises several (B, H, T, T) tensors; "
                    f"CPU runs stop at T={CONTENT_MAX_T} (LENBENCH_CONTENT_MAX_T raises it)")
    B = ATTENTION_BATCH
    q, k, v = _inputs((B, HEADS, T, HEAD_DIM), dtype, device, 3)
    pos = _positions(enc, B, T, device)
    enc = enc.to(dtype)
    eager = lambda: K.attention_content(q, k, v, enc, pos)  # noqa: E731
    fn = eager if impl == "eager" else (lambda: K.attention_content_compiled(q, k, v, enc, pos))
    bias = torch.empty(B, HEADS, T, T, dtype=dtype, device="meta")
    return fn, eager, q.shape, K.attention_bytes(q, k, v, bias=bias)


# --- training step --------------------------------------------------------------------------------

TRAIN_ENCODINGS = ["nope", *[n for n in ENCODINGS.names() if n != "nope"]]
TRAIN_ROUNDS = int(os.environ.get("LENBENCH_TRAIN_ROUNDS", "20"))
TRAIN_TASK = os.environ.get("LENBENCH_TRAIN_TASK", "lm")  # a task of the quick suite: lm (64 tokens), passkey, copy


@pytest.fixture(scope="session")
def interleaved_step_ratios(device) -> dict[str, float]:
    """Every encoding's quick-suite training step timed round-robin in one loop; per encoding the
    median over rounds of (its step / nope's step in the same round). Other load on the machine
    then hits every encoding alike."""
    steps = {name: K.quick_training_step(name, device, task=TRAIN_TASK).step for name in TRAIN_ENCODINGS}
    for step in steps.values():
        for _ in range(3):
            step()
    synchronize(device)
    times = {name: [] for name in steps}
    for _ in range(TRAIN_ROUNDS):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t / n for t, n in zip(times[name], times["nope"], strict=True)) for name in steps}


@pytest.mark.parametrize("name", TRAIN_ENCODINGS)
def test_training_step(name, timed, benchmark, device, interleaved_step_ratios):
    """One training step (forward, backward, clip, AdamW) of the quick suite's lm model."""
    ts = K.quick_training_step(name, device, task=TRAIN_TASK)
    benchmark.group = f"training-step-quick-{TRAIN_TASK}"
    timed(ts.step, rounds=TRAIN_ROUNDS, warmup_rounds=3)
    stats = getattr(benchmark, "stats", None)  # None under --benchmark-disable
    seconds = stats.stats.median if stats is not None else K.time_fn(ts.step, device, rounds=3, warmup=0)
    _SECONDS[(name, "train-step")] = seconds
    nope = _SECONDS.get(("nope", "train-step"))
    benchmark.extra_info.update(
        encoding=name, kind="training-step", seconds=seconds, ratio_to_nope=interleaved_step_ratios[name],
        ratio_to_nope_interleaved=interleaved_step_ratios[name],
        ratio_to_nope_sequential=seconds / nope if nope else None, tokens=ts.tokens, model_params=ts.model_params,
        geometry=ts.geometry,
    )
