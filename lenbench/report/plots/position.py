"""Loss by position within the evaluation window (bucketed lm rows, issue 11)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from lenbench.report.plots._buckets import bucketed
from lenbench.report.plots._style import (
    PANEL_COLUMNS,
    PAPER_WIDTH,
    grid,
    legend_handles,
    plain_log_labels,
    save_figure,
    series_style,
)
from lenbench.report.rows import series_label, series_order
from lenbench.report.tables import ratio_label


def position_loss_plot(df: pd.DataFrame, path: str | Path) -> Path:
    """Loss by position within the evaluation window, one line per (encoding, variant) at the
    longest evaluated length, one panel per lm task (and training length): the figure of Press et
    al. 2022 (ALiBi, fig. 3), Sun et al. 2022 (xPos) and Ding et al. 2024 (LongRoPE).

    x: target position (bucket midpoint, log2 axis), y: mean nll (nats) over the bucket and seeds;
    a dashed vertical line at the training length. A curve that keeps falling past the training
    length uses the longer context; one that flattens there ignores it; one that rises is hurt.

    Args:
        df: the tidy results frame (`lenbench.report.rows.load_results`), holding "pos:…" bucket
            rows (`evaluate_lm_context`).
        path: output file (.png or .svg).
    """
    df = bucketed(df, "pos")
    df = df[df["metric"] == "nll"]
    keys = list(dict.fromkeys(zip(df["task"], df["train_len"], strict=True)))
    if not keys:
        raise ValueError("position_loss_plot: no per-position rows (bucket 'pos:…') to plot")
    fig, axes = grid(len(keys), PAPER_WIDTH / PANEL_COLUMNS, 2.8, ncols=PANEL_COLUMNS)
    all_pairs = series_order(zip(df["encoding"], df["variant"], strict=True))
    for ax, (task, train_len) in zip(axes, keys, strict=True):
        bdf = df[(df["task"] == task) & (df["train_len"] == train_len)]
        ratio = bdf["ratio"].max()
        bdf = bdf[bdf["ratio"] == ratio]
        for encoding, variant in series_order(zip(bdf["encoding"], bdf["variant"], strict=True)):
            sdf = bdf[(bdf["encoding"] == encoding) & (bdf["variant"] == variant)]
            curve = sdf.assign(mid=(sdf["lo"] + sdf["hi"]) / 2 + 1).groupby("mid", sort=True)["value"].mean()
            style = series_style(encoding, variant)
            (line,) = ax.plot(curve.index, curve.to_numpy(), color=style["color"], linewidth=1.4,
                              label=series_label(encoding, variant))
            if style["dashes"]:
                line.set_dashes(style["dashes"])
        ax.axvline(train_len, color="0.25", linestyle="--", linewidth=1.0, zorder=0)
        ax.set_xscale("log", base=2)
        plain_log_labels(ax.xaxis)
        eval_len = int(bdf["eval_len"].max())
        ax.set(title=f"{task} (train length {train_len}, evaluated at {eval_len} = {ratio_label(ratio)})",
               xlabel="target position in the window (log2)", ylabel="nll (nats) ↓")
        ax.grid(True, which="major", alpha=0.3)
    extra = [Line2D([], [], color="0.25", linestyle="--", linewidth=1.0, label="training length")]
    fig.legend(handles=legend_handles(all_pairs) + extra, loc="center left", bbox_to_anchor=(1.0, 0.5),
               frameon=False, fontsize="small")
    fig.suptitle("lenbench: loss by position at the longest evaluation length (mean over seeds)")
    fig.tight_layout()
    return save_figure(fig, path)
