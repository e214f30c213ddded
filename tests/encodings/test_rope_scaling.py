"""RoPE length-extension variants against closed forms written out here, independently of the code.

Every expected value is computed with plain `math` from the formulas in transformers'
`modeling_rope_utils.py` / the papers, never by calling lenbench's implementation.
"""

import math

import pytest
import torch
from lenbench_testing import assert_scores_depend_on_distance_only

from lenbench.encodings import EncodingDims, build_encoding
from lenbench.encodings.rope_scaling import SEQ_LEN_TYPES, rope_parameters, uses_seq_len
from lenbench.encodings.rope_types import ROPE_TYPES

BASE = 1e4
DIMS = [64, 128]
FACTORS = [4.0, 10.0]
ORIGINALS = [128, 2048]
grid = pytest.mark.parametrize(
    "dim,factor,orig", [(d, f, o) for d in DIMS for f in FACTORS for o in ORIGINALS]
)


def theta(dim, base=BASE):
    """Plain RoPE inverse frequencies base^(−2i/dim) as a Python list."""
    return [base ** (-2 * i / dim) for i in range(dim // 2)]


def resolve(scaling, dim, seq_len=None, base=BASE):
    return rope_parameters(scaling, dim, base, seq_len)


def assert_freqs(got, expected):
    assert got.dtype == torch.float64 and got.shape == (len(expected),)
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64), rtol=1e-12, atol=0)


@pytest.mark.parametrize("dim", DIMS)
def test_default(dim):
    inv, att = resolve(None, dim)
    assert_freqs(inv, theta(dim))
    assert att == 1.0
    assert_freqs(resolve({"rope_type": "default"}, dim)[0], theta(dim))


@grid
def test_linear_is_default_divided_by_factor(dim, factor, orig):
    inv, att = resolve({"rope_type": "linear", "factor": factor}, dim, seq_len=orig * 4)
    assert_freqs(inv, [t / factor for t in theta(dim)])
    assert att == 1.0


@grid
def test_ntk_closed_form(dim, factor, orig):
    inv, att = resolve({"rope_type": "ntk", "factor": factor}, dim, seq_len=orig)
    new_base = BASE * factor ** (dim / (dim - 2))
    assert_freqs(inv, theta(dim, new_base))
    assert att == 1.0
    # The highest frequency is kept, the lowest is divided by exactly the factor.
    assert inv[0].item() == 1.0
    assert inv[-1].item() == pytest.approx(theta(dim)[-1] / factor, rel=1e-12)


@grid
def test_dynamic_is_default_up_to_the_original_length_then_closed_form(dim, factor, orig):
    scaling = {"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": orig}
    for seq_len in (None, 1, orig // 2, orig):
        inv, att = resolve(scaling, dim, seq_len)
        assert_freqs(inv, theta(dim))
        assert att == 1.0
    for seq_len in (orig + 1, 3 * orig, 16 * orig):
        new_base = BASE * ((factor * seq_len / orig) - (factor - 1)) ** (dim / (dim - 2))
        inv, att = resolve(scaling, dim, seq_len)
        assert_freqs(inv, theta(dim, new_base))
        assert att == 1.0


def yarn_expected(dim, factor, orig, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """YaRN by hand: correction range from the rotation counts, linear ramp, blend."""

    def d_of(rotations):
        return dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(BASE))

    low, high = d_of(beta_fast), d_of(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i, t in enumerate(theta(dim)):
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)  # 0: keep, 1: interpolate
        out.append(t * (1 - ramp) + (t / factor) * ramp)
    return out, low, high


@grid
@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_closed_form(dim, factor, orig, truncate):
    scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": orig, "truncate": truncate}
    inv, att = resolve(scaling, dim, seq_len=orig * 8)
    expected, low, high = yarn_expected(dim, factor, orig, truncate=truncate)
    assert_freqs(inv, expected)
    assert att == pytest.approx(0.1 * math.log(factor) + 1.0, rel=1e-15)
    # Below the range the frequency is untouched; above it, it is divided by the factor.
    t = theta(dim)
    for i in range(dim // 2):
        if i <= low:
            assert inv[i].item() == pytest.approx(t[i], rel=1e-12)
        elif i >= high:
            assert inv[i].item() == pytest.approx(t[i] / factor, rel=1e-12)
        else:
            assert t[i] / factor < inv[i].item() < t[i]
    assert any(i >= high for i in range(dim // 2))  # the interpolated band is never empty on this grid


def test_yarn_attention_factor_at_factor_4():
    _, att = resolve({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 128}, 64)
    assert att == pytest.approx(1.13862943611, abs=1e-11)
    _, att = resolve({"rope_type": "yarn", "factor": 1, "original_max_position_embeddings": 128}, 64)
    assert att == 1.0


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("mscale,mscale_all_dim", [(1.0, 0.5), (0.707, 1.0), (1.0, 1.0), (0.707, 0.707)])
def test_yarn_mscale_form(factor, mscale, mscale_all_dim):
    scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 2048,
               "mscale": mscale, "mscale_all_dim": mscale_all_dim}
    inv, att = resolve(scaling, 64)
    expected = (0.1 * mscale * math.log(factor) + 1) / (0.1 * mscale_all_dim * math.log(factor) + 1)
    assert att == pytest.approx(expected, rel=1e-15)
    assert_freqs(inv, yarn_expected(64, factor, 2048)[0])  # frequencies are unaffected
    # Only one of the two set (or a zero): the plain 0.1·ln(s) + 1, as transformers' `if mscale and mscale_all_dim`.
    _, att = resolve({**scaling, "mscale_all_dim": None}, 64)
    assert att == pytest.approx(0.1 * math.log(factor) + 1, rel=1e-15)
    _, att = resolve({**scaling, "mscale": 0}, 64)
    assert att == pytest.approx(0.1 * math.log(factor) + 1, rel=1e-15)


def test_yarn_explicit_attention_factor_and_betas():
    scaling = {"rope_type": "yarn", "factor": 8, "original_max_position_embeddings": 4096,
               "attention_factor": 0.9, "beta_fast": 16, "beta_slow": 2, "mscale": 1, "mscale_all_dim": 0.5}
    inv, att = resolve(scaling, 128)
    assert att == 0.9  # an explicit attention_factor wins over mscale / mscale_all_dim
    assert_freqs(inv, yarn_expected(128, 8, 4096, beta_fast=16, beta_slow=2)[0])
    # None means "default", as transformers' `.get("beta_fast") or 32`.
    inv, _ = resolve({**scaling, "beta_fast": None, "beta_slow": None}, 128)
    assert_freqs(inv, yarn_expected(128, 8, 4096)[0])


@grid
def test_llama3_bands(dim, factor, orig):
    low_ff, high_ff = 1.0, 4.0
    scaling = {"rope_type": "llama3", "factor": factor, "low_freq_factor": low_ff,
               "high_freq_factor": high_ff, "original_max_position_embeddings": orig}
    inv, att = resolve(scaling, dim)
    assert att == 1.0
    bands = {"high": 0, "mid": 0, "low": 0}
    for i, t in enumerate(theta(dim)):
        wavelen = 2 * math.pi / t
        if wavelen < orig / high_ff:  # highest frequencies: unchanged
            bands["high"] += 1
            assert inv[i].item() == pytest.approx(t, rel=1e-12)
        elif wavelen > orig / low_ff:  # lowest frequencies: divided by the factor
            bands["low"] += 1
            assert inv[i].item() == pytest.approx(t / factor, rel=1e-12)
        else:  # smooth interpolation between the two
            bands["mid"] += 1
            s = (orig / wavelen - low_ff) / (high_ff - low_ff)
            assert 0 <= s <= 1
            assert inv[i].item() == pytest.approx((1 - s) * t / factor + s * t, rel=1e-12)
            assert t / factor <= inv[i].item() <= t
    assert all(bands.values()), bands  # every band is exercised on this grid


def test_llama3_defaults_are_llama_31():
    inv, _ = resolve({"rope_type": "llama3"}, 128, base=500000.0)
    explicit, _ = resolve({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
                           "original_max_position_embeddings": 8192}, 128, base=500000.0)
    torch.testing.assert_close(inv, explicit, rtol=0, atol=0)
    t = theta(128, 500000.0)
    assert inv[0].item() == pytest.approx(t[0]) and inv[-1].item() == pytest.approx(t[-1] / 8, rel=1e-12)


def longrope_lists(dim):
    short = [1.0 + 0.01 * i for i in range(dim // 2)]
    long = [1.0 + 0.5 * i for i in range(dim // 2)]
    return short, long


@grid
def test_longrope_short_then_long_factors_and_attention_factor(dim, factor, orig):
    short, long = longrope_lists(dim)
    scaling = {"rope_type": "longrope", "short_factor": short, "long_factor": long,
               "original_max_position_embeddings": orig, "factor": factor}
    expected_att = math.sqrt(1 + math.log(factor) / math.log(orig))
    for seq_len, ext in [(None, short), (1, short), (orig, short), (orig + 1, long), (orig * 4, long)]:
        inv, att = resolve(scaling, dim, seq_len)
        assert_freqs(inv, [t / e for t, e in zip(theta(dim), ext, strict=True)])
        assert att == pytest.approx(expected_att, rel=1e-15)


def test_longrope_factor_derivation_and_overrides():
    short, long = longrope_lists(64)
    base = {"rope_type": "longrope", "short_factor": short, "long_factor": long, "original_max_position_embeddings": 4096}
    # Phi-3: no factor, derived as max_position_embeddings / original_max_position_embeddings = 32.
    _, att = resolve({**base, "max_position_embeddings": 131072}, 64)
    assert att == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)), rel=1e-15)
    assert resolve({**base, "factor": 1.0}, 64)[1] == 1.0
    assert resolve({**base, "factor": 4.0, "attention_factor": 1.25}, 64)[1] == 1.25
    assert resolve({**base, "attention_factor": 1.25}, 64)[1] == 1.25  # factor then unneeded
    with pytest.raises(ValueError, match=r"rope_type 'longrope' needs parameter 'factor'"):
        resolve(base, 64)


@pytest.mark.parametrize("which", ["short_factor", "long_factor"])
def test_longrope_list_length_is_checked(which):
    short, long = longrope_lists(64)
    scaling = {"rope_type": "longrope", "short_factor": short, "long_factor": long,
               "original_max_position_embeddings": 128, "factor": 4, which: [1.0] * 31}
    with pytest.raises(ValueError, match=rf"'longrope': {which} has 31 entries .* needs dim/2 = 32") as err:
        resolve(scaling, 64)
    assert "\n" not in str(err.value)


SCALINGS = {
    "default": {},
    "linear": {"factor": 4},
    "ntk": {"factor": 4},
    "dynamic": {"factor": 4, "original_max_position_embeddings": 128},
    "yarn": {"factor": 4, "original_max_position_embeddings": 128},
    "llama3": {"factor": 4, "original_max_position_embeddings": 128},
    "longrope": {"factor": 4, "original_max_position_embeddings": 128,
                 "short_factor": longrope_lists(64)[0], "long_factor": longrope_lists(64)[1]},
    "drope": {},
}
STATIC = ["default", "linear", "ntk", "yarn", "llama3"]  # frequencies independent of the sequence length


def test_every_rope_type_is_covered():
    assert set(SCALINGS) == set(ROPE_TYPES.names())


@pytest.mark.parametrize("rope_type", list(SCALINGS))
@pytest.mark.parametrize("key", ["theta", "rope_theta"])
def test_theta_overrides_the_base_for_every_type(rope_type, key):
    scaling = {"rope_type": rope_type, **SCALINGS[rope_type]}
    for seq_len in (100, 1000):
        got = resolve({**scaling, key: 500000.0}, 64, seq_len)
        want = resolve(scaling, 64, seq_len, base=500000.0)
        torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
        assert got[1] == want[1]
        if resolve(scaling, 64, seq_len)[0].any():  # drope has no frequency left for theta to change
            assert not torch.equal(got[0], resolve(scaling, 64, seq_len)[0])
    # Through the encoding, in closed form for `linear`: θ_i = 500000^(−2i/64) / 4.
    enc = build_encoding("rope", EncodingDims(d_model=256, n_heads=4),
                         scaling={"rope_type": "linear", "factor": 4, key: 500000.0})
    assert_freqs(enc.frequencies(10)[0], [t / 4 for t in theta(64, 500000.0)])


def test_type_alias_and_conflicting_theta():
    assert_freqs(resolve({"type": "linear", "factor": 2}, 64)[0], [t / 2 for t in theta(64)])
    with pytest.raises(ValueError, match="keep one"):
        resolve({"rope_type": "linear", "factor": 2, "theta": 1e4, "rope_theta": 5e5}, 64)


# --- errors: one line, naming the variant, the parameter and the fix ---------------------------


def one_line_error(exc_type, scaling, match, dim=64):
    with pytest.raises(exc_type, match=match) as err:
        resolve(scaling, dim, seq_len=10)
    assert "\n" not in str(err.value)


def test_unknown_rope_type_suggests_the_closest():
    one_line_error(KeyError, {"rope_type": "yarm", "factor": 4}, r"unknown rope_type 'yarm'; did you mean 'yarn'\?")
    one_line_error(KeyError, {"rope_type": "llama-3"}, r"did you mean 'llama3'\?")


def test_unknown_parameter_suggests_the_closest():
    one_line_error(ValueError, {"rope_type": "linear", "facter": 4},
                   r"rope_type 'linear' has no parameter 'facter'; did you mean 'factor'\?")
    one_line_error(ValueError, {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 8, "beta_fats": 3},
                   r"did you mean 'beta_fast'\?")
    one_line_error(ValueError, {"rope_type": "ntk", "factor": 4, "original_max_position_embeddings": 8},
                   r"rope_type 'ntk' has no parameter 'original_max_position_embeddings'")


@pytest.mark.parametrize("rope_type", ["linear", "ntk", "dynamic", "yarn", "llama3", "longrope"])
def test_factor_below_one_is_an_error(rope_type):
    one_line_error(ValueError, {"rope_type": rope_type, **SCALINGS[rope_type], "factor": 0.5},
                   rf"rope_type '{rope_type}': factor=0.5 is below 1; set factor >= 1")


@pytest.mark.parametrize("rope_type,missing", [
    ("linear", "factor"), ("ntk", "factor"), ("dynamic", "factor"), ("yarn", "factor"),
    ("dynamic", "original_max_position_embeddings"), ("yarn", "original_max_position_embeddings"),
    ("longrope", "original_max_position_embeddings"), ("longrope", "short_factor"),
])
def test_missing_required_parameter_names_type_and_parameter(rope_type, missing):
    scaling = {"rope_type": rope_type, **SCALINGS[rope_type]}
    del scaling[missing]
    one_line_error(ValueError, scaling, rf"rope_type '{rope_type}' needs parameter '{missing}'.*add it")
    one_line_error(ValueError, {**scaling, missing: None}, rf"needs parameter '{missing}'")


def test_inconsistent_parameters_are_errors():
    one_line_error(ValueError, {"rope_type": "llama3", "low_freq_factor": 4, "high_freq_factor": 2},
                   r"'llama3': high_freq_factor=2 must be greater than low_freq_factor=4")
    one_line_error(ValueError, {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 128,
                                "beta_fast": 1, "beta_slow": 32}, r"'yarn': beta_fast=1 is below beta_slow=32")
    one_line_error(ValueError, {"rope_type": "dynamic", "factor": 2, "original_max_position_embeddings": 0},
                   r"'dynamic': original_max_position_embeddings=0 must be a positive length")


def test_docstrings_summarise_and_cite():
    for name, fn in ROPE_TYPES.items():
        lines = (fn.__doc__ or "").strip().splitlines()
        assert lines and lines[0].strip(), name
        if name != "default":
            assert "Args:" in fn.__doc__ and any(str(y) in fn.__doc__ for y in range(2021, 2026)), name


# --- through the encoding --------------------------------------------------------------------


def _enc(scaling=None):
    return build_encoding("rope", EncodingDims(d_model=256, n_heads=4), scaling=scaling)  # head_dim 64


def test_set_scaling_swaps_variants_on_an_existing_module():
    q, k = torch.randn(2, 4, 300, 64, dtype=torch.float64), torch.randn(2, 4, 300, 64, dtype=torch.float64)
    pos = torch.arange(300).expand(2, 300)
    enc = _enc({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 128})
    outs = {"yarn": enc.rotate(q, k, pos)}
    for rope_type in ["linear", "ntk", "dynamic", "llama3", "longrope", "default"]:
        enc.set_scaling({"rope_type": rope_type, **SCALINGS[rope_type]})
        assert enc.scaling["rope_type"] == rope_type
        outs[rope_type] = enc.rotate(q, k, pos)
    enc.set_scaling(None)
    assert enc.scaling is None
    torch.testing.assert_close(enc.rotate(q, k, pos)[0], _enc().rotate(q, k, pos)[0], rtol=0, atol=0)
    names = list(outs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not torch.allclose(outs[a][0], outs[b][0]), (a, b)
    # A bad dict is refused and leaves the current scaling in place.
    enc.set_scaling({"rope_type": "linear", "factor": 2})
    with pytest.raises(ValueError, match="factor=0.5 is below 1"):
        enc.set_scaling({"rope_type": "linear", "factor": 0.5})
    assert enc.scaling == {"rope_type": "linear", "factor": 2}


@pytest.mark.parametrize("att", [0.5, 1.5])
def test_attention_factor_scales_cos_and_sin(att):
    yarn = {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 128}
    one, scaled = _enc({**yarn, "attention_factor": 1.0}), _enc({**yarn, "attention_factor": att})
    pos = torch.arange(50)[None]
    for a, b in zip(one.cos_sin(pos, torch.float64), scaled.cos_sin(pos, torch.float64), strict=True):
        torch.testing.assert_close(b, a * att)
    q, k = torch.randn(1, 4, 50, 64, dtype=torch.float64), torch.randn(1, 4, 50, 64, dtype=torch.float64)
    q1, k1 = one.rotate(q, k, pos)
    q2, k2 = scaled.rotate(q, k, pos)
    torch.testing.assert_close(q2 @ k2.transpose(-1, -2), (q1 @ k1.transpose(-1, -2)) * att**2)


@pytest.mark.parametrize("rope_type", STATIC)
def test_scores_depend_only_on_relative_position_under_static_variants(rope_type):
    enc = _enc({"rope_type": rope_type, **SCALINGS[rope_type]})
    assert_scores_depend_on_distance_only(enc, 4, 64, [(5, 2), (130, 127), (1003, 1000)], atol=1e-9)


@pytest.mark.parametrize("scaling", [
    None,
    {"rope_type": "linear", "factor": 4},
    {"rope_type": "ntk", "factor": 4},
    {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 128},
    {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 128},
    {"rope_type": "dynamic", "factor": 2, "original_max_position_embeddings": 128},
    {"type": "dynamic", "factor": 2, "original_max_position_embeddings": 128},
])
def test_uses_seq_len_is_true_exactly_where_the_frequencies_depend_on_the_length(scaling):
    """RoPE reads the sequence length (a host sync on an accelerator) only where `uses_seq_len` says
    it matters: every other type must give the same frequencies at every length."""
    short, long = (rope_parameters(scaling, 64, 10000.0, seq_len=n) for n in (16, 100_000))
    depends = not (torch.equal(short[0], long[0]) and short[1] == long[1])
    assert uses_seq_len(scaling) == depends


def test_uses_seq_len_covers_every_registered_type():
    """A new rope type must be classified: either in SEQ_LEN_TYPES or in the test above's list."""
    checked = {"default", "linear", "ntk", "yarn", "llama3", "dynamic", "drope"}
    assert set(ROPE_TYPES) <= checked | SEQ_LEN_TYPES, sorted(set(ROPE_TYPES) - checked - SEQ_LEN_TYPES)
