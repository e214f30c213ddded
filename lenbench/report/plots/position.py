"""Loss by position within the evaluation window (bucketed lm rows)."""

from __future__ import annotations

import zlib
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from lenbench.report.figures import FigureSpec
from lenbench.report.plots._buckets import bucketed, has_bucket_rows
from lenbench.report.plots._style import (
    NOT_LEARNED_ALPHA,
    PAPER_FONT_SIZE,
    PAPER_WIDTH,
    banded_figure,
    boards_left_out,
    grid,
    legend_handles,
    outside_legend,
    plain_log_labels,
    save_figure,
    series_groups,
    series_style,
)
from lenbench.report.rows import board_rows, series_order
from lenbench.report.tables import Leaderboard, leaderboard, ratio_label

#: The figures this module draws (read by `lenbench.report.figures` without importing it).
FIGURES = (FigureSpec(stem="position_loss", title="lm loss by position", source="rows", draw="draw_figure",
                      order=30, left_out="figure_left_out", needs="figure_needs"),)

#: The caption of the figure on the page (`lenbench.report.page`), and for docs to quote.
CAPTION = ("Language-model loss (nll, nats) by target position within the window at the longest evaluated "
           "length, mean over seeds, the training length dashed; top row the trained encodings, below one row "
           "per encoding with inference-time variants, each in its colour, marker and dashes of every figure. A curve that keeps falling past the training length uses "
           "the longer context, a flat one ignores it, a rising one is hurt by it.")

COLUMNS = 2
PANEL_HEIGHT = 2.2


def _keys(df: pd.DataFrame) -> list[tuple[str, int]]:
    return list(dict.fromkeys(zip(df["task"], (int(n) for n in df["train_len"]), strict=True)))


def position_left_out(df: pd.DataFrame, board: Leaderboard | None = None) -> dict[str, str]:
    """The panels `position_loss_plot` leaves out: {"task (train length n)": why}
    (`lenbench.report.plots._style.board_left_out`)."""
    rows = bucketed(df, "pos")
    board = board if board is not None else leaderboard(df)
    return boards_left_out(board, _keys(rows[rows["metric"] == "nll"]))[1]


def position_loss_plot(df: pd.DataFrame, path: str | Path, *, board: Leaderboard | None = None) -> Path:
    """Loss by position within the evaluation window (`CAPTION`), one line per (encoding, variant)
    at the longest evaluated length, one column of panels per lm task (and training length): the
    figure of Press et al. 2022 (ALiBi, fig. 3), Sun et al. 2022 (xPos) and Ding et al. 2024
    (LongRoPE). Rows as in `lenbench.report.plots.extrapolation`: the trained encodings, then
    one row per encoding with inference-time variants; the legend of each row beside it.

    x: target position (bucket midpoint, log2 axis), y: mean nll (nats) over the bucket and seeds;
    a dashed vertical line at the training length; a model not learned at 1× faded. A board on
    which every model is at zero or not learned is left out (`position_left_out`), unless every
    board is.

    Args:
        df: the tidy results frame (`lenbench.report.rows.load_results`), holding "pos:…" bucket
            rows (`evaluate_lm_context`).
        path: output file (.png, .svg or .pdf).
        board: the precomputed `leaderboard(df)`, if at hand.
    """
    rows = bucketed(df, "pos")
    rows = rows[rows["metric"] == "nll"]
    keys = _keys(rows)
    if not keys:
        raise ValueError("position_loss_plot: no per-position rows (bucket 'pos:…') to plot")
    board = board if board is not None else leaderboard(df)
    keys, _ = boards_left_out(board, keys)
    with plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        return _position_figure(rows, board, keys, path)


def _position_figure(df: pd.DataFrame, board: Leaderboard, keys: list[tuple[str, int]], path: str | Path) -> Path:
    shown = df[[k in set(keys) for k in zip(df["task"], df["train_len"], strict=True)]]
    groups = series_groups(zip(shown["encoding"], shown["variant"], strict=True))
    not_learned = {(r["task"], r["train_len"], r["encoding"], r["variant"])
                   for r in board.per_task.to_dict("records") if r["not_learned"]}
    ncols = min(COLUMNS, len(keys))
    band_rows = -(-len(keys) // ncols)
    fig, bands = banded_figure(PAPER_WIDTH, [PANEL_HEIGHT * band_rows] * len(groups),
                               [len(pairs) + 2 for _, pairs in groups])  # at most this many legend entries
    for band, (family, pairs) in zip(bands, groups, strict=True):
        _, axes = grid(len(keys), 0, 0, ncols, parent=band)
        faded = False
        for ax, (task, train_len) in zip(axes, keys, strict=True):
            bdf = board_rows(df, task, train_len)
            ratio = bdf["ratio"].max()
            bdf = bdf[bdf["ratio"] == ratio]
            for encoding, variant in series_order(zip(bdf["encoding"], bdf["variant"], strict=True)):
                if (encoding, variant) not in pairs:
                    continue
                sdf = bdf[(bdf["encoding"] == encoding) & (bdf["variant"] == variant)]
                curve = sdf.assign(mid=(sdf["lo"] + sdf["hi"]) / 2 + 1).groupby("mid", sort=True)["value"].mean()
                style = series_style(encoding, variant)
                alpha = NOT_LEARNED_ALPHA if (task, train_len, encoding, variant) in not_learned else 1.0
                faded |= alpha < 1
                (line,) = ax.plot(curve.index, curve.to_numpy(), color=style["color"], linewidth=1.2, alpha=alpha,
                                  marker=style["marker"], markersize=3, markevery=_mark_every(len(curve), encoding))
                if style["dashes"]:
                    line.set_dashes(style["dashes"])
            ax.axvline(train_len, color="0.25", linestyle="--", linewidth=1.0, zorder=0)
            ax.set_xscale("log", base=2)
            plain_log_labels(ax.xaxis)
            eval_len = int(bdf["eval_len"].max())
            ax.set_title(f"{task} (train length {train_len}) at {eval_len} ({ratio_label(ratio)})",
                         fontsize=PAPER_FONT_SIZE)
            ax.set(xlabel="target position in the window (log2)", ylabel="nll (nats) ↓")
            ax.tick_params(labelsize=PAPER_FONT_SIZE - 1)
            ax.grid(True, which="major", alpha=0.3)
        extra = [Line2D([], [], color="0.25", linestyle="--", linewidth=1.0, label="training length")]
        if faded:
            extra.append(Line2D([], [], color="0.3", alpha=NOT_LEARNED_ALPHA, linewidth=1.4, label="faded: not learned or uncertain"))
        outside_legend(band, legend_handles(pairs) + extra, where="below")
        band.suptitle("trained encodings" if family is None else f"{family} and its inference-time variants",
                      fontsize=PAPER_FONT_SIZE, x=0.02, ha="left")
    return save_figure(fig, path)


#: Markers on a loss-by-position curve: about this many, so that a dense curve stays a line.
MARKS = 6


def _mark_every(n: int, encoding: str) -> tuple[int, int]:
    """`markevery` of a curve of `n` points: every n // `MARKS`-th point, starting at an offset fixed
    by the encoding's name, so that the markers of curves lying together do not sit on each other."""
    step = max(1, n // MARKS)
    return (zlib.crc32(encoding.encode()) % step, step)


def draw_figure(inputs, path: str | Path) -> Path:
    """The figure of `lenbench.report.figures`: `position_loss_plot` of the rows and their board."""
    return position_loss_plot(inputs.rows, path, board=inputs.board)


def figure_left_out(inputs) -> dict[str, str]:
    return position_left_out(inputs.rows, inputs.board)


def figure_needs(inputs) -> bool:
    """Drawn where the rows hold loss-by-position buckets."""
    return has_bucket_rows(inputs.rows, "pos")
