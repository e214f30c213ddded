"""Needle-in-a-haystack heatmaps: accuracy by needle depth × evaluation length (bucketed passkey rows)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize

from lenbench.report.figures import FigureSpec
from lenbench.report.formatting import fixed
from lenbench.report.plots._buckets import bucketed, has_bucket_rows
from lenbench.report.plots._style import (
    ALL_ZERO,
    PAPER_FONT_SIZE,
    PAPER_WIDTH,
    board_label,
    frame_is_zero,
    grid,
    keep_panels,
    left_out_note,
    save_figure,
)
from lenbench.report.rows import primary_metric, series_label, series_order, task_order, whole_length
from lenbench.report.tables import Leaderboard, leaderboard

#: The figures this module draws (read by `lenbench.report.figures` without importing it).
FIGURES = (FigureSpec(stem="needle_depth", title="passkey: needle depth × length", source="rows",
                      draw="draw_figure", order=40, left_out="figure_left_out", needs="figure_needs"),)

#: The caption of the figure on the page (`lenbench.report.page`), and for docs to quote.
CAPTION = ("Passkey retrieval by needle depth (rows, shallow at the top) and evaluation length (columns): the "
           "task's primary metric, mean over seeds, one panel per trained model or inference-time variant; "
           "brighter is better. The models left out (not learned at 1×, or at zero everywhere) are named under "
           "the panels and here.")

COLUMNS = 4
#: Characters to a line of the footnote naming the panels left out.
FOOTNOTE_WIDTH = 150
NOT_LEARNED_PANEL = "not learned at 1× (or uncertain)"


def _panels(df: pd.DataFrame, board: Leaderboard) -> tuple[list[tuple], dict[str, str]]:
    """(the panels to draw: (task, train_len, metric, encoding, variant, rows) in canonical order,
    {panel label: why it is left out}): a panel whose series is at zero everywhere or did not learn
    its task at 1× is left out (`lenbench.report.plots._style.keep_panels`)."""
    full = df
    rows = bucketed(full, "depth")
    not_learned = {(r["task"], int(r["train_len"]), r["encoding"], r["variant"])
                   for r in board.per_task.to_dict("records") if r["not_learned"]}
    panels, reasons = [], {}
    for task in task_order(rows["task"]):
        tdf = rows[rows["task"] == task]
        metric = primary_metric(task, whole_length(full[full["task"] == task])["metric"].unique())
        tdf = tdf[tdf["metric"] == metric]
        for train_len in sorted(tdf["train_len"].unique()):
            ldf = tdf[tdf["train_len"] == train_len]
            for encoding, variant in series_order(zip(ldf["encoding"], ldf["variant"], strict=True)):
                sdf = ldf[(ldf["encoding"] == encoding) & (ldf["variant"] == variant)]
                reasons[len(panels)] = (NOT_LEARNED_PANEL if (task, int(train_len), encoding, variant) in not_learned
                                        else ALL_ZERO if frame_is_zero(sdf["value"]) else None)
                panels.append((task, int(train_len), metric, encoding, variant, sdf))
    kept, dropped = keep_panels(list(range(len(panels))), reasons)
    several = len({(p[0], p[1]) for p in panels}) > 1
    label = {i: series_label(p[3], p[4]) + (f" on {board_label(p[0], p[1])}" if several else "")
             for i, p in enumerate(panels)}
    return [panels[i] for i in kept], {label[i]: why for i, why in dropped.items()}


def needle_left_out(df: pd.DataFrame, board: Leaderboard | None = None) -> dict[str, str]:
    """The panels `needle_heatmap` leaves out: {series label: why}."""
    return _panels(df, board if board is not None else leaderboard(df))[1]


def needle_heatmap(df: pd.DataFrame, path: str | Path, *, board: Leaderboard | None = None) -> Path:
    """Needle-in-a-haystack heatmaps (`CAPTION`): accuracy by needle depth (rows, shallow at the
    top) and evaluation length (columns), one panel per (task, train length, encoding, variant),
    the task's primary metric averaged over seeds; brighter is better; one colour bar for all.
    A panel whose series is at zero everywhere or did not learn the task at 1× is left out
    (`needle_left_out`), unless every panel is; a footnote under the panels names them and why.

    Args:
        df: the tidy results frame (`lenbench.report.rows.load_results`), holding "depth:…" bucket
            rows (`evaluate_depth`).
        path: output file (.png, .svg or .pdf).
        board: the precomputed `leaderboard(df)`, if at hand.
    """
    if not len(bucketed(df, "depth")):
        raise ValueError("needle_heatmap: no needle-depth rows (bucket 'depth:…') to plot")
    board = board if board is not None else leaderboard(df)
    panels, dropped = _panels(df, board)
    with plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        return _needle_figure(panels, dropped, path)


def _needle_figure(panels: list[tuple], dropped: dict[str, str], path: str | Path) -> Path:
    groups = list(dict.fromkeys((p[0], p[1], p[2]) for p in panels))
    ncols = min(COLUMNS, len(panels))
    fig, axes = grid(len(panels), PAPER_WIDTH / COLUMNS, 1.55, ncols)
    norm = Normalize(vmin=0.0, vmax=1.0)
    for i, (ax, (task, train_len, _, encoding, variant, sdf)) in enumerate(zip(axes, panels, strict=True)):
        matrix = sdf.pivot_table(index="bucket", columns="eval_len", values="value", aggfunc="mean").sort_index()
        labels = [b.split(":", 1)[1] for b in matrix.index]
        _annotated_heatmap(ax, matrix.to_numpy(dtype=float), norm, [str(c) for c in matrix.columns], labels)
        title = series_label(encoding, variant)
        if len(groups) > 1:
            title += f"\n{board_label(task, train_len)}"
        ax.set_title(title, fontsize=PAPER_FONT_SIZE - 1)
        first_col, last_row = i % ncols == 0, i + ncols >= len(panels)
        ax.set_ylabel("needle depth" if first_col else "", fontsize=PAPER_FONT_SIZE - 1)
        ax.set_xlabel("evaluation length" if last_row else "", fontsize=PAPER_FONT_SIZE - 1)
        ax.tick_params(axis="y", rotation=0, labelsize=5, labelleft=first_col, length=2)
        ax.tick_params(axis="x", rotation=0, labelsize=5, length=2)
    metrics = " / ".join(dict.fromkeys(g[2] for g in groups))
    fig.colorbar(ScalarMappable(norm=norm, cmap="viridis"), ax=axes, label=f"{metrics} ↑", shrink=0.6, aspect=30)
    where = board_label(groups[0][0], groups[0][1]) if len(groups) == 1 else "passkey tasks"
    fig.suptitle(f"{where}: {metrics} by needle depth × evaluation length", fontsize=PAPER_FONT_SIZE + 1)
    if dropped:  # under the panels: the figure says whom it leaves out, not only its caption on the page
        fig.text(0.0, 0.0, textwrap.fill(left_out_note(dropped).strip(), FOOTNOTE_WIDTH), ha="left", va="top",
                 fontsize=PAPER_FONT_SIZE - 2, color="0.3")
    return save_figure(fig, path)


def _annotated_heatmap(ax, values: np.ndarray, norm: Normalize, columns: list[str], rows: list[str]) -> None:
    """One panel: `values` (rows, columns) as viridis cells separated by white lines, first row at the
    top, each finite cell annotated with its value to 2 decimals (dark text on a light cell, white on a
    dark one), NaN cells left blank.

    Drawn with matplotlib directly: seaborn's heatmap redraws the whole figure after every panel to
    test its tick labels for overlap, which made this figure's cost grow with the square of its panels
    (the quick report took about 28 s with it and 25 s without, measured in one process)."""
    cmap = plt.get_cmap("viridis")
    ax.pcolormesh(np.ma.masked_invalid(values), cmap=cmap, norm=norm, edgecolors="white", linewidth=0.4)
    ax.set_xlim(0, values.shape[1])
    ax.set_ylim(values.shape[0], 0)
    ax.set_xticks(np.arange(values.shape[1]) + 0.5, columns)
    ax.set_yticks(np.arange(values.shape[0]) + 0.5, rows)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for (i, j), value in np.ndenumerate(values):
        if np.isfinite(value):
            ax.text(j + 0.5, i + 0.5, fixed(value, ".2f"), ha="center", va="center", fontsize=4.5,
                    color=".15" if _luminance(cmap(norm(value))) > 0.408 else "w")


def _luminance(rgba: tuple[float, ...]) -> float:
    """Relative luminance of an sRGB colour (WCAG 2.0), 0 (black) … 1 (white)."""
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3]]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def draw_figure(inputs, path: str | Path) -> Path:
    """The figure of `lenbench.report.figures`: `needle_heatmap` of the rows and their board."""
    return needle_heatmap(inputs.rows, path, board=inputs.board)


def figure_left_out(inputs) -> dict[str, str]:
    return needle_left_out(inputs.rows, inputs.board)


def figure_needs(inputs) -> bool:
    """Drawn where the rows hold needle-depth buckets."""
    return has_bucket_rows(inputs.rows, "depth")
