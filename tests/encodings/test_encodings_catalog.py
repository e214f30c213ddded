"""Defining properties of the catalog encodings: xPos, KERPLE, Sandwich, FIRE, CoPE, randomized."""

import math

import pytest
import torch

from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding, encoding_parameters
from lenbench.encodings.xpos import xpos_zeta
from lenbench.model import ModelConfig, Transformer

NEW = ["xpos", "kerple", "sandwich", "fire", "cope", "randomized"]


def dims(d_model=32, n_heads=4, **kw) -> EncodingDims:
    return EncodingDims(d_model=d_model, n_heads=n_heads, **kw)


def _logits(name, params, *, train_len=None, max_len=64, T=24):
    """Logits of a 2-layer model with encoding `name`, seed 0, one training-mode forward pass."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=16, d_model=32, n_heads=4, n_layers=2, encoding=name, encoding_params=params,
                      max_len=max_len, train_len=train_len)
    model = Transformer(cfg).train()
    return model(torch.randint(0, 16, (2, T))).detach()


# --------------------------------------------------------------------------------------------- xPos


def _pair_score(enc, qv, kv, m, n):
    """q at position m, k at position n, rotated in one call (one row), score per head."""
    q = torch.zeros(1, qv.shape[0], 2, qv.shape[-1], dtype=torch.float64)
    k = torch.zeros_like(q)
    q[:, :, 1], k[:, :, 0] = qv, kv
    rq, rk = enc.rotate(q, k, torch.tensor([[n, m]]))
    return (rq[:, :, 1] * rk[:, :, 0]).sum(-1)[0]  # (H,)


def test_xpos_scores_depend_only_on_relative_position():
    enc = build_encoding("xpos", dims())  # head_dim 8
    qv, kv = torch.randn(4, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64)
    ref = _pair_score(enc, qv, kv, 3, 0)
    for m, n in [(5, 2), (103, 100), (4003, 4000), (100003, 100000)]:
        torch.testing.assert_close(_pair_score(enc, qv, kv, m, n), ref, atol=1e-9, rtol=1e-9)
    assert not torch.allclose(_pair_score(enc, qv, kv, 4, 0), ref)
    # The same holds inside a long row: positions are centred per row, the scores do not move.
    T = 64
    q, k = torch.randn(1, 4, T, 8, dtype=torch.float64), torch.randn(1, 4, T, 8, dtype=torch.float64)
    a_q, a_k = enc.rotate(q, k, torch.arange(T)[None])
    b_q, b_k = enc.rotate(q, k, torch.arange(T)[None] + 10_000)
    torch.testing.assert_close(a_q @ a_k.transpose(-1, -2), b_q @ b_k.transpose(-1, -2))


def test_xpos_decays_with_distance_by_zeta_per_pair():
    d, sb = 16, 16.0
    enc = build_encoding("xpos", dims(d_model=d, n_heads=1), scale_base=sb)
    rope = build_encoding("rope", dims(d_model=d, n_heads=1))
    zeta = xpos_zeta(d, 0.4)
    for i in (0, 3, d // 2 - 1):  # "half" layout: pair i is channels (i, i + d/2)
        v = torch.zeros(1, d, dtype=torch.float64)
        v[0, i], v[0, i + d // 2] = 0.6, 0.8
        for dist in (0, 1, 7, 40):
            want = _pair_score(rope, v, v, 50 + dist, 50) * zeta[i] ** (dist / sb)
            torch.testing.assert_close(_pair_score(enc, v, v, 50 + dist, 50), want)
    # q = k on the slowest pair (cos ≈ 1 over these distances): |score| strictly decreases.
    v = torch.zeros(1, d, dtype=torch.float64)
    v[0, d // 2 - 1], v[0, d - 1] = 1.0, 1.0
    scores = torch.stack([_pair_score(enc, v, v, 10 + dist, 10).abs() for dist in range(0, 65, 4)])
    assert (scores.diff(dim=0) < 0).all(), scores.flatten()
    assert scores[-1] < 0.75 * scores[0]  # ζ_7^(64/16) = 0.69


def test_xpos_is_causal_only():
    with pytest.raises(ValueError, match="causal attention only"):
        build_encoding("xpos", dims(causal=False))


def test_xpos_scale_base_fraction_is_relative_to_the_training_length_in_tokens():
    for train_len, expected in ((1024, 512.0), (64, 32.0), (100, 50.0), (1, 0.5)):
        assert build_encoding("xpos", dims(train_len=train_len), scale_base_fraction=0.5).scale_base == expected
    assert build_encoding("xpos", dims(train_len=64), scale_base_fraction=0.25).scale_base == 16.0
    assert build_encoding("xpos", dims(train_len=None), scale_base_fraction=0.5).scale_base == 512.0  # unknown
    for train_len in (None, 32, 4096):  # the default: the paper's 512 whatever the training length
        assert build_encoding("xpos", dims(train_len=train_len)).scale_base == 512.0
    assert build_encoding("xpos", dims(train_len=64), scale_base=100).scale_base == 100.0
    with pytest.raises(ValueError, match=r"^encoding 'xpos': scale_base = 100 and scale_base_fraction = 0.5 both set "
                                         r"the decay's scale base; keep one$"):
        build_encoding("xpos", dims(train_len=64), scale_base=100, scale_base_fraction=0.5)
    with pytest.raises(ValueError, match=r"^encoding 'xpos': scale_base_fraction = 0 is out of range "
                                         r"\(valid: a finite number > 0\)$"):
        build_encoding("xpos", dims(train_len=64), scale_base_fraction=0)


def test_xpos_default_forward_is_unchanged_and_the_paper_fraction_reproduces_it():
    default = _logits("xpos", {}, train_len=1024)
    assert torch.equal(_logits("xpos", {}, train_len=None), default)  # the default ignores the training length
    assert torch.equal(_logits("xpos", {"scale_base": 512.0}, train_len=1024), default)
    assert torch.equal(_logits("xpos", {"scale_base_fraction": 0.5}, train_len=1024), default)  # 0.5 × 1024 = 512
    assert not torch.equal(_logits("xpos", {"scale_base_fraction": 0.5}, train_len=16), default)  # γ_s = 8


# ------------------------------------------------------------------------------------------ KERPLE


def _check_monotone(enc):
    pos = torch.arange(120)[None]
    bias = enc.bias(pos, pos)[0].detach()  # (H, T, T)
    row = bias[:, 60]  # (H, T): query 60 against every key
    left, right = row[:, :61].flip(-1), row[:, 60:]  # both start at distance 0
    for side in (left, right):
        assert (side.diff(dim=-1) <= 1e-6).all()  # non-increasing in |m − n|
    assert (row[:, 60] == 0).all() and (bias <= 0).all()
    torch.testing.assert_close(bias, bias.transpose(-1, -2))  # depends on |m − n|


@pytest.mark.parametrize("form", ["log", "power"])
def test_kerple_bias_is_monotone_in_distance(form):
    for seed in range(5):
        torch.manual_seed(seed)
        enc = build_encoding("kerple", dims(n_heads=8), form=form)
        with torch.no_grad():
            enc.raw_r1.normal_(0, 3)
            enc.raw_r2.normal_(0, 3)
        _check_monotone(enc)


@pytest.mark.parametrize("form", ["log", "power"])
def test_kerple_matches_the_kernel_formula(form):
    enc = build_encoding("kerple", dims(), form=form)
    pos = torch.arange(30)[None]
    bias = enc.bias(pos, pos)[0].detach()  # (H, T, T)
    r1, r2 = enc.r1.detach(), enc.r2.detach()
    for h in range(4):
        for m, n in [(0, 0), (7, 3), (3, 7), (29, 0)]:
            dist = abs(m - n)
            f = math.log1p(r2[h] * dist) if form == "log" else dist ** float(r2[h])
            assert bias[h, m, n].item() == pytest.approx(-float(r1[h]) * f, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("form", ["log", "power"])
@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_kerple_parameters_stay_feasible_after_a_huge_step(form, direction):
    enc = build_encoding("kerple", dims(), form=form)
    before = enc.r1.detach().clone(), enc.r2.detach().clone()
    pos = torch.arange(50)[None]
    # direction 1: loss = −Σ bias = Σ r1·f(d), whose gradient pushes r1 and r2 down (towards negative);
    # direction −1 pushes them up (for the power form, r2 past its bound 2).
    loss = -direction * enc.bias(pos, pos).sum()
    loss.backward()
    assert torch.isfinite(enc.raw_r1.grad).all() and torch.isfinite(enc.raw_r2.grad).all()
    torch.optim.SGD(enc.parameters(), lr=1e4).step()
    r1, r2 = enc.r1.detach(), enc.r2.detach()
    assert (r1 > 0).all() and (r2 > 0).all()
    if form == "power":
        assert (r2 <= 2).all()
    if direction > 0:
        assert (r1 < before[0]).all() and (r2 < before[1]).all()  # the step did push them down
    else:
        assert (r1 > before[0]).all() and (r2 > before[1]).all()
    _check_monotone(enc)


# ---------------------------------------------------------------------------------------- Sandwich


def _sinusoid(m: int, dim: int) -> list[float]:
    """The paper's p_m: (sin(m ω_i), cos(m ω_i)) for ω_i = 10000^(−2i/d̄), i = 1 … d̄/2."""
    out = []
    for i in range(1, dim // 2 + 1):
        w = 10000.0 ** (-2 * i / dim)
        out += [math.sin(m * w), math.cos(m * w)]
    return out


@pytest.mark.parametrize("dim", [16, 128])
def test_sandwich_equals_closed_form_inner_product(dim):
    H = 4
    enc = build_encoding("sandwich", dims(n_heads=H), dim=dim)
    pos = torch.tensor([[0, 1, 2, 5, 17, 40, 333]])
    bias = enc.bias(pos, pos)[0]  # (H, T, T)
    vecs = [_sinusoid(int(m), dim) for m in pos[0]]
    for a in range(pos.shape[1]):
        for b in range(pos.shape[1]):
            dot = sum(x * y for x, y in zip(vecs[a], vecs[b], strict=True))  # p_m · p_n
            for h in range(H):
                want = (dot - dim / 2) / (8 * (h + 1) / H)
                assert bias[h, a, b].item() == pytest.approx(want, abs=1e-4)


def test_sandwich_depends_only_on_relative_position():
    enc = build_encoding("sandwich", dims())
    pos = torch.arange(50)[None]
    b0 = enc.bias(pos, pos)  # (1, H, 50, 50)
    torch.testing.assert_close(enc.bias(pos + 1000, pos + 1000), b0, atol=1e-5, rtol=0)
    assert (b0 <= 1e-6).all() and (b0[0, :, range(50), range(50)] == 0).all()  # p_m·p_n ≤ |p|² = d̄/2
    torch.testing.assert_close(b0[0, 1], b0[0, 0] / 2)  # head h divided by 8h/H
    assert b0[0, 0, 10, 9] > b0[0, 0, 10, 0]  # recency


# -------------------------------------------------------------------------------------------- FIRE


def _identity_fire(L=16.0, c=0.7, H=4):
    """FIRE whose MLP returns (h + 1)·x for head h (x ≥ 0 passes the ReLU)."""
    enc = build_encoding("fire", dims(n_heads=H), threshold=L, c=c)
    lin1, lin2 = enc.mlp[0], enc.mlp[2]
    with torch.no_grad():
        lin1.weight.fill_(1.0)
        lin1.bias.zero_()
        lin2.weight.zero_()
        lin2.weight[:, 0] = torch.arange(1, H + 1, dtype=torch.float32)
        lin2.bias.zero_()
    return enc


def test_fire_matches_formula_with_query_position_normaliser():
    L, c = 16.0, 0.7
    enc = _identity_fire(L, c)
    q_pos = torch.tensor([[0, 3, 15, 16, 20, 41]])
    k_pos = torch.tensor([[0, 2, 3, 9, 15]])  # Tq ≠ Tk: the normaliser must follow the queries
    bias = enc.bias(q_pos, k_pos).detach()[0]  # (H, Tq, Tk)

    def psi(x):
        return math.log(c * x + 1)

    for a, i in enumerate(q_pos[0].tolist()):
        for b, j in enumerate(k_pos[0].tolist()):
            if j > i:
                continue
            x = psi(i - j) / (psi(max(L, i)) + 1e-6)
            for h in range(4):
                assert bias[h, a, b].item() == pytest.approx((h + 1) * x, rel=1e-5, abs=1e-6)


def test_fire_is_relative_below_threshold_and_normalised_by_query_above():
    L = 16
    enc = _identity_fire(float(L))
    pos = torch.arange(60)[None]
    bias = enc.bias(pos, pos).detach()[0, 0]  # (T, T), head 0
    # Queries before L: the normaliser is ψ(L) for all, so the bias is a function of i − j only.
    for i, j, s in [(5, 2, 7), (10, 0, 5), (15, 15, -9)]:
        assert i + s < L
        assert bias[i, j].item() == pytest.approx(bias[i + s, j + s].item(), abs=1e-6)
    # Queries at or past L: the normaliser is the query's own ψ(i), so the whole context maps onto
    # [0, 1] and the first token is always at normalised distance 1. This fails if the max were
    # taken with the key position (ψ(i)/ψ(L) > 1), with (L, j), or with the sequence length.
    for i in range(L, 60):
        assert bias[i, 0].item() == pytest.approx(1.0, abs=1e-5)
        assert bias[i, : i + 1].max().item() == pytest.approx(1.0, abs=1e-5)
    for i in range(1, L):
        assert bias[i, 0].item() < 1.0 - 1e-3  # before L: ψ(i)/ψ(L) < 1
    # Past L the bias is no longer shift invariant: (i, j) and (i + s, j + s) differ.
    assert bias[30, 20].item() != pytest.approx(bias[50, 40].item(), abs=1e-4)


def test_fire_learns_c_and_the_threshold_multiplier():
    enc = build_encoding("fire", dims(), threshold=8.0)
    pos = torch.arange(20)[None]
    enc.bias(pos, pos).tril().sum().backward()
    assert enc.c.grad is not None and enc.c.grad.abs() > 0
    assert enc.threshold_scale.grad is not None and enc.threshold_scale.grad.abs() > 0  # L = |m · L0|, m learned
    assert not enc.threshold_init.requires_grad and "threshold_init" in enc.state_dict()  # L0: a constant of the checkpoint


# -------------------------------------------------------------------------------------------- CoPE


def _cope(npos_max=64, d_model=32, H=4):
    return build_encoding("cope", dims(d_model=d_model, n_heads=H), npos_max=npos_max)


def test_cope_with_open_gates_counts_ordinary_relative_positions():
    T, Dh = 10, 8
    enc = _cope()
    q = k = torch.full((1, 4, T, Dh), 10.0)  # q·k/√Dh = 283: every gate σ(·) = 1
    p = enc.contextual_positions(q, k)[0, 0]  # (T, T)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    want = torch.where(j <= i, i - j + 1, 0).float()  # p_ij = Σ_{t=j}^{i} 1 = i − j + 1
    torch.testing.assert_close(p, want)
    assert p[9, 0].item() == 10 and p[4, 4].item() == 1 and p[3, 5].item() == 0


@pytest.mark.parametrize("npos_max", [64, 4])
def test_cope_bias_reads_interpolated_embeddings_and_clamps(npos_max):
    T, Dh = 10, 8
    enc = _cope(npos_max)
    u = torch.randn(Dh)
    with torch.no_grad():
        enc.pos_emb.copy_(torch.arange(npos_max, dtype=torch.float32)[:, None] * u)  # e[p] = p·u
    q = k = torch.full((1, 4, T, Dh), 10.0)
    bias = enc.attention_bias(q, k, None, None)[0, 0]  # (T, T)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    count = (i - j + 1).clamp(max=npos_max - 1).float()
    qu = (q[0, 0, 0] @ u).item()
    torch.testing.assert_close(bias[j <= i], (qu * count)[j <= i], rtol=1e-5, atol=1e-3)
    assert torch.isneginf(bias[j > i]).all()  # causal: keys after the query are masked


def test_cope_interpolates_fractional_positions_and_ignores_future_keys():
    T, Dh = 6, 8
    enc = _cope()
    with torch.no_grad():
        enc.pos_emb.zero_()
        enc.pos_emb[:, 0] = torch.arange(64, dtype=torch.float32) ** 2  # e[p] = p²·e1: curved
    q = torch.zeros(1, 4, T, Dh)
    k = torch.zeros(1, 4, T, Dh)
    q[..., 0], k[..., 0] = 1.0, math.log(1 / 3) * math.sqrt(Dh)  # every gate σ(log(1/3)) = 1/4
    p = enc.contextual_positions(q, k)[0, 0]  # p_ij = (i − j + 1)/4
    assert p[2, 0].item() == pytest.approx(0.75) and p[5, 0].item() == pytest.approx(1.5)
    bias = enc.attention_bias(q, k, None, None)[0, 0]  # q·e[p] = e[p][0]
    assert bias[2, 0].item() == pytest.approx(0.25 * 0 + 0.75 * 1)  # between e[0] and e[1], weight 3/4 on e[1]
    assert bias[5, 0].item() == pytest.approx(0.5 * 1 + 0.5 * 4)  # linear between e[1] and e[2], not 1.5²
    assert bias[3, 0].item() == pytest.approx(1.0)  # p = 1 exactly
    # Changing keys after a query leaves that query's contextual positions unchanged.
    k2 = k.clone()
    k2[:, :, 4:] = torch.randn(1, 4, 2, Dh) * 5
    torch.testing.assert_close(enc.contextual_positions(q, k2)[..., :4, :], enc.contextual_positions(q, k)[..., :4, :])


def test_cope_npos_fraction_is_relative_to_the_training_length_in_tokens():
    for train_len, fraction, expected in ((63, 1.0, 64), (512, 1.0, 513), (100, 0.25, 26), (64, 0.5, 33), (1, 0.1, 2)):
        enc = build_encoding("cope", dims(train_len=train_len), npos_fraction=fraction)
        assert enc.npos_max == expected and enc.pos_emb.shape == (expected, 8)
    assert build_encoding("cope", dims(train_len=None), npos_fraction=1.0).npos_max == 64  # unknown: the constant
    for train_len in (None, 32, 4096):  # the default: 64 whatever the training length
        assert build_encoding("cope", dims(train_len=train_len)).npos_max == 64
    assert build_encoding("cope", dims(train_len=64), npos_max=8).npos_max == 8
    with pytest.raises(ValueError, match=r"^encoding 'cope': npos_max = 8 and npos_fraction = 1.0 both set the number "
                                         r"of position vectors; keep one$"):
        build_encoding("cope", dims(train_len=64), npos_max=8, npos_fraction=1.0)
    with pytest.raises(ValueError, match=r"^encoding 'cope': npos_fraction = -1 is out of range "
                                         r"\(valid: a finite number > 0\)$"):
        build_encoding("cope", dims(train_len=64), npos_fraction=-1)


def test_cope_default_forward_is_unchanged_and_a_fraction_giving_64_reproduces_it():
    default = _logits("cope", {}, train_len=63)
    assert torch.equal(_logits("cope", {}, train_len=None), default)
    assert torch.equal(_logits("cope", {"npos_max": 64}, train_len=63), default)
    assert torch.equal(_logits("cope", {"npos_fraction": 1.0}, train_len=63), default)  # round(63) + 1 = 64


# -------------------------------------------------------------------------------------- randomized


@pytest.mark.parametrize("sampling", ["batch", "row"])
def test_randomized_positions_are_sorted_distinct_and_in_range(sampling):
    enc = build_encoding("randomized", dims(max_len=64), max_position=100, sampling=sampling,
                         eval_positions="sampled" if sampling == "batch" else "plain").train()
    pos = torch.arange(64).expand(8, 64)
    out = enc.positions(pos)  # (8, 64)
    assert out.shape == (8, 64) and out.dtype == torch.long
    assert (out.diff(dim=-1) > 0).all()  # sorted and distinct
    assert out.min() >= 0 and out.max() < 100
    assert not (out == pos).all()  # actually randomized (probability of identity is ~1e-29 per row)
    # one subset for the batch (the paper's code), or one per row
    assert len({tuple(r) for r in out.tolist()}) == (1 if sampling == "batch" else 8)
    assert len({tuple(enc.positions(pos)[0].tolist()) for _ in range(3)}) == 3  # re-drawn every forward pass
    # Positions are mapped through the draw: repeated / offset inputs keep their order.
    pos2 = torch.tensor([[0, 0, 3, 7]])
    out2 = enc.positions(pos2)
    assert out2[0, 0] == out2[0, 1] and (out2[0, 1:].diff() > 0).all()


def test_randomized_eval_modes():
    pos = torch.arange(20).expand(2, 20)
    plain = build_encoding("randomized", dims(max_len=64), eval_positions="plain").eval()
    assert torch.equal(plain.positions(pos), pos)
    sampled = build_encoding("randomized", dims(max_len=64)).eval()  # the default: as the paper's code
    assert sampled.eval_positions == "sampled" and sampled.max_position == 2048
    out = sampled.positions(pos)
    assert (out.diff(dim=-1) > 0).all() and not torch.equal(out, pos)


def test_randomized_is_deterministic_under_manual_seed():
    enc = build_encoding("randomized", dims(max_len=64)).train()
    pos = torch.arange(32).expand(4, 32)
    torch.manual_seed(123)
    a = enc.positions(pos)
    torch.manual_seed(123)
    b = enc.positions(pos)
    torch.manual_seed(124)
    c = enc.positions(pos)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_randomized_limits_and_delegation():
    with pytest.raises(ValueError, match="sampling='row' needs eval_positions='plain'.*use sampling='batch'"):
        build_encoding("randomized", dims(max_len=16), sampling="row")
    with pytest.raises(ValueError, match="randomized sampling must be 'batch' or 'row', got 'step'"):
        build_encoding("randomized", dims(max_len=16), sampling="step")
    enc = build_encoding("randomized", dims(max_len=16), max_position=16).train()
    with pytest.raises(ValueError, match="'randomized' cannot represent length 17.*max_position=16"):
        enc.positions(torch.arange(17)[None])
    with pytest.raises(ValueError, match="below the longest length"):
        build_encoding("randomized", dims(max_len=64), max_position=32)
    # Static bias: the wrapped encoding's, on the mapped positions.
    alibi = build_encoding("randomized", dims(max_len=64), base="alibi")
    mapped = torch.tensor([[3, 10, 50]])
    torch.testing.assert_close(alibi.bias(mapped, mapped), build_encoding("alibi", dims()).bias(mapped, mapped))
    assert not alibi.content_dependent
    # Content-dependent and causal-only flags carry over from the wrapped encoding.
    cope = build_encoding("randomized", dims(max_len=64), base="cope", base_params={"npos_max": 8})
    assert cope.content_dependent and cope.causal_only and cope.inner.npos_max == 8
    with pytest.raises(ValueError, match="causal attention only"):
        build_encoding("randomized", dims(max_len=64, causal=False), base="xpos")
    # A learned table is sized to cover every position that can be drawn.
    learned = build_encoding("randomized", dims(max_len=64), base="learned", max_position=500)
    assert learned.inner.max_len == 500


def test_randomized_builds_the_wrapped_encoding_at_the_training_length():
    """A length-relative parameter of the wrapped encoding reads the training length, as unwrapped."""
    wrapped = build_encoding("randomized", dims(max_len=64, train_len=16), base="fire",
                             base_params={"threshold_fraction": 0.25})
    alone = build_encoding("fire", dims(max_len=64, train_len=16), threshold_fraction=0.25)
    assert float(wrapped.inner.threshold_init) == float(alone.threshold_init) == 4.0
    assert wrapped.inner.dims.train_len == 16 and wrapped.inner.dims.max_len == 2048


def test_randomized_max_position_factor_is_relative_to_the_longest_length():
    for max_len, factor, expected in ((500, 4.096, 2048), (500, 4, 2000), (64, 4, 256), (30, 1.1, 33), (7, 1.5, 11)):
        enc = build_encoding("randomized", dims(max_len=max_len), max_position_factor=factor)
        assert enc.max_position == expected == math.ceil(round(factor * max_len, 9))
        assert enc.inner.dims.max_len == max(max_len, expected)  # the wrapped encoding covers every draw
    learned = build_encoding("randomized", dims(max_len=64), base="learned", max_position_factor=4)
    assert learned.inner.max_len == 256  # a learned table sized to L
    # the training length plays no part; the default stays max(2048, the longest length)
    assert build_encoding("randomized", dims(max_len=64, train_len=16), max_position_factor=4).max_position == 256
    for max_len, expected in ((64, 2048), (500, 2048), (4096, 4096)):
        assert build_encoding("randomized", dims(max_len=max_len)).max_position == expected
    with pytest.raises(ValueError, match=r"^encoding 'randomized': max_position = 100 and max_position_factor = 4 both "
                                         r"set the range positions are drawn from; keep one$"):
        build_encoding("randomized", dims(max_len=64), max_position=100, max_position_factor=4)
    with pytest.raises(ValueError, match=r"^encoding 'randomized': max_position_factor = 0 is out of range "
                                         r"\(valid: a finite number > 0\)$"):
        build_encoding("randomized", dims(max_len=64), max_position_factor=0)
    with pytest.raises(ValueError, match=r"randomized max_position=32 is below the longest length max_len=64"):
        build_encoding("randomized", dims(max_len=64), max_position_factor=0.5)  # sampled evaluation needs L ≥ 64
    plain = build_encoding("randomized", dims(max_len=64), max_position_factor=0.5, eval_positions="plain")
    assert plain.max_position == 32


def test_randomized_default_forward_is_unchanged_and_the_paper_factor_reproduces_it():
    for base in ("rope", "learned"):
        default = _logits("randomized", {"base": base}, max_len=500)
        assert torch.equal(_logits("randomized", {"base": base, "max_position": 2048}, max_len=500), default)
        # ⌈4.096 × 500⌉ = 2048: the same range, the same draws
        assert torch.equal(_logits("randomized", {"base": base, "max_position_factor": 4.096}, max_len=500), default)
        assert not torch.equal(_logits("randomized", {"base": base, "max_position_factor": 1}, max_len=500), default)


# ----------------------------------------------------------------------------------------- catalog


def test_catalog_is_registered_with_keyword_parameters():
    expected = {
        "xpos": {"gamma", "scale_base", "scale_base_fraction", "theta", "layout"},
        "kerple": {"form"},
        "sandwich": {"dim", "base"},
        "fire": {"hidden", "c", "threshold", "threshold_fraction"},
        "cope": {"npos_max", "npos_fraction"},
        "randomized": {"base", "base_params", "max_position", "max_position_factor", "eval_positions", "sampling"},
    }
    for name, params in expected.items():
        cls = ENCODINGS.get(name)
        assert set(encoding_parameters(cls)) == params, name
        assert cls.description and cls.paper and "Args:" in cls.__doc__
    assert ENCODINGS.get("xpos").causal_only and ENCODINGS.get("cope").causal_only
    assert ENCODINGS.get("cope").content_dependent


CASES = [(n, {}) for n in NEW] + [
    ("kerple", {"form": "power"}),
    ("randomized", {"base": "alibi"}),
    ("randomized", {"base": "learned"}),
    ("randomized", {"base": "cope"}),
    ("randomized", {"base": "fire", "eval_positions": "plain"}),
]


@pytest.mark.parametrize("name,params", CASES, ids=[f"{n}-{'-'.join(map(str, p.values())) or 'default'}" for n, p in CASES])
@pytest.mark.parametrize("T", [16, 256])
def test_forward_backward_in_model(name, params, T):
    cls = ENCODINGS.get(name)
    causal_only = cls.causal_only or params.get("base") in ("cope", "fire", "xpos")
    for causal in [True] if causal_only else [True, False]:
        torch.manual_seed(0)
        cfg = ModelConfig(vocab_size=16, encoding=name, encoding_params=params, max_len=256, causal=causal)
        model = Transformer(cfg).train()
        tokens = torch.randint(0, 16, (2, T))
        logits = model(tokens)  # (2, T, 16)
        assert logits.shape == (2, T, 16) and torch.isfinite(logits).all()
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
        loss.backward()
        enc_grads = [p.grad for p in model.pos_enc.parameters()]
        assert all(g is not None and torch.isfinite(g).all() for g in enc_grads), name
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        model.eval()
        with torch.no_grad():
            assert torch.isfinite(model(tokens)).all()
