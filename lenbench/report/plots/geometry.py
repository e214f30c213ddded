"""The position pattern of one encoding as a heatmap: the position × channel matrix that
`lenbench.report.geometry` builds (from the run's geometry and trained weights) drawn to PNG, SVG or PDF."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from lenbench.atomic import is_disk_full
from lenbench.report.plots._style import PAPER_FONT_SIZE, PAPER_WIDTH, frame_is_zero, quiet, save_figure

#: The caption of the position-pattern figures on the page (`lenbench.report.page`), and for docs to quote.
CAPTION = ("What each encoding adds as a function of position, at the geometry of the run (the first finished "
           "cell of the encoding, lm first): embedding values by position and dimension, rotation angles by "
           "position and frequency pair, or the attention bias by key position and head. A learned encoding (trainable "
           "parameters) is drawn with its trained weights where the results directory holds its checkpoint; a fixed "
           "one (sinusoidal, rope) is its definition, and its note says \"fixed\".")
#: Why a pattern is not drawn (`pattern_left_out`).
AT_INITIALISATION = "trainable, and no checkpoint in the results: only its random initialisation"
NO_PATTERN = "no position signal: the matrix is all zeros"


def pattern_left_out(pattern) -> str | None:
    """Why an encoding's position pattern (`lenbench.report.geometry.EncodingPattern`) is not
    drawn, or None to draw it: a trainable encoding without its trained weights
    (`AT_INITIALISATION`), or a matrix of zeros such as `nope`'s (`NO_PATTERN`)."""
    if pattern.at_initialisation:
        return AT_INITIALISATION
    if frame_is_zero(pattern.matrix) or not len(pattern.matrix):
        return NO_PATTERN
    return None


def _tick_step(n: int, target: int = 8) -> int:
    """A round step giving about `target` labelled ticks over n cells."""
    raw = max(1, n // target)
    return min((s for s in (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 256, 500, 512, 1000, 1024)
                if s >= raw), default=raw)


def encoding_heatmap(matrix: pd.DataFrame, path: str | Path, *, title: str, note: str = "") -> Path:
    """Render an encoding's position matrix to PNG, SVG or PDF, both axes labelled with their units and ticked.

    For `sinusoidal` this is the classic striped picture: fast oscillation in the first dimensions,
    slow waves in the last.

    Args:
        matrix: (positions, channels) values, rows top to bottom; ``matrix.index.name`` labels the
            y axis, ``matrix.columns.name`` the x axis (`lenbench.report.geometry.EncodingPattern.matrix`).
        path: output file; the suffix (.png, .svg, .pdf) chooses the format.
        title: the figure's title (e.g. "rope (d_model 64, 4 heads)").
        note: shown under the title (where the geometry and weights come from).
    """
    values = matrix.to_numpy()  # (T, channels)
    with plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        fig, ax = plt.subplots(figsize=(PAPER_WIDTH / 2, 2.8), layout="constrained")
        # rasterized: one image instead of T × D vector patches, so the SVG stays small.
        with quiet():
            sns.heatmap(values, ax=ax, cmap="RdBu_r", center=0, xticklabels=_tick_step(values.shape[1]),
                        yticklabels=_tick_step(values.shape[0], 10), rasterized=True)
        ax.tick_params(axis="x", rotation=0, labelsize=6)
        ax.tick_params(axis="y", rotation=0, labelsize=6)
        ax.set(xlabel=matrix.columns.name, ylabel=matrix.index.name)
        ax.set_title(title + (f"\n{note}" if note else ""), fontsize=PAPER_FONT_SIZE)
        return save_figure(fig, path)


def safe_encoding_heatmap(matrix: pd.DataFrame, path: str | Path, *, title: str, note: str = "") -> Path | None:
    """`encoding_heatmap`, or None (with nothing written) when the matrix cannot be drawn."""
    try:
        return encoding_heatmap(matrix, path, title=title, note=note)
    except Exception as err:  # a matrix that cannot be drawn is skipped
        plt.close("all")
        if is_disk_full(err):  # not the encoding's fault: the report cannot be written
            raise
        return None
