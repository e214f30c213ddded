"""The report's figures, declared once: each figure's file stem, page title, what it is drawn from
and which plot function draws it.

`lenbench.report.build` draws every figure of `FIGURES` whose input the source has, in this order,
as PNG and SVG; `lenbench.publication` reads the stems from here to know which files a publication
may hold; the page (`lenbench.report.page`) shows them in this order under their titles. The plot
modules are imported only when a figure is drawn, so reading this list imports no matplotlib.

The per-encoding position patterns (``encodings/<name>.{png,svg}``, `lenbench.report.geometry`)
are one figure per encoding in a folder of their own and are drawn by the build directly.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pandas as pd

#: Every figure is written in these formats (the page shows the first).
FORMATS = ("png", "svg")
#: Their file suffixes.
SUFFIXES = tuple(f".{fmt}" for fmt in FORMATS)
#: What a figure is drawn from: the extrapolation rows and their leaderboard, or the kernel timings.
SOURCES = ("rows", "cost")


@dataclasses.dataclass(frozen=True)
class FigureInputs:
    """What the figures are drawn from: the tidy rows and their leaderboard (None without rows), the
    cost table (None without kernel timings) and the quality-against-cost points (None unless both)."""

    rows: pd.DataFrame
    board: Any = None
    cost: pd.DataFrame | None = None
    points: pd.DataFrame | None = None


@dataclasses.dataclass(frozen=True)
class FigureSpec:
    """One figure of the report.

    Attributes:
        stem: the file name without its format (``<stem>.png``, ``<stem>.svg``).
        title: its heading on the page.
        source: "rows" (drawn after the tables, when the source has extrapolation rows) or "cost"
            (drawn after the cost table, when it has kernel timings).
        module: the plot module under `lenbench.report.plots` that draws it.
        draw: ``draw(inputs, path) -> Path``, by the name of its function in `module`.
        caption: the name of the caption string in `module`.
        left_out: ``left_out(inputs) -> {panel: reason}``, by name in `module`; "" when it leaves
            nothing out.
        needs: ``needs(inputs) -> bool``, by name in `module`, whether the source has what it
            draws; "" when its source is enough.
    """

    stem: str
    title: str
    source: str
    module: str
    draw: str
    caption: str = "CAPTION"
    left_out: str = ""
    needs: str = ""

    def _attr(self, name: str):
        return getattr(importlib.import_module(f"lenbench.report.plots.{self.module}"), name)

    def available(self, inputs: FigureInputs) -> bool:
        return not self.needs or bool(self._attr(self.needs)(inputs))

    def render(self, inputs: FigureInputs, path) -> Any:
        return self._attr(self.draw)(inputs, path)

    def caption_text(self) -> str:
        return self._attr(self.caption)

    def panels_left_out(self, inputs: FigureInputs) -> dict[str, str]:
        return self._attr(self.left_out)(inputs) if self.left_out else {}


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec("extrapolation", "metric against evaluation length", "rows", "extrapolation", "draw_figure",
               left_out="figure_left_out"),
    FigureSpec("leaderboard_heatmap", "leaderboard heatmap", "rows", "heatmap", "draw_figure",
               left_out="figure_left_out"),
    FigureSpec("position_loss", "lm loss by position", "rows", "position", "draw_figure",
               left_out="figure_left_out", needs="figure_needs"),
    FigureSpec("needle_depth", "passkey: needle depth × length", "rows", "needle", "draw_figure",
               left_out="figure_left_out", needs="figure_needs"),
    FigureSpec("cost", "kernel time against sequence length", "cost", "cost", "cost_figure",
               caption="COST_CAPTION"),
    FigureSpec("quality_cost", "quality against training cost", "cost", "cost", "quality_cost_figure",
               caption="QUALITY_COST_CAPTION", left_out="quality_cost_figure_left_out",
               needs="quality_cost_figure_needs"),
)

#: The file stems of every figure, in page order.
FIGURE_STEMS: tuple[str, ...] = tuple(spec.stem for spec in FIGURES)


def figure_files() -> frozenset[str]:
    """Every file name a figure of `FIGURES` may be written as."""
    return frozenset(f"{stem}.{ext}" for stem in FIGURE_STEMS for ext in FORMATS)


def _check(figures: tuple[FigureSpec, ...]) -> None:
    stems = [spec.stem for spec in figures]
    if len(set(stems)) != len(stems):
        raise ValueError(f"a figure stem is declared twice: {stems}")
    for spec in figures:
        if spec.source not in SOURCES:
            raise ValueError(f"figure {spec.stem!r}: source {spec.source!r} is not one of {', '.join(SOURCES)}")


_check(FIGURES)
