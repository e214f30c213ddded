"""The reference test of the alibi-steep plugin (docs/add-encoding.md): its bias against the
closed form in float64, and the invariants it must keep. Run it with `pytest examples/plugins`."""

from pathlib import Path

import torch

from lenbench.encodings import EncodingDims, build_encoding

HERE = Path(__file__).resolve().parent


def load_plugin():
    """Register alibi-steep once (as `lenbench run --plugin` would)."""
    from lenbench.plugins import load_plugins

    load_plugins([HERE / "alibi_steep.py"])


def test_bias_is_scaled_alibi_in_closed_form():
    load_plugin()
    dims = EncodingDims(d_model=32, n_heads=4)
    enc = build_encoding("alibi-steep", dims, scale=3.0)
    pos = torch.arange(7, dtype=torch.float64)[None]  # (1, T)
    bias = enc.bias(pos, pos)  # (1, H, T, T)
    # Press et al. §3: for 4 heads the slopes are 2^-2, 2^-4, 2^-6, 2^-8
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / 4) for h in range(4)], dtype=torch.float64)
    i, j = torch.meshgrid(torch.arange(7.0, dtype=torch.float64), torch.arange(7.0, dtype=torch.float64),
                          indexing="ij")
    expected = -3.0 * slopes[:, None, None] * (i - j).abs()  # (H, T, T)
    torch.testing.assert_close(bias[0], expected, rtol=0, atol=1e-12)


def test_scale_one_is_alibi_and_bias_is_translation_invariant():
    load_plugin()
    dims = EncodingDims(d_model=32, n_heads=4)
    pos = torch.arange(5)[None]  # (1, T)
    steep = build_encoding("alibi-steep", dims, scale=1.0).bias(pos, pos)
    torch.testing.assert_close(steep, build_encoding("alibi", dims).bias(pos, pos))
    shifted = build_encoding("alibi-steep", dims, scale=1.0).bias(pos + 100, pos + 100)
    torch.testing.assert_close(steep, shifted)
