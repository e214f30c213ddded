"""Model-level invariants every encoding must satisfy: order sensitivity, padding, long inputs."""

import pytest
import torch

from lenbench.encodings import ENCODINGS
from lenbench.model import ModelConfig, Transformer

TRAIN_LEN = 32

# Parameters that make an encoding deterministic at evaluation (randomized positions would
# otherwise be re-sampled on every call, which these tests are not about).
EVAL_PARAMS = {"randomized": {"eval_positions": "plain"}}


def make(name: str, *, causal: bool, max_len: int = 16 * TRAIN_LEN, **overrides) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=23, d_model=32, n_layers=2, n_heads=4, causal=causal, encoding=name,
                      encoding_params=EVAL_PARAMS.get(name, {}), max_len=max_len, **overrides)
    return Transformer(cfg).double().eval()


def bidirectional_encodings() -> list[str]:
    return [n for n, cls in ENCODINGS.items() if not cls.causal_only]


def modes(name: str) -> list[bool]:
    return [True] if ENCODINGS.get(name).causal_only else [True, False]


@pytest.mark.parametrize("name", bidirectional_encodings())
def test_permutation_changes_every_encoding_but_nope(name):
    """In a bidirectional model, permuting the tokens permutes NoPE's outputs exactly, because
    attention without positions is a set function of its keys; every other encoding sees the order.

    A *causal* NoPE model is still order-aware: the mask lets token t attend to exactly t + 1
    tokens, so a model can count its predecessors (and so infer positions) from the attention
    pattern alone; permuting the input changes which tokens each position sees. That is why this
    check is run bidirectionally (and why causal_only encodings are not in it).
    """
    model = make(name, causal=False)
    tokens = torch.randint(0, 23, (2, 16))
    perm = torch.randperm(16)
    with torch.no_grad():
        out = model(tokens)  # (2, 16, V)
        out_perm = model(tokens[:, perm])  # (2, 16, V)
    if name == "nope":
        torch.testing.assert_close(out_perm, out[:, perm], atol=1e-10, rtol=0)
    else:
        assert (out_perm - out[:, perm]).abs().max() > 1e-4, f"{name} ignores token order"


def test_causal_nope_is_order_aware():
    model = make("nope", causal=True)
    tokens = torch.randint(0, 23, (1, 16))
    perm = torch.randperm(16)
    with torch.no_grad():
        assert (model(tokens[:, perm]) - model(tokens)[:, perm]).abs().max() > 1e-4


@pytest.mark.parametrize("name", ENCODINGS.names())
def test_padding_leaves_real_positions_unchanged(name):
    for causal in modes(name):
        model = make(name, causal=causal)
        tokens = torch.randint(1, 23, (2, 12))
        padded = torch.cat((tokens, torch.zeros(2, 17, dtype=torch.long)), dim=1)  # (2, 29)
        pad_mask = torch.arange(29)[None] < 12  # (1, 29) -> True at real tokens
        with torch.no_grad():
            plain = model(tokens)  # (2, 12, V)
            with_pad = model(padded, pad_mask=pad_mask.expand(2, 29))[:, :12]  # (2, 12, V)
            no_pad = model(tokens, pad_mask=torch.ones(2, 12, dtype=torch.bool))
        torch.testing.assert_close(with_pad, plain, atol=1e-6, rtol=0, msg=f"{name} causal={causal}")
        torch.testing.assert_close(no_pad, plain, atol=1e-6, rtol=0)


def test_left_padding_with_explicit_positions():
    """Positions are explicit: left-padded rows give the same outputs when positions start at 0 at the first real token."""
    model = make("rope", causal=True)
    tokens = torch.randint(1, 23, (1, 10))
    padded = torch.cat((torch.zeros(1, 5, dtype=torch.long), tokens), dim=1)  # (1, 15)
    pos = (torch.arange(15) - 5).clamp(min=0)[None]  # (1, 15)
    pad_mask = torch.arange(15)[None] >= 5
    with torch.no_grad():
        torch.testing.assert_close(model(padded, pos=pos, pad_mask=pad_mask)[:, 5:], model(tokens), atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ENCODINGS.names())
@pytest.mark.parametrize("T", [1, TRAIN_LEN, 16 * TRAIN_LEN])
def test_forward_backward_at_short_train_and_16x_lengths(name, T):
    causal = ENCODINGS.get(name).causal_only or T != TRAIN_LEN
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=23, d_model=32, n_layers=2, n_heads=4, causal=causal,
                                    encoding=name, max_len=16 * TRAIN_LEN)).train()
    tokens = torch.randint(0, 23, (2, T))
    logits = model(tokens)  # (2, T, V)
    assert logits.shape == (2, T, 23) and torch.isfinite(logits).all()
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_learned_model_fails_past_table_with_clear_error():
    model = make("learned", causal=True, max_len=20)
    with pytest.raises(ValueError, match="cannot represent length 21"):
        model(torch.zeros(1, 21, dtype=torch.long))


def test_impossible_lengths_fail_loudly():
    model = make("nope", causal=True)
    with pytest.raises(AssertionError, match="empty sequence"):
        model(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(AssertionError, match="pos has shape"):
        model(torch.zeros(1, 4, dtype=torch.long), pos=torch.arange(3)[None])


def test_model_init_leaves_the_encodings_own_initialisation():
    """The model's N(0, 0.02) init must not overwrite an encoding's parameters (FIRE's MLP biases
    start non-zero under nn.Linear's default init; the causal mask must hold for CoPE too)."""
    model = make("fire", causal=True)
    assert model.pos_enc.mlp[0].bias.abs().sum() > 0
    assert model.blocks[0].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.1)


@pytest.mark.parametrize("name", ENCODINGS.names())
def test_causal_models_never_look_ahead(name):
    """Changing a later token never changes earlier outputs of a causal model, for every encoding."""
    model = make(name, causal=True)
    tokens = torch.randint(1, 23, (1, 12))
    changed = tokens.clone()
    changed[0, 8:] = (changed[0, 8:] + 1) % 23
    with torch.no_grad():
        torch.testing.assert_close(model(changed)[:, :8], model(tokens)[:, :8], atol=1e-9, rtol=0)


def test_explicit_attention_equals_sdpa_math_in_values_and_every_gradient():
    """`attend`'s explicit path (a learned mask on the CPU: scores built and the mask added in place)
    gives SDPA's math-path output and the same gradients for q, k, v and the broadcast mask."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from lenbench.encodings.attention import attend

    torch.manual_seed(0)
    B, H, T, Dh = 3, 2, 7, 4
    causal = torch.zeros(T, T).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    leaves = [torch.randn(B, H, T, Dh, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    bias = torch.randn(1, H, T, T, dtype=torch.float64, requires_grad=True)
    grad_out = torch.randn(B, H, T, Dh, dtype=torch.float64)
    results = []
    for explicit in (True, False):
        mask = bias + causal  # (1, H, T, T), requires grad
        if explicit:
            out = attend(*leaves, mask, False, 0.0)
        else:
            with sdpa_kernel(SDPBackend.MATH):
                out = torch.nn.functional.scaled_dot_product_attention(*leaves, attn_mask=mask)
        grads = torch.autograd.grad(out, [*leaves, bias], grad_out)
        results.append((out, *grads))
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_shared_rows_collapses_identical_position_rows_only():
    from lenbench.encodings.base import shared_rows

    same = torch.arange(5).repeat(3, 1)  # (3, 5), equal rows stored apart
    assert shared_rows(same).shape == (1, 5) and torch.equal(shared_rows(same)[0], torch.arange(5))
    assert shared_rows(torch.arange(5).expand(3, 5), compare_values=False).shape == (1, 5)  # stride 0: no look needed
    assert shared_rows(same, compare_values=False) is same  # equal, but only a comparison could tell
    offsets = same + torch.tensor([[0], [0], [2]])
    assert shared_rows(offsets) is offsets
    assert shared_rows(offsets[:1]).shape == (1, 5)


def test_embedding_std_scales_the_token_embeddings_alone_and_draws_the_same_random_stream():
    """A larger `embedding_std` changes the token embeddings' scale and nothing else: every other
    weight comes from the same random draws (the same op per parameter, in the same order)."""
    models = {}
    for std in (0.02, 1.0):
        torch.manual_seed(0)
        models[std] = Transformer(ModelConfig(vocab_size=50, d_model=32, n_heads=4, encoding="rope", embedding_std=std))
    small, big = (dict(models[s].named_parameters()) for s in (0.02, 1.0))
    torch.testing.assert_close(big["tok.weight"], small["tok.weight"] * 50, rtol=1e-5, atol=1e-6)  # same draws, scaled
    assert 0.9 < big["tok.weight"].std().item() < 1.1
    assert all(torch.equal(small[k], big[k]) for k in small if k != "tok.weight")
