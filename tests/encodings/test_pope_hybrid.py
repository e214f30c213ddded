"""PoPE and the per-layer NoPE/RoPE hybrid (issue 40), as tests/encodings/test_frontier.py holds the 2024
frontier: each against a float64 loop of its paper's formula built from a model's own weights, the
invariants that define it, causality, padding, gradients, one-line parameter errors, a tiny suite.
"""

from __future__ import annotations

import cmath
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

from lenbench import kernels as K
from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding
from lenbench.model import Transformer

V, D, H, L, T = 13, 16, 2, 2, 7
DH = D // H
TOKENS = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(5))


def model(name: str, params: dict | None = None, *, n_layers: int = L, seed: int = 0) -> Transformer:
    return float64_model(name, params, vocab=V, d_model=D, n_heads=H, n_layers=n_layers, seed=seed, train_len=8)


def output(attn, logits, v) -> torch.Tensor:
    """softmax over each row of logits[b][h][i] (−inf masked), times v, heads merged, out-projected: (B, T, D)."""
    return attend(attn, [[softmax_rows(per_head) for per_head in per_b] for per_b in logits], v)


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


# --- PoPE -----------------------------------------------------------------------------------------------


def pope_logits(q, k, delta, pos, theta=10000.0):
    """a_ts / √Dh = Σ_c softplus(q_tc) softplus(k_sc) cos((t − s) θ_c − δ_c) / √Dh, s ≤ t; else −inf."""
    freqs = [theta ** (-c / DH) for c in range(DH)]
    out = []
    for b in range(q.shape[0]):
        per_head = []
        for h in range(H):
            rows = []
            for i in range(q.shape[2]):
                row = []
                for j in range(q.shape[2]):
                    if j > i:
                        row.append(-math.inf)
                        continue
                    t, s = float(pos[b, i]), float(pos[b, j])
                    a = sum(softplus(float(q[b, h, i, c])) * softplus(float(k[b, h, j, c]))
                            * math.cos((t - s) * freqs[c] - float(delta[h, c])) for c in range(DH))
                    row.append(a / math.sqrt(DH))
                rows.append(row)
            per_head.append(rows)
        out.append(per_head)
    return out


@pytest.mark.parametrize("layer", [0, 1])
def test_pope_equals_the_polar_formula(layer):
    m = model("pope")
    with torch.no_grad():  # a phase bias inside [−2π, 0], different per head and frequency
        m.pos_enc.delta.copy_(-torch.rand(H, DH, generator=torch.Generator().manual_seed(2)).double() * 2 * math.pi)
    x, y = attention_io(m, TOKENS, layer)
    q, k, v = split_qkv(m.blocks[layer].attn, x, H)
    pos = torch.arange(T).expand(2, T)
    want = output(m.blocks[layer].attn, pope_logits(q, k, m.pos_enc.delta.detach(), pos), v)
    err = (y - want).abs().max().item()
    assert err < 1e-12, err


def test_pope_clamps_its_phase_bias_to_minus_two_pi_zero():
    m = model("pope")
    x, _ = attention_io(m, TOKENS, 0)
    with torch.no_grad():
        m.pos_enc.delta.fill_(1.0)  # above 0: clamped to 0
        a = attention_io(m, TOKENS, 0)[1]
        m.pos_enc.delta.fill_(0.0)
        b = attention_io(m, TOKENS, 0)[1]
        m.pos_enc.delta.fill_(-10.0)  # below −2π: clamped to −2π, the same phase as 0
        c = attention_io(m, TOKENS, 0)[1]
    assert torch.equal(a, b)
    torch.testing.assert_close(c, b, atol=1e-12, rtol=0)


def test_pope_scores_depend_on_positions_only_through_their_difference():
    """Every position shifted by c (1, 1000, 100000): the same model output (float64), for every query."""
    m = model("pope")
    with torch.no_grad():
        m.pos_enc.delta.copy_(-torch.rand(H, DH, generator=torch.Generator().manual_seed(3)).double() * 6)
        base = m(TOKENS)
        for c in (1, 1000, 100_000):
            shifted = m(TOKENS, torch.arange(T).expand(2, T) + c)
            assert (shifted - base).abs().max().item() < 1e-9, c
    enc = m.pos_enc
    q, k = torch.randn(1, H, T, DH, dtype=torch.float64), torch.randn(1, H, T, DH, dtype=torch.float64)
    pos = torch.arange(T)[None]
    scores = [(lambda r: r[0] @ r[1].transpose(-1, -2))(enc.rotate(q, k, pos + c)) for c in (0, 37)]
    torch.testing.assert_close(scores[0], scores[1], atol=1e-12, rtol=0)


def test_pope_magnitudes_carry_no_phase_from_content():
    """Negating a query channel cannot flip its phase: softplus(q) ≥ 0 is the channel's magnitude, so
    every pair (m cos φ, m sin φ) has angle φ = t θ_c (RoPE would rotate the content's own angle)."""
    enc = build_encoding("pope", EncodingDims(d_model=D, n_heads=H), learnable_bias=False)
    q = torch.randn(1, H, T, DH, dtype=torch.float64)
    pos = torch.arange(T)[None]
    rq, _ = enc.rotate(q, q, pos)
    angle = torch.atan2(rq[..., DH:], rq[..., :DH])  # (1, H, T, Dh)
    want = pos[0, :, None].double() * enc.inv_freq()  # (T, Dh)
    torch.testing.assert_close(torch.remainder(angle - want + math.pi, 2 * math.pi) - math.pi,
                               torch.zeros_like(angle), atol=1e-12, rtol=0)


# --- the NoPE/RoPE hybrid ----------------------------------------------------------------------------


def llama4_is_nope_layer(layer_id: int, nope_layer_interval: int | None) -> bool:
    """meta-llama/llama-models, models/llama4/model.py, TransformerBlock.__init__ (verbatim expression)."""
    return nope_layer_interval is not None and (layer_id + 1) % nope_layer_interval == 0


def llama4_chunked_attention_mask(seq_len: int, attention_chunk_size: int) -> torch.Tensor:
    """meta-llama/llama-models, models/llama4/model.py, `create_chunked_attention_mask` (verbatim body)."""
    block_pos = torch.abs(
        (torch.arange(seq_len).unsqueeze(0) // attention_chunk_size)
        - (torch.arange(seq_len).unsqueeze(1) // attention_chunk_size)
    )
    token_pos = torch.arange(seq_len).unsqueeze(0) - torch.arange(seq_len).unsqueeze(1)
    return (block_pos == 0) & (token_pos <= 0)


def test_the_layer_schedule_is_llama4s():
    for n_layers in range(1, 9):
        for interval in range(1, 6):
            enc = build_encoding("hybrid", EncodingDims(D, H, n_layers=n_layers), interval=interval)
            assert [enc.is_nope(i) for i in range(n_layers)] == [llama4_is_nope_layer(i, interval) for i in range(n_layers)]
    two = build_encoding("hybrid", EncodingDims(D, H, n_layers=2, train_len=64))
    assert (two.interval, two.window, [two.is_nope(i) for i in range(2)]) == (2, 32, [False, True])
    assert build_encoding("hybrid", EncodingDims(D, H, n_layers=12)).interval == 4  # Llama 4 Scout's


def test_the_chunked_mask_is_llama4s():
    for T_, chunk in [(20, 4), (17, 5), (9, 1), (8, 8)]:
        enc = build_encoding("hybrid", EncodingDims(D, H), local="chunked", window=chunk)
        pos = torch.arange(T_)[None]
        ours = enc.local_keys(pos)[0] & torch.ones(T_, T_, dtype=torch.bool).tril()
        assert torch.equal(ours, llama4_chunked_attention_mask(T_, chunk))


def rope_score(qv, kv, i, j, theta=10000.0) -> float:
    """Re Σ_m (q_m + i q_{m+Dh/2}) e^{i·i·θ_m} · conj((k_m + i k_{m+Dh/2}) e^{i·j·θ_m}), θ_m = θ^(−2m/Dh)."""
    half = DH // 2
    total = 0.0
    for m in range(half):
        w = theta ** (-2 * m / DH)
        zq = complex(float(qv[m]), float(qv[m + half])) * cmath.exp(1j * i * w)
        zk = complex(float(kv[m]), float(kv[m + half])) * cmath.exp(1j * j * w)
        total += (zq * zk.conjugate()).real
    return total


def hybrid_logits(q, k, layer, enc):
    out = []
    for b in range(q.shape[0]):
        per_head = []
        for h in range(H):
            rows = []
            for i in range(q.shape[2]):
                row = []
                for j in range(q.shape[2]):
                    if enc.is_nope(layer):
                        ok = j <= i
                        z = float(q[b, h, i] @ k[b, h, j])
                    else:
                        ok = j <= i and (i - j < enc.window if enc.local == "sliding"
                                         else i // enc.window == j // enc.window)
                        z = rope_score(q[b, h, i], k[b, h, j], i, j)
                    row.append(z / math.sqrt(DH) if ok else -math.inf)
                rows.append(row)
            per_head.append(rows)
        out.append(per_head)
    return out


@pytest.mark.parametrize("params,n_layers", [({}, 2), ({"local": "chunked", "window": 3}, 2),
                                             ({"window": 2, "interval": 3}, 3), ({"interval": 1}, 2)])
def test_hybrid_equals_rope_local_and_nope_global_layers(params, n_layers):
    m = model("hybrid", params, n_layers=n_layers)
    enc = m.pos_enc
    for layer in range(n_layers):
        x, y = attention_io(m, TOKENS, layer)
        q, k, v = split_qkv(m.blocks[layer].attn, x, H)
        err = (y - output(m.blocks[layer].attn, hybrid_logits(q, k, layer, enc), v)).abs().max().item()
        assert err < 1e-12, (layer, err)


def test_a_nope_layer_sees_the_set_of_earlier_keys_not_their_order():
    """For query i in a NoPE layer, permuting the (key, value) pairs of the positions before i (jointly,
    each key with its value) leaves the output at i unchanged: the softmax sums over the set
    {(k_j, v_j): j ≤ i}. The RoPE-local layer does change (its scores read i − j)."""
    enc = model("hybrid", {"window": 100}).pos_enc  # window past T: only the rotation differs
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, H, 12, DH, generator=gen, dtype=torch.float64) for _ in range(3))
    x, pos = torch.zeros(1, 12, D, dtype=torch.float64), torch.arange(12)[None]
    mask = K.layer_mask(enc, pos, torch.float64)
    for i in (3, 7, 11):
        perm = torch.cat((torch.randperm(i, generator=gen), torch.arange(i, 12)))
        for layer, same in ((1, True), (0, False)):
            a = K.attention_layer(x, q, k, v, enc, pos, mask, layer)[:, :, i]
            b = K.attention_layer(x, q, k[:, :, perm], v[:, :, perm], enc, pos, mask, layer)[:, :, i]
            assert ((a - b).abs().max().item() < 1e-12) == same, (i, layer)


@pytest.mark.parametrize("local", ["sliding", "chunked"])
def test_the_window_masks_exactly_the_keys_outside_it(local):
    """v_j = e_j makes the layer's output at i its attention weights: w_ij > 0 exactly for the keys
    j ≤ i with i − j < window (sliding) or in i's chunk (chunked), in the local layer; every j ≤ i in the
    NoPE layer."""
    n, W = DH, 3
    enc = build_encoding("hybrid", EncodingDims(D, H, n_layers=2), window=W, local=local)
    gen = torch.Generator().manual_seed(6)
    q, k = (torch.randn(1, H, n, DH, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.eye(n, dtype=torch.float64).expand(1, H, n, n)
    pos = torch.arange(n)[None]
    for layer in (0, 1):
        w = K.attention_layer(torch.zeros(1, n, D), q, k, v, enc, pos, K.layer_mask(enc, pos, torch.float64), layer)
        for i in range(n):
            for j in range(n):
                inside = j <= i and (layer == 1 or (i - j < W if local == "sliding" else i // W == j // W))
                assert bool((w[0, :, i, j] > 0).all()) == inside and bool((w[0, :, i, j] == 0).all()) != inside


# --- invariants and errors, both encodings ---------------------------------------------------------------


CASES = [("pope", {}), ("pope", {"learnable_bias": False}), ("hybrid", {"window": 3}),
         ("hybrid", {"window": 3, "local": "chunked"})]


@pytest.mark.parametrize("name,params", CASES)
def test_changing_future_tokens_never_changes_past_outputs(name, params):
    assert_causal(model(name, params), V)


@pytest.mark.parametrize("name,params", CASES)
def test_right_padding_leaves_real_tokens_unchanged_and_training_is_finite(name, params):
    m = model(name, params)
    assert_right_padding_is_invisible(m, TOKENS)
    m.float().train()
    with torch.no_grad():
        for p in m.pos_enc.parameters():
            p.sub_(0.5)  # δ inside (−2π, 0), where the clamp passes the gradient
    m(torch.randint(0, V, (2, 40))).logsumexp(-1).mean().backward()
    grads = [p.grad for p in m.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert all(p.grad.abs().sum() > 0 for p in m.pos_enc.parameters())


def test_both_document_themselves_and_their_length_behaviour():
    for name in ("pope", "hybrid"):
        cls = ENCODINGS.get(name)
        assert cls.description and cls.paper and cls.length_behaviour.startswith("evaluated as trained"), name
        assert "Args:" in cls.__doc__ and "Length behaviour" in cls.__doc__ and "Deviations" in cls.__doc__, name
    assert ENCODINGS.get("hybrid").causal_only and not ENCODINGS.get("pope").causal_only


@pytest.mark.parametrize("name,params,match", [
    ("pope", {"theta": 0}, "encoding 'pope': theta = 0 is out of range"),
    ("pope", {"learnable_bias": "yes"}, "learnable_bias = 'yes' is out of range"),
    ("hybrid", {"interval": 0}, "encoding 'hybrid': interval = 0 is out of range"),
    ("hybrid", {"interval": 1.5}, "interval = 1.5 is out of range"),
    ("hybrid", {"window": 0}, "encoding 'hybrid': window = 0 is out of range"),
    ("hybrid", {"window": True}, "window = True is out of range"),
    ("hybrid", {"local": "global"}, "local = 'global' is out of range"),
    ("hybrid", {"theta": -1}, "encoding 'hybrid': theta = -1 is out of range"),
])
def test_parameters_out_of_range_fail_in_one_line(name, params, match):
    with pytest.raises(ValueError, match=match) as info:
        build_encoding(name, EncodingDims(d_model=16, n_heads=2), **params)
    assert "\n" not in str(info.value)


def test_the_hybrid_refuses_bidirectional_models():
    with pytest.raises(ValueError, match="causal attention only"):
        build_encoding("hybrid", EncodingDims(d_model=16, n_heads=2, causal=False))
    build_encoding("pope", EncodingDims(d_model=16, n_heads=2, causal=False))


# --- a tiny suite: both on copy, passkey and lm, evaluated at 1–16× ------------------------------------------


TINY_SUITE = {
    "name": "pope-hybrid-tiny",
    "seeds": [0],
    "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "ff_mult": 2},
    "train": {"steps": 30, "batch_size": 8, "lr": 0.003, "warmup": 3},
    "eval": {"ratios": [1, 2, 4, 8, 16], "samples": 4},
    "tasks": [{"name": "copy", "train_len": 8}, {"name": "passkey", "train_len": 16}, {"name": "lm", "train_len": 16}],
    "encodings": ["pope", {"name": "hybrid", "label": "rnope-swa"},
                  {"name": "hybrid", "params": {"local": "chunked"}, "label": "irope"}],
}


@pytest.mark.slow
def test_tiny_suite_both_train_and_every_row_is_ok(tmp_path):
    """PoPE, RNoPE-SWA and iRoPE on copy, passkey and lm at 1–16×: no failed row, every value finite."""
    entries, _ = run_tiny_suite_checked(TINY_SUITE, tmp_path / "run")
    assert entries == {(e, "none", t) for e in ("pope", "rnope-swa", "irope") for t in ("copy", "passkey", "lm")}
