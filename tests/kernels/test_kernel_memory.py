"""The kernel benchmarks' memory bounds: a bias built by blocks of query rows equals the one-call
bias, its peak is bounded by the block, and freed memory goes back to the OS between benchmarks.

The peak and release checks run in subprocesses (ru_maxrss and /proc/self/statm are per process);
their bounds come from the tensor sizes, not from a machine's timing.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from lenbench import kernels as K
from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding

ROOT = Path(__file__).resolve().parents[2]
DIMS = EncodingDims(d_model=64, n_heads=4, max_len=256)
T = 37  # no block size below divides it


def bias_encodings():
    names = [n for n in ENCODINGS.names() if K.kernel_kind(build_encoding(n, DIMS)) == "bias"]
    assert {"alibi", "t5", "kerple", "sandwich", "fire"} <= set(names)
    return names


def positions():
    """Shared rows, per-row offsets (not shared) and strictly increasing random rows."""
    gen = torch.Generator().manual_seed(3)
    random = torch.stack([torch.randperm(200, generator=gen)[:T].sort().values for _ in range(2)])
    return {"shared": torch.arange(T).expand(2, T), "offset": torch.stack((torch.arange(T), torch.arange(T) + 9)),
            "random": random}


def rows_bytes(pos, rows, heads=DIMS.n_heads, dtype=torch.float64):
    """block_bytes that make `folded_bias` call the hook on `rows` query rows at a time."""
    return rows * pos.shape[0] * heads * pos.shape[1] * torch.empty((), dtype=dtype).element_size()


@pytest.mark.parametrize("name", bias_encodings())
def test_blocked_folded_bias_equals_one_call_in_float64(name):
    """Every element is the hook's at its (query, key) pair, whichever block it was built in."""
    enc = build_encoding(name, DIMS).double()
    with torch.no_grad():
        for label, pos in positions().items():
            from lenbench.encodings.base import shared_rows

            p = shared_rows(pos)
            for causal in (True, False):
                whole = K.folded_bias(enc, pos, torch.float64, causal, block_bytes=1 << 40)
                for rows in (1, 5, 16, T - 1):
                    bb = rows_bytes(p, rows)
                    assert K.bias_query_rows(p.shape[0], DIMS.n_heads, T, torch.float64, bb) == rows
                    blocked = K.folded_bias(enc, pos, torch.float64, causal, block_bytes=bb)
                    assert blocked.shape == whole.shape and blocked.dtype == torch.float64
                    torch.testing.assert_close(blocked, whole, atol=1e-12, rtol=0,
                                               msg=f"{name} {label} causal={causal} rows={rows}")
                    if causal:  # the causal mask is folded in row by row: −inf exactly after each query
                        after = torch.ones(T, T, dtype=torch.bool).triu(1)
                        assert torch.isneginf(blocked[..., after]).all() and torch.isfinite(blocked[..., ~after]).all()


def test_blocked_folded_bias_in_float32_equals_the_eager_attention():
    """The benchmark's eager reference at a blocked size gives the one-call attention."""
    enc = build_encoding("fire", DIMS)
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, DIMS.n_heads, T, 16, generator=gen) for _ in range(3))
    pos = positions()["offset"]
    with torch.no_grad():
        whole = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=K.folded_bias(enc, pos, torch.float32))
        blocked = K.folded_bias(enc, pos, torch.float32, block_bytes=rows_bytes(pos, 4, dtype=torch.float32))
        torch.testing.assert_close(torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=blocked), whole,
                                   atol=1e-6, rtol=1e-6)


def test_blocked_folded_bias_keeps_gradients():
    """Under autograd (trainable FIRE parameters) the blocks are concatenated: same values, same gradients."""
    pos = positions()["shared"]
    grads = []
    for bb in (1 << 40, rows_bytes(pos[:1], 6)):
        torch.manual_seed(0)  # the same parameters both times
        enc = build_encoding("fire", DIMS).double()
        bias = K.folded_bias(enc, pos, torch.float64, block_bytes=bb)
        assert bias.requires_grad
        weights = torch.linspace(-1, 1, bias.numel(), dtype=torch.float64).view_as(bias)
        (bias.masked_fill(torch.isinf(bias), 0) * weights).sum().backward()
        grads.append([prm.grad.clone() for prm in enc.parameters()])
    for whole, blocked in zip(*grads, strict=True):
        torch.testing.assert_close(blocked, whole, atol=1e-10, rtol=1e-10)


def test_bias_query_rows():
    f32 = torch.float32
    assert K.BIAS_BLOCK_BYTES == 64 << 20
    assert K.bias_query_rows(1, 8, 1024, f32) == 1024  # 32 MiB: one call, as before blocks existed
    assert K.bias_query_rows(1, 8, 2048, f32) == 1024  # 128 MiB: two calls
    assert K.bias_query_rows(1, 8, 4096, f32) == 512  # 512 MiB: eight calls of 64 MiB
    assert K.bias_query_rows(2, 8, 4096, f32) == 256  # unshared rows double the bytes of a row
    assert K.bias_query_rows(1, 8, 4096, torch.bfloat16) == 512  # hooks compute in float32
    assert K.bias_query_rows(1, 8, 4096, torch.float64) == 256
    assert K.bias_query_rows(1, 8, 4096, f32, block_bytes=1) == 1  # at least one row


def test_relative_range_equals_the_pairwise_extremes():
    for pos in (*positions().values(), torch.tensor([[5, 3, 9, 0], [2, 2, 2, 2]])):
        rel = pos[:, None, :] - pos[:, :, None]  # (B, T, T): k_pos − q_pos
        assert K.relative_range(pos) == tuple(int(v) for v in torch.aminmax(rel))


PEAK = textwrap.dedent("""
    import json, resource, sys
    import torch
    torch.set_num_threads(1)
    from lenbench import kernels as K
    from lenbench.device import keep_freed_memory
    from lenbench.encodings import EncodingDims, build_encoding

    T, H, block = int(sys.argv[1]), 8, int(sys.argv[2])
    keep_freed_memory()  # as the benchmark session
    enc = build_encoding("fire", EncodingDims(d_model=H * 64, n_heads=H, max_len=T, causal=True))
    q, k, v = (torch.randn(1, H, T, 64) for _ in range(3))  # (1, H, T, 64)
    pos = torch.arange(T)[None]  # (1, T)
    maxrss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # bytes (Linux: KiB)
    peaks = {}
    with torch.no_grad():
        K.attention_eager(q[:, :, :8], k[:, :, :8], v[:, :, :8], enc, pos[:, :8])  # imports, first-call state
        for label, bb in (("blocked", block), ("one_call", 1 << 40)):
            before = maxrss()
            for _ in range(3):  # rounds of the timed eager reference
                mask = K.folded_bias(enc, pos, torch.float32, block_bytes=bb)  # (1, H, T, T)
                torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                del mask
            peaks[label] = maxrss() - before
    print(json.dumps(peaks))
""")


@pytest.mark.subprocess
def test_fire_eager_peak_is_bounded_by_the_mask_and_the_block():
    """FIRE's hook holds two (rows, T, hidden = 32) tensors: 8 of its 8-head bias blocks. At T = 2048
    with 8 MiB blocks the eager reference's peak stays within 2 masks + 16 blocks (384 MiB; measured
    ~270 MiB), where one call over all rows takes about 1.1 GiB (asserted too: the bound discriminates)."""
    T, block = 2048, 8 << 20
    mask = 8 * T * T * 4  # (1, 8, T, T) fp32: 128 MiB
    bound = 2 * mask + 16 * block
    proc = subprocess.run([sys.executable, "-c", PEAK, str(T), str(block)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    peaks = json.loads(proc.stdout.strip().splitlines()[-1])
    assert peaks["blocked"] <= bound, f"blocked FIRE eager peaked {peaks['blocked'] / 2**20:.0f} MiB > {bound / 2**20:.0f}"
    # one call from the blocked run's peak: its own rise alone is above the bound
    assert peaks["one_call"] > bound, f"one-call FIRE eager rose only {peaks['one_call'] / 2**20:.0f} MiB"


RELEASE = textwrap.dedent("""
    import json, torch
    from lenbench.device import keep_freed_memory
    from lenbench.benchmark import plans as P
    rss = lambda: int(open("/proc/self/statm").read().split()[1]) * 4096
    keep_freed_memory()
    tensors = [torch.ones(8 << 20) for _ in range(8)]  # 8 × 32 MiB, written
    del tensors
    kept = rss()
    released = P.release_freed_memory()
    print(json.dumps({"kept": kept, "after": rss(), "released": released}))
""")


@pytest.mark.subprocess
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim and /proc/self/statm: glibc on Linux")
def test_release_freed_memory_hands_the_kept_heap_back():
    """keep_freed_memory keeps 256 MiB of freed blocks resident; release_freed_memory returns them."""
    proc = subprocess.run([sys.executable, "-c", RELEASE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if not out["released"]:
        pytest.skip("no glibc malloc_trim here")
    assert out["kept"] - out["after"] >= 200 << 20, out


@pytest.mark.subprocess
def test_every_kernel_benchmark_releases_memory_after_it():
    """The benchmarks' autouse fixture (`lenbench.benchmark.bench.common`) runs around every test of
    bench/test_kernels.py, the kernel and the training benchmarks alike (setup plan)."""
    env = {**os.environ, "LENBENCH_KERNEL_LENGTHS": "64", "LENBENCH_KERNEL_DTYPES": "fp32",
           "LENBENCH_KERNEL_ENCODINGS": "alibi,rope"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "bench/test_kernels.py", "--suite", "smoke", "--setup-plan",
                           "-q", "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the plan's test lines; not the "slowest durations" lines, which name tests too, more of them on a busy machine
    tests = [line for line in proc.stdout.splitlines() if "bench/test_kernels.py::" in line and "(fixtures used:" in line]
    releases = [line for line in proc.stdout.splitlines() if "TEARDOWN F release_memory_after_each_test" in line]
    assert tests and len(releases) == len(tests), proc.stdout[-3000:]
