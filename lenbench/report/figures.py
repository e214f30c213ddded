"""The report's figures: each declared once, in the plot module that draws it.

A plot module under `lenbench.report.plots` declares its figures at module level as
``FIGURES = (FigureSpec(stem=..., title=..., source=..., draw=..., order=...), ...)`` with literal
arguments; this module reads those declarations from the modules' source (`ast`, without importing
them, so reading the list imports no matplotlib) into `FIGURES`, ordered by `order`. A new figure is
therefore one new plot module (or one more entry in an existing one).

`lenbench.report.build` draws every figure of `FIGURES` whose input the source has, in this order,
as PNG, SVG and PDF; `lenbench.publication` reads the stems from here to know which files a publication
may hold; the page (`lenbench.report.page`) shows them in this order under their titles. The plot
modules are imported only when a figure is drawn.

The per-encoding position patterns (``encodings/<name>.{png,svg,pdf}``, `lenbench.report.geometry`)
are one figure per encoding in a folder of their own and are drawn by the build directly.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path
from typing import Any

import pandas as pd

from lenbench.registry import module_declarations

#: Every figure is written in these formats (the page shows the first): a 300 dpi PNG, and SVG and PDF
#: (vector) for a paper.
FORMATS = ("png", "svg", "pdf")
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
    """One figure of the report, declared in the plot module that draws it.

    Attributes:
        stem: the file name without its format (``<stem>.png``, ``.svg``, ``.pdf``).
        title: its heading on the page.
        source: "rows" (drawn after the tables, when the source has extrapolation rows) or "cost"
            (drawn after the cost table, when it has kernel timings).
        draw: ``draw(inputs, path) -> Path``, by the name of its function in `module`.
        order: its place on the page and in the build (ascending; distinct per figure).
        caption: the name of the caption string in `module`.
        left_out: ``left_out(inputs) -> {panel: reason}``, by name in `module`; "" when it leaves
            nothing out.
        needs: ``needs(inputs) -> bool``, by name in `module`, whether the source has what it
            draws; "" when its source is enough.
        module: the plot module under `lenbench.report.plots` that declares and draws it (filled in
            from where the declaration is found).
    """

    stem: str
    title: str
    source: str
    draw: str
    order: int
    caption: str = "CAPTION"
    left_out: str = ""
    needs: str = ""
    module: str = ""

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


#: The plot modules, where figures are declared.
PLOTS = Path(__file__).resolve().parent / "plots"


def declared_figures(plots: Path = PLOTS) -> tuple[FigureSpec, ...]:
    """Every figure the plot modules in `plots` declare (their module-level ``FIGURES`` tuples of
    ``FigureSpec(...)`` calls with literal keyword arguments), by `order`.

    Raises:
        ValueError: a declaration that is not such a tuple, one line naming the module.
    """
    found = []
    for path, value in module_declarations(plots, "FIGURES"):
        calls = value.elts if isinstance(value, ast.Tuple) else None
        if calls is None or not all(isinstance(c, ast.Call) and getattr(c.func, "id", "") == "FigureSpec"
                                    and not c.args for c in calls):
            raise ValueError(f"{path.name}: FIGURES must be a tuple of FigureSpec(...) calls with keyword arguments")
        try:
            found += [FigureSpec(**{k.arg: ast.literal_eval(k.value) for k in c.keywords}, module=path.stem)
                      for c in calls]
        except ValueError as err:
            raise ValueError(f"{path.name}: a FigureSpec argument is not a literal ({err})") from None
    return tuple(sorted(found, key=lambda spec: spec.order))


FIGURES: tuple[FigureSpec, ...] = declared_figures()

#: The file stems of every figure, in page order.
FIGURE_STEMS: tuple[str, ...] = tuple(spec.stem for spec in FIGURES)


def figure_files() -> frozenset[str]:
    """Every file name a figure of `FIGURES` may be written as."""
    return frozenset(f"{stem}.{ext}" for stem in FIGURE_STEMS for ext in FORMATS)


def _check(figures: tuple[FigureSpec, ...]) -> None:
    stems = [spec.stem for spec in figures]
    if len(set(stems)) != len(stems):
        raise ValueError(f"a figure stem is declared twice: {stems}")
    orders = [spec.order for spec in figures]
    if len(set(orders)) != len(orders):
        raise ValueError(f"two figures share an order: {[(s.stem, s.order) for s in figures]}")
    for spec in figures:
        if spec.source not in SOURCES:
            raise ValueError(f"figure {spec.stem!r}: source {spec.source!r} is not one of {', '.join(SOURCES)}")


_check(FIGURES)
