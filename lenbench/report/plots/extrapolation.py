"""Metric against evaluation length: one panel per task (and training length), one line per
(encoding, variant) in the shared style (`lenbench.report.plots._style`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from lenbench.report.plots._style import (
    BASELINE_STYLES,
    NOT_LEARNED_ALPHA,
    PANEL_COLUMNS,
    PAPER_FONT_SIZE,
    PAPER_WIDTH,
    baseline_style,
    grid,
    legend_handles,
    plain_log_labels,
    save_figure,
    series_style,
)
from lenbench.report.rows import primary_metric, series_label, series_order, task_order, whole_length
from lenbench.report.tables import Leaderboard, leaderboard, ratio_label


def task_chance(task: str) -> float | None:
    """The chance-level token accuracy of a task (default parameters), or None."""
    try:
        from lenbench.tasks import build_task

        chance = build_task(task).chance
        return float(chance) if chance is not None else None
    except Exception:  # unknown task, or one that cannot be built here (e.g. a missing corpus)
        return None


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


def _draw_series(ax, xs, mean, lo, hi, style: dict, alpha: float, marker: str | None) -> None:
    finite = np.isfinite(mean)
    if not finite.any():
        return
    (line,) = ax.plot(xs[finite], mean[finite], color=style["color"], marker=marker, markersize=5 if marker else 0,
                      linewidth=1.6 if marker else 1.3, alpha=alpha)
    if style["dashes"]:
        line.set_dashes(style["dashes"])
    band = finite & np.isfinite(lo) & np.isfinite(hi)
    if band.any() and (hi[band] > lo[band]).any():
        ax.fill_between(xs[band], lo[band], hi[band], color=style["color"], alpha=0.15 * alpha, linewidth=0)


def extrapolation_plot(df: pd.DataFrame, path: str | Path, *, board: Leaderboard | None = None) -> Path:
    """The primary metric against evaluation length, one panel per task (and training length).

    log2 x axis at the evaluated lengths, a dashed vertical line at the training length, one line
    per (encoding, variant) in the shared style (`lenbench.report.plots._style`): the mean over seeds
    with its 95 % hierarchical bootstrap band (`lenbench.report.stats`); a model that did not learn the
    task at 1× (`not_learned`) is drawn faded. Baselines (``baseline:<name>`` rows: chance,
    repeat-previous, unigram) are grey lines without markers; results without baseline rows get
    a dotted chance line for token accuracy. × marks at the bottom where every seed failed;
    perplexity on a log y axis.

    Args:
        df: the tidy results frame (`lenbench.report.rows.load_results`).
        path: output file; the suffix (.png, .svg) chooses the format.
        board: the precomputed `leaderboard(df)`, if at hand.
    """
    boards = _boards(df)
    if not boards:
        raise ValueError("extrapolation_plot: no rows to plot")
    board = board if board is not None else leaderboard(df)
    with plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        return _extrapolation_figure(df, boards, board, path)


def _extrapolation_figure(df: pd.DataFrame, boards, board: Leaderboard, path: str | Path) -> Path:
    from lenbench.report.stats import is_baseline

    fig, axes = grid(len(boards), PAPER_WIDTH / PANEL_COLUMNS, 2.5, ncols=PANEL_COLUMNS)
    all_pairs = series_order((e, v) for e, v in zip(df["encoding"], df["variant"], strict=True) if not is_baseline(e))
    baselines = sorted({e for e in df["encoding"] if is_baseline(e)})
    any_not_learned = bool(board.per_task["not_learned"].any()) if len(board.per_task) else False
    for ax, (task, train_len, metric, bdf) in zip(axes, boards, strict=True):
        wide = board.wide[(board.wide["task"] == task) & (board.wide["train_len"] == train_len)]
        ratios = sorted(bdf["ratio"].unique())
        cols = [ratio_label(r) for r in ratios]
        eval_len = bdf.groupby("ratio")["eval_len"].first()
        xs = np.array([float(eval_len[r]) for r in ratios])
        for r in wide.to_dict("records"):
            mean, lo, hi = (np.array([r.get(f"{c}{suffix}", np.nan) for c in cols], dtype=float)
                            for suffix in ("", "_ci_low", "_ci_high"))
            if r["kind"] == "baseline":
                _draw_series(ax, xs, mean, lo, hi, baseline_style(r["encoding"]), 1.0, None)
            else:
                style = series_style(r["encoding"], r["variant"])
                _draw_series(ax, xs, mean, lo, hi, style, NOT_LEARNED_ALPHA if r["not_learned"] else 1.0, style["marker"])
        data = bdf.assign(series=[series_label(e, v) for e, v in zip(bdf["encoding"], bdf["variant"], strict=True)])
        failed = data.groupby(["encoding", "variant", "eval_len"], sort=True)["value"].apply(lambda v: v.isna().all())
        for (encoding, variant, length), all_failed in failed.items():
            if all_failed:
                color = baseline_style(encoding)["color"] if is_baseline(encoding) else series_style(encoding, variant)["color"]
                ax.plot([length], [0.02], transform=ax.get_xaxis_transform(), marker="x", linestyle="none",
                        color=color, markersize=6, clip_on=False)
        ax.set_xscale("log", base=2)
        lengths = sorted(data["eval_len"].unique())
        ax.set_xticks(lengths, labels=[str(x) for x in lengths])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.axvline(train_len, color="0.25", linestyle="--", linewidth=1.0, zorder=0)
        ax.set_xlim(lengths[0] / 2**0.25, lengths[-1] * 2**0.25)
        if metric in ("exact_match", "token_accuracy"):
            ax.set_ylim(-0.03, 1.03)  # accuracies on their whole range
        if metric == "token_accuracy" and not (wide["kind"] == "baseline").any():
            chance = task_chance(task)
            if chance is not None:
                ax.axhline(chance, color=BASELINE_STYLES["chance"]["color"], linestyle=":", linewidth=1.2, zorder=0)
                low, high = ax.get_ylim()
                if chance < low or chance > high:  # keep the chance line in view
                    pad = 0.05 * (max(high, chance) - min(low, chance))
                    ax.set_ylim(min(low, chance - pad), max(high, chance + pad))
        values = bdf.loc[bdf["value"].notna() & ~bdf["encoding"].map(is_baseline), "value"].to_numpy(dtype=float)
        if metric in ("perplexity",) and len(values) and (values > 0).all():  # always log: ratios read as distances
            ax.set_yscale("log")
            plain_log_labels(ax.yaxis)
        arrow = "↑" if metric in ("token_accuracy", "exact_match") else "↓"
        ax.set(title=f"{task} (train length {train_len})", xlabel="evaluation length (log2)",
               ylabel=f"{metric} {arrow}")
        ax.grid(True, which="major", alpha=0.3)
    extra = [Line2D([], [], color="0.25", linestyle="--", linewidth=1.0, label="training length")]
    if not baselines:
        extra.append(Line2D([], [], color="0.45", linestyle=":", linewidth=1.2, label="chance"))
    for encoding in baselines:
        handle = Line2D([], [], color=baseline_style(encoding)["color"], linewidth=1.3, label=encoding)
        handle.set_dashes(baseline_style(encoding)["dashes"])
        extra.append(handle)
    extra.append(Line2D([], [], color="0.3", marker="x", linestyle="none", label="failed (all seeds)"))
    if any_not_learned:
        extra.append(Line2D([], [], color="0.3", alpha=NOT_LEARNED_ALPHA, linewidth=1.6, label="faded: not learned at 1×"))
    if len(fig.axes) > len(axes):  # an odd panel count leaves a free slot in the grid: the legend goes there
        slot = fig.axes[len(axes)]
        slot.set_visible(True)
        slot.axis("off")
        slot.legend(handles=legend_handles(all_pairs) + extra, loc="center", frameon=False, fontsize=6.5, ncol=2)
    else:
        fig.legend(handles=legend_handles(all_pairs) + extra, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   frameon=False, fontsize=6.5, ncol=4)
    seeds = df["seed"].nunique()
    fig.suptitle(f"{metric_summary(boards)} against evaluation length "
                 f"({seeds} seed{'s' if seeds != 1 else ''}, mean and 95 % bootstrap band)", fontsize=PAPER_FONT_SIZE + 1)
    fig.tight_layout()
    return save_figure(fig, path)


def metric_summary(boards) -> str:
    metrics = list(dict.fromkeys(m for _, _, m, _ in boards))
    return " / ".join(metrics)
