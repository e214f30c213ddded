"""Closed-form and invariant checks of the six core encodings."""

import math

import pytest
import torch
from lenbench_testing import assert_scores_depend_on_distance_only

from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding
from lenbench.encodings.alibi import alibi_slopes
from lenbench.encodings.rope import rotate_half
from lenbench.encodings.sinusoidal import sinusoidal_table
from lenbench.encodings.t5 import t5_bucket
from lenbench.registry import UnknownNameError


def test_sinusoidal_matches_closed_form():
    d, T = 32, 50
    got = sinusoidal_table(torch.arange(T), d)  # (T, d)
    for pos in range(T):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert abs(got[pos, 2 * i].item() - math.sin(angle)) < 1e-6
            assert abs(got[pos, 2 * i + 1].item() - math.cos(angle)) < 1e-6


def test_sinusoidal_add_and_concat_modes():
    dims = EncodingDims(d_model=16, n_heads=2)
    h = torch.randn(2, 5, 16)
    pos = torch.arange(5).expand(2, 5)
    add = build_encoding("sinusoidal", dims)
    torch.testing.assert_close(add.embed(h, pos), h * 4.0 + sinusoidal_table(pos, 16))  # sqrt(d_model) = 4
    unscaled = build_encoding("sinusoidal", dims, embed_scale=1.0)
    torch.testing.assert_close(unscaled.embed(h, pos), h + sinusoidal_table(pos, 16))
    cat = build_encoding("sinusoidal", dims, mode="concat")
    out = cat.embed(h, pos)
    assert out.shape == h.shape
    torch.testing.assert_close(out, torch.cat((h * 4.0, sinusoidal_table(pos, 16)), -1) @ cat.proj.weight.T)
    with pytest.raises(ValueError, match="mode"):
        build_encoding("sinusoidal", dims, mode="mul")


def test_encoding_heatmap_renders_png(tmp_path):
    from lenbench.report.geometry import encoding_pattern
    from lenbench.report.plots.geometry import encoding_heatmap

    pattern = encoding_pattern("sinusoidal", length=128, d_model=64)
    out = encoding_heatmap(pattern.matrix, tmp_path / "pe.png", title=pattern.title)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def _rope(**kw):
    return build_encoding("rope", EncodingDims(d_model=64, n_heads=2), **kw)  # head_dim 32


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("partial", [1.0, 0.5])
def test_rope_scores_depend_only_on_relative_position(layout, partial):
    enc = _rope(layout=layout, partial=partial)
    assert_scores_depend_on_distance_only(enc, 2, 32, [(5, 2), (100, 97), (1003, 1000)], atol=1e-5)


def test_rope_never_touches_values_and_partial_passes_through():
    from lenbench.model import ModelConfig, Transformer

    enc = _rope(partial=0.5)
    q, k = torch.randn(2, 2, 7, 32), torch.randn(2, 2, 7, 32)
    rq, rk = enc.rotate(q, k, torch.arange(7).expand(2, 7))
    torch.testing.assert_close(rq[..., 16:], q[..., 16:])  # the unrotated half
    assert not torch.allclose(rq[..., :16], q[..., :16])
    # In the model, the values that reach attention are the projected inputs, unrotated: check by hook.
    model = Transformer(ModelConfig(vocab_size=11, encoding="rope", n_layers=1))
    seen = {}
    import torch.nn.functional as F

    orig = F.scaled_dot_product_attention

    def spy(q, k, v, **kw):
        seen["v"] = v
        return orig(q, k, v, **kw)

    tokens = torch.randint(0, 11, (1, 9))
    F.scaled_dot_product_attention = spy
    try:
        model(tokens)
    finally:
        F.scaled_dot_product_attention = orig
    x = model.blocks[0].ln1(model.tok(tokens))  # (1, 9, D)
    v = model.blocks[0].attn.qkv(x).split(64, -1)[2].view(1, 9, 4, 16).transpose(1, 2)
    torch.testing.assert_close(seen["v"], v)


def test_rope_layouts_agree_after_permutation():
    half, inter = _rope(layout="half"), _rope(layout="interleaved")
    perm = torch.cat((torch.arange(0, 32, 2), torch.arange(1, 32, 2)))  # interleaved pair (2i, 2i+1) -> (i, i+16)
    q, k = torch.randn(2, 2, 9, 32, dtype=torch.float64), torch.randn(2, 2, 9, 32, dtype=torch.float64)
    pos = torch.randint(0, 500, (2, 9))
    qi, ki = inter.rotate(q, k, pos)
    qh, kh = half.rotate(q[..., perm], k[..., perm], pos)
    torch.testing.assert_close(qi @ ki.transpose(-1, -2), qh @ kh.transpose(-1, -2))
    torch.testing.assert_close(qi[..., perm], qh)


def test_rope_half_layout_matches_rotate_half_formulation():
    enc = _rope()
    x = torch.randn(1, 1, 4, 32, dtype=torch.float64)
    pos = torch.tensor([[0, 1, 7, 300]])
    inv = 1.0 / 10000 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32)
    ang = torch.cat((pos[0, :, None] * inv, pos[0, :, None] * inv), -1)  # (4, 32)
    want = x * ang.cos() + rotate_half(x) * ang.sin()
    torch.testing.assert_close(enc.rotate(x, x, pos)[0], want)


@pytest.mark.parametrize("partial", [0.3, 0.0, 1.5])
def test_rope_bad_rotated_dimension_is_a_clear_error(partial):
    with pytest.raises(ValueError, match="positive even integer"):
        _rope(partial=partial)  # 0.3 * 32 = 9.6, not an integer; 0 and 1.5 out of range


def test_rope_odd_rotated_dimension_is_a_clear_error():
    with pytest.raises(ValueError, match="positive even integer"):
        build_encoding("rope", EncodingDims(d_model=36, n_heads=4))  # head_dim 9, odd


def test_alibi_slopes_match_paper():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)], dtype=torch.float64))
    twelve = [2.0 ** -(i + 1) for i in range(8)] + [2.0 ** -0.5, 2.0 ** -1.5, 2.0 ** -2.5, 2.0 ** -3.5]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(twelve, dtype=torch.float64))
    assert alibi_slopes(1).tolist() == [2.0 ** -8]


def test_alibi_bias_is_minus_slope_times_distance():
    enc = build_encoding("alibi", EncodingDims(d_model=32, n_heads=8))
    pos = torch.arange(6)[None]
    bias = enc.bias(pos, pos)  # (1, 8, 6, 6)
    assert bias[0, 0, 5, 2].item() == pytest.approx(-0.5 * 3)
    assert bias[0, 7, 4, 4].item() == 0.0
    assert bias[0, 2, 3, 0].item() == pytest.approx(-(2.0 ** -3) * 3)


# (rel = key − query, expected bucket) computed by hand from Raffel et al. 2020's bucketing with
# 32 buckets and max_distance 128: causal has 16 exact distances; bidirectional 8 per direction.
CAUSAL = [(0, 0), (-1, 1), (-15, 15), (-16, 16), (-20, 17), (-32, 21), (-64, 26), (-127, 31), (-128, 31), (-1000, 31), (5, 0)]
BIDIR = [(0, 0), (-3, 3), (3, 19), (-7, 7), (-8, 8), (-16, 10), (16, 26), (-128, 15), (1000, 31)]


@pytest.mark.parametrize("bidirectional,table", [(False, CAUSAL), (True, BIDIR)])
def test_t5_buckets_match_hand_table(bidirectional, table):
    rel = torch.tensor([r for r, _ in table])
    got = t5_bucket(rel, bidirectional=bidirectional, num_buckets=32, max_distance=128)
    assert got.tolist() == [b for _, b in table]


def test_t5_bias_reads_table_by_bucket():
    enc = build_encoding("t5", EncodingDims(d_model=32, n_heads=4), num_buckets=8, max_distance=16)
    pos = torch.arange(20)[None]
    bias = enc.bias(pos, pos)  # (1, 4, 20, 20)
    rel = pos[:, None, :] - pos[:, :, None]
    buckets = t5_bucket(rel, bidirectional=False, num_buckets=8, max_distance=16)[0]
    torch.testing.assert_close(bias[0, 1], enc.table.weight[buckets, 1])


def test_learned_past_max_len_raises():
    enc = build_encoding("learned", EncodingDims(d_model=16, n_heads=2, max_len=32))
    assert enc.table.weight.std().item() == pytest.approx(0.02, rel=0.2)
    h = torch.zeros(1, 33, 16)
    enc.embed(h[:, :32], torch.arange(32)[None])
    with pytest.raises(ValueError, match=r"'learned' cannot represent length 33.*max_len=32"):
        enc.embed(h, torch.arange(33)[None])


def test_registry_did_you_mean_and_parameter_errors():
    with pytest.raises(UnknownNameError, match="did you mean 'alibi'"):
        ENCODINGS.get("albi")
    with pytest.raises(ValueError, match="did you mean 'theta'"):
        build_encoding("rope", EncodingDims(d_model=32, n_heads=2), thta=1.0)


def test_every_encoding_documents_itself():
    for name, cls in ENCODINGS.items():
        assert cls.description and cls.paper, name
        assert cls.__doc__ and any(str(y) in cls.__doc__ for y in range(2016, 2026)), f"{name} docstring cites no paper year"
