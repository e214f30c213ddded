"""Figures: the position-encoding heatmap (and, with the leaderboard, metric-vs-length plots).

Every figure is written with the non-interactive Agg backend, so plotting works on machines
without a display.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
import torch  # noqa: E402

from lenbench.encodings import EncodingDims, PositionalEncoding, build_encoding  # noqa: E402


def encoding_matrix(enc: PositionalEncoding, length: int) -> tuple[torch.Tensor, str]:
    """The position × channel matrix an encoding applies, and a label for its channel axis.

    - absolute encodings: `embed(0, pos)`, the vector added at each position (T, D);
    - rotary encodings: a ones query rotated to each position (T, Dh);
    - bias encodings: the bias from the last query to each key, per head (T, H).
    """
    d = enc.dims
    pos = torch.arange(length)[None]  # (1, T)
    with torch.no_grad():
        emb = enc.embed(torch.zeros(1, length, d.d_model), pos)[0]  # (T, D)
        if emb.abs().sum() > 0:
            return emb, "embedding dimension"
        ones = torch.ones(1, 1, length, d.head_dim)  # (1, 1, T, Dh)
        q, _ = enc.rotate(ones, ones, pos)
        if not torch.equal(q, ones):
            return q[0, 0], "head dimension"
        bias = enc.bias(pos, pos)  # (1, H, T, T) or None
        if bias is not None:
            return bias[0, :, -1, :].T, "head"  # (T, H)
    return torch.zeros(length, d.d_model), "embedding dimension"


def encoding_heatmap(
    encoding: str, path: str | Path, *, length: int = 256, d_model: int = 128, n_heads: int = 8, **params
) -> Path:
    """Render an encoding's position × dimension matrix (see `encoding_matrix`) to PNG or SVG.

    For `sinusoidal` this is the classic striped picture: fast oscillation in the first dimensions,
    slow waves in the last.

    Args:
        encoding: registered encoding name.
        path: output file; the suffix (.png, .svg) chooses the format.
        length: number of positions (rows).
        d_model, n_heads: model geometry the encoding is built for.
        params: encoding parameters.
    """
    enc = build_encoding(encoding, EncodingDims(d_model=d_model, n_heads=n_heads, max_len=max(length, 1)), **params)
    enc.eval()
    matrix, xlabel = encoding_matrix(enc, length)
    fig, ax = plt.subplots(figsize=(7, 5))
    sns.heatmap(matrix.float().numpy(), ax=ax, cmap="RdBu_r", center=0, xticklabels=False, yticklabels=False)
    ax.set(xlabel=xlabel, ylabel="position", title=f"{encoding}: position × {xlabel}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
