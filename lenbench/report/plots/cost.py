"""What it costs: kernel time against sequence length, and retention against training-step cost."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator

from lenbench.report.figures import FigureSpec
from lenbench.report.plots._style import (
    ALL_ZERO,
    NOT_LEARNED,
    NOT_LEARNED_ALPHA,
    PAPER_COLUMN,
    PAPER_FONT_SIZE,
    PAPER_WIDTH,
    board_label,
    encoding_color,
    encoding_marker,
    grid,
    keep_panels,
    outside_legend,
    quiet,
    save_figure,
)
from lenbench.report.rows import BASE_VARIANT, series_order

#: The figures this module draws (read by `lenbench.report.figures` without importing it).
FIGURES = (
    FigureSpec(stem="cost", title="kernel time against sequence length", source="cost", draw="cost_figure",
               order=50, caption="COST_CAPTION"),
    FigureSpec(stem="quality_cost", title="quality against training cost", source="cost",
               draw="quality_cost_figure", order=60, caption="QUALITY_COST_CAPTION",
               left_out="quality_cost_figure_left_out", needs="quality_cost_figure_needs"),
)

#: The least span of a quality-against-cost panel's retention axis: differences smaller than this are
#: not read as differences (a panel whose points all lie within it is drawn over this span).
MIN_RETENTION_SPAN = 0.2

#: The captions of the two figures on the page (`lenbench.report.page`), and for docs to quote.
COST_CAPTION = ("Forward-kernel time per call against sequence length (log-log), one colour and marker per "
                "encoding as in every figure: solid with filled markers the fused implementation, dashed with hollow "
                "markers the eager reference, black unbiased causal SDPA (what nope attends with); one panel per "
                "dtype. Timed at one length: bars per encoding, fused filled beside eager hatched.")
QUALITY_COST_CAPTION = ("Retention past the training length against the training step's time relative to nope's, "
                        "with 95 % intervals, one panel per task: retention averages (score − chance) / (in-dist − "
                        "chance) over ratios > 1 (perplexity: in-dist / ppl). Ringed and joined: the Pareto front of "
                        "the learned models (none cheaper and better); hollow and faded: not learned at 1× (or uncertain). A panel "
                        "whose points spread less than 0.2 in retention is drawn over 0.2 around them: a smaller "
                        "spread (addition's, about 1e-6) is numerical noise, not a difference.")


def cost_plot(cost: pd.DataFrame, path: str | Path) -> Path:
    """Kernel time against sequence length (`COST_CAPTION`), log-log, one line per encoding, one panel per dtype.

    Solid with filled markers: the fused implementation (`lenbench.report.cost.cost_table`'s
    ``fused_s``); dashed with hollow markers, same colour: the eager reference; black: unbiased
    causal SDPA (what `nope` attends with), recovered from ``ratio_to_sdpa``. Colours and markers are
    the encodings' of every other figure; the legend is below the panels. Where every panel times
    one sequence length, a bar chart instead (`_cost_bars`). A panel is a paper's column wide.
    """
    timed = cost[cost["dtype"] != ""]
    if timed.empty:
        raise ValueError("cost_plot: no kernel timings to plot")
    dtypes = sorted(set(timed["dtype"]), key=lambda d: (d != "fp32", d))
    with quiet(), plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        if timed.groupby("dtype")["T"].nunique().max() == 1:
            return save_figure(_cost_bars(timed, dtypes), path)
        fig, axes = grid(len(dtypes), PAPER_COLUMN, 2.4, 2)
        handles: dict[str, Line2D] = {}
        for ax, dtype in zip(axes, dtypes, strict=True):
            d = timed[timed["dtype"] == dtype]
            for encoding, g in d.groupby("encoding", sort=False):
                color, marker = encoding_color(encoding), encoding_marker(encoding)
                (line,) = ax.plot(g["T"], g["fused_s"], color=color, marker=marker, markersize=3.5, linewidth=1.2,
                                  label=encoding)
                handles.setdefault(encoding, line)
                eager = g[g["eager_s"].notna()]
                if len(eager):
                    (line,) = ax.plot(eager["T"], eager["eager_s"], color=color, marker=marker, markersize=3.5,
                                      markerfacecolor="white", linewidth=0.9, alpha=0.8)
                    line.set_dashes((4, 2))
            sdpa = d[d["ratio_to_sdpa"].notna()].drop_duplicates("T")
            if len(sdpa):
                (line,) = ax.plot(sdpa["T"], sdpa["fused_s"] / sdpa["ratio_to_sdpa"], color="black", linewidth=1.8,
                                  label="SDPA (nope)")
                handles.setdefault("SDPA (nope)", line)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(NullFormatter())  # 3×10⁻⁴ beside 4×10⁻⁴ on a short range
            ax.set_xticks(sorted(set(d["T"])))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("sequence length T")
            ax.set_ylabel("seconds per call")
            ax.set_title(dtype, fontsize=PAPER_FONT_SIZE)
            ax.grid(True, which="major", alpha=0.3)
        kinds = [Line2D([], [], color="0.3", marker="o", linewidth=1.2, markersize=3.5, label="fused"),
                 Line2D([], [], color="0.3", marker="o", markerfacecolor="white", linewidth=0.9, dashes=(4, 2),
                        markersize=3.5, label="eager reference")]
        outside_legend(fig, list(handles.values()) + kinds, where="below", ncol=3)
    return save_figure(fig, path)


def _cost_bars(timed: pd.DataFrame, dtypes: list[str]):
    """Kernel time at the one timed sequence length, as bars: per encoding (x, in its colour) the
    fused implementation (filled) beside the eager reference (hatched, hollow), on a log axis, SDPA
    a black line across; one panel per dtype, each a paper's column wide."""
    fig, axes = grid(len(dtypes), PAPER_COLUMN, 2.4, 1)
    for ax, dtype in zip(axes, dtypes, strict=True):
        d = timed[timed["dtype"] == dtype].drop_duplicates("encoding")
        names = [e for e, _ in series_order((e, BASE_VARIANT) for e in d["encoding"])]
        d = d.set_index("encoding").loc[names]
        x = np.arange(len(names))
        colors = [encoding_color(e) for e in names]
        ax.bar(x - 0.2, d["fused_s"], width=0.4, color=colors, label="fused")
        ax.bar(x + 0.2, d["eager_s"].fillna(np.nan), width=0.4, facecolor="white", edgecolor=colors, hatch="////",
               linewidth=0.8, label="eager reference")
        sdpa = d[d["ratio_to_sdpa"].notna()]
        if len(sdpa):
            ax.axhline(float((sdpa["fused_s"] / sdpa["ratio_to_sdpa"]).iloc[0]), color="black", linewidth=1.2,
                       label="SDPA (nope)")
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(x, names, rotation=60, ha="right", rotation_mode="anchor")
        ax.tick_params(axis="x", labelsize=PAPER_FONT_SIZE - 1)
        ax.set_ylabel("seconds per call")
        ax.set_title(f"{dtype} at T = {int(d['T'].iloc[0])}", fontsize=PAPER_FONT_SIZE)
        ax.grid(True, axis="y", which="major", alpha=0.3)
    handles = [Patch(facecolor="0.45", label="fused"),
               Patch(facecolor="white", edgecolor="0.45", hatch="////", label="eager reference"),
               Line2D([], [], color="black", linewidth=1.2, label="SDPA (nope)")]
    outside_legend(fig, handles, where="below", ncol=3)
    return fig


def quality_cost_left_out(points: pd.DataFrame) -> dict[str, str]:
    """The panels `quality_cost_plot` leaves out: {"task (train length n)": why}."""
    return _boards(points)[1]


def _boards(points: pd.DataFrame) -> tuple[list, dict[str, str]]:
    boards = list(points.groupby(["task", "train_len"], sort=False))
    reasons = {}
    for key, g in boards:
        retention = g["retention"].to_numpy(dtype=float)
        reasons[key] = (NOT_LEARNED if g["not_learned"].all()
                        else ALL_ZERO if np.all(np.nan_to_num(retention, nan=0.0) == 0) else None)
    kept, dropped = keep_panels([k for k, _ in boards], reasons)
    groups = dict(boards)
    return [(k, groups[k]) for k in kept], {board_label(*k): why for k, why in dropped.items()}


def quality_cost_plot(points: pd.DataFrame, path: str | Path) -> Path:
    """Retention past the training length against training-step cost (`QUALITY_COST_CAPTION`), one panel per task.

    x: the encoding's training step relative to `nope` (`lenbench.report.cost.quality_cost_frame`);
    y: retention (`lenbench.report.stats`) with its 95 % interval as error bars; each encoding in
    its colour and marker of every figure, named in the legend below the panels (no labels on the
    points, which would overlap); the Pareto front (cheaper and better than every other learned
    model it is not dominated by) joined by a line and ringed; not-learned models hollow, faded
    and never on the front. A board whose every model is not learned or at zero retention is left
    out (`quality_cost_left_out`), unless every board is.
    """
    if points.empty:
        raise ValueError("quality_cost_plot: no model with both a retention and a training-step timing")
    boards, _ = _boards(points)
    encodings = [e for e, _ in series_order((e, BASE_VARIANT) for _, g in boards for e in g["encoding"])]
    with quiet(), plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        fig, axes = grid(len(boards), PAPER_WIDTH / 3, 2.3, 3)
        any_front = any_not_learned = False
        for ax, ((task, train_len), g) in zip(axes, boards, strict=True):
            for r in g.to_dict("records"):
                y = r["retention"] if math.isfinite(r["retention"]) else np.nan
                lo, hi = r["retention_ci_low"], r["retention_ci_high"]
                err = [[y - lo], [hi - y]] if math.isfinite(lo) and math.isfinite(hi) and math.isfinite(y) else None
                color = encoding_color(r["encoding"])
                faded = bool(r["not_learned"])
                any_not_learned |= faded
                ax.errorbar([r["cost"]], [y], yerr=err, fmt=encoding_marker(r["encoding"]), color=color,
                            alpha=NOT_LEARNED_ALPHA if faded else 1.0, markersize=4.5, capsize=2, elinewidth=0.9,
                            markerfacecolor="none" if faded else color)
            front = g[g["pareto"]].sort_values("cost")
            if len(front):
                any_front = True
                ax.plot(front["cost"], front["retention"], color="black", linewidth=1.0, linestyle=":", zorder=0)
                ax.scatter(front["cost"], front["retention"], s=80, facecolors="none", edgecolors="black",
                           linewidths=0.8)
            ax.axvline(1.0, color="0.6", linewidth=0.8, linestyle="--")
            floor_span(ax, MIN_RETENTION_SPAN)
            ax.set_xlabel("training step / nope's")
            ax.set_ylabel("retention past train length ↑")
            ax.set_title(board_label(task, train_len), fontsize=PAPER_FONT_SIZE)
            ax.tick_params(labelsize=PAPER_FONT_SIZE - 1)
            ax.grid(True, alpha=0.3)
        handles = [Line2D([], [], color=encoding_color(e), marker=encoding_marker(e), linestyle="none", markersize=4.5,
                          label=e) for e in encodings]
        if any_front:
            handles.append(Line2D([], [], color="black", marker="o", markerfacecolor="none", markersize=8, linestyle=":",
                                  linewidth=1.0, label="Pareto front"))
        if any_not_learned:
            handles.append(Line2D([], [], color="0.3", marker="o", markerfacecolor="none", alpha=NOT_LEARNED_ALPHA,
                                  linestyle="none", markersize=4.5, label="not learned"))
        outside_legend(fig, handles, where="below", ncol=6)
    return save_figure(fig, path)


def floor_span(ax, span: float) -> None:
    """Widen `ax`'s y view to at least `span` around its middle, with no offset on its tick labels:
    spreads far smaller (addition's retentions of ±1e-6, all numerical noise around 0) are not
    drawn as differences."""
    low, high = ax.get_ylim()
    if high - low < span:
        middle = (low + high) / 2
        ax.set_ylim(middle - span / 2, middle + span / 2)
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")


def cost_figure(inputs, path: str | Path) -> Path:
    """The cost figure of `lenbench.report.figures`: `cost_plot` of the cost table."""
    return cost_plot(inputs.cost, path)


def quality_cost_figure(inputs, path: str | Path) -> Path:
    """The quality-against-cost figure of `lenbench.report.figures`: `quality_cost_plot` of the points."""
    return quality_cost_plot(inputs.points, path)


def quality_cost_figure_left_out(inputs) -> dict[str, str]:
    return quality_cost_left_out(inputs.points)


def quality_cost_figure_needs(inputs) -> bool:
    """Drawn where the source has both a leaderboard and kernel timings."""
    return inputs.points is not None and len(inputs.points) > 0
