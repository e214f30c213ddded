"""The frontier encodings against the authors' own reference functions, where those run on a CPU.

| ours            | the authors' function                                          | where it comes from            |
| --------------- | -------------------------------------------------------------- | ------------------------------ |
| fox             | `naive_forgetting_attn` (fla/ops/forgetting_attn/naive.py)     | `pip install lenbench[authors]` (fla-core; the FoX authors' README points to it) |
| stickbreaking   | `naive_stickbreaking_attn` (fla/ops/stickbreaking_attn/naive.py) | the same                     |
| path, path-fox  | `naive_path_attn` (fla/ops/path_attn/naive.py), run in float64 | the same                       |
| stickbreaking   | `stickbreaking` (stickbreaking_attention/sb_ref.py, Tan et al.) | a checkout of shawntan/stickbreaking-attention on PYTHONPATH (not on PyPI) |
| dape            | `AliBi_DAPE`, `ParallelKerpleLog_DAPE` (DAPE.py, Zheng et al.)  | a checkout of chuanyang-Zheng/DAPE on PYTHONPATH (not on PyPI) |
| pope            | `apply_pope_to_qk`, `PoPE` (PoPE_pytorch/pope.py): a third party's (lucidrains), not the authors' | `pip install PoPE-pytorch`, or a checkout of lucidrains/PoPE-pytorch on PYTHONPATH |

Each test skips, naming what to install, where its source is absent. The flash-linear-attention
and stick-breaking packages import triton (GPU kernels) in their `__init__`, which a CPU machine
does not have; their reference functions need only torch (and einops), so each is loaded from its
file inside the installed package without running the package's `__init__`.

p-RoPE's and SSMax's authors publish no code that runs here (the p-RoPE paper's listing is JAX
pseudocode; SSMax has no author's package, and the `scalable-softmax` package on PyPI is a third
party's, with n fixed to the input's full width rather than the causal count): both are held to
their papers' formulas in test_frontier.py. PoPE's authors publish no code that could be found
either; the closest is lucidrains' PoPE-pytorch, a third party's implementation, held equal below.
The NoPE/RoPE hybrid's reference lines (Llama 4's layer schedule and chunk mask) are replicated
verbatim in test_pope_hybrid.py: llama-models' module needs fairscale and a GPU process group.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from lenbench.model import ModelConfig, Transformer

V, D, H, L = 17, 32, 4, 2
DH = D // H
FLA = "pip install 'lenbench[authors]' (fla-core and einops)"


def authors_module(package: str, relpath: str, install: str) -> ModuleType:
    """The module file `relpath` of the installed `package`, executed on its own (the package's
    `__init__` is never run: it imports triton); skips naming `install` when it is absent."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{package} is not installed: {install}")
    path = Path(next(iter(spec.submodule_search_locations))) / relpath
    if not path.is_file():
        pytest.skip(f"{package} has no {relpath} (a version without it?): {install}")
    mod_spec = importlib.util.spec_from_file_location(f"_authors_{package}_{path.stem}", path)
    module = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(module)
    except ImportError as e:  # e.g. einops missing
        pytest.skip(f"{package}/{relpath} needs {e.name}: {install}")
    return module


def model(name: str, params: dict | None = None, dtype=torch.float32, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=V, d_model=D, n_layers=L, n_heads=H, ff_mult=2, encoding=name,
                      encoding_params=params or {}, max_len=256)
    return Transformer(cfg).to(dtype).eval()


def layer_io(m: Transformer, tokens: torch.Tensor, layer: int):
    """Layer `layer`'s attention input x (B, T, D), its q, k, v in the authors' (B, T, H, Dh) layout
    (before any rotation: these encodings rotate nothing) and the layer's output (B, T, D)."""
    seen = {}
    attn = m.blocks[layer].attn
    hook = attn.register_forward_hook(lambda mod, args, out: seen.update(x=args[0], y=out))
    with torch.no_grad():
        m(tokens)
        hook.remove()
        x = seen["x"]
        B, T, _ = x.shape
        q, k, v = (t.reshape(B, T, H, DH) for t in attn.qkv(x).split(D, dim=-1))  # (B, T, H, Dh) each
    return x, q, k, v, seen["y"]


def project(m: Transformer, layer: int, o: torch.Tensor) -> torch.Tensor:
    """Heads (B, T, H, Dh) merged and through the layer's output projection: (B, T, D)."""
    with torch.no_grad():
        return m.blocks[layer].attn.out(o.reshape(o.shape[0], o.shape[1], D).to(m.head.weight.dtype))


def tokens(T: int, seed: int = 3) -> torch.Tensor:
    return torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(seed))


# --- FoX: flash-linear-attention's reference of forgetting attention -------------------------------


@pytest.mark.parametrize("layer", [0, 1])
def test_fox_equals_the_authors_forgetting_attention(layer):
    """The model's FoX layer = `naive_forgetting_attn(q, k, v, g)` with g = logsigmoid(fgate_proj(x))
    in float32 (forgetting-transformer, modeling_forgetting_transformer.py:343–346), scale 1/√Dh."""
    naive = authors_module("fla", "ops/forgetting_attn/naive.py", FLA).naive_forgetting_attn
    m = model("fox")
    gate = m.pos_enc.gates[layer]
    with torch.no_grad():  # gates far from 1/2 and different per head: the decay matters at T = 96
        gate.weight.mul_(30)
        gate.bias.copy_(torch.tensor([3.0, 0.5, -1.0, 6.0]))
    x, q, k, v, y = layer_io(m, tokens(96), layer)
    with torch.no_grad():
        g = F.logsigmoid(F.linear(x, gate.weight, gate.bias).float())  # (B, T, H): the authors' log forget gate
        ref = naive(q, k, v, g)  # (B, T, H, Dh)
    assert g.min() < -2  # some gates well below 1: the decay is exercised
    torch.testing.assert_close(y, project(m, layer, ref), atol=2e-6, rtol=1e-5)


# --- stick-breaking: flash-linear-attention's reference and the authors' sb_ref ---------------------


SB_CASES = [{}, {"attend_current": True}, {"remainder": "drop"}, {"attend_current": True, "remainder": "drop"}]


@pytest.mark.parametrize("params", SB_CASES, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()) or "default")
def test_stickbreaking_equals_flas_reference(params):
    """The model's layer = `naive_stickbreaking_attn(q, k, v, attend_current)` in float64, plus its
    remainder on the query's own value unless dropped (the authors' test: `o + rem[..., None] * v`,
    stickbreaking-attention tests/test_attn.py:16–17). Logits scaled up to saturate the sigmoids."""
    naive = authors_module("fla", "ops/stickbreaking_attn/naive.py", FLA).naive_stickbreaking_attn
    m = model("stickbreaking", params, torch.float64)
    with torch.no_grad():
        m.blocks[1].attn.qkv.weight[: 2 * D].mul_(60)  # q and k: logits of tens, β near 0 and 1
    x, q, k, v, y = layer_io(m, tokens(80), 1)
    with torch.no_grad():
        o, rem = naive(q, k, v, attend_current=params.get("attend_current", False))  # (B, T, H, Dh), (B, T, H)
        if params.get("remainder", "current") == "current":
            o = o + rem[..., None] * v  # (B, T, H, Dh)
        ours = m.pos_enc.weights(q.transpose(1, 2), k.transpose(1, 2))  # (B, H, T, T)
    assert rem.min() < 0.01 and rem.max() > 0.99  # saturated both ways
    torch.testing.assert_close(y, project(m, 1, o), atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(1 - ours.sum(-1), rem.transpose(1, 2), atol=1e-12, rtol=0)  # the same leftover stick


@pytest.mark.parametrize("attend_current", [False, True])
def test_stickbreaking_equals_the_authors_sb_ref(attend_current):
    """Tan et al.'s own reference (stickbreaking-attention, stickbreaking_attention/sb_ref.py:8–25), called as
    their test calls it (tests/test_attn.py:10–18: mask triu(0), or triu(1) with attend_current;
    cumulative weight tril(−1); o + rem · v). It computes in float32."""
    sb_ref = authors_module("stickbreaking_attention", "sb_ref.py",
                            "a checkout of github.com/shawntan/stickbreaking-attention on PYTHONPATH").stickbreaking
    m = model("stickbreaking", {"attend_current": attend_current})
    x, q, k, v, y = layer_io(m, tokens(64), 0)
    T = q.shape[1]
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh): their layout
    mask = torch.ones(T, T, dtype=torch.bool).triu(1 if attend_current else 0)  # (T, T): True = not attended
    with torch.no_grad():
        o, rem = sb_ref(q, k, v, mask, torch.ones(T, T).tril(-1))
        o = o + rem[..., None] * v  # (B, H, T, Dh)
    torch.testing.assert_close(y, project(m, 0, o.transpose(1, 2)), atol=2e-6, rtol=1e-5)


# --- DAPE: the authors' DAPE.py ---------------------------------------------------------------------


def dape_module() -> ModuleType:
    return pytest.importorskip("DAPE", reason="the DAPE authors' DAPE.py is not importable: put a checkout of "
                                               "github.com/chuanyang-Zheng/DAPE on PYTHONPATH")


def dape_scores(m: Transformer, layer: int, T: int):
    """Layer `layer`'s logits z = q·k/√Dh (B, H, T, T) and our z + B + f(z, B) (B, H, T, T)."""
    enc = m.pos_enc
    x, q, k, v, _ = layer_io(m, tokens(T), layer)
    q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, T, Dh)
    pos = torch.arange(T).expand(2, T)
    with torch.no_grad():
        z = q @ k.transpose(-1, -2) / math.sqrt(DH)  # (B, H, T, T)
        return z, z + enc.layer_bias(x, q, k, pos, layer)


def test_dape_alibi_equals_the_authors_alibi_dape():
    """`AliBi_DAPE(H, mp_rank=0, mlp_width=32)` (DAPE.py:96–196: x + a + mlp2([x, a]) on the unmasked scores,
    a = −slope · (i − j) on and below the diagonal) with our MLP's weights: equal where the
    causal mask lets a query attend (their bias is 0 above the diagonal, ours |i − j|; both masked)."""
    theirs = dape_module().AliBi_DAPE(H, mp_rank=0, mlp_width=32).double()  # its default mp_rank=1 slices no slope
    m = model("dape", {"base": "alibi"}, torch.float64)
    theirs.mlp2.load_state_dict(m.pos_enc.mlps[1].state_dict())
    slopes = m.pos_enc.base_enc.slopes.double()  # (H,)
    torch.testing.assert_close(theirs.slopes.double(), slopes, atol=1e-7, rtol=0)  # theirs went through float32
    theirs.slopes.copy_(slopes)
    z, ours = dape_scores(m, 1, 40)
    with torch.no_grad():
        ref = theirs(z)  # (B, H, T, T)
    causal = torch.ones(40, 40, dtype=torch.bool).tril()
    torch.testing.assert_close(ours[..., causal], ref[..., causal], atol=1e-10, rtol=0)


def test_dape_kerple_equals_the_authors_kerple_dape(monkeypatch):
    """`ParallelKerpleLog_DAPE` (DAPE.py:295–402, the paper's Kerple-DAPE: x + bias + mlp2([x, bias]),
    bias = −p · log(1 + a · (i − j))) with our r1 → p, r2 → a and our MLP's weights. Its parameters
    are allocated on `torch.cuda.current_device()`, patched to the CPU here."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "cpu")
    args = SimpleNamespace(num_attention_heads=H, pos_emb="kerple_dape", params_dtype=torch.float64, mlp_width=32)
    theirs = dape_module().ParallelKerpleLog_DAPE(args, layer_number=0).double()
    m = model("dape", {}, torch.float64)
    base = m.pos_enc.base_enc
    with torch.no_grad():
        theirs.bias_p.copy_(base.r1.detach()[:, None, None])
        theirs.bias_a.copy_(base.r2.detach()[:, None, None])
    theirs.mlp2.load_state_dict(m.pos_enc.mlps[0].state_dict())
    z, ours = dape_scores(m, 0, 40)
    with torch.no_grad():
        ref = theirs(z)  # (B, H, T, T)
    causal = torch.ones(40, 40, dtype=torch.bool).tril()
    torch.testing.assert_close(ours[..., causal], ref[..., causal], atol=1e-10, rtol=0)


def test_pope_equals_pope_pytorchs_apply_pope_to_qk():
    """lucidrains' PoPE (third party): `PoPE(Dh, heads=H)` with our δ as its `bias`, `apply_pope_to_qk`
    on the layer's q and k, then softmax(q̃·k̃ᵀ · Dh^−1/2) (its `softmax_scale` default, over the
    original head dimension) with the causal mask: equal to the model's layer in float64."""
    pope = pytest.importorskip("PoPE_pytorch.pope", reason="PoPE-pytorch is not importable: pip install PoPE-pytorch "
                               "or put a checkout of lucidrains/PoPE-pytorch on PYTHONPATH")
    m = model("pope", dtype=torch.float64)
    with torch.no_grad():
        m.pos_enc.delta.copy_(-torch.rand(H, DH, generator=torch.Generator().manual_seed(1)).double() * 6)
    T = 12
    theirs = pope.PoPE(DH, heads=H).double()
    with torch.no_grad():
        theirs.bias.copy_(m.pos_enc.delta)
        theirs.inv_freqs.copy_(m.pos_enc.inv_freq())  # the same θ^(−c/Dh), computed in float64
    for layer in range(L):
        _, q, k, v, y = layer_io(m, tokens(T), layer)  # (B, T, H, Dh) each
        with torch.no_grad():
            rq, rk = pope.apply_pope_to_qk(theirs(T), q.transpose(1, 2), k.transpose(1, 2))  # (B, H, T, 2Dh)
            scores = (rq @ rk.transpose(-1, -2)) * DH ** -0.5
            scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
            o = scores.softmax(-1) @ v.transpose(1, 2)  # (B, H, T, Dh)
        torch.testing.assert_close(project(m, layer, o.transpose(1, 2)), y, atol=1e-12, rtol=0)


# --- PaTH and PaTH-FoX: flash-linear-attention's naive_path_attn ------------------------------------


class _Float64Torch:
    """`torch` as naive_path_attn sees it, with `torch.float` meaning float64: its `x.to(torch.float)`
    then keeps float64 (with float64 the default dtype for its `torch.zeros` score buffer)."""

    float = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["path", "path-fox"])
@pytest.mark.parametrize("layer", [0, 1])
def test_path_equals_the_authors_naive_path_attn_in_float64(name, layer, monkeypatch):
    """The model's PaTH layer = `naive_path_attn(q, k, v, w, beta, g, scale)` (fla/ops/path_attn/naive.py,
    the authors' reference of their triton kernel, chunk 64) with w, β and g computed from the
    model's own projections as fla/layers/path_attn.py does (l. 110–124), in float64: the naive
    function's float32 casts are redirected to float64. T = 150 spans three of its chunks and five
    of ours; the transforms are made strong (β across (0, 2), w far from the initialisation)."""
    fla_naive = authors_module("fla", "ops/path_attn/naive.py", FLA)
    monkeypatch.setattr(fla_naive, "torch", _Float64Torch())
    m = model(name, dtype=torch.float64)
    enc = m.pos_enc
    with torch.no_grad():
        for p in enc.parameters():
            p.copy_(torch.randn_like(p))
    x, q, k, v, y = layer_io(m, tokens(150), layer)
    with torch.no_grad():
        w, beta = enc.transforms(x, layer)  # (B, H, T, Dh), (B, H, T)
        log_f = enc.log_forget(x, layer)
        g = torch.zeros_like(beta) if log_f is None else log_f  # (B, H, T)
        before = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            ref = fla_naive.naive_path_attn(q, k, v, w.transpose(1, 2), beta.transpose(1, 2), g.transpose(1, 2),
                                            scale=DH ** -0.5)  # (B, T, H, Dh)
        finally:
            torch.set_default_dtype(before)
    assert ref.dtype == torch.float64
    assert beta.min() < 0.2 and beta.max() > 1.8  # near the identity and near a reflection
    assert log_f is None or log_f.min() < -2
    print(f"{name} layer {layer}: max |ours - naive_path_attn| = {(y - project(m, layer, ref)).abs().max():.2e}")
    torch.testing.assert_close(y, project(m, layer, ref), atol=1e-11, rtol=1e-9)
