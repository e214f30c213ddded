"""Metric against evaluation length: one column of panels per task (and training length), the
trained encodings in the top row and one row per encoding with inference-time variants below it,
each line in the shared style (`lenbench.report.plots._style`)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from lenbench.metrics import find_metric
from lenbench.report.figures import FigureSpec
from lenbench.report.plots._style import (
    BASELINE_STYLES,
    NOT_LEARNED_ALPHA,
    PAPER_FONT_SIZE,
    PAPER_WIDTH,
    banded_figure,
    baseline_line,
    baseline_style,
    board_label,
    boards_left_out,
    freeze_limits,
    grid,
    legend_handles,
    outside_legend,
    round_log_axis,
    round_out,
    save_figure,
    series_groups,
    series_style,
)
from lenbench.report.rows import board_rows, primary_metric, series_label, task_order, whole_length
from lenbench.report.tables import Leaderboard, leaderboard, ratio_label
from lenbench.task_display import task_chance

#: The figures this module draws (read by `lenbench.report.figures` without importing it).
FIGURES = (FigureSpec(stem="extrapolation", title="metric against evaluation length", source="rows",
                      draw="draw_figure", order=10, left_out="figure_left_out"),)

#: The caption of the figure on the page (`lenbench.report.page`), and for docs to quote.
CAPTION = ("Each task's primary metric (exact match ↑, perplexity ↓) against evaluation length on a log2 axis: "
           "the mean over seeds with its 95 % interval band (a t interval over seeds), the training length dashed. "
           "Top row: the trained encodings, each in the colour and marker it has in every figure; below, one row "
           "per encoding with inference-time variants: its plain model beside them (colour by rope_type, "
           "▲ fine-tuned, ■ pinned factor). Faded, without a band: not learned at 1× (or uncertain; their intervals are in "
           "the tables); ×: every seed failed at that length; "
           "grey: baselines, drawn over the range the models set (one beyond it is an arrow and its value at the edge).")

#: Panels per row of a band (one band: the trained encodings, or one encoding and its variants).
COLUMNS = 3
PANEL_HEIGHT = 2.1


def _boards(df: pd.DataFrame) -> list[tuple[str, int, str, pd.DataFrame]]:
    """(task, train_len, primary metric, rows of that metric) in canonical task order; whole-length
    rows only (bucketed rows have figures of their own)."""
    out = []
    df = whole_length(df)
    for task in task_order(df["task"]):
        tdf = df[df["task"] == task]
        metric = primary_metric(task, tdf["metric"].unique())
        mdf = tdf[tdf["metric"] == metric]
        for train_len in sorted(mdf["train_len"].unique()):
            out.append((task, int(train_len), metric, mdf[mdf["train_len"] == train_len]))
    return out


def extrapolation_left_out(df: pd.DataFrame, board: Leaderboard | None = None) -> dict[str, str]:
    """The panels `extrapolation_plot` leaves out: {"task (train length n)": why}
    (`lenbench.report.plots._style.board_left_out`)."""
    board = board if board is not None else leaderboard(df)
    return boards_left_out(board, [(t, n) for t, n, _, _ in _boards(df)])[1]


def _draw_series(ax, xs, mean, lo, hi, style: dict, alpha: float, marker: str | None, band: bool = True) -> None:
    """One series' mean line and, with `band`, its interval band."""
    finite = np.isfinite(mean)
    if not finite.any():
        return
    (line,) = ax.plot(xs[finite], mean[finite], color=style["color"], marker=marker, markersize=3.5 if marker else 0,
                      linewidth=1.2, alpha=alpha)
    if style["dashes"]:
        line.set_dashes(style["dashes"])
    inside = finite & np.isfinite(lo) & np.isfinite(hi)
    if band and inside.any() and (hi[inside] > lo[inside]).any():
        ax.fill_between(xs[inside], lo[inside], hi[inside], color=style["color"], alpha=0.15 * alpha, linewidth=0)


def extrapolation_plot(df: pd.DataFrame, path: str | Path, *, board: Leaderboard | None = None) -> Path:
    """The primary metric against evaluation length (`CAPTION`).

    Columns: one per board (task, training length), `COLUMNS` to a row; rows: the trained
    encodings, then one row per encoding with inference-time variants (its plain model and its
    variants). log2 x axis at the evaluated lengths, a dashed vertical line at the training length,
    one line per (encoding, variant) in the shared style (`lenbench.report.plots._style`): the mean
    over seeds with its 95 % interval band (`lenbench.report.stats`); a model that
    did not learn the task at 1× (`not_learned`: not learned or uncertain) is drawn faded, without a
    band (a board of 26 entries with bimodal seeds is otherwise washed over by bands of ±0.5). Baselines (``baseline:<name>``
    rows: chance, repeat-previous, unigram) are grey lines without markers in every row, drawn
    after the models have set the view, which they never move: one wholly beyond it is an arrow
    and its value at that edge (`lenbench.report.plots._style.baseline_line`); results without
    baseline rows get a dotted chance line for token accuracy. The legend is below each row. × marks at the bottom where
    every seed failed; perplexity on a log y axis ticked at three or more round values
    (`lenbench.report.plots._style.round_log_axis`). A board on which every model is at zero or not
    learned is left out (`extrapolation_left_out`), unless every board is.

    Args:
        df: the tidy results frame (`lenbench.report.rows.load_results`).
        path: output file; the suffix (.png, .svg, .pdf) chooses the format.
        board: the precomputed `leaderboard(df)`, if at hand.
    """
    boards = _boards(df)
    if not boards:
        raise ValueError("extrapolation_plot: no rows to plot")
    board = board if board is not None else leaderboard(df)
    kept, _ = boards_left_out(board, [(t, n) for t, n, _, _ in boards])
    boards = [b for b in boards if (b[0], b[1]) in kept]
    with plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        return _extrapolation_figure(df, boards, board, path)


def _extrapolation_figure(df: pd.DataFrame, boards, board: Leaderboard, path: str | Path) -> Path:
    from lenbench.report.stats import is_baseline

    keys = {(t, n) for t, n, _, _ in boards}
    shown = board.per_task[[k in keys for k in zip(board.per_task["task"], board.per_task["train_len"], strict=True)]]
    groups = series_groups(zip(shown["encoding"], shown["variant"], strict=True))
    baselines = sorted({e for e in df["encoding"] if is_baseline(e)})
    ncols = min(COLUMNS, len(boards))
    band_rows = -(-len(boards) // ncols)
    fig, bands = banded_figure(PAPER_WIDTH, [PANEL_HEIGHT * band_rows] * len(groups),
                               [len(pairs) + len(baselines) + 4 for _, pairs in groups])  # at most this many legend entries
    for band, (family, pairs) in zip(bands, groups, strict=True):
        _, axes = grid(len(boards), 0, 0, ncols, parent=band)
        members = set(pairs)
        any_failed = any_not_learned = False
        for ax, (task, train_len, metric, bdf) in zip(axes, boards, strict=True):
            failed, not_learned = _draw_board(ax, task, train_len, metric, bdf, board, members)
            any_failed |= failed
            any_not_learned |= not_learned
        extra = [Line2D([], [], color="0.25", linestyle="--", linewidth=1.0, label="training length")]
        if not baselines and any(_chance_applies(m) for _, _, m, _ in boards):
            extra.append(Line2D([], [], color="0.45", linestyle=":", linewidth=1.2, label="chance"))
        for encoding in baselines:
            handle = Line2D([], [], color=baseline_style(encoding)["color"], linewidth=1.2, label=encoding)
            handle.set_dashes(baseline_style(encoding)["dashes"])
            extra.append(handle)
        if any_failed:
            extra.append(Line2D([], [], color="0.3", marker="x", linestyle="none", label="failed (all seeds)"))
        if any_not_learned:
            extra.append(Line2D([], [], color="0.3", alpha=NOT_LEARNED_ALPHA, linewidth=1.4, label="faded: not learned or uncertain"))
        outside_legend(band, legend_handles(pairs) + extra, where="below")
        band.suptitle("trained encodings" if family is None else f"{family} and its inference-time variants",
                      fontsize=PAPER_FONT_SIZE, x=0.02, ha="left")
    return save_figure(fig, path)


def _chance_applies(metric: str) -> bool:
    """A task's per-token chance is a floor of `metric`: the metric is a per-token rate."""
    facts = find_metric(metric)
    return facts is not None and facts.per_token_rate


def spaced_labels(lengths: list[int], train_len: int, gap: float = 0.3) -> list[str]:
    """Tick labels of a log2 length axis: every whole multiple of the training length, then the
    other lengths where they lie at least `gap` doublings from every label (a dense axis, every
    length from 8 to 16, would otherwise print on top of itself); "" for the rest."""
    whole = [x % train_len == 0 for x in lengths]
    shown = [math.log2(x) for x, w in zip(lengths, whole, strict=True) if w]
    labels = []
    for x, w in zip(lengths, whole, strict=True):
        keep = w or all(abs(math.log2(x) - y) >= gap for y in shown)
        if keep and not w:
            shown.append(math.log2(x))
        labels.append(str(x) if keep else "")
    return labels


def _draw_board(ax, task: str, train_len: int, metric: str, bdf: pd.DataFrame, board: Leaderboard,
                members: set[tuple[str, str]]) -> tuple[bool, bool]:
    """One panel: the series of `members` (and every baseline) on one board; returns whether it
    drew a failed mark and a not-learned line."""
    from lenbench.report.stats import is_baseline

    wide = board_rows(board.wide, task, train_len)
    ratios = sorted(bdf["ratio"].unique())
    cols = [ratio_label(r) for r in ratios]
    eval_len = bdf.groupby("ratio")["eval_len"].first()
    xs = np.array([float(eval_len[r]) for r in ratios])
    facts = find_metric(metric)
    ax.set_xscale("log", base=2)
    values = bdf.loc[bdf["value"].notna() & ~bdf["encoding"].map(is_baseline), "value"].to_numpy(dtype=float)
    if facts is not None and facts.log_scale and len(values) and (values > 0).all():  # ratios read as distances
        ax.set_yscale("log")
    any_not_learned = False
    for r in wide.to_dict("records"):
        if r["kind"] == "baseline" or (r["encoding"], r["variant"]) not in members:
            continue
        mean, lo, hi = (np.array([r.get(f"{c}{suffix}", np.nan) for c in cols], dtype=float)
                        for suffix in ("", "_ci_low", "_ci_high"))
        style = series_style(r["encoding"], r["variant"])
        any_not_learned |= bool(r["not_learned"])
        faded = bool(r["not_learned"])  # an unranked entry: its line for context, its interval in the tables
        _draw_series(ax, xs, mean, lo, hi, style, NOT_LEARNED_ALPHA if faded else 1.0, style["marker"], band=not faded)
    data = bdf.assign(series=[series_label(e, v) for e, v in zip(bdf["encoding"], bdf["variant"], strict=True)])
    failed = data.groupby(["encoding", "variant", "eval_len"], sort=True)["value"].apply(lambda v: v.isna().all())
    any_failed = False
    for (encoding, variant, length), all_failed in failed.items():
        if all_failed and (is_baseline(encoding) or (encoding, variant) in members):
            any_failed = True
            color = baseline_style(encoding)["color"] if is_baseline(encoding) else series_style(encoding, variant)["color"]
            ax.plot([length], [0.02], transform=ax.get_xaxis_transform(), marker="x", linestyle="none",
                    color=color, markersize=5, clip_on=False)
    lengths = sorted(data["eval_len"].unique())
    ax.set_xticks(lengths, labels=spaced_labels(lengths, train_len))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.axvline(train_len, color="0.25", linestyle="--", linewidth=1.0, zorder=0)
    ax.set_xlim(lengths[0] / 2**0.25, lengths[-1] * 2**0.25)
    if facts is not None and facts.bounds is not None:  # a bounded metric on its whole range
        low, high = facts.bounds
        pad = 0.03 * (high - low)
        ax.set_ylim(low - pad, high + pad)
    freeze_limits(ax)  # the models set the view; baselines annotate it
    if ax.get_yscale() == "log":  # a view at short round ends, ticked at round values inside it
        ax.set_ylim(*round_out(*ax.get_ylim()))
        round_log_axis(ax.yaxis, *ax.get_ylim(), ends=False)
    for r in wide.to_dict("records"):
        if r["kind"] == "baseline":
            ys = np.array([r.get(c, np.nan) for c in cols], dtype=float)
            baseline_line(ax, xs, ys, baseline_style(r["encoding"]), r["encoding"])
    if _chance_applies(metric) and not (wide["kind"] == "baseline").any():
        chance = task_chance(task)
        if chance is not None:
            baseline_line(ax, ax.get_xlim(), [chance, chance], BASELINE_STYLES["chance"], "chance")
    arrow = "" if facts is None else " ↑" if facts.higher_is_better else " ↓"
    ax.set_title(board_label(task, train_len), fontsize=PAPER_FONT_SIZE)
    ax.set(xlabel="evaluation length (log2)", ylabel=f"{metric}{arrow}")
    ax.tick_params(labelsize=PAPER_FONT_SIZE - 1)
    ax.grid(True, which="major", alpha=0.3)
    return any_failed, any_not_learned


def draw_figure(inputs, path: str | Path) -> Path:
    """The figure of `lenbench.report.figures`: `extrapolation_plot` of the rows and their board."""
    return extrapolation_plot(inputs.rows, path, board=inputs.board)


def figure_left_out(inputs) -> dict[str, str]:
    return extrapolation_left_out(inputs.rows, inputs.board)
