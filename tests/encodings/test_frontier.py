"""The 2024–2025 frontier encodings (issues 22 and 40): fox, stickbreaking, prope, ssmax, dape, path,
path-fox; and DroPE, RoPE's `drope` variant.

Each is held equal to an independent float64 implementation of its paper's formula, written
with plain loops over (head, query, key) on small inputs, and to the invariants that define it.
The references build q, k, v from a model's own attention weights, so the model's hooks (the
layer index, the layer input, the mask handed to `attend`) are checked with the formula.
"""

from __future__ import annotations

import math

import pytest
import torch
from lenbench_testing import (
    assert_causal,
    assert_right_padding_is_invisible,
    attend,
    attention_io,
    float64_model,
    run_tiny_suite_checked,
    softmax_rows,
    split_qkv,
)

from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding
from lenbench.model import Transformer

NEW = ["fox", "stickbreaking", "prope", "ssmax", "dape", "path", "path-fox"]
V, D, H, L, T = 13, 16, 2, 2, 7
DH = D // H


def model(name: str, params: dict | None = None, *, n_layers: int = L, seed: int = 0) -> Transformer:
    return float64_model(name, params, vocab=V, d_model=D, n_heads=H, n_layers=n_layers, seed=seed)


def dot(a, b) -> float:
    return float(sum(x * y for x, y in zip(a.tolist(), b.tolist(), strict=True)))


TOKENS = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(5))


# --- references against the papers' formulas ---------------------------------------------------


@pytest.mark.parametrize("layer", [0, 1])
def test_fox_equals_the_forget_gate_formula(layer):
    """logits_ij = q_i·k_j/√d + Σ_{l=j+1}^{i} log σ(w_h·x_l + b_h), softmax over j ≤ i, per layer's own gate."""
    m = model("fox")
    gate = m.pos_enc.gates[layer]
    with torch.no_grad():
        gate.bias.copy_(torch.tensor([1.5, -0.5]))  # gates away from 1/2, differently per head
        gate.weight.mul_(20)
    x, y = attention_io(m, TOKENS, layer)
    attn = m.blocks[layer].attn
    q, k, v = split_qkv(attn, x, H)
    W, bias = gate.weight.detach().double(), gate.bias.detach().double()
    weights = []
    for b in range(2):
        per_head = []
        for h in range(H):
            log_f = [math.log(1 / (1 + math.exp(-(dot(W[h], x[b, t]) + float(bias[h]))))) for t in range(T)]
            rows = [[dot(q[b, h, i], k[b, h, j]) / math.sqrt(DH) + sum(log_f[j + 1 : i + 1]) if j <= i else -math.inf
                     for j in range(T)] for i in range(T)]
            per_head.append(softmax_rows(rows))
        weights.append(per_head)
    torch.testing.assert_close(y, attend(attn, weights, v), atol=1e-10, rtol=0)


def test_fox_with_every_gate_open_is_nope():
    """log f = 0 (f = 1 for every token): the decay vanishes and FoX is NoPE with the same weights."""
    fox, nope = model("fox"), model("nope")
    nope.load_state_dict({k: v for k, v in fox.state_dict().items() if not k.startswith("pos_enc")})
    fox.pos_enc.log_forget = lambda x, layer: torch.zeros(x.shape[0], H, x.shape[1], dtype=x.dtype)
    with torch.no_grad():
        torch.testing.assert_close(fox(TOKENS), nope(TOKENS), atol=1e-12, rtol=0)


def test_fox_gate_initialisation_is_the_authors():
    enc = build_encoding("fox", EncodingDims(d_model=256, n_heads=4, n_layers=3))
    assert len(enc.gates) == 3
    for gate in enc.gates:
        assert gate.weight.shape == (4, 256) and torch.equal(gate.bias, torch.zeros(4))
        assert gate.weight.std().item() == pytest.approx(0.02, rel=0.1)
    m = model("fox")  # the model's own init leaves the encoding's parameters alone
    assert torch.equal(m.pos_enc.gates[0].bias, torch.zeros(H))


@pytest.mark.parametrize("params", [{}, {"attend_current": True}, {"remainder": "drop"}])
def test_stickbreaking_equals_the_stick_breaking_formula(params):
    """A_ij = β_ij Π_{j<k<i} (1 − β_ik), β = σ(q·k/√d), keys j < i (≤ i with attend_current);
    o_i = Σ_j A_ij v_j + (1 − Σ_j A_ij) v_i unless the remainder is dropped."""
    m = model("stickbreaking", params)
    x, y = attention_io(m, TOKENS, 1)
    attn = m.blocks[1].attn
    q, k, v = split_qkv(attn, x, H)
    last = (lambda i: i) if params.get("attend_current") else (lambda i: i - 1)
    weights, rest = [], []
    for b in range(2):
        wh, rh = [], []
        for h in range(H):
            rows, rems = [], []
            for i in range(T):
                beta = {j: 1 / (1 + math.exp(-dot(q[b, h, i], k[b, h, j]) / math.sqrt(DH))) for j in range(last(i) + 1)}
                row = []
                for j in range(T):
                    if j > last(i):
                        row.append(0.0)
                        continue
                    a = beta[j]
                    for kk in range(j + 1, last(i) + 1):
                        a *= 1 - beta[kk]
                    row.append(a)
                rows.append(row)
                rems.append(1 - sum(row) if params.get("remainder", "current") == "current" else 0.0)
            wh.append(rows)
            rh.append(rems)
        weights.append(wh)
        rest.append(rh)
    torch.testing.assert_close(y, attend(attn, weights, v, rest), atol=1e-10, rtol=0)


def test_stickbreaking_weights_are_sub_stochastic():
    enc = build_encoding("stickbreaking", EncodingDims(d_model=32, n_heads=2))
    q, k = torch.randn(3, 2, 50, 16) * 4, torch.randn(3, 2, 50, 16) * 4
    a = enc.weights(q, k)  # (3, 2, 50, 50)
    assert a.min() >= 0 and a.max() <= 1
    assert (a.sum(-1) <= 1 + 1e-6).all()
    a64 = enc.weights(q.double(), k.double())  # float32 in log space stays close to float64
    assert (a64.sum(-1) <= 1 + 1e-12).all() and (a.double() - a64).abs().max() < 1e-5
    assert (a.triu(0) == 0).all()  # no token attends to itself or to later ones
    assert (a[..., 0, :] == 0).all()  # the first token has nothing before it: all its mass is the remainder


@pytest.mark.parametrize("p", [0.25, 0.5, 0.75])
def test_prope_equals_rope_with_the_lowest_frequencies_zeroed(p):
    """Rotate pair m (channels m and m + R/2, R = 2⌊p·Dh/2⌋) by pos·θ^(−2m/Dh) for m < R/2; others unrotated."""
    enc = build_encoding("prope", EncodingDims(d_model=64, n_heads=2), p=p)  # Dh = 32, 16 pairs
    kept = int(p * 32 // 2)
    q, k = torch.randn(1, 2, T, 32, dtype=torch.float64), torch.randn(1, 2, T, 32, dtype=torch.float64)
    pos = torch.arange(T)[None]
    rq, rk = enc.rotate(q, k, pos)
    for x, rx in ((q, rq), (k, rk)):
        ref = x.clone()
        for t in range(T):
            for m in range(kept):
                a, b = m, m + kept
                angle = t * 10000.0 ** (-2 * m / 32)
                ref[..., t, a] = x[..., t, a] * math.cos(angle) - x[..., t, b] * math.sin(angle)
                ref[..., t, b] = x[..., t, b] * math.cos(angle) + x[..., t, a] * math.sin(angle)
        torch.testing.assert_close(rx, ref, atol=1e-12, rtol=0)


def test_prope_p1_is_rope_and_p0_is_nope():
    rope, p1, p0, nope = model("rope"), model("prope", {"p": 1.0}), model("prope", {"p": 0.0}), model("nope")
    with torch.no_grad():
        torch.testing.assert_close(p1(TOKENS), rope(TOKENS), atol=0, rtol=0)
        torch.testing.assert_close(p0(TOKENS), nope(TOKENS), atol=0, rtol=0)


def test_prope_is_not_partial_rotary_factor():
    """rope `partial` (transformers' partial_rotary_factor) re-spreads θ^(−2i/R) over the R rotated
    channels; p-RoPE keeps θ^(−2i/Dh) of the highest frequencies. Same channels rotated, other angles."""
    dims = EncodingDims(d_model=64, n_heads=2)  # Dh = 32
    prope, partial = build_encoding("prope", dims, p=0.5), build_encoding("rope", dims, partial=0.5)
    assert prope.rot_dim == partial.rot_dim == 16
    f_prope = prope.inv_freq()
    f_partial, _ = partial.frequencies(1)
    torch.testing.assert_close(f_prope, 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 32))
    torch.testing.assert_close(f_partial, 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16))
    assert f_prope.min() > 10 * f_partial.min()  # p-RoPE dropped the slow pairs; partial still has one at ~1/θ
    q = k = torch.randn(1, 2, 32, 32)
    pos = torch.arange(32)[None]
    assert (prope.rotate(q, k, pos)[0] - partial.rotate(q, k, pos)[0]).abs().max() > 1e-2


@pytest.mark.parametrize("params", [{}, {"base": "rope"}, {"base": "alibi"}, {"learnable": False, "s": 0.7}])
def test_ssmax_equals_softmax_of_logits_scaled_by_s_log_n(params):
    """weights_i = softmax_j((s_h · log(i + 1)) · (q_i·k_j/√d + bias_ij)) over j ≤ i, per layer's own s."""
    m = model("ssmax", params)
    if params.get("learnable", True):
        with torch.no_grad():
            m.pos_enc.s.copy_(torch.tensor([[0.3, 0.9], [1.4, 0.6]]))
    x, y = attention_io(m, TOKENS, 1)
    attn = m.blocks[1].attn
    q, k, v = split_qkv(attn, x, H)
    pos = torch.arange(T)[None].expand(2, T)
    q, k = m.pos_enc.base_enc.rotate(q, k, pos)  # the wrapped encoding's own hooks, then the formula
    bias = m.pos_enc.base_enc.bias(pos[:1], pos[:1])
    s = m.pos_enc.s[1].detach().double()
    weights = [[softmax_rows([[float(s[h]) * math.log(i + 1) * (dot(q[b, h, i], k[b, h, j]) / math.sqrt(DH)
                                + (0.0 if bias is None else float(bias[0, h, i, j]))) if j <= i else -math.inf
                               for j in range(T)] for i in range(T)]) for h in range(H)] for b in range(2)]
    torch.testing.assert_close(y, attend(attn, weights, v), atol=1e-10, rtol=0)


def test_ssmax_with_s_one_over_log_n_is_plain_softmax_at_that_n():
    n = 5
    ss = model("ssmax", {"s": 1 / math.log(n), "learnable": False}, n_layers=1)
    nope = model("nope", n_layers=1)
    nope.load_state_dict({k: v for k, v in ss.state_dict().items() if not k.startswith("pos_enc")})
    (_, y_ss), (_, y_nope) = attention_io(ss, TOKENS, 0), attention_io(nope, TOKENS, 0)
    torch.testing.assert_close(y_ss[:, n - 1], y_nope[:, n - 1], atol=1e-10, rtol=0)  # query n − 1 attends to n keys
    assert (y_ss[:, n] - y_nope[:, n]).abs().max() > 1e-6  # other n: a different scale


def test_ssmax_counts_the_keys_a_padding_mask_allows():
    enc = build_encoding("ssmax", EncodingDims(d_model=16, n_heads=2))
    mask = torch.zeros(1, 1, 4, 4)
    mask[..., 1:] = float("-inf")  # only the first key allowed: n = 1, log n = 0
    mask[..., 3, :] = 0.0  # the last query sees all four
    log_n = enc.log_n(4, 4, mask, "cpu", torch.float64)
    assert log_n[0, 0, :3, 0].abs().max() == 0 and log_n[0, 0, 3, 0] == pytest.approx(math.log(4))


@pytest.mark.parametrize("base", ["kerple", "alibi"])
def test_dape_equals_base_bias_plus_mlp_across_heads(base):
    """logits_ij = z_ij + B_ij + W2 · LeakyReLU(W1 · [z_ij^(1..H), B_ij^(1..H)] + b1) + b2, softmax over j ≤ i."""
    m = model("dape", {"base": base})
    x, y = attention_io(m, TOKENS, 1)
    attn = m.blocks[1].attn
    q, k, v = split_qkv(attn, x, H)
    mlp = m.pos_enc.mlps[1]
    W1, b1, W2, b2 = (t.detach().double() for t in (mlp[0].weight, mlp[0].bias, mlp[2].weight, mlp[2].bias))
    enc = m.pos_enc.base_enc

    def base_bias(h, i, j):  # the papers' formulas, not the hooks
        if base == "alibi":
            return -float(enc.slopes[h]) * abs(i - j)
        return -float(enc.r1[h].detach()) * math.log(1 + float(enc.r2[h].detach()) * abs(i - j))

    weights = []
    for b in range(2):
        rows_h = [[[0.0] * T for _ in range(T)] for _ in range(H)]
        for i in range(T):
            for j in range(T):
                z = [dot(q[b, h, i], k[b, h, j]) / math.sqrt(DH) for h in range(H)]
                bb = [base_bias(h, i, j) for h in range(H)]
                feats = torch.tensor(z + bb, dtype=torch.float64)
                hidden = W1 @ feats + b1
                hidden = torch.where(hidden > 0, hidden, 0.01 * hidden)
                f = W2 @ hidden + b2
                for h in range(H):
                    rows_h[h][i][j] = z[h] + bb[h] + float(f[h]) if j <= i else -math.inf
        weights.append([softmax_rows(rows_h[h]) for h in range(H)])
    torch.testing.assert_close(y, attend(attn, weights, v), atol=1e-10, rtol=0)


def test_dape_with_its_mlp_zeroed_is_its_base():
    dape, kerple = model("dape"), model("kerple", seed=1)
    kerple.load_state_dict({k: v for k, v in dape.state_dict().items() if not k.startswith("pos_enc")}, strict=False)
    kerple.pos_enc.load_state_dict(dape.pos_enc.base_enc.state_dict())
    with torch.no_grad():
        for mlp in dape.pos_enc.mlps:
            mlp[2].weight.zero_()
            mlp[2].bias.zero_()
        torch.testing.assert_close(dape(TOKENS), kerple(TOKENS), atol=1e-12, rtol=0)


# --- PaTH and PaTH-FoX: the product of Householder-like transforms ----------------------------------


def path_w_beta_g(enc, x: torch.Tensor, layer: int):
    """w_t (B, H, T, Dh), β_t (B, H, T) and log f_t (B, H, T) or None, from the layer's weights in float64
    with loops: w = l2norm(SiLU(causal depthwise conv(W_up W_down x))) per head (eps 1e-6), β = 2σ(·)."""
    W = [lin.weight.detach().double() for lin in enc.w_proj[layer]]  # (r, D), (D, r)
    cw = enc.w_conv[layer].weight.detach().double()[:, 0]  # (D, K)
    Kc = cw.shape[1]
    B, Tn, _ = x.shape
    w = torch.zeros(B, H, Tn, DH, dtype=torch.float64)
    beta = torch.zeros(B, H, Tn, dtype=torch.float64)
    log_f = None if enc.gates is None else torch.zeros(B, H, Tn, dtype=torch.float64)
    for b in range(B):
        pre = [W[1] @ (W[0] @ x[b, t].double()) for t in range(Tn)]  # (D,) each
        for t in range(Tn):
            conv = torch.zeros(D, dtype=torch.float64)
            for m in range(Kc):
                s = t - (Kc - 1) + m
                if s >= 0:
                    conv += cw[:, m] * pre[s]
            act = conv / (1 + torch.exp(-conv))  # SiLU
            for h in range(H):
                part = act[h * DH:(h + 1) * DH]
                w[b, h, t] = part / math.sqrt(float(part @ part) + 1e-6)
                lin = enc.beta_proj[layer]
                z = dot(lin.weight[h].detach().double(), x[b, t]) + float(lin.bias[h].detach())
                beta[b, h, t] = 2 / (1 + math.exp(-z))
                if log_f is not None:
                    gate = enc.gates[layer]
                    g = dot(gate.weight[h].detach().double(), x[b, t]) + float(gate.bias[h].detach())
                    log_f[b, h, t] = -math.log1p(math.exp(-g))
    return w, beta, log_f


def householder_products(w, beta, b, h, i):
    """[P_i0, …, P_ii] for query i: P_ij = H_i H_{i−1} ⋯ H_{j+1}, H_t = I − β_t w_t w_tᵀ (D×D, float64)."""
    P, out = torch.eye(DH, dtype=torch.float64), [None] * (i + 1)
    for j in range(i, -1, -1):
        out[j] = P.clone()
        P = P @ (torch.eye(DH, dtype=torch.float64) - beta[b, h, j] * torch.outer(w[b, h, j], w[b, h, j]))
    return out


def strong_path(name: str) -> Transformer:
    """A float64 PaTH model whose transforms matter: its parameters redrawn N(0, 1)."""
    m = model(name)
    with torch.no_grad():
        for p in m.pos_enc.parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()), dtype=p.dtype))
    return m


@pytest.mark.parametrize("name", ["path", "path-fox"])
@pytest.mark.parametrize("layer", [0, 1])
def test_path_equals_the_householder_product_formula(name, layer):
    """logits_ij = (q_iᵀ H_i ⋯ H_{j+1} k_j + c_i − c_j) / √Dh for j ≤ i (c: path-fox's cumulative log
    gates; the products D×D matrices multiplied out), softmax over j ≤ i, from the layer's own weights."""
    m = strong_path(name)
    x, y = attention_io(m, TOKENS, layer)
    attn = m.blocks[layer].attn
    q, k, v = split_qkv(attn, x, H)
    w, beta, log_f = path_w_beta_g(m.pos_enc, x, layer)
    assert beta.min() < 0.5 and beta.max() > 1.5
    weights = []
    for b in range(2):
        per_head = []
        for h in range(H):
            rows = []
            for i in range(T):
                P = householder_products(w, beta, b, h, i)
                gate = [0.0] * T if log_f is None else [float(log_f[b, h, j + 1:i + 1].sum()) for j in range(T)]
                rows.append([(float(q[b, h, i] @ P[j] @ k[b, h, j]) + gate[j]) / math.sqrt(DH) if j <= i else -math.inf
                             for j in range(T)])
            per_head.append(softmax_rows(rows))
        weights.append(per_head)
    ref = attend(attn, weights, v)
    print(f"{name} layer {layer}: max |ours - loop| = {(y - ref).abs().max():.2e}")
    torch.testing.assert_close(y, ref, atol=1e-10, rtol=0)


def test_path_transforms_are_reflections_at_beta_two_and_projections_at_one():
    """β = 2: every H_t is a Householder reflection, so every product P_ij is orthogonal and keeps
    norms; β = 1: H_t w_t = 0 (a projection, eigenvalue 1 − β = 0), which PaTH also allows."""
    m = strong_path("path")
    enc = m.pos_enc
    x, _ = attention_io(m, TOKENS, 0)
    with torch.no_grad():
        enc.beta_proj[0].weight.zero_()
        enc.beta_proj[0].bias.fill_(1e4)  # σ = 1 exactly: β = 2
        w, beta = enc.transforms(x, 0)
    assert torch.equal(beta, torch.full_like(beta, 2.0))
    assert torch.allclose(w.norm(dim=-1), torch.ones((), dtype=w.dtype), atol=1e-5)  # unit directions (eps 1e-6 aside)
    w = w / w.norm(dim=-1, keepdim=True)
    for b, h in ((0, 0), (1, 1)):
        for j, P in enumerate(householder_products(w, beta, b, h, T - 1)):
            torch.testing.assert_close(P.T @ P, torch.eye(DH, dtype=torch.float64), atol=1e-13, rtol=0)
            key = torch.randn(DH, dtype=torch.float64)
            assert abs(float((P @ key).norm() - key.norm())) < 1e-13, j
    H1 = torch.eye(DH, dtype=torch.float64) - torch.outer(w[0, 0, 3], w[0, 0, 3])
    assert float((H1 @ w[0, 0, 3]).norm()) < 1e-15


@pytest.mark.parametrize("name", ["path", "path-fox"])
@pytest.mark.parametrize("zero", ["beta", "w"])
def test_path_at_the_identity_is_nope(name, zero):
    """β = 0 (σ = 0 exactly) or w = 0 (its projection zeroed): every H_t is I, no positional effect,
    and the model is NoPE with the same weights (path-fox with every gate open, log f = 0)."""
    path, nope = strong_path(name), model("nope")
    nope.load_state_dict({k: v for k, v in path.state_dict().items() if not k.startswith("pos_enc")})
    enc = path.pos_enc
    with torch.no_grad():
        for layer in range(L):
            if zero == "beta":
                enc.beta_proj[layer].weight.zero_()
                enc.beta_proj[layer].bias.fill_(-1e4)  # σ(−1e4) = 0 exactly
            else:
                enc.w_proj[layer][1].weight.zero_()
            if enc.gates is not None:
                enc.gates[layer].weight.zero_()
                enc.gates[layer].bias.fill_(1e4)  # log σ(1e4) = 0 exactly
        diff = (path(TOKENS) - nope(TOKENS)).abs().max()
    print(f"{name} {zero} = 0: max |path - nope| = {diff:.2e}")
    assert diff < 1e-12


def test_path_initialisation_is_the_authors():
    enc = build_encoding("path-fox", EncodingDims(d_model=256, n_heads=4, n_layers=3))
    assert len(enc.w_proj) == len(enc.w_conv) == len(enc.beta_proj) == len(enc.gates) == 3
    assert [lin.weight.shape for lin in enc.w_proj[0]] == [(32, 256), (256, 32)]  # low rank 32
    assert enc.w_conv[0].weight.shape == (256, 1, 3) and enc.w_conv[0].bias is None
    for lin in (enc.beta_proj[0], enc.gates[0]):
        assert torch.equal(lin.bias, torch.zeros(4)) and lin.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert not hasattr(build_encoding("path", EncodingDims(16, 2)), "set_scaling")
    assert build_encoding("path", EncodingDims(16, 2)).gates is None
    full = build_encoding("path", EncodingDims(16, 2), w_rank=None, short_conv=False)
    assert isinstance(full.w_proj[0], torch.nn.Linear) and full.w_conv is None


# --- DroPE: RoPE's drope variant ------------------------------------------------------------------


def test_drope_drops_every_position_the_model_is_nope_with_the_same_weights():
    """After the drop (rope_type drope: every frequency 0, cos 1 and sin 0, the authors' way) a RoPE
    model's output equals NoPE's with the same weights bit for bit, at any positions."""
    rope, nope = model("rope"), model("nope")
    nope.load_state_dict(rope.state_dict())
    with torch.no_grad():
        before = rope(TOKENS)
        rope.pos_enc.set_scaling({"rope_type": "drope"})
        after = rope(TOKENS)
        shifted = rope(TOKENS, pos=torch.arange(T).expand(2, T) + 1000)
        assert torch.equal(after, nope(TOKENS)) and torch.equal(shifted, after)
        assert not torch.equal(before, after)


def test_drope_recalibration_runs_the_stated_steps_at_the_training_length_without_positions(monkeypatch):
    """The variant's fine-tune (`run.cell._finetuned_model`) trains a copy exactly `finetune_steps`
    steps at finetune_ratio (1) × train_len with `finetune_lr`, with every frequency 0 throughout."""
    from lenbench.config import parse_suite
    from lenbench.run import cell as cell_module
    from lenbench.run.checkpoint import CheckpointCache
    from lenbench.tasks import build_task

    suite = parse_suite({"name": "drope-steps", "model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "ff_mult": 2},
                         "train": {"steps": 5, "batch_size": 4, "lr": 0.003, "warmup": 1},
                         "tasks": [{"name": "copy", "train_len": 8}], "encodings": ["rope"],
                         "variants": [{"rope_type": "drope", "finetune_steps": 7, "finetune_ratio": 1,
                                       "finetune_lr": 3.0e-4, "name": "drope"}]})
    (cell,) = suite.cells()
    (variant,) = cell.variants
    assert variant.key == "drope"
    task = build_task("copy")
    base = Transformer(cell_module.model_config(cell, task))
    seen, real = {}, cell_module.train_model

    def recording(model, task, length, spec, **kw):
        seen.update(length=length, steps=kw["steps"], lr=kw["lr"], freqs=model.pos_enc.frequencies(64)[0].clone())
        stats = real(model, task, length, spec, **kw)
        seen["ran"] = stats.steps
        return stats

    monkeypatch.setattr(cell_module, "train_model", recording)
    tuned = cell_module._finetuned_model(cell, task, variant, base, CheckpointCache({}, torch.device("cpu")),
                                         torch.device("cpu"), False)
    assert seen["steps"] == seen["ran"] == 7 and seen["length"] == cell.train_len and seen["lr"] == 3.0e-4
    assert not seen["freqs"].any() and not tuned.pos_enc.frequencies(64)[0].any()
    assert base.pos_enc.frequencies(64)[0].any()  # the RoPE-trained model itself keeps its positions


# --- invariants every new encoding keeps ------------------------------------------------------


CAUSAL_CASES = [(n, {}) for n in NEW] + [("ssmax", {"base": "rope"}), ("dape", {"base": "alibi"}),
                                          ("stickbreaking", {"attend_current": True})]


@pytest.mark.parametrize("name,params", CAUSAL_CASES)
def test_changing_future_tokens_never_changes_past_outputs(name, params):
    assert_causal(model(name, params), V)


@pytest.mark.parametrize("name,params", CAUSAL_CASES)
def test_right_padding_leaves_real_tokens_unchanged_and_training_is_finite(name, params):
    m = model(name, params)
    assert_right_padding_is_invisible(m, TOKENS)
    m.float().train()
    loss = m(torch.randint(0, V, (2, 40))).logsumexp(-1).mean()
    loss.backward()
    grads = [p.grad for p in m.pos_enc.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_every_new_encoding_documents_itself_and_its_length_behaviour(capsys):
    from lenbench.cli import main

    for name in NEW:
        cls = ENCODINGS.get(name)
        assert cls.description and cls.paper and cls.length_behaviour, name
        assert "Args:" in cls.__doc__ and "Length behaviour" in cls.__doc__, name
        # "evaluated as trained" is what the evaluation does: no inference-time variant is swapped in
        assert cls.length_behaviour.startswith("evaluated as trained"), name
        assert not cls.variant_descriptions() and not hasattr(build_encoding(name, EncodingDims(16, 2)), "set_scaling")
    assert main(["list", "encodings"]) == 0
    out = capsys.readouterr().out
    for name in NEW:
        cls = ENCODINGS.get(name)
        assert cls.paper in out and cls.length_behaviour in out, name
    # `lenbench list encodings` prints the boards' order (lenbench.encoding_display): the frontier last
    # (issue 22's five, then issue 40's pope and hybrid)
    listed = [line.split()[0] for line in out.splitlines() if line[:1].strip()]
    assert sorted(listed) == sorted(ENCODINGS.names())
    assert listed[-9:] == ["fox", "stickbreaking", "prope", "ssmax", "dape", "pope", "hybrid", "path", "path-fox"]


@pytest.mark.parametrize("name,params,match", [
    ("prope", {"p": 1.5}, "p = 1.5 is out of range"),
    ("prope", {"p": -0.1}, "p = -0.1 is out of range"),
    ("prope", {"p": "half"}, "p = 'half' is out of range"),
    ("prope", {"theta": 0}, "theta = 0 is out of range"),
    ("ssmax", {"s": 0}, "s = 0 is out of range"),
    ("ssmax", {"learnable": "yes"}, "learnable = 'yes' is out of range"),
    ("ssmax", {"base": "ssmax"}, "cannot wrap itself"),
    ("ssmax", {"base": "stickbreaking"}, "cannot wrap 'stickbreaking'"),
    ("ssmax", {"base_params": [1]}, "base_params = \\[1\\] is out of range"),
    ("dape", {"hidden": 0}, "hidden = 0 is out of range"),
    ("dape", {"base": "rope"}, "base = 'rope' is out of range"),
    ("dape", {"base": "cope"}, "base = 'cope' is out of range"),
    ("dape", {"base": "fox"}, "cannot wrap 'fox'"),
    ("stickbreaking", {"remainder": "bias"}, "remainder = 'bias' is out of range"),
    ("stickbreaking", {"attend_current": 1}, "attend_current = 1 is out of range"),
    ("fox", {"init_std": -1}, "init_std = -1 is out of range"),
    ("randomized", {"base": "fox"}, "cannot wrap 'fox'"),
    ("path", {"w_rank": 0}, "w_rank = 0 is out of range"),
    ("path", {"short_conv": "yes"}, "short_conv = 'yes' is out of range"),
    ("path-fox", {"conv_size": 0}, "conv_size = 0 is out of range"),
    ("path-fox", {"init_std": -1}, "init_std = -1 is out of range"),
])
def test_parameters_out_of_range_fail_in_one_line(name, params, match):
    with pytest.raises(ValueError, match=match):
        build_encoding(name, EncodingDims(d_model=16, n_heads=2), **params)


def test_bidirectional_models_refuse_the_causal_only_ones():
    for name in ("fox", "stickbreaking", "ssmax", "path", "path-fox"):
        with pytest.raises(ValueError, match="causal attention only"):
            build_encoding(name, EncodingDims(d_model=16, n_heads=2, causal=False))
    build_encoding("dape", EncodingDims(d_model=16, n_heads=2, causal=False))  # kerple is symmetric
    build_encoding("prope", EncodingDims(d_model=16, n_heads=2, causal=False))


# --- a tiny suite: every new encoding on copy, passkey and lm, evaluated at 1–16× ------------------


TINY_ENCODINGS = ["fox", "stickbreaking", "prope", "ssmax", {"name": "ssmax", "params": {"base": "rope"},
                  "label": "ssmax+rope"}, "dape"]
TINY_SUITE = {
    "name": "frontier-tiny",
    "seeds": [0],
    "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "ff_mult": 2},
    "train": {"steps": 30, "batch_size": 8, "lr": 0.003, "warmup": 3},
    "eval": {"ratios": [1, 2, 4, 8, 16], "samples": 4},
    "tasks": [{"name": "copy", "train_len": 8}, {"name": "passkey", "train_len": 16}, {"name": "lm", "train_len": 16}],
    "encodings": TINY_ENCODINGS,
}


@pytest.mark.slow
def test_tiny_suite_every_new_encoding_trains_and_every_row_is_ok(tmp_path):
    """Every new encoding (and ssmax over rope) on copy, passkey and lm at d_model 32 for 30 steps:
    training never diverges and ends below the uniform guess's loss log V, and every row at every
    ratio 1–16× is ok and finite (a failed row would carry its reason in `error`)."""
    entries, checkpoints = run_tiny_suite_checked(TINY_SUITE, tmp_path / "run")
    labels = ("fox", "stickbreaking", "prope", "ssmax", "ssmax+rope", "dape")
    assert entries == {(e, "none", t) for e in labels for t in ("copy", "passkey", "lm")}
    assert len(checkpoints) == len(entries)  # one trained model per cell, none reused


# --- issue 40's PaTH, PaTH-FoX and the DroPE variant: a tiny suite at 1–16× ----------------------------

PATH_DROPE_SUITE = {
    "name": "path-drope-tiny",
    "seeds": [0],
    "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "ff_mult": 2},
    "train": {"steps": 30, "batch_size": 8, "lr": 0.003, "warmup": 3},
    "eval": {"ratios": [1, 2, 4, 8, 16], "samples": 4},
    "tasks": [{"name": "copy", "train_len": 8}, {"name": "passkey", "train_len": 16}, {"name": "lm", "train_len": 16}],
    "encodings": ["path", "path-fox", "rope"],
    "variants": [{"rope_type": "drope", "finetune_steps": 5, "finetune_ratio": 1, "finetune_lr": 1.0e-3,
                  "name": "drope"}],
}


@pytest.mark.slow
def test_tiny_suite_path_path_fox_and_drope_train_and_every_row_is_ok(tmp_path):
    """Every task at 1–16×: PaTH and PaTH-FoX as trained, RoPE and its DroPE variant (positions dropped,
    recalibrated 5 steps): no failed row, every value finite, every cell's loss below the uniform guess."""
    entries, _ = run_tiny_suite_checked(PATH_DROPE_SUITE, tmp_path / "run")
    for task in ("copy", "passkey", "lm"):
        assert {("path", "none", task), ("path-fox", "none", task), ("rope", "drope", task)} <= entries, entries
