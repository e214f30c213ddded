"""Needle-in-a-haystack heatmaps: accuracy by needle depth × evaluation length (bucketed passkey rows, issue 11)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from lenbench.report.plots._buckets import bucketed
from lenbench.report.plots._style import PAPER_WIDTH, grid, quiet, save_figure
from lenbench.report.rows import primary_metric, series_label, series_order, task_order, whole_length


def needle_heatmap(df: pd.DataFrame, path: str | Path) -> Path:
    """Needle-in-a-haystack heatmaps: accuracy by needle depth (rows, shallow at the top) and
    evaluation length (columns), one panel per (task, train length, encoding, variant), the
    task's primary metric averaged over seeds; brighter is better.

    Args:
        df: the tidy results frame (`lenbench.report.rows.load_results`), holding "depth:…" bucket
            rows (`evaluate_depth`).
        path: output file (.png or .svg).
    """
    full = df
    df = bucketed(full, "depth")
    panels = []
    for task in task_order(df["task"]):
        tdf = df[df["task"] == task]
        metric = primary_metric(task, whole_length(full[full["task"] == task])["metric"].unique())
        tdf = tdf[tdf["metric"] == metric]
        for train_len in sorted(tdf["train_len"].unique()):
            ldf = tdf[tdf["train_len"] == train_len]
            for encoding, variant in series_order(zip(ldf["encoding"], ldf["variant"], strict=True)):
                panels.append((task, int(train_len), metric, encoding, variant,
                               ldf[(ldf["encoding"] == encoding) & (ldf["variant"] == variant)]))
    if not panels:
        raise ValueError("needle_heatmap: no needle-depth rows (bucket 'depth:…') to plot")
    fig, axes = grid(len(panels), PAPER_WIDTH / 3, 2.2)
    for ax, (task, train_len, metric, encoding, variant, sdf) in zip(axes, panels, strict=True):
        matrix = sdf.pivot_table(index="bucket", columns="eval_len", values="value", aggfunc="mean").sort_index()
        labels = [b.split(":", 1)[1] for b in matrix.index]
        with quiet():
            sns.heatmap(matrix, ax=ax, cmap="viridis", vmin=0.0, vmax=1.0, annot=True, fmt=".2f",
                        annot_kws={"fontsize": 6}, cbar=False, linewidths=0.5, linecolor="white",
                        yticklabels=labels)
        ax.set(title=f"{series_label(encoding, variant)} ({task}, L{train_len})", xlabel="evaluation length",
               ylabel=f"needle depth ({metric})")
        ax.tick_params(axis="y", rotation=0, labelsize=7)
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle("lenbench: needle depth × length (brighter is better)")
    fig.tight_layout()
    return save_figure(fig, path)
