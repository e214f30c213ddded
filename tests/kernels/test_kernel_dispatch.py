"""Kernel dispatch by what an encoding declares (issue 20), never by its name.

- Every built-in encoding gets exactly the implementations and flex flavour it got when dispatch
  went by name (the lists were computed on the `skeleton` branch, before the change).
- The frontier encodings (issue 22) get the kinds their declarations give (`FRONTIER`).
- A toy encoding registered here (not in `lenbench/kernels/`) gets the fused paths its
  declarations allow: relative-only bias → toeplitz and the per-distance flex table; a closed
  form → its own flex modifier; a per-pair rotation → the fused rotary kernel; each equal to its
  eager hooks. The toys are unregistered afterwards.
"""

import warnings

import pytest
import torch

from lenbench import kernels as K
from lenbench.encodings import ENCODINGS, EncodingDims, PositionalEncoding, build_encoding, register_encoding
from lenbench.encodings.base import ClosedFormBias, PairRotation
from lenbench.encodings.rope import apply_rotary

DIMS = EncodingDims(d_model=64, n_heads=4, max_len=256, causal=True, train_len=64)
B, H, T, DH = 2, 4, 24, 16

# (encoding, params, kind, implementations): `kernel_kind` and `implementations` on the skeleton
# branch (name-based dispatch), before the declarations replaced it.
BEFORE = [
    ("alibi", {}, "bias", ["eager", "cached", "flex", "flex_gather", "toeplitz"]),
    ("cope", {}, "content", ["eager", "compiled"]),
    ("fire", {}, "bias", ["eager", "cached", "flex", "cached_blocks"]),
    ("kerple", {}, "bias", ["eager", "cached", "flex", "toeplitz"]),
    ("learned", {}, "absolute", ["eager", "compiled"]),
    ("nope", {}, "none", []),
    ("randomized", {}, "rotary", ["eager", "hf", "fused"]),
    ("rope", {}, "rotary", ["eager", "hf", "fused"]),
    ("sandwich", {}, "bias", ["eager", "cached", "flex", "toeplitz"]),
    ("sinusoidal", {}, "absolute", ["eager", "compiled"]),
    ("t5", {}, "bias", ["eager", "cached", "flex", "toeplitz"]),
    ("xpos", {}, "rotary", ["eager", "fused"]),
    ("rope", {"layout": "interleaved"}, "rotary", ["eager", "fused"]),
    ("rope", {"partial": 0.5}, "rotary", ["eager", "fused"]),
    ("rope", {"scaling": {"rope_type": "linear", "factor": 2.0}}, "rotary", ["eager", "hf", "fused"]),
    ("xpos", {"layout": "interleaved"}, "rotary", ["eager", "fused"]),
    ("kerple", {"form": "power"}, "bias", ["eager", "cached", "flex", "toeplitz"]),
    ("t5", {"bidirectional": True}, "bias", ["eager", "cached", "flex", "toeplitz"]),
    ("randomized", {"base": "alibi"}, "bias", ["eager", "cached", "flex", "flex_gather", "toeplitz"]),
    ("randomized", {"base": "cope"}, "content", ["eager", "compiled"]),
    ("randomized", {"base": "fire"}, "bias", ["eager", "cached", "flex", "cached_blocks"]),
    ("randomized", {"base": "kerple"}, "bias", ["eager", "cached", "flex", "toeplitz"]),
    ("randomized", {"base": "learned"}, "absolute", ["eager", "compiled"]),
    ("randomized", {"base": "nope"}, "none", []),
    ("randomized", {"base": "rope"}, "rotary", ["eager", "hf", "fused"]),
    ("randomized", {"base": "sandwich"}, "bias", ["eager", "cached", "flex", "toeplitz"]),
    ("randomized", {"base": "sinusoidal"}, "absolute", ["eager", "compiled"]),
    ("randomized", {"base": "t5"}, "bias", ["eager", "cached", "flex", "toeplitz"]),
    ("randomized", {"base": "xpos"}, "rotary", ["eager", "fused"]),
]
# The 2024–2025 frontier (issue 22): kinds from `replaces_softmax` (attend, before any other hook:
# SSMax over RoPE or ALiBi still replaces the softmax) and `layer_dependent` (layer); FoX's
# `score_vector` declaration adds flex; p-RoPE's `pair_rotation` gives it the fused rotary kernel.
FRONTIER = [
    ("fox", {}, "layer", ["eager", "compiled", "flex"]),
    ("dape", {}, "layer", ["eager", "compiled"]),
    ("dape", {"base": "alibi"}, "layer", ["eager", "compiled"]),
    ("stickbreaking", {}, "attend", ["eager", "compiled"]),
    ("ssmax", {}, "attend", ["eager", "compiled"]),
    ("ssmax", {"base": "rope"}, "attend", ["eager", "compiled"]),
    ("ssmax", {"base": "alibi"}, "attend", ["eager", "compiled"]),
    ("prope", {}, "rotary", ["eager", "fused"]),
    ("prope", {"p": 1.0}, "rotary", ["eager", "fused"]),
    # issue 40: PoPE overrides `rotate` alone (no pair_rotation: its compiled rotate is the fused path); the
    # hybrid's `layer_dependent` window bias makes it a layer encoding whatever it rotates
    ("pope", {}, "rotary", ["eager", "fused"]),
    ("hybrid", {}, "layer", ["eager", "compiled"]),
    ("hybrid", {"local": "chunked"}, "layer", ["eager", "compiled"]),
]
# The flex flavour of each bias encoding at contiguous and at gathered positions (skeleton branch).
FLAVOURS_BEFORE = {"alibi": "alibi", "fire": "dense_shared", "kerple": "kerple_log", "sandwich": "table", "t5": "table"}


@pytest.mark.parametrize(("name", "params", "kind", "impls"), BEFORE, ids=[f"{n}{p or ''}" for n, p, _, _ in BEFORE])
def test_every_built_in_encoding_gets_the_implementations_it_got_by_name(name, params, kind, impls):
    enc = build_encoding(name, DIMS, **params)
    assert (K.kernel_kind(enc), K.implementations(enc)) == (kind, impls)


@pytest.mark.parametrize(("name", "params", "kind", "impls"), FRONTIER, ids=[f"{n}{p or ''}" for n, p, _, _ in FRONTIER])
def test_the_frontier_encodings_get_their_kind_from_their_declarations(name, params, kind, impls):
    enc = build_encoding(name, DIMS, **params)
    assert (K.kernel_kind(enc), K.implementations(enc)) == (kind, impls)


def test_p_rope_declares_its_rotation_and_p0_rotates_nothing():
    q, k = qkv(2)
    pos = torch.stack((torch.arange(T), torch.arange(T) + 3))
    for p in (0.25, 0.75, 1.0):
        enc = build_encoding("prope", DIMS, p=p)
        tables = K.rotary_inputs(enc, pos, torch.float32)
        assert tables is not None and 2 * tables.cos.shape[-1] == enc.rot_dim
        ref = enc.rotate(q, k, pos)
        for out in (tables.eager(q, k), tables.fused(q, k, compiled=False)):
            torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-6)
    assert K.rotary_inputs(build_encoding("prope", DIMS, p=0.0), pos, torch.float32) is None  # compiled rotate (identity)


@pytest.mark.parametrize("name", sorted(FLAVOURS_BEFORE))
def test_every_built_in_bias_gets_the_flex_flavour_it_got_by_name(name):
    enc = build_encoding(name, DIMS)
    gaps = torch.tensor([[0, 2, 3, 7, 8, 11], [0, 2, 3, 7, 8, 11]])
    for pos in (torch.arange(6).expand(B, 6), gaps):
        assert K.prepare_flex(enc, pos, torch.float32).flavour == FLAVOURS_BEFORE[name]
    relative = {n for n in FLAVOURS_BEFORE if build_encoding(n, DIMS).relative_only}
    assert relative == {"alibi", "kerple", "sandwich", "t5"}  # TOEPLITZ_ENCODINGS, when dispatch went by name


# --- toy encodings, registered for these tests only ------------------------------------------------


class ToyRelative(PositionalEncoding):
    """bias[h, i, j] = −(h + 1)/4 · log(1 + |j − i|): relative-only, declared as such, no closed form."""

    relative_only = True

    def bias(self, q_pos, k_pos):
        rel = (k_pos[:, None, :] - q_pos[:, :, None]).abs().to(torch.float32)  # (B, Tq, Tk)
        scale = (torch.arange(self.dims.n_heads, dtype=torch.float32) + 1) / 4  # (H,)
        return -scale[None, :, None, None] * torch.log1p(rel)[:, None]  # (B, H, Tq, Tk)


def _toy_closed_score(score, h, rel, slopes):
    return score - slopes[h] * rel.abs() * rel.abs()


class ToyClosed(PositionalEncoding):
    """bias = −m_h · (j − i)²: relative-only with a closed form, asking for the flex_gather comparison too."""

    relative_only = True

    def slopes(self):
        return 1.0 / (torch.arange(self.dims.n_heads, dtype=torch.float32) + 8)  # (H,)

    def bias(self, q_pos, k_pos):
        rel = (k_pos[:, None, :] - q_pos[:, :, None]).to(torch.float32)  # (B, Tq, Tk)
        return -self.slopes()[None, :, None, None] * (rel * rel)[:, None]  # (B, H, Tq, Tk)

    def closed_form_bias(self):
        return ClosedFormBias("toy_quadratic", _toy_closed_score, (self.slopes(),))

    def kernel_comparisons(self):
        return ("flex_gather",)


class ToyRotary(PositionalEncoding):
    """A rotary encoding of its own (base 500, half layout), declaring its per-pair rotation."""

    def tables(self, pos, dtype):
        inv_freq = 500.0 ** (-torch.arange(0, self.dims.head_dim, 2, dtype=torch.float32) / self.dims.head_dim)  # (Dh/2,)
        angle = pos.to(torch.float32)[:, None, :, None] * inv_freq  # (B, 1, T, Dh/2)
        return angle.cos().to(dtype), angle.sin().to(dtype)

    def rotate(self, q, k, pos):
        cos, sin = self.tables(pos, q.dtype)
        return apply_rotary(q, cos, sin, "half"), apply_rotary(k, cos, sin, "half")

    def pair_rotation(self, pos, dtype):
        return PairRotation(*self.tables(pos, dtype), "half")


class ToyRotaryUndeclared(ToyRotary):
    """The same rotation without the declaration: its fused path is `rotate` compiled."""

    pair_rotation = PositionalEncoding.pair_rotation


class ToyBadComparison(ToyRotaryUndeclared):
    def kernel_comparisons(self):
        return ("hf",)  # needs pair_rotation


class ToyUnknownComparison(ToyRotary):
    def kernel_comparisons(self):
        return ("hff",)


class ToyClosedNotRelative(ToyClosed):
    relative_only = False

    def kernel_comparisons(self):
        return ()


TOYS = {"toy_relative": ToyRelative, "toy_closed": ToyClosed, "toy_rotary": ToyRotary,
        "toy_rotary_undeclared": ToyRotaryUndeclared, "toy_bad_comparison": ToyBadComparison,
        "toy_unknown_comparison": ToyUnknownComparison, "toy_closed_not_relative": ToyClosedNotRelative}


@pytest.fixture(scope="module", autouse=True)
def toys():
    """Register the toys in the encodings registry; unregister them afterwards (no other test sees them)."""
    for name, cls in TOYS.items():
        register_encoding(name)(cls)
    try:
        yield
    finally:
        for name in TOYS:
            ENCODINGS.unregister(name)
    assert not set(TOYS) & set(ENCODINGS.names())


def qkv(n=3, dtype=torch.float32):
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(B, H, T, DH, generator=gen).to(dtype) for _ in range(n)]


def _unfused_flex(q, k, v, plan):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        return K.attention_flex(q, k, v, plan, compiled=False)


def test_a_relative_only_toy_gets_the_toeplitz_path_equal_to_eager():
    enc = build_encoding("toy_relative", DIMS)
    assert K.kernel_kind(enc) == "bias"
    assert K.implementations(enc) == ["eager", "cached", "flex", "toeplitz"]
    q, k, v = qkv()
    pos = torch.stack((torch.arange(T), torch.arange(T) + 5))  # contiguous rows, one offset
    with torch.no_grad():
        for causal in (True, False):
            ref = K.attention_eager(q, k, v, enc, pos, causal=causal)
            plan = K.prepare_toeplitz(enc, pos, torch.float32, causal=causal, block=7)
            torch.testing.assert_close(K.attention_toeplitz(q, k, v, plan), ref, atol=1e-6, rtol=1e-6)
        flex = K.prepare_flex(enc, pos, torch.float32)
        assert flex.flavour == "table"  # its per-distance table, not the dense bias
        torch.testing.assert_close(_unfused_flex(q, k, v, flex), K.attention_eager(q, k, v, enc, pos),
                                   atol=2e-5, rtol=1e-5)


def test_a_closed_form_toy_gets_its_own_flex_modifier_equal_to_eager():
    enc = build_encoding("toy_closed", DIMS)
    assert K.implementations(enc) == ["eager", "cached", "flex", "flex_gather", "toeplitz"]
    q, k, v = qkv()
    gen = torch.Generator().manual_seed(3)
    gaps = torch.stack([torch.randperm(60, generator=gen)[:T].sort().values for _ in range(B)])
    with torch.no_grad():
        for pos in (torch.arange(T).expand(B, T), gaps):
            for gather in (False, True):
                plan = K.prepare_flex(enc, pos, torch.float32, gather=gather)
                assert plan.flavour == "toy_quadratic" and plan.score is _toy_closed_score
                torch.testing.assert_close(_unfused_flex(q, k, v, plan), K.attention_eager(q, k, v, enc, pos),
                                           atol=2e-5, rtol=1e-5)


@pytest.mark.compile
def test_a_rotary_toy_declaring_its_rotation_gets_the_fused_rotary_kernel_equal_to_eager():
    enc = build_encoding("toy_rotary", DIMS)
    assert K.kernel_kind(enc) == "rotary" and K.implementations(enc) == ["eager", "fused"]
    q, k = qkv(2)
    pos = torch.stack((torch.arange(T), torch.arange(T) + 3))
    tables = K.rotary_inputs(enc, pos, torch.float32)
    assert tables is not None and tables.layout == "half"
    ref = enc.rotate(q, k, pos)
    for out in (tables.eager(q, k), tables.fused(q, k, compiled=False)):
        torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-6)
    if K.compile_support("cpu")[0]:  # the compiled kernel itself
        torch.testing.assert_close(tables.fused(q, k), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.compile
def test_a_rotary_toy_without_the_declaration_gets_its_hook_compiled():
    enc = build_encoding("toy_rotary_undeclared", DIMS)
    assert K.implementations(enc) == ["eager", "fused"]
    assert K.rotary_inputs(enc, torch.arange(T)[None], torch.float32) is None  # bench: compiled_hook(enc, "rotate")


def test_declarations_that_cannot_hold_fail_in_one_line():
    with pytest.raises(ValueError, match=r"declares kernel comparison 'hf' but no pair_rotation\(\)"):
        K.implementations(build_encoding("toy_bad_comparison", DIMS))
    with pytest.raises(ValueError, match=r"'hff', which its kind 'rotary' does not offer; did you mean 'hf'\?"):
        K.implementations(build_encoding("toy_unknown_comparison", DIMS))
    enc = build_encoding("toy_closed_not_relative", DIMS)
    assert K.implementations(enc) == ["eager", "cached", "flex", "cached_blocks"]
    with pytest.raises(ValueError, match="declares a closed_form_bias but not relative_only = True"):
        K.prepare_flex(enc, torch.arange(T)[None], torch.float32)
    with pytest.raises(ValueError, match="relative_only = True"):
        K.prepare_toeplitz(enc, torch.arange(T)[None], torch.float32)
