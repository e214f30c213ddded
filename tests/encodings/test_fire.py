"""FIRE (Li et al. 2023) against an independent float64 implementation of the paper's formula,
with the authors' reference initialisation as the default and the length-relative threshold as a
parameter (issue 24, part 2)."""

import math

import pytest
import torch

from lenbench.encodings import EncodingDims, build_encoding


def dims(train_len=None, n_heads=4):
    return EncodingDims(d_model=32, n_heads=n_heads, train_len=train_len)


def reference_bias(mlp, c: float, threshold: float, q_pos: list[int], k_pos: list[int]) -> torch.Tensor:
    """b(i, j) = f_θ(ψ(i − j) / (ψ(max(L, i)) + 1e-6)), ψ(x) = log(|c|·x + 1), written out in float64:
    the logs with `math`, f_θ = W2 · relu(W1 · x + b1) + b2 with the module's weights. (H, Tq, Tk)."""
    w1, b1 = mlp[0].weight.detach().double()[:, 0], mlp[0].bias.detach().double()  # (hidden,), (hidden,)
    w2, b2 = mlp[2].weight.detach().double(), mlp[2].bias.detach().double()  # (H, hidden), (H,)
    out = torch.zeros(w2.shape[0], len(q_pos), len(k_pos), dtype=torch.float64)  # (H, Tq, Tk)
    for a, i in enumerate(q_pos):
        for b, j in enumerate(k_pos):
            x = math.log(abs(c) * max(i - j, 0) + 1) / (math.log(abs(c) * max(threshold, i) + 1) + 1e-6)
            out[:, a, b] = w2 @ torch.relu(w1 * x + b1) + b2  # (H,)
    return out


def test_the_default_is_the_authors_initialisation_whatever_the_training_length():
    for train_len in (None, 32, 64, 4096):
        enc = build_encoding("fire", dims(train_len))
        assert enc.c.item() == pytest.approx(0.1) and enc.threshold_init.item() == 512.0
        assert enc.threshold_scale.item() == 1.0 and enc.threshold.item() == 512.0
        assert enc.mlp[0].out_features == 32  # the paper's MLP width


def test_threshold_fraction_is_relative_to_the_training_length_in_tokens():
    for train_len, expected in ((64, 16.0), (100, 25.0), (2, 1.0)):  # at least one position
        enc = build_encoding("fire", dims(train_len), threshold_fraction=0.25)
        assert enc.threshold_init.item() == expected and enc.threshold.item() == expected
    assert build_encoding("fire", dims(None), threshold_fraction=0.25).threshold.item() == 512.0  # unknown: the constant
    assert build_encoding("fire", dims(64), threshold=100).threshold.item() == 100.0
    with pytest.raises(ValueError, match=r"^encoding 'fire': threshold = 100 and threshold_fraction = 0.25 both set "
                                         r"the initial threshold; keep one$"):
        build_encoding("fire", dims(64), threshold=100, threshold_fraction=0.25)
    with pytest.raises(ValueError, match=r"^encoding 'fire': threshold_fraction = 0 is out of range \(valid: a finite number > 0\)$"):
        build_encoding("fire", dims(64), threshold_fraction=0)


def _trained_looking_fire(threshold=20.0, scale=0.7, c=-0.37, seed=0):
    """FIRE with random MLP weights and c, m moved off their initial values (L = |m · L0| = 14)."""
    torch.manual_seed(seed)
    enc = build_encoding("fire", dims(), threshold=threshold, c=1.0)
    with torch.no_grad():
        for p in enc.mlp.parameters():
            p.normal_()
        enc.c.fill_(c)  # used as |c|
        enc.threshold_scale.fill_(scale)
    return enc


def test_fire_equals_the_float64_formula_below_and_above_a_fractional_threshold():
    enc = _trained_looking_fire()
    L = abs(0.7 * 20.0)
    assert enc.threshold.item() == pytest.approx(L)
    q_pos, k_pos = [0, 3, 13, 14, 15, 40, 200], [0, 1, 5, 13, 14, 39, 150]  # Tq = Tk, queries on both sides of L
    got = enc.bias(torch.tensor([q_pos]), torch.tensor([k_pos])).detach()[0].double()  # (H, Tq, Tk)
    expected = reference_bias(enc.mlp, -0.37, L, q_pos, k_pos)
    causal = torch.tensor([[j <= i for j in k_pos] for i in q_pos])  # keys after the query: masked by the model
    torch.testing.assert_close(got[:, causal], expected[:, causal], rtol=1e-5, atol=1e-5)
    # a batch whose rows differ (no broadcast shortcut), Tq ≠ Tk
    q2, k2 = [[2, 9, 30], [16, 17, 100]], [[0, 2, 5, 9], [1, 16, 17, 90]]
    batched = enc.bias(torch.tensor(q2), torch.tensor(k2)).detach().double()  # (2, H, 3, 4)
    for row in range(2):
        torch.testing.assert_close(batched[row], reference_bias(enc.mlp, -0.37, L, q2[row], k2[row]),
                                   rtol=1e-5, atol=1e-5)


def test_the_threshold_learns_through_its_multiplier_as_the_chain_rule_says():
    """d bias / d m = L0 · d bias / d L (L = |m · L0|): the module's gradient in float64 equals a
    central difference of the float64 formula in m."""
    enc = _trained_looking_fire().double()
    pos = [0, 4, 9, 13, 20]
    weights = torch.randn(enc.mlp[2].out_features, len(pos), len(pos), dtype=torch.float64,
                          generator=torch.Generator().manual_seed(1)).tril()  # (H, T, T), causal entries
    (enc.bias(torch.tensor([pos]), torch.tensor([pos]))[0] * weights).sum().backward()

    def loss(m: float) -> float:
        return float((reference_bias(enc.mlp, -0.37, abs(m * 20.0), pos, pos) * weights).sum())

    h = 1e-6
    numeric = (loss(0.7 + h) - loss(0.7 - h)) / (2 * h)
    assert enc.threshold_scale.grad.item() == pytest.approx(numeric, rel=1e-5)
    assert numeric != 0  # queries below L = 14 see it


def test_state_dict_round_trips_the_threshold_constant():
    enc = build_encoding("fire", dims(64), threshold_fraction=0.25)
    other = build_encoding("fire", dims(None))  # L0 = 512 before loading
    other.load_state_dict(enc.state_dict())
    assert other.threshold.item() == 16.0
