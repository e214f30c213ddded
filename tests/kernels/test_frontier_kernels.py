"""Kernels of the 2024–2025 frontier encodings (issues 22, 40): layer (FoX, DAPE, the NoPE/RoPE hybrid,
PaTH, PaTH-FoX) and attend (stick-breaking, SSMax) kinds, `lenbench.kernels.layer`; PoPE's rotary kind (its
own `rotate`, compiled).

- The eager reference is the model's attention: equal to `lenbench.model.Attention` (with its
  projections applied outside) on the same inputs, in two layers.
- Each fused implementation equals the eager reference: compiled (float32, and the same function
  uncompiled in float64), FoX's flex (its unfused reference in float32 and float64; compiled in
  float32 at a length off and on the block size).
"""

import pytest
import torch

from lenbench import kernels as K
from lenbench.model import ModelConfig, Transformer

B, H, D = 2, 4, 64
DH = D // H
CASES = [("fox", {}), ("dape", {}), ("dape", {"base": "alibi"}), ("stickbreaking", {}), ("ssmax", {}),
         ("ssmax", {"base": "rope"}), ("ssmax", {"base": "alibi"}), ("path", {}), ("path-fox", {}),
         ("hybrid", {"window": 5}), ("hybrid", {"window": 5, "local": "chunked"})]  # hybrid: layer 0 RoPE-local, 1 NoPE
IDS = [f"{n}{p or ''}" for n, p in CASES]


def model(name, params, dtype=torch.float32):
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=16, d_model=D, n_layers=2, n_heads=H, encoding=name, encoding_params=dict(params),
                      max_len=512)
    m = Transformer(cfg).eval()
    with torch.no_grad():  # non-trivial encoding parameters: gates away from 1/2, DAPE's MLP, SSMax's s per head
        for p in m.pos_enc.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m.to(dtype)  # the same values in every dtype


def inputs(T, dtype=torch.float32, seed=1):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, D, generator=gen).to(dtype)
    q, k, v = (torch.randn(B, H, T, DH, generator=gen).to(dtype) for _ in range(3))
    return x, q, k, v, torch.arange(T).expand(B, T)


@pytest.mark.parametrize(("name", "params"), CASES, ids=IDS)
def test_the_eager_reference_is_the_models_attention(name, params):
    """Each layer's input, mask and output captured from a model forward: `layer_mask` is the mask
    the model hands the layer and `attention_layer` (+ the layer's projections) its output."""
    m = model(name, params)
    enc = m.pos_enc
    T = 24
    seen = []
    hooks = [b.attn.register_forward_hook(lambda mod, args, out: seen.append((mod, args, out))) for b in m.blocks]
    with torch.no_grad():
        m(torch.randint(0, 16, (B, T), generator=torch.Generator().manual_seed(3)))
        for h in hooks:
            h.remove()
        assert [mod.layer for mod, _, _ in seen] == [0, 1]
        for attn, (x, pos, _, model_mask, _), ref in seen:
            mask = K.layer_mask(enc, pos, x.dtype)
            assert (mask is None) == (model_mask is None)
            if mask is not None:
                torch.testing.assert_close(mask, model_mask, atol=0, rtol=0)
            q, k, v = attn.qkv(x).split(D, dim=-1)
            q, k, v = (t.view(B, T, H, DH).transpose(1, 2) for t in (q, k, v))
            y = K.attention_layer(x, q, k, v, enc, pos, mask, attn.layer)  # (B, H, T, Dh)
            torch.testing.assert_close(attn.out(y.transpose(1, 2).reshape(B, T, D)), ref, atol=0, rtol=0)


@pytest.mark.compile
@pytest.mark.parametrize(("name", "params"), CASES, ids=IDS)
def test_compiled_equals_eager(name, params):
    if not K.compile_support("cpu")[0]:
        pytest.skip(K.compile_support("cpu")[1])
    enc = model(name, params).pos_enc
    for T in (24, 40):  # a second length: the dynamic-shape compilation serves it
        x, q, k, v, pos = inputs(T)
        mask = K.layer_mask(enc, pos, torch.float32)
        with torch.no_grad():
            ref = K.attention_layer(x, q, k, v, enc, pos, mask, 1)
            out = K.attention_layer_compiled(x, q, k, v, enc, pos, mask, 1)
        torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize(("name", "params"), CASES, ids=IDS)
def test_eager_float64_matches_float32(name, params):
    """The function compiled is one that holds in float64 (what the float32 comparisons are against)."""
    enc32, enc64 = model(name, params).pos_enc, model(name, params, torch.float64).pos_enc
    x, q, k, v, pos = inputs(32, torch.float64)
    with torch.no_grad():
        ref = K.attention_layer(x, q, k, v, enc64, pos, K.layer_mask(enc64, pos, torch.float64), 0)
        out = K.attention_layer(*(t.float() for t in (x, q, k, v)), enc32, pos, K.layer_mask(enc32, pos, torch.float32), 0)
    assert ref.dtype == torch.float64
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fox_flex_unfused_equals_eager(dtype):
    enc = model("fox", {}, dtype).pos_enc
    x, q, k, v, pos = inputs(40, dtype)
    with torch.no_grad():
        ref = K.attention_layer(x, q, k, v, enc, pos, K.layer_mask(enc, pos, dtype), 1)
        out = K.attention_score_vector(x, q, k, v, enc, pos, 1, compiled=False)
    tol = 1e-12 if dtype == torch.float64 else 2e-6
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)


def test_fox_score_vector_is_its_layer_bias():
    enc = model("fox", {}).pos_enc
    x, q, k, v, pos = inputs(20)
    with torch.no_grad():
        c = enc.score_vector(x, 0)  # (B, H, T)
        bias = enc.layer_bias(x, q, k, pos, 0)  # (B, H, T, T)
    causal = torch.ones(20, 20, dtype=torch.bool).tril()
    torch.testing.assert_close((c[..., :, None] - c[..., None, :])[..., causal], bias[..., causal])
    assert torch.isneginf(bias[..., ~causal]).all()


@pytest.mark.compile
def test_fox_flex_compiled_equals_eager():
    if not K.flex_support("cpu")[0]:
        pytest.skip(K.flex_support("cpu")[1])
    enc = model("fox", {}).pos_enc
    for T in (100, 128):  # off the block size (the CPU path pads to whole blocks) and on it
        x, q, k, v, pos = inputs(T)
        with torch.no_grad():
            ref = K.attention_layer(x, q, k, v, enc, pos, K.layer_mask(enc, pos, torch.float32), 0)
            out = K.attention_score_vector(x, q, k, v, enc, pos, 0)
        torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-5)


def test_the_flex_path_refuses_an_encoding_without_the_declaration():
    enc = model("dape", {}).pos_enc
    x, q, k, v, pos = inputs(8)
    with pytest.raises(ValueError, match="declares no score_vector"):
        K.attention_score_vector(x, q, k, v, enc, pos)


def test_quick_times_its_boards_encodings_and_standard_and_the_catalog_time_all():
    """quick (the main command, 15 minutes) times exactly the encodings its board ranks; standard and
    the catalog name none: every registered encoding, the frontier included."""
    from lenbench.config import load_suite

    quick = load_suite("quick")
    assert set(quick.kernels.encodings) == {e.name for e in quick.encodings}
    assert load_suite("standard").kernels.encodings == () and load_suite("catalog").kernels.encodings == ()


@pytest.mark.parametrize("T", [24, 64])
def test_pope_fused_rotation_equals_its_eager_rotate(T):
    """PoPE's fused path is its own `rotate` compiled (no pair_rotation: magnitudes are softplus of the
    content and the keys' phase carries δ); eager is the hook the model calls."""
    enc = model("pope", {}).pos_enc
    _, q, k, _, pos = inputs(T)
    assert K.kernel_kind(enc) == "rotary" and K.rotary_inputs(enc, pos, torch.float32) is None
    with torch.no_grad():
        ref = enc.rotate(q, k, pos)  # (B, H, T, 2Dh) each
        out = K.compiled_hook(enc, "rotate")(q, k, pos)
    assert ref[0].shape == (B, H, T, 2 * DH)
    for a, b in zip(out, ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
