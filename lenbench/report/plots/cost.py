"""What it costs: kernel time against sequence length, and retention against training-step cost."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, NullLocator

from lenbench.report.plots._style import NOT_LEARNED_ALPHA, encoding_color, grid, quiet, save_figure


def cost_plot(cost: pd.DataFrame, path: str | Path) -> Path:
    """Kernel time against sequence length, log-log, one line per encoding, one panel per dtype.

    Solid: the fused implementation (`lenbench.report.cost.cost_table`'s ``fused_s``); dashed, same
    colour: the eager reference; black: unbiased causal SDPA (what `nope` attends with), recovered
    from ``ratio_to_sdpa``. Colours are the encodings' colours of every other figure.
    """
    timed = cost[cost["dtype"] != ""]
    if timed.empty:
        raise ValueError("cost_plot: no kernel timings to plot")
    dtypes = sorted(set(timed["dtype"]), key=lambda d: (d != "fp32", d))
    with quiet():
        fig, axes = grid(len(dtypes), 3.6, 3.0)
        for ax, dtype in zip(axes, dtypes, strict=True):
            d = timed[timed["dtype"] == dtype]
            for encoding, g in d.groupby("encoding", sort=False):
                color = encoding_color(encoding)
                ax.plot(g["T"], g["fused_s"], color=color, marker="o", markersize=3, linewidth=1.4, label=encoding)
                eager = g[g["eager_s"].notna()]
                if len(eager):
                    (line,) = ax.plot(eager["T"], eager["eager_s"], color=color, linewidth=0.9, alpha=0.7)
                    line.set_dashes((4, 2))
            sdpa = d[d["ratio_to_sdpa"].notna()].drop_duplicates("T")
            if len(sdpa):
                ax.plot(sdpa["T"], sdpa["fused_s"] / sdpa["ratio_to_sdpa"], color="black", linewidth=1.8,
                        label="SDPA (nope)")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(sorted(set(d["T"])))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("sequence length T")
            ax.set_ylabel("seconds per call")
            ax.set_title(f"{dtype}: fused (solid) vs eager (dashed)", fontsize=9)
            ax.grid(True, which="major", alpha=0.3)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=5, fontsize=7, frameon=False)
        fig.tight_layout()
    return save_figure(fig, path)


def quality_cost_plot(points: pd.DataFrame, path: str | Path) -> Path:
    """Retention past the training length against training-step cost, one panel per task.

    x: the encoding's training step relative to `nope` (`lenbench.report.cost.quality_cost_frame`);
    y: retention (`lenbench.report.stats`) with its 95 % interval as error bars; the Pareto front (cheaper
    and better than every other learned model it is not dominated by) joined by a line and ringed;
    not-learned models faded and never on the front.
    """
    if points.empty:
        raise ValueError("quality_cost_plot: no model with both a retention and a training-step timing")
    boards = list(points.groupby(["task", "train_len"], sort=False))
    with quiet():
        fig, axes = grid(len(boards), 3.2, 2.8)
        for ax, ((task, train_len), g) in zip(axes, boards, strict=True):
            for r in g.to_dict("records"):
                y = r["retention"] if math.isfinite(r["retention"]) else np.nan
                lo, hi = r["retention_ci_low"], r["retention_ci_high"]
                err = [[y - lo], [hi - y]] if math.isfinite(lo) and math.isfinite(hi) and math.isfinite(y) else None
                alpha = NOT_LEARNED_ALPHA if r["not_learned"] else 1.0
                color = encoding_color(r["encoding"])
                ax.errorbar([r["cost"]], [y], yerr=err, fmt="o", color=color, alpha=alpha, markersize=5, capsize=2)
                if math.isfinite(y):
                    ax.annotate(r["encoding"] + (" (n/l)" if r["not_learned"] else ""), (r["cost"], y), fontsize=6,
                                xytext=(3, 3), textcoords="offset points", alpha=alpha)
            front = g[g["pareto"]].sort_values("cost")
            if len(front):
                ax.plot(front["cost"], front["retention"], color="black", linewidth=1.0, linestyle=":", zorder=0)
                ax.scatter(front["cost"], front["retention"], s=90, facecolors="none", edgecolors="black",
                           linewidths=0.9, label="Pareto front")
            ax.axvline(1.0, color="0.6", linewidth=0.8, linestyle="--")
            ax.set_xlabel("training step / nope's (lower is cheaper)")
            ax.set_ylabel("retention past train length")
            ax.set_title(f"{task} (train length {train_len})", fontsize=9)
            ax.grid(True, alpha=0.3)
        fig.tight_layout()
    return save_figure(fig, path)
