"""The leaderboard as heatmaps: (encoding, variant) × length ratio, one panel per task."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm, Normalize
from matplotlib.patches import Rectangle
from seaborn.utils import relative_luminance

from lenbench.metrics import find_metric
from lenbench.report.figures import FigureSpec
from lenbench.report.formatting import fixed
from lenbench.report.markdown import wide_labels
from lenbench.report.plots._style import (
    PAPER_FONT_SIZE,
    board_label,
    boards_left_out,
    grid,
    round_log_axis,
    round_out,
    save_figure,
)
from lenbench.report.rows import board_rows
from lenbench.report.tables import Leaderboard, leaderboard

#: The figures this module draws (read by `lenbench.report.figures` without importing it).
FIGURES = (FigureSpec(stem="leaderboard_heatmap", title="leaderboard heatmap", source="rows", draw="draw_figure",
                      order=20, left_out="figure_left_out"),)

#: The caption of the figure on the page (`lenbench.report.page`), and for docs to quote.
CAPTION = ("The leaderboard as heatmaps: each task's primary metric (mean over seeds) for every trained model, "
           "inference-time variant and baseline at each length ratio (evaluation / training length); brighter is "
           "better, \"fail\" marks a length where every seed failed, hatched grey rows did not learn the task at 1× "
           "(labelled not learned or uncertain, as the tables label them). "
           "Perplexity has a log colour scale spanning the models (a baseline beyond it takes the end colour).")


def _cell_text(value: float, metric: str) -> str:
    if not math.isfinite(value):
        return ""
    facts = find_metric(metric)
    if facts is not None and facts.bounds is not None:
        return fixed(value, ".2f")
    return fixed(value, ".1f") if abs(value) < 100 else fixed(value, ".3g")


def _board_keys(board: Leaderboard) -> list[tuple[str, int]]:
    wide = board.wide
    return list(dict.fromkeys(zip(wide["task"], (int(n) for n in wide["train_len"]), strict=True)))


def heatmap_left_out(board: Leaderboard) -> dict[str, str]:
    """The panels `leaderboard_heatmap` leaves out: {"task (train length n)": why}
    (`lenbench.report.plots._style.board_left_out`)."""
    return boards_left_out(board, _board_keys(board))[1]


def leaderboard_heatmap(df: pd.DataFrame, path: str | Path, *, board: Leaderboard | None = None) -> Path:
    """The leaderboard as heatmaps (`CAPTION`): (encoding, variant) × length ratio, primary metric
    (mean over seeds), one panel per task; brighter is better; "fail" marks a failed length; a
    model that did not learn the task at 1× with support is veiled grey, hatched and labelled as the
    board's tables label it ("(not learned)", "(uncertain)").
    A board on which every model is at zero or not learned is left out (`heatmap_left_out`),
    unless every board is. Each panel has its own colour bar; a log one (perplexity) is ticked at
    three or more round values, and at an end they leave a third of the bar short of
    (`lenbench.report.plots._style.log_ticks`).

    Args:
        df: the tidy results frame (`lenbench.report.rows.load_results`).
        path: output file (.png, .svg or .pdf).
        board: the precomputed `leaderboard(df)`, if at hand.
    """
    board = board if board is not None else leaderboard(df)
    keys = _board_keys(board)
    if not keys:
        raise ValueError("leaderboard_heatmap: no rows to plot")
    keys, _ = boards_left_out(board, keys)
    with plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        return _heatmap_figure(board, keys, path)


def _heatmap_figure(board: Leaderboard, keys: list[tuple[str, int]], path: str | Path) -> Path:
    wide = board.wide
    n_rows = max(len(board_rows(wide, t, n)) for t, n in keys)
    n_cols = max(len(board.ratio_columns(t, n)) for t, n in keys)
    # wide enough for a dense length axis: each annotated value needs about 0.42 in at 6.5 pt
    fig, axes = grid(len(keys), max(5.0, 2.6 + 0.42 * n_cols), 0.9 + 0.26 * n_rows)
    for ax, (task, train_len) in zip(axes, keys, strict=True):
        rows = board_rows(wide, task, train_len)
        metric = rows["metric"].iloc[0]
        hib = bool(rows["higher_is_better"].iloc[0])
        cols = board.ratio_columns(task, train_len)
        labels = wide_labels(rows, board_rows(board.per_task, task, train_len))
        matrix = rows.set_index(pd.Index(labels, name="series"))[cols].astype(float)
        values = matrix.to_numpy()
        models = values[(rows["kind"] != "baseline").to_numpy()] if "kind" in rows else values
        finite = models[np.isfinite(models)]  # the colour scale spans the models; baselines may clip
        if not len(finite):
            finite = values[np.isfinite(values)]
        norm = None
        facts = find_metric(metric)
        if facts is not None and facts.bounds is not None:
            norm = Normalize(vmin=facts.bounds[0], vmax=facts.bounds[1])
        elif facts is not None and facts.log_scale and len(finite) and (finite > 0).all() and finite.max() > finite.min():
            norm = LogNorm(*round_out(float(finite.min()), float(finite.max())))  # short labels at its ends
        elif len(finite):
            norm = Normalize(vmin=float(finite.min()), vmax=float(finite.max()))
        cbar = _panel(ax, matrix, cmap="viridis" if hib else "viridis_r", norm=norm,
                      label=f"{metric} {'↑' if hib else '↓'}",
                      texts=[[_cell_text(v, metric) for v in row] for row in values])
        if isinstance(norm, LogNorm):
            round_log_axis(cbar.ax.yaxis, norm.vmin, norm.vmax)
        for i, j in zip(*np.where(np.isnan(values)), strict=True):
            ax.text(j + 0.5, i + 0.5, "fail", ha="center", va="center", fontsize=6.5, color="0.3")
        for i, not_learned in enumerate(rows["not_learned"]):  # grey veil and hatching over a not-learned row
            if not_learned:
                ax.add_patch(Rectangle((0, i), len(cols), 1, facecolor="white", alpha=0.55, hatch="//",
                                       edgecolor="0.5", linewidth=0))
        ax.set(title=board_label(task, train_len), xlabel="length ratio (eval / train)", ylabel="")
        ax.tick_params(axis="y", rotation=0, labelsize=7)
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle("lenbench leaderboard: primary metric by length ratio (brighter is better)")
    return save_figure(fig, path)


def _panel(ax, matrix: pd.DataFrame, *, cmap: str, norm, label: str, texts: list[list[str]]):
    """One task's heatmap on `ax` (rows top to bottom, a white grid, its colour bar, each cell's text in
    dark grey or white by the W3C luminance of its colour, seaborn's rule for its annotated heatmap); returns the
    colour bar. Drawn with matplotlib directly: `seaborn.heatmap` renders the whole figure once per call
    (to check its tick labels for overlap), so a figure of one panel per task drew every earlier panel
    again, and a 26-entry catalog's heatmap spent most of its report time there."""
    values = np.ma.masked_invalid(matrix.to_numpy(dtype=float))
    n_rows, n_cols = values.shape
    mesh = ax.pcolormesh(values, cmap=cmap, norm=norm, edgecolors="white", linewidth=0.5)
    ax.set(xlim=(0, n_cols), ylim=(n_rows, 0))
    for spine in ax.spines.values():
        spine.set_visible(False)
    cbar = ax.figure.colorbar(mesh, ax=ax, label=label, pad=0.02)
    cbar.outline.set_linewidth(0)
    ax.set_xticks(np.arange(n_cols) + 0.5, [str(c) for c in matrix.columns])
    ax.set_yticks(np.arange(n_rows) + 0.5, [str(i) for i in matrix.index], va="center")
    luminance = relative_luminance(mesh.to_rgba(values).reshape(-1, 4)).reshape(values.shape)
    for (i, j), text in np.ndenumerate(np.array(texts, dtype=object)):
        if text and not np.ma.is_masked(values[i, j]):
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=6.5,
                    color=".15" if luminance[i, j] > 0.408 else "w")
    return cbar


def draw_figure(inputs, path: str | Path) -> Path:
    """The figure of `lenbench.report.figures`: `leaderboard_heatmap` of the rows and their board."""
    return leaderboard_heatmap(inputs.rows, path, board=inputs.board)


def figure_left_out(inputs) -> dict[str, str]:
    return heatmap_left_out(inputs.board)
