"""The shared look of every report figure: saving, the palette, line styles, panel grids, left-out panels.

Every figure is written with the non-interactive Agg backend (set in `lenbench.report.plots`), so plotting works on machines
without a display, in the format the path's suffix names (PNG at 300 dpi, SVG or PDF), atomically
(temporary file + os.replace) and reproducibly (no date in SVGs or PDFs, fixed SVG ids): `save_figure`. Every figure
is laid out by matplotlib's constrained layout (`grid`, `figure`), so titles, labels, colour bars
and legends outside the axes never overlap.

Every figure shares one style per series. A trained encoding's colour and marker are declared
facts of `lenbench.encoding_display` (lenbench's own encodings: fixed; any other label, a plug-in
encoding or a test label: from a CRC-32 of its name into strong shades no built-in has, never
grey), so neither the order of imports, nor loading a plug-in, nor adding results ever shifts a
colour. An inference-time variant (`rope+yarn`) takes its colour and dash pattern from its
rope_type's place in the declared rope_type order (`VARIANT_COLORS`, `VARIANT_DASHES`), darker with a ▲ marker when fine-tuned, lighter with a ■ marker when its factor
is pinned; figures draw variants in panels of their own, beside the plain model
(`lenbench.report.plots.extrapolation`, `lenbench.report.plots.position`). Lines and legends follow
`lenbench.report.rows.series_order`.

Panels whose every series scores zero or did not learn the task are left out (`board_left_out`,
`keep_panels`), and the figure's caption on the page says which (`left_out_note`).
"""

from __future__ import annotations

import contextlib
import math
import warnings
import zlib
from pathlib import Path

import matplotlib.pyplot as plt  # the Agg backend: chosen by the package's __init__, which runs first
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

from lenbench import encoding_display
from lenbench.atomic import atomic_path
from lenbench.report.rows import BASE_VARIANT, board_rows, series_label, variant_rope_type

# --- saving -------------------------------------------------------------------------------------


@contextlib.contextmanager
def quiet():
    """Silence seaborn's own deprecation chatter (matplotlib API changes it has not caught up with)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield

_RC = {"svg.hashsalt": "lenbench", "svg.fonttype": "path", "pdf.fonttype": 42}
#: A raster figure's resolution: what a paper's printer asks for.
DPI = 300
#: The metadata entry that would date a file, per format (left out, so a rebuild is byte-identical).
_UNDATED = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}


def save_figure(fig, path: str | Path, *, dpi: int = DPI) -> Path:
    """Save `fig` to `path` (format from the suffix: png, svg, pdf) atomically and reproducibly (no
    date in SVG or PDF), then close it."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    metadata = _UNDATED.get(fmt)
    try:
        with atomic_path(path) as tmp, plt.rc_context(_RC):
            fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight", metadata=metadata)
    finally:
        plt.close(fig)
    return path


# --- the shared style of every line -------------------------------------------------------------

#: Dash patterns for variants, indexed by the rope_type's declared place (solid = the plain encoding).
VARIANT_DASHES: list[tuple[float, ...]] = [(4, 1.5), (1, 1), (3, 1.25, 1.5, 1.25), (5, 1, 1, 1), (2, 2, 6, 2),
                                           (8, 2, 2, 2), (1, 2, 1, 2, 4, 2), (3, 3)]
#: Colours of inference-time variants, indexed by the rope_type's declared place: tab10 without its
#: grey (the grey is close to the plain `rope` line they are drawn beside).
VARIANT_COLORS: list[tuple[float, float, float]] = [c for i, c in enumerate(sns.color_palette("tab10", 10)) if i != 7]
#: A fine-tuned variant: its rope_type's colour times this (darker); a pinned factor: mixed this far with white.
FINETUNED_SHADE = 0.6
PINNED_TINT = 0.45


def _stable_index(name: str, n: int) -> int:
    return zlib.crc32(name.encode()) % n


def encoding_color(encoding: str) -> tuple[float, float, float]:
    """The fixed colour of a trained encoding in every figure (`lenbench.encoding_display`)."""
    return to_rgb(encoding_display.encoding_color(encoding))


def encoding_marker(encoding: str) -> str:
    """The fixed marker of a trained encoding in every figure."""
    return encoding_display.encoding_look(encoding).marker


def _variant_index(variant: str, n: int) -> int:
    rope_type = variant_rope_type(variant)
    return (encoding_display.ROPE_TYPES.index(rope_type) if rope_type else _stable_index(variant, n)) % n


def _variant_kind(variant: str) -> str:
    """"plain" (a rope_type as is), "finetuned" (finetune-…) or "pinned" (…@factor); "other" else."""
    if variant.startswith("finetune-"):
        return "finetuned"
    if "@" in variant:
        return "pinned"
    return "plain" if variant_rope_type(variant) == variant else "other"


def variant_dashes(variant: str) -> tuple[float, ...] | str:
    """"" (solid) for the plain encoding (whose line takes its encoding's declared dashes in
    `series_style`), else a dash pattern fixed by the variant's rope_type."""
    if variant == BASE_VARIANT:
        return ""
    return VARIANT_DASHES[_variant_index(variant, len(VARIANT_DASHES))]


def variant_marker(variant: str) -> str:
    """The marker of a variant's line: ● a rope_type as is, ▲ fine-tuned, ■ pinned factor, ◆ other."""
    return {"plain": "o", "finetuned": "^", "pinned": "s"}.get(_variant_kind(variant), "D")


def series_color(encoding: str, variant: str) -> tuple[float, float, float]:
    """The encoding's colour for its trained model; for a variant its rope_type's colour (so
    `rope+yarn` and `xpos+yarn` share a hue), darker when fine-tuned, lighter when pinned."""
    if variant == BASE_VARIANT:
        return encoding_color(encoding)
    hue = VARIANT_COLORS[_variant_index(variant, len(VARIANT_COLORS))]
    kind = _variant_kind(variant)
    if kind == "finetuned":
        return tuple(float(FINETUNED_SHADE * c) for c in hue)
    if kind == "pinned":
        return tuple(float((1 - PINNED_TINT) * c + PINNED_TINT) for c in hue)
    return tuple(float(c) for c in hue)


def encoding_dashes(encoding: str) -> tuple[float, ...] | str:
    """The declared dash pattern of a trained encoding's line ("" solid; `lenbench.encoding_display`)."""
    return encoding_display.encoding_look(encoding).dashes


def series_style(encoding: str, variant: str) -> dict:
    """Colour (`series_color`), dashes and marker of the line of (encoding, variant) in every figure:
    a trained encoding's declared colour, marker and dashes; a variant's by its rope_type."""
    if variant == BASE_VARIANT:
        return {"color": series_color(encoding, variant), "dashes": encoding_dashes(encoding),
                "marker": encoding_marker(encoding)}
    return {"color": series_color(encoding, variant), "dashes": variant_dashes(variant),
            "marker": variant_marker(variant)}


def legend_handles(pairs: list[tuple[str, str]]) -> list[Line2D]:
    """Legend entries of (encoding, variant) series, in their figure style."""
    handles = []
    for encoding, variant in pairs:
        style = series_style(encoding, variant)
        handle = Line2D([], [], color=style["color"], marker=style["marker"], markersize=4, linewidth=1.4,
                        label=series_label(encoding, variant))
        if style["dashes"]:
            handle.set_dashes(style["dashes"])
        handles.append(handle)
    return handles


def series_groups(pairs) -> list[tuple[str | None, list[tuple[str, str]]]]:
    """Series split into panel rows: (None, the trained encodings), then per encoding with
    inference-time variants (encoding, its plain model and variants), in canonical order."""
    from lenbench.report.rows import series_order
    from lenbench.report.stats import is_baseline

    pairs = [p for p in series_order(pairs) if not is_baseline(p[0])]
    groups: list[tuple[str | None, list[tuple[str, str]]]] = [(None, [p for p in pairs if p[1] == BASE_VARIANT])]
    for family in dict.fromkeys(e for e, v in pairs if v != BASE_VARIANT):
        groups.append((family, [p for p in pairs if p[0] == family]))
    return [g for g in groups if g[1]]


# --- axes and panels ---------------------------------------------------------------------------


def plain_log_labels(axis) -> None:
    """Label a log axis 5, 10, 20 rather than 5×10⁰, 10¹, 2×10¹."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))


def log_ticks(vmin: float, vmax: float, ends: bool = True) -> list[float]:
    """At least three round ticks for a log scale over [vmin, vmax] (a log colour bar over less than
    a decade keeps a scale): the sparsest of 10^k, {1, 3}, {1, 2, 5}, {1, 2, 3, 5}, {1, 1.5, 2, 3, 5, 7}
    × 10^k that puts three or more inside the range, with `ends` (a colour bar) each end beyond a third
    of the range from its nearest tick as well (4.7 to 42: 5, 10, 20, 42). A range too narrow for those (31 to 48) is nearly
    linear on a log scale: without `ends` (a panel's axis), three or more evenly spaced round values
    inside it (35, 40, 45: matplotlib's `MaxNLocator` steps); with them (a colour bar, whose ends are
    the data's), both ends and five values spread evenly in log space, with as few significant digits
    (two or more) as keep three apart. A range that is one value gets that value."""
    if not (0 < vmin < vmax):
        return [vmin, vmax] if vmin < vmax else [vmin]
    decades = range(math.floor(math.log10(vmin)), math.ceil(math.log10(vmax)) + 1)
    for mantissas in ((1,), (1, 3), (1, 2, 5), (1, 2, 3, 5), (1, 1.5, 2, 3, 5, 7)):
        ticks = sorted(t for t in {float(f"{m * 10.0 ** k:.12g}") for k in decades for m in mantissas} if vmin <= t <= vmax)
        if len(ticks) >= 3:
            span = math.log(vmax / vmin)  # a colour bar labels an end its round ticks leave a third of it short of
            return ([float(vmin)] if ends and math.log(ticks[0] / vmin) > span / 3 else []) + ticks + \
                ([float(vmax)] if ends and math.log(vmax / ticks[-1]) > span / 3 else [])
    if not ends:
        for bins in range(3, 10):
            values = MaxNLocator(nbins=bins, steps=[1, 2, 5, 10]).tick_values(vmin, vmax)
            ticks = [float(f"{t:.12g}") for t in values if vmin <= t <= vmax]
            if len(ticks) >= 3:
                return ticks
    for digits in range(2, 17):
        spread = {float(f"{v:.{digits}g}") for v in np.geomspace(vmin, vmax, 5)}
        ticks = sorted({t for t in spread if vmin <= t <= vmax} | {vmin, vmax})
        if len(ticks) >= 3:
            break
    return ticks


def round_log_axis(axis, vmin: float, vmax: float, ends: bool = True) -> None:
    """Tick a log axis (a panel's, `ends` False, or a colour bar's) over [vmin, vmax] at `log_ticks`'
    round values, labelled plainly (5, 10, 20), without minor ticks: matplotlib's own locator leaves a
    range inside one decade (a byte-level perplexity of 3 to 6) without a single label."""
    axis.set_major_locator(FixedLocator(log_ticks(vmin, vmax, ends)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(NullLocator())


def round_out(vmin: float, vmax: float, digits: int = 2) -> tuple[float, float]:
    """[vmin, vmax] widened to `digits` significant digits (8.29709, 18.3527 → 8.2, 19), so that a
    colour bar's ends, which `log_ticks` may label, print short; a positive range stays positive."""
    def step(v: float) -> float:
        return 10.0 ** (math.floor(math.log10(abs(v))) - digits + 1) if v else 1.0

    low = math.floor(round(vmin / step(vmin), 9)) * step(vmin)
    high = math.ceil(round(vmax / step(vmax), 9)) * step(vmax)
    if vmin > 0 and low <= 0:
        low = vmin
    return float(f"{low:.{digits + 2}g}"), float(f"{high:.{digits + 2}g}")


#: A two-column paper's text width in inches (a figure* in a NeurIPS/ICML/ACL template); report
#: figures are this wide, panels wrapping `PANEL_COLUMNS` to a row, at `PAPER_FONT_SIZE`.
PAPER_WIDTH = 6.75
#: One column of a two-column paper, in inches: a single-panel figure's width.
PAPER_COLUMN = 3.25
PANEL_COLUMNS = 2
PAPER_FONT_SIZE = 8
LEGEND_FONT_SIZE = 6.5
#: The height of one row of a legend at `LEGEND_FONT_SIZE`, in inches.
LEGEND_ROW = 0.14


def banded_figure(width: float, heights: list[float], legend_entries: list[int], ncol: int = 4):
    """A constrained-layout figure of bands stacked top to bottom (subfigures), band i `heights[i]`
    inches of panels plus the rows its legend below takes (`legend_entries[i]` entries, `ncol` to a
    row); returns (figure, the bands)."""
    total = [h + LEGEND_ROW * math.ceil(n / ncol) + 0.25 for h, n in zip(heights, legend_entries, strict=True)]
    fig = figure(width, sum(total))
    return fig, fig.subfigures(len(total), 1, squeeze=False, height_ratios=total)[:, 0]


def figure(width: float, height: float):
    """An empty figure with constrained layout (titles, labels, colour bars and legends never overlap)."""
    return plt.figure(figsize=(width, height), layout="constrained")


def grid(n: int, width: float, height: float, ncols: int = 3, *, parent=None, **subplot_kw):
    """`n` panels of `width` × `height` inches, `ncols` to a row, in a constrained-layout figure
    (or in `parent`, a figure or subfigure); returns (figure, the n axes)."""
    ncols = min(ncols, max(1, n))
    nrows = math.ceil(n / ncols)
    if parent is None:
        fig = figure(width * ncols, height * nrows)
        axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    else:
        fig = parent
        axes = parent.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def outside_legend(target, handles: list, *, where: str = "right", max_rows: int = 16, ncol: int = 4):
    """A legend outside the panels of `target` (a figure or subfigure), placed by constrained
    layout: "right" (a column beside the panels) or "below" (rows under them, `ncol` to a row)."""
    if where == "below":
        ncol = min(len(handles), ncol)
        if isinstance(target, plt.Figure):  # taller by the legend's rows: the panels keep their height
            target.set_figheight(target.get_figheight() + LEGEND_ROW * math.ceil(len(handles) / ncol) + 0.1)
        return target.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False,
                             fontsize=LEGEND_FONT_SIZE)
    ncol = max(1, math.ceil(len(handles) / max_rows))
    return target.legend(handles=handles, loc="outside right upper", ncol=ncol, frameon=False,
                         fontsize=LEGEND_FONT_SIZE)


#: Line styles of baseline rows ("baseline:<name>"): grey, no marker.
BASELINE_STYLES = {"chance": {"color": "0.45", "dashes": (1, 1.5)}, "repeat-previous": {"color": "0.3", "dashes": (5, 2, 1, 2)},
                   "unigram": {"color": "0.3", "dashes": (6, 2)}}
NOT_LEARNED_ALPHA = 0.3


def baseline_style(encoding: str) -> dict:
    """Colour and dashes of a baseline's line (grey; chance dotted)."""
    name = encoding.split(":", 1)[-1]
    return BASELINE_STYLES.get(name, {"color": "0.35", "dashes": (3, 1.5, 1, 1.5, 1, 1.5)})


def freeze_limits(ax) -> None:
    """Fix `ax`'s view at what its artists so far span (autoscaling off), so that what is drawn
    next (a baseline) never moves it."""
    ax.autoscale_view()
    ax.set_xlim(ax.get_xlim())
    ax.set_ylim(ax.get_ylim())


def baseline_line(ax, xs, ys, style: dict, label: str) -> str:
    """A baseline drawn as an annotation of the view the models set (call `freeze_limits` first): a
    line that never rescales the axis, clipped to the view where it leaves it, and, when all of it
    lies above (below) the view, an arrow and "label value" at that edge instead, stacked under
    (over) any drawn before. Returns "in view", "above" or "below" (or "" when nothing is finite).

    Args:
        ax: the panel.
        xs, ys: the baseline's points (x in data units, y its metric), NaN where it has none.
        style: its colour and dashes (`baseline_style`).
        label: how the annotation names it ("chance", "baseline:unigram").
    """
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    finite = np.isfinite(xs) & np.isfinite(ys)
    if not finite.any():
        return ""
    low, high = ax.get_ylim()
    where = "above" if (ys[finite] > high).all() else "below" if (ys[finite] < low).all() else "in view"
    if where == "in view":
        (line,) = ax.plot(xs[finite], ys[finite], color=style["color"], linewidth=1.2, zorder=1, scalex=False,
                          scaley=False)
        line.set_dashes(style["dashes"])
        return where
    stack = ax.__dict__.setdefault("_lenbench_off_scale", {"above": 0, "below": 0})
    value = float(np.median(ys[finite]))
    step = 1.6 * LEGEND_FONT_SIZE * stack[where]  # points: one line of annotation per baseline before it
    stack[where] += 1
    ax.annotate(f"{'↑' if where == 'above' else '↓'} {label.removeprefix('baseline:')} {value:.3g}",
                xy=(0.97, 0.97 if where == "above" else 0.03), xycoords="axes fraction",
                xytext=(0, -step if where == "above" else step), textcoords="offset points",
                ha="right", va="top" if where == "above" else "bottom",
                fontsize=LEGEND_FONT_SIZE, color=style["color"],
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    return where


# --- panels left out ----------------------------------------------------------------------------

NOT_LEARNED = "no model learned it at 1×"
ALL_ZERO = "every model scores 0 at every length"


def board_left_out(board, task: str, train_len: int) -> str | None:
    """Why the panel of one board (task, train length) is left out of a figure, or None to draw it:
    every trained model and variant did not learn the task at 1× (`NOT_LEARNED`), or scores 0 (or
    failed) at every length (`ALL_ZERO`).

    Args:
        board: the `lenbench.report.tables.Leaderboard` of the results.
        task, train_len: the board.
    """
    rows = board_rows(board.per_task, task, train_len)
    rows = rows[rows["kind"] != "baseline"]
    if not len(rows):
        return None
    if rows["not_learned"].all():
        return NOT_LEARNED
    wide = board_rows(board.wide, task, train_len)
    wide = wide[wide["kind"] != "baseline"]
    cols = [c for c in board.ratio_columns(task, train_len) if c in wide.columns]
    values = wide[cols].to_numpy(dtype=float) if cols else np.zeros((0, 0))
    if values.size and np.all(np.nan_to_num(values, nan=0.0) == 0):
        return ALL_ZERO
    return None


def keep_panels(panels: list, reasons: dict) -> tuple[list, dict]:
    """(the panels to draw, {panel: why it is left out}); `reasons` holds a reason or None per panel.
    When every panel would be left out, all are drawn (a figure that shows nothing is no figure)
    and none is reported left out."""
    dropped = {p: reasons[p] for p in panels if reasons.get(p)}
    kept = [p for p in panels if p not in dropped]
    if not kept:
        return list(panels), {}
    return kept, dropped


def left_out_note(dropped: dict[str, str]) -> str:
    """The caption sentence naming the panels left out of a figure and why ("" when none is)."""
    if not dropped:
        return ""
    by_reason: dict[str, list[str]] = {}
    for label, reason in dropped.items():
        by_reason.setdefault(reason, []).append(label)
    return " Left out: " + "; ".join(f"{', '.join(labels)}: {reason}" for reason, labels in by_reason.items()) + "."


def board_label(task: str, train_len: int) -> str:
    return f"{task} (train length {train_len})"


def boards_left_out(board, keys: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """`keep_panels` over boards: (the (task, train_len) keys to draw, {"task (train length n)": why})."""
    kept, dropped = keep_panels(keys, {k: board_left_out(board, *k) for k in keys})
    return kept, {board_label(*k): why for k, why in dropped.items()}


def frame_is_zero(values: pd.DataFrame | np.ndarray) -> bool:
    """Whether every finite value of a frame or array is 0 (and it has one)."""
    arr = np.asarray(values, dtype=float)
    finite = arr[np.isfinite(arr)]
    return bool(finite.size) and bool(np.all(finite == 0))
