"""The leaderboard as heatmaps: (encoding, variant) × length ratio, one panel per task."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import LogNorm, Normalize
from matplotlib.patches import Rectangle

from lenbench.report.plots._style import grid, plain_log_labels, quiet, save_figure
from lenbench.report.tables import Leaderboard, leaderboard, ratio_label


def _cell_text(value: float, metric: str) -> str:
    if not math.isfinite(value):
        return ""
    if metric in ("token_accuracy", "exact_match"):
        return f"{value:.2f}"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:.3g}"


def leaderboard_heatmap(df: pd.DataFrame, path: str | Path, *, board: Leaderboard | None = None) -> Path:
    """The leaderboard as heatmaps: (encoding, variant) × length ratio, primary metric (mean over
    seeds), one panel per task; brighter is better; "fail" marks a failed length; a model that
    did not learn the task at 1× is veiled grey, hatched and labelled "(not learned)".

    Args:
        df: the tidy results frame (`lenbench.report.rows.load_results`).
        path: output file (.png or .svg).
        board: the precomputed `leaderboard(df)`, if at hand.
    """
    board = board if board is not None else leaderboard(df)
    wide = board.wide
    keys = list(dict.fromkeys(zip(wide["task"], wide["train_len"], strict=True)))
    if not keys:
        raise ValueError("leaderboard_heatmap: no rows to plot")
    n_rows = max(int(((wide["task"] == t) & (wide["train_len"] == n)).sum()) for t, n in keys)
    fig, axes = grid(len(keys), 5.2, 0.9 + 0.32 * n_rows)
    for ax, (task, train_len) in zip(axes, keys, strict=True):
        rows = wide[(wide["task"] == task) & (wide["train_len"] == train_len)]
        metric = rows["metric"].iloc[0]
        hib = bool(rows["higher_is_better"].iloc[0])
        ratios = sorted(df.loc[(df["task"] == task) & (df["train_len"] == train_len), "ratio"].unique())
        cols = [ratio_label(r) for r in ratios]
        labels = [f"{sr} (not learned)" if nl else sr for sr, nl in zip(rows["series"], rows["not_learned"], strict=True)]
        matrix = rows.set_index(pd.Index(labels, name="series"))[cols].astype(float)
        values = matrix.to_numpy()
        models = values[(rows["kind"] != "baseline").to_numpy()] if "kind" in rows else values
        finite = models[np.isfinite(models)]  # the colour scale spans the models; baselines may clip
        if not len(finite):
            finite = values[np.isfinite(values)]
        norm = None
        if metric in ("exact_match", "token_accuracy"):
            norm = Normalize(vmin=0.0, vmax=1.0)
        elif metric == "perplexity" and len(finite) and (finite > 0).all() and finite.max() > finite.min():
            norm = LogNorm(vmin=float(finite.min()), vmax=float(finite.max()))
        elif len(finite):
            norm = Normalize(vmin=float(finite.min()), vmax=float(finite.max()))
        annot = [[_cell_text(v, metric) for v in row] for row in values]
        with quiet():
            sns.heatmap(matrix, ax=ax, cmap="viridis" if hib else "viridis_r", annot=np.array(annot, dtype=object),
                        fmt="", norm=norm, annot_kws={"fontsize": 7},
                        cbar_kws={"label": f"{metric} {'↑' if hib else '↓'}"}, linewidths=0.5, linecolor="white")
        if isinstance(norm, LogNorm):
            plain_log_labels(ax.collections[0].colorbar.ax.yaxis)
        for i, j in zip(*np.where(np.isnan(values)), strict=True):
            ax.text(j + 0.5, i + 0.5, "fail", ha="center", va="center", fontsize=7, color="0.3")
        for i, not_learned in enumerate(rows["not_learned"]):  # grey veil and hatching over a not-learned row
            if not_learned:
                ax.add_patch(Rectangle((0, i), len(cols), 1, facecolor="white", alpha=0.55, hatch="//",
                                       edgecolor="0.5", linewidth=0))
        ax.set(title=f"{task} (train length {train_len})", xlabel="length ratio (eval / train)", ylabel="")
        ax.tick_params(axis="y", rotation=0)
    fig.suptitle("lenbench leaderboard: primary metric by length ratio (brighter is better)")
    fig.tight_layout()
    return save_figure(fig, path)
