"""Fused kernels == eager references, the bandwidth arithmetic, and `bench/test_kernels.py` collection.

Fast and untimed: flex_attention runs its unfused eager reference except in one compiled check,
and the rotary kernel compiles once at a small size (about 20 s of compilation in all, less with
a warm inductor cache).
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lenbench import kernels as K
from lenbench.benchmark import plans as P
from lenbench.benchmark import timing
from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding
from lenbench.encodings.attention import attend
from lenbench.encodings.rope import apply_rotary, apply_rotary_tables
from lenbench.encodings.t5 import t5_bucket
from lenbench.model import ModelConfig, Transformer

ROOT = Path(__file__).resolve().parents[2]
DIMS = EncodingDims(d_model=64, n_heads=4, max_len=256)
B, H, T, DH = 2, 4, 40, 16


def qkv(n=3, dtype=torch.float32, t=T):
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(B, H, t, DH, generator=gen).to(dtype) for _ in range(n)]


def positions():
    """Contiguous rows (one with an offset) and strictly increasing random rows."""
    plain = torch.arange(T).expand(B, T)
    offset = torch.stack((torch.arange(T), torch.arange(T) + 7))
    gen = torch.Generator().manual_seed(2)
    random = torch.stack([torch.randperm(200, generator=gen)[:T].sort().values for _ in range(B)])
    return {"plain": plain, "offset": offset, "random": random}


def kind_names(kind):
    return [n for n in ENCODINGS.names() if K.kernel_kind(build_encoding(n, DIMS)) == kind]


#: The bias encodings that declare `relative_only` (the toeplitz path): alibi, kerple, sandwich, t5.
RELATIVE_ONLY = [n for n in kind_names("bias") if K.base_encoding(build_encoding(n, DIMS)).relative_only]


# --- registry coverage ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ENCODINGS.names())
def test_every_encoding_has_a_kind_and_implementations(name):
    enc = build_encoding(name, DIMS)
    kind = K.kernel_kind(enc)
    impls = K.implementations(enc)
    assert kind in ("rotary", "bias", "absolute", "content", "layer", "attend", "none")
    if kind == "none":
        assert impls == [] and "nothing to fuse" in K.nothing_to_fuse_reason(enc)
    else:
        assert impls[0] == "eager" and len(impls) >= 2


def test_kinds_of_the_core_encodings():
    kinds = {n: K.kernel_kind(build_encoding(n, DIMS)) for n in ("nope", "rope", "alibi", "t5", "sinusoidal", "learned")}
    assert kinds == {"nope": "none", "rope": "rotary", "alibi": "bias", "t5": "bias", "sinusoidal": "absolute",
                     "learned": "absolute"}


# --- rotary -----------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("partial", [1.0, 0.5])
def test_rotary_fused_formulation_equals_apply_rotary(layout, partial):
    """The compiler's formulation, run eagerly, is bit-identical to the reference (same products)."""
    enc = build_encoding("rope", DIMS, layout=layout, partial=partial)
    q, k = qkv(2)
    for pos in positions().values():
        tables = K.rotary_inputs(enc, pos, torch.float32)
        ref = K.rotary_eager(q, k, tables.cos, tables.sin, layout)
        assert all(torch.equal(a, b) for a, b in zip(tables.fused(q, k, compiled=False), ref, strict=True))
        for a, b in zip(ref, enc.rotate(q, k, pos), strict=True):  # the training path fuses multiply-adds
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", ["rope", "xpos"])
def test_rotary_tables_are_shared_by_identical_rows_only(name):
    """Identical position rows get one (1, 1, T, R/2) table broadcast over the batch (as the model
    builds them), rows that differ one table each; the rotation is the same either way."""
    enc = build_encoding(name, DIMS)
    q, k = qkv(2)
    B, T = q.shape[0], q.shape[2]
    plain = torch.arange(T).expand(B, T)  # (B, T), every row 0 … T−1
    shared = K.rotary_inputs(enc, plain, torch.float32)
    assert shared.cos.shape[0] == 1 and (shared.cos_k is None or shared.cos_k.shape[0] == 1)
    assert K.rotary_inputs(enc, positions()["random"], torch.float32).cos.shape[0] == B
    ref = K.base_encoding(enc).rotate(q, k, plain)
    for a, b in zip(shared.eager(q, k), ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", ["rope", "prope"])  # p-RoPE rotates its kept pairs only (transformers' partial rotary)
def test_hf_rotate_half_formulation_equals_reference(name):
    enc = build_encoding(name, DIMS)
    q, k = qkv(2)
    tables = K.rotary_inputs(enc, positions()["random"], torch.float32)
    out = K.rotary_hf(q, k, *K.hf_tables(tables.cos, tables.sin))
    ref = tables.eager(q, k)
    assert all(torch.equal(a, b) for a, b in zip(out, ref, strict=True))


@pytest.mark.parametrize("name", kind_names("rotary"))
def test_rotary_tables_reproduce_the_encodings_own_rotate(name):
    enc = build_encoding(name, DIMS).eval()
    q, k = qkv(2)
    pos = positions()["offset"]
    tables = K.rotary_inputs(enc, pos, torch.float32)
    if tables is None:
        pytest.skip(f"{name}: no table adapter; its fused path compiles its own rotate hook")
    ref = K.base_encoding(enc).rotate(q, k, pos)
    for out in (tables.eager(q, k), tables.fused(q, k, compiled=False)):
        for a, b in zip(out, ref, strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


@pytest.mark.compile
@pytest.mark.parametrize(("name", "kwargs", "pos"), [
    ("rope", {}, "plain"),
    ("rope", {}, "random"),
    ("rope", {"layout": "interleaved"}, "random"),
    ("rope", {"partial": 0.5}, "offset"),
    ("xpos", {}, "random"),
], ids=["half-shared", "half-per-batch", "interleaved", "partial", "xpos"])
def test_rotary_fused_compiled_equals_eager(name, kwargs, pos):
    """The compiled kernel (q and k in one fused loop, `K.ROTARY_COMPILE_OPTIONS`) equals the
    eager reference for both layouts, partial rotation, xPos's separate k tables and positions
    that differ per batch row (one compilation per branch)."""
    ok, reason = K.compile_support("cpu")
    if not ok:
        pytest.skip(reason)
    enc = build_encoding(name, DIMS, **kwargs)
    q, k = qkv(2)
    tables = K.rotary_inputs(enc, positions()[pos], torch.float32)
    out = tables.fused(q, k)
    ref = tables.eager(q, k)
    assert not torch.allclose(ref[0], q) and not torch.allclose(ref[1], k)  # the rotation does something
    for a, b in zip(out, ref, strict=True):
        assert a.shape == b.shape and a.is_contiguous()
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


# --- additive bias ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", kind_names("bias"))
def test_bias_cached_and_flex_equal_eager(name):
    enc = build_encoding(name, DIMS)
    q, k, v = qkv()
    unbiased = K.attention_unbiased(q, k, v)
    with torch.no_grad():
        for label, pos in positions().items():
            ref = K.attention_eager(q, k, v, enc, pos)
            assert (ref - unbiased).abs().max() > 1e-4, f"{name}: the bias changes nothing"
            mask = K.folded_bias(enc, pos, torch.float32)
            torch.testing.assert_close(K.attention_cached(q, k, v, mask), ref, atol=1e-6, rtol=1e-6)
            for gather in (False, True):
                plan = K.prepare_flex(enc, pos, torch.float32, gather=gather)
                if label != "random" and not plan.flavour.startswith("dense"):
                    assert plan.affine is not gather
                out = K.attention_flex(q, k, v, plan, compiled=False)
                torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5, msg=f"{name} {label} gather={gather}")


@pytest.mark.parametrize("form", ["log", "power"])
def test_kerple_forms_in_flex(form):
    enc = build_encoding("kerple", DIMS, form=form)
    q, k, v = qkv()
    pos = positions()["random"]
    with torch.no_grad():
        plan = K.prepare_flex(enc, pos, torch.float32)
        assert plan.flavour == f"kerple_{form}"
        torch.testing.assert_close(K.attention_flex(q, k, v, plan, compiled=False),
                                   K.attention_eager(q, k, v, enc, pos), atol=1e-5, rtol=1e-5)


def test_relative_table_reads_the_hook():
    enc = build_encoding("t5", DIMS)
    table = K.relative_table(enc, -5, 3, torch.device("cpu"))  # (H, 9)
    buckets = t5_bucket(torch.arange(-5, 4), bidirectional=enc.bidirectional)
    torch.testing.assert_close(table, enc.table(buckets).T)


def test_row_offsets():
    pos = positions()
    assert torch.equal(K.row_offsets(pos["offset"]), torch.tensor([0, 7]))
    assert K.row_offsets(pos["random"]) is None


@pytest.mark.parametrize("name", RELATIVE_ONLY)
def test_toeplitz_equals_eager_causal_and_bidirectional(name):
    """Strided diagonal-table masks == the materialised bias, for blocks that do and do not divide T,
    per-row offsets, causal and bidirectional."""
    enc = build_encoding(name, DIMS)
    assert "toeplitz" in K.implementations(enc)
    q, k, v = qkv()
    with torch.no_grad():
        for label in ("plain", "offset"):
            pos = positions()[label]
            for causal in (True, False):
                ref = K.attention_eager(q, k, v, enc, pos, causal=causal)
                for block in (7, 16, T, 64):
                    plan = K.prepare_toeplitz(enc, pos, torch.float32, causal=causal, block=block)
                    assert plan.diagonals.shape == (H, 2 * T - 1) and plan.T == T
                    out = K.attention_toeplitz(q, k, v, plan)
                    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-6, msg=f"{name} {label} causal={causal} block={block}")


@pytest.mark.parametrize("name", kind_names("bias"))
def test_cached_blocks_equal_eager(name):
    """Causal query blocks over views of the materialised mask == the whole mask, any positions."""
    enc = build_encoding(name, DIMS)
    q, k, v = qkv()
    with torch.no_grad():
        for label, pos in positions().items():
            ref = K.attention_eager(q, k, v, enc, pos)
            mask = K.folded_bias(enc, pos, torch.float32)
            for block in (7, 16, T, None):
                torch.testing.assert_close(K.attention_cached_blocks(q, k, v, mask, block), ref, atol=1e-6, rtol=1e-6,
                                           msg=f"{name} {label} block={block}")


def test_toeplitz_diagonals_are_the_hook_bias():
    """Column n of the table is the bias at k − q = n − (T − 1); the causal mask is folded in."""
    enc = build_encoding("alibi", DIMS)
    plan = K.prepare_toeplitz(enc, torch.arange(5)[None], torch.float32)
    rel = torch.arange(-4, 5, dtype=torch.float32)  # k − q
    expected = torch.where(rel <= 0, enc.slopes[:, None] * rel, float("-inf"))  # (H, 9): −m·|k − q|
    torch.testing.assert_close(plan.diagonals, expected)


def test_toeplitz_refuses_what_it_cannot_compute():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="contiguous position rows"):
        K.prepare_toeplitz(build_encoding("alibi", DIMS), positions()["random"], torch.float32)
    fire = [n for n in kind_names("bias") if n not in RELATIVE_ONLY]
    for name in fire:
        assert "toeplitz" not in K.implementations(build_encoding(name, DIMS))
        with pytest.raises(ValueError, match="relative-only bias"):
            K.prepare_toeplitz(build_encoding(name, DIMS), positions()["plain"], torch.float32)
    plan = K.prepare_toeplitz(build_encoding("t5", DIMS), torch.arange(T // 2)[None], torch.float32)
    with pytest.raises(ValueError, match=f"built for T={T // 2}, the queries have T={T}"):
        K.attention_toeplitz(q, k, v, plan)


@pytest.mark.compile
def test_flex_compiled_alibi_equals_eager():
    ok, reason = K.flex_support("cpu")
    if not ok:
        pytest.skip(reason)
    enc = build_encoding("alibi", DIMS)
    q, k, v = (t[:1] for t in qkv(t=128))  # a batch of one: the offsets are padded to two entries
    pos = torch.arange(128)[None]
    with torch.no_grad():
        out = K.attention_flex(q, k, v, K.prepare_flex(enc, pos, torch.float32))
        torch.testing.assert_close(out, K.attention_eager(q, k, v, enc, pos), atol=1e-5, rtol=1e-5)


# --- content-dependent and absolute -----------------------------------------------------------


@pytest.mark.parametrize("name", kind_names("content"))
def test_content_attention_matches_the_model_path(name):
    enc = build_encoding(name, DIMS)
    q, k, v = qkv()
    pos = positions()["plain"]
    with torch.no_grad():
        bias = enc.attention_bias(q, k, pos, pos)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=bias + K.causal_additive_mask(T, q.device, q.dtype))
        torch.testing.assert_close(K.attention_content(q, k, v, enc, pos), ref)


# --- model fast paths -------------------------------------------------------------------------


def test_t5_distance_lookup_equals_per_pair_bucketing():
    for causal in (True, False):
        enc = build_encoding("t5", EncodingDims(64, 4, causal=causal))
        pos = positions()["random"]
        rel = pos[:, None, :] - pos[:, :, None]
        ref = enc.table(t5_bucket(rel, bidirectional=enc.bidirectional)).permute(0, 3, 1, 2)
        assert torch.equal(enc.bias(pos, pos), ref)


def test_rope_tables_are_cached_per_pos_tensor_and_invalidated():
    enc = build_encoding("rope", DIMS)
    q, k = qkv(2)
    pos = torch.arange(T).expand(B, T).clone()
    first = enc.rotate(q, k, pos)
    assert enc._per_forward[0] is pos
    pos += 3  # in place: the version changes, the cache must not be used
    cos, sin = enc.cos_sin(pos, q.dtype)
    torch.testing.assert_close(enc.rotate(q, k, pos)[0], apply_rotary(q, cos, sin, "half"), atol=1e-6, rtol=1e-6)
    assert not torch.equal(first[0], enc.rotate(q, k, pos)[0])
    enc.set_scaling({"rope_type": "linear", "factor": 2.0})
    cos, sin = enc.cos_sin(pos, q.dtype)
    torch.testing.assert_close(enc.rotate(q, k, pos)[0], apply_rotary(q, cos, sin, "half"), atol=1e-6, rtol=1e-6)


def test_rope_tables_are_built_once_per_position_row_across_forwards():
    """Identical rows give (1, 1, T, R) tables; a new tensor with the same row reuses them (CPU);
    another row, another dtype, inference mode or another scaling builds new ones."""
    enc = build_encoding("rope", DIMS)
    tables = enc.tables(torch.arange(T).expand(B, T), torch.float32)
    assert tables[0].shape == (1, 1, T, DH)
    assert enc.tables(torch.arange(T).expand(B, T).clone(), torch.float32)[0] is tables[0]  # new tensor, same rows
    shifted = enc.tables(torch.arange(T).expand(B, T) + 1, torch.float32)
    assert shifted[0] is not tables[0]
    torch.testing.assert_close(shifted[0], enc.tables(torch.arange(1, T + 1)[None], torch.float32)[0], atol=0, rtol=0)
    assert enc.tables(torch.arange(T).expand(B, T), torch.float64)[0].dtype == torch.float64
    with torch.inference_mode():
        assert enc.tables(torch.arange(T).expand(B, T), torch.float32)[0] is not tables[0]
    enc.set_scaling({"rope_type": "linear", "factor": 2.0})
    assert not torch.equal(enc.tables(torch.arange(T).expand(B, T), torch.float32)[0], tables[0])
    rows = positions()["random"]  # rows differ: one table per row
    assert enc.tables(rows, torch.float32)[0].shape == (B, 1, T, DH)


@pytest.mark.slow
def test_position_table_cache_is_bounded():
    from lenbench.encodings.base import TABLE_CACHE_SIZE

    enc = build_encoding("rope", DIMS)
    for offset in range(TABLE_CACHE_SIZE + 5):
        enc.tables(torch.arange(offset, offset + T)[None], torch.float32)
    assert len(enc._tables_by_row) == 1  # one key per (length, dtype, mode): the row is compared
    for length in range(1, TABLE_CACHE_SIZE + 6):
        enc.tables(torch.arange(length)[None], torch.float32)
    assert len(enc._tables_by_row) == TABLE_CACHE_SIZE


@pytest.mark.parametrize(("name", "params"), [("rope", {"layout": "half"}), ("rope", {"layout": "interleaved"}),
                                              ("rope", {"partial": 0.5}), ("xpos", {"layout": "half"}),
                                              ("xpos", {"layout": "interleaved"})])
def test_training_rotation_equals_apply_rotary_with_gradients(name, params):
    """The model's rotation (q and k into one buffer, hand-written backward, fused multiply-adds)
    == the per-tensor reference `apply_rotary_tables`, values and gradients, within float rounding."""
    enc = build_encoding(name, DIMS, **params)
    layout = enc.layout
    base = torch.randn(B, T, 3 * 64)
    weight = torch.randn(B, H, T, DH)
    for pos in (positions()["offset"], torch.arange(T).expand(B, T)):
        results = []
        for use_hook in (True, False):
            x = base.clone().requires_grad_()
            q, k, _ = (t.view(B, T, H, DH).transpose(1, 2) for t in x.split(64, dim=-1))  # as in the model
            if use_hook:
                rq, rk = enc.rotate(q, k, pos)
            else:
                tabs = enc.tables(pos.clone(), q.dtype)
                q_tabs, k_tabs = (tabs, tabs) if len(tabs) == 2 else (tabs[:2], tabs[2:])
                rq, rk = apply_rotary_tables(q, *q_tabs, layout), apply_rotary_tables(k, *k_tabs, layout)
            ((rq * weight).sum() + (rk * weight.square()).sum()).backward()
            results.append((rq.detach(), rk.detach(), x.grad))
        for a, b in zip(*results, strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        assert results[0][0].is_contiguous() and results[0][1].is_contiguous()  # SDPA reads them as they are


def test_attend_learned_bias_path_equals_sdpa_with_gradients():
    q, k, v = (t.requires_grad_() for t in qkv())
    bias = torch.randn(1, H, T, T, requires_grad=True)
    mask = bias + K.causal_additive_mask(T, q.device, q.dtype)
    grads = []
    for fn in (lambda: attend(q, k, v, mask, False, 0.0), lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)):
        out = fn()
        g = torch.autograd.grad((out * out).sum(), (q, k, v, bias))
        grads.append((out, *g))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["alibi", "t5", "kerple", "sandwich", "fire"])
def test_model_shares_one_bias_across_identical_rows(name):
    """The model builds a (1, H, T, T) bias when all rows share positions: same logits and
    gradients as row by row."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=11, d_model=32, n_layers=2, n_heads=4, encoding=name, max_len=64)).double()
    tokens = torch.randint(0, 11, (3, 20))
    pos = torch.arange(5, 25).expand(3, 20)
    together = model(tokens, pos=pos)
    alone = torch.cat([model(tokens[i : i + 1], pos=pos[i : i + 1]) for i in range(3)])
    torch.testing.assert_close(together, alone, atol=1e-10, rtol=0)


# --- bandwidth arithmetic ---------------------------------------------------------------------


def test_bytes_and_bandwidth_arithmetic():
    q = torch.empty(2, 3, 4, 5)
    k = torch.empty(2, 3, 4, 5)
    assert P.nbytes(q, None, k) == 2 * 120 * 4
    assert P.rotary_bytes(q, k) == 4 * 120 * 4  # read q, k + write q, k
    bias = torch.empty(1, 3, 4, 4, dtype=torch.bfloat16)
    assert P.attention_bytes(q, k, q) == 4 * 120 * 4  # q, k, v + out
    assert P.attention_bytes(q, k, q, bias=bias) == 4 * 120 * 4 + 48 * 2
    assert P.gb_per_s(3_000_000_000, 1.5) == pytest.approx(2.0)
    assert P.copy_ratio(0.3, 0.1) == pytest.approx(3.0)
    assert math.isnan(P.gb_per_s(10, 0.0)) and math.isnan(P.copy_ratio(1.0, 0.0))


def test_copy_floor_measures_once_per_size():
    floor = P.CopyFloor(torch.device("cpu"), rounds=3)
    first = floor.seconds(1 << 16)
    assert first > 0 and floor.seconds(1 << 16) == first
    assert floor.seconds(1 << 17) > 0 and len(floor._seconds) == 2
    assert floor.gb_per_s(1 << 16) == pytest.approx((1 << 16) / first / 1e9)


def test_quick_training_step_runs():
    ts = P.quick_training_step("alibi", torch.device("cpu"))
    assert ts.geometry["d_model"] == 64 and ts.geometry["batch_size"] == 32 and ts.geometry["T"] >= 32
    losses = [float(ts.step()) for _ in range(2)]
    assert all(math.isfinite(x) for x in losses)


# --- bench collection -------------------------------------------------------------------------


@pytest.mark.subprocess
def test_bench_kernels_collects_every_encoding():
    env = {**os.environ, "LENBENCH_KERNEL_LENGTHS": "256", "LENBENCH_KERNEL_DTYPES": "fp32"}
    proc = subprocess.run(
        # standard: its kernels section times every registered encoding (quick names its twelve)
        [sys.executable, "-m", "pytest", "bench/test_kernels.py", "--suite", "standard", "--collect-only", "-q",
         "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line.strip() for line in proc.stdout.splitlines() if "::" in line]
    kernels = [i.split("[", 1)[1].rstrip("]") for i in ids if "::test_kernel[" in i]
    expected = []  # by exact id: one encoding's name may begin another's (path, path-fox)
    for name in ENCODINGS.names():
        impls = K.implementations(build_encoding(name, DIMS)) or ["none"]
        expected += [f"{name}-{impl}-T256-fp32" for impl in impls]
        assert any(i.endswith(f"::test_training_step[{name}]") for i in ids), name
    assert sorted(kernels) == sorted(expected)
    assert sum("::test_attention_baseline[" in i for i in ids) == 1


@pytest.mark.subprocess
def test_kernel_benchmarks_have_separate_params_and_group_by_param_works(tmp_path):
    """pytest-benchmark users group by a parameter: each kernel benchmark has encoding, impl, T
    and dtype (the baseline T and dtype), and `--benchmark-group-by=param:T` runs through the
    training-step benchmarks that have no T (`lenbench.benchmark.pytest_plugin`)."""
    env = {**os.environ, "LENBENCH_KERNEL_LENGTHS": "64,128", "LENBENCH_KERNEL_DTYPES": "fp32",
           "LENBENCH_KERNEL_ENCODINGS": "rope", "LENBENCH_KERNEL_SECONDS": "0.01", "LENBENCH_TRAIN_ROUNDS": "2"}
    out = tmp_path / "k.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/test_kernels.py", "--suite", "smoke", "-q", "-p", "no:cacheprovider",
         "--benchmark-group-by=param:T", "--benchmark-json", str(out)],
        cwd=ROOT, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "benchmark 'T=64'" in proc.stdout and "benchmark 'T=128'" in proc.stdout
    assert "benchmark 'training-step-smoke-lm'" in proc.stdout
    benches = json.loads(out.read_text())["benchmarks"]
    kernels = [b for b in benches if b["name"].startswith("test_kernel[")]
    assert {(b["params"]["encoding"], b["params"]["impl"], b["params"]["T"], b["params"]["dtype"]) for b in kernels} == {
        ("rope", impl, T, "fp32") for impl in ("eager", "hf", "fused") for T in (64, 128)}
    assert all(b["param"] == "{encoding}-{impl}-T{T}-{dtype}".format(**b["params"]) for b in kernels)
    baseline = [b["params"] for b in benches if b["name"].startswith("test_attention_baseline[")]
    assert sorted(p["T"] for p in baseline) == [64, 128] and {p["dtype"] for p in baseline} == {"fp32"}


@pytest.mark.parametrize(("stat", "expected"), [("median", 2.5), ("min", 1.0)])
def test_time_fn_reports_the_median_or_min_of_the_rounds(monkeypatch, stat, expected):
    """Rounds of 3, 1, 2 and 4 s (a scripted clock): the median of an even count is the mean of
    the middle two (`statistics.median`, as the GPU check and the benchmarks report it)."""
    clock = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0, 30.0, 34.0])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    assert timing.time_fn(lambda: None, torch.device("cpu"), rounds=4, warmup=1, stat=stat) == expected


class _FakeAccelerator:
    """A scripted device: every call of `fn` costs `per_call` seconds of device time, a
    synchronise costs `latency`; `syncs` counts the synchronises (no GPU needed)."""

    def __init__(self, monkeypatch, per_call: float, latency: float = 20e-6) -> None:
        self.now, self.syncs, self.calls, self.per_call, self.latency = 0.0, 0, 0, per_call, latency
        monkeypatch.setattr(timing.time, "perf_counter", lambda: self.now)
        monkeypatch.setattr(timing, "synchronize", self.synchronize)

    def fn(self) -> None:
        self.calls += 1
        self.now += self.per_call

    def synchronize(self, device) -> None:
        self.syncs += 1
        self.now += self.latency


def test_calls_per_round_is_one_on_the_cpu_and_fills_a_millisecond_on_an_accelerator(monkeypatch):
    fake = _FakeAccelerator(monkeypatch, per_call=20e-6)
    assert timing.calls_per_round(fake.fn, torch.device("cpu")) == 1
    calls = timing.calls_per_round(fake.fn, torch.device("cuda"))
    assert 45 <= calls <= 50  # 1 ms / (20 µs + the synchronise latency shared by the calls of a round)
    fake.per_call = 1e-9
    assert timing.calls_per_round(fake.fn, torch.device("cuda")) == timing.MAX_CALLS_PER_ROUND


def test_time_fn_on_an_accelerator_times_many_calls_per_synchronise(monkeypatch):
    """A 5 µs kernel behind a 20 µs synchronise: one call per round would report 25 µs; rounds
    of `calls_per_round` calls report the kernel's time within the latency spread over them."""
    fake = _FakeAccelerator(monkeypatch, per_call=5e-6)
    seconds = timing.time_fn(fake.fn, torch.device("cuda"), rounds=5, warmup=1)
    assert 5e-6 <= seconds < 5.2e-6
    syncs_before, calls_before = fake.syncs, fake.calls
    timing.time_fn(fake.fn, torch.device("cuda"), rounds=5, warmup=0)
    calibration = 2  # calls_per_round's two rounds
    assert fake.syncs - syncs_before == 1 + calibration + 5 and fake.calls - calls_before > 5 * 100


def test_synced_every_synchronises_once_per_round_of_calls(monkeypatch):
    """pytest-benchmark calls the target `iterations` times per round: the device is synchronised
    after the last call of each round (CPU: after every call, as before)."""
    fake = _FakeAccelerator(monkeypatch, per_call=50e-6)
    target, calls = timing.synced_every(fake.fn, torch.device("cuda"))
    assert calls == 20
    fake.syncs = 0
    for _ in range(3 * calls):
        target()
    assert fake.syncs == 3
    target, calls = timing.synced_every(fake.fn, torch.device("cpu"))
    fake.syncs = 0
    for _ in range(4):
        target()
    assert calls == 1 and fake.syncs == 4


def test_interleaved_ratio_cancels_the_order_of_the_two_calls(monkeypatch):
    """A scripted clock where whichever call runs second in a round takes half as long as the first
    (4 s then 2 s), and fn is truly 1.5× base: counterbalanced pairs give 1.5 exactly, where a
    fixed fn-first order would give 3 (6 / 2)."""
    cost = {"fn": 1.5, "base": 1.0}
    now = [0.0]
    order = []

    def call(name):
        position = (len(order) + 1) % 2  # after the warm-up call: 0 first of its round, 1 second
        order.append(name)
        now[0] += cost[name] * (4.0 if position == 0 else 2.0)

    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])  # call_seconds lives in lenbench.benchmark.timing
    ratio = P.interleaved_ratio(lambda: call("fn"), lambda: call("base"), torch.device("cpu"), rounds=5)
    assert ratio == pytest.approx(1.5)
    assert order[1:5] == ["fn", "base", "base", "fn"] and len(order) == 1 + 4 * 3  # a warm-up, then 3 ABBA pairs


def test_in_dtype_copies_once_per_dtype_and_leaves_the_original_alone():
    enc = build_encoding("cope", EncodingDims(d_model=32, n_heads=2, max_len=64, causal=True, train_len=16))
    with torch.no_grad():
        for param in enc.parameters():
            param.fill_(0.1)
    half = P.in_dtype(enc, torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in half.parameters())
    assert all(p.dtype == torch.float32 for p in enc.parameters())  # Module.to would have converted it in place
    assert P.in_dtype(enc, torch.bfloat16) is half and P.in_dtype(enc, torch.float32) is not enc


def test_flex_on_the_cpu_is_timed_only_when_asked():
    skip = P.timing_skip("flex", "cpu", environ={})
    assert skip and P.CPU_FLEX_ENV in skip and "results/catalog/cost.md" in skip
    assert P.timing_skip("flex_gather", "cpu", environ={}) == skip
    assert P.timing_skip("flex", "cpu", environ={P.CPU_FLEX_ENV: "1"}) is None
    assert P.timing_skip("flex", "cpu", environ={P.CPU_FLEX_ENV: "0"}) == skip
    assert P.timing_skip("flex", "cuda", environ={}) is None  # the GPUs' flex is Triton: always timed
    for impl in ("eager", "cached", "cached_blocks", "toeplitz", "fused", "compiled"):
        assert P.timing_skip(impl, "cpu", environ={}) is None


def test_an_encoding_that_declares_a_slow_cpu_compile_is_timed_eager_only_on_the_cpu():
    """PaTH declares `slow_cpu_compile` (its first compiled call took minutes on a CPU): its compiled
    cases are skipped there with that reason, unless asked; eager, the GPU and every other encoding
    are timed as before."""
    from lenbench.benchmark.cases import CaseSkipped, ready
    from lenbench.config import KernelSpec
    from lenbench.encodings import ENCODINGS

    path = ENCODINGS.get("path")
    skip = P.timing_skip("compiled", "cpu", environ={}, encoding=path)
    assert skip and skip.startswith("path's compiled kernel is not timed on the CPU by default: ")
    assert "530 s" in skip and P.CPU_SLOW_COMPILE_ENV in skip
    assert P.timing_skip("compiled", "cpu", environ={P.CPU_SLOW_COMPILE_ENV: "1"}, encoding=path) is None
    assert P.timing_skip("eager", "cpu", environ={}, encoding=path) is None
    assert P.timing_skip("compiled", "cuda", environ={}, encoding=path) is None
    assert ENCODINGS.get("path-fox").slow_cpu_compile == path.slow_cpu_compile
    declared = sorted(name for name in ENCODINGS.builtin_names() if ENCODINGS.get(name).slow_cpu_compile)
    assert declared == ["path", "path-fox"]
    for name in ENCODINGS.builtin_names():
        if name not in declared:
            assert P.timing_skip("compiled", "cpu", environ={}, encoding=ENCODINGS.get(name)) is None
    with pytest.raises(CaseSkipped, match="path's compiled kernel is not timed"):
        ready(("path", "compiled", 64, "fp32"), torch.device("cpu"), KernelSpec(lengths=(64,)))


BIAS_KERNELS = ("cached", "cached_blocks", "toeplitz")


def test_the_published_cpu_timings_justify_not_timing_flex():
    """`timing_skip`'s reason, checked against the catalog's published CPU timings (timed with
    LENBENCH_CPU_FLEX=1): for every bias encoding and length, flex is slower than its best
    cached / Toeplitz kernel or at most 10 % faster (ALiBi at T = 1024 was 5 % faster in the
    republication of 2026-12-02), so skipping it moves no CPU target by more than that."""
    data = json.loads((ROOT / "results" / "catalog" / "bench.json").read_text())
    medians: dict[tuple[str, int], dict[str, float]] = {}
    for b in data["benchmarks"]:
        info = b.get("extra_info", {})
        if info.get("dtype") == "fp32" and info.get("impl") and "T" in info:
            medians.setdefault((info["encoding"], info["T"]), {})[info["impl"]] = b["stats"]["median"]
    compared = 0
    for (encoding, T), impls in medians.items():
        if "flex" in impls and any(k in impls for k in BIAS_KERNELS):
            best = min(impls[k] for k in BIAS_KERNELS if k in impls)
            assert impls["flex"] > 0.9 * best, f"{encoding} T={T}: flex {impls['flex']:.4f} s beat {best:.4f} s by over 10 %"
            compared += 1
    assert compared >= 10  # alibi, fire, kerple, sandwich, t5 at T = 1024 and 4096
