"""The shared look of every report figure: saving, the palette, line styles, panel grids.

Every figure is written with the non-interactive Agg backend (set in `lenbench.report.plots`), so plotting works on machines
without a display, in the format the path's suffix names (PNG or SVG), atomically (temporary
file + os.replace) and reproducibly (no date in SVGs, fixed SVG ids): `save_figure`.

Every figure shares one style per line: the colour comes from the encoding's index in the
encoding registry (`ENCODING_COLORS`, 20 fixed colours; a label outside the registry gets a
colour from a hash of its name), the dash pattern from the variant's rope_type index in the
rope_type registry (solid for the plain encoding), the marker says whether the variant was
fine-tuned; lines and legends follow `lenbench.report.rows.series_order`. Adding results never
shuffles colours.
"""

from __future__ import annotations

import contextlib
import math
import warnings
import zlib
from pathlib import Path

import matplotlib.pyplot as plt  # the Agg backend: chosen by the package's __init__, which runs first
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from lenbench.atomic import atomic_path
from lenbench.encodings import ENCODINGS
from lenbench.report.rows import BASE_VARIANT, series_label, variant_rope_type

# --- saving -------------------------------------------------------------------------------------


@contextlib.contextmanager
def quiet():
    """Silence seaborn's own deprecation chatter (matplotlib API changes it has not caught up with)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield

_RC = {"svg.hashsalt": "lenbench", "svg.fonttype": "path"}


def save_figure(fig, path: str | Path, *, dpi: int = 100) -> Path:
    """Save `fig` to `path` (format from the suffix) atomically and reproducibly, then close it."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    metadata = {"Date": None} if fmt == "svg" else None
    try:
        with atomic_path(path) as tmp, plt.rc_context(_RC):
            fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight", metadata=metadata)
    finally:
        plt.close(fig)
    return path


# --- the shared style of every line -------------------------------------------------------------

_TAB20 = sns.color_palette("tab20", 20)
#: 20 fixed colours: the ten strong tab20 shades first, then the ten light ones.
ENCODING_COLORS: list[tuple[float, float, float]] = [_TAB20[i] for i in (*range(0, 20, 2), *range(1, 20, 2))]
#: Dash patterns for variants, indexed by the rope_type's registry index (solid = the plain encoding).
VARIANT_DASHES: list[tuple[float, ...]] = [(4, 1.5), (1, 1), (3, 1.25, 1.5, 1.25), (5, 1, 1, 1), (2, 2, 6, 2),
                                           (6, 2), (1, 2, 1, 2, 4, 2), (3, 3)]


def _stable_index(name: str, n: int) -> int:
    return zlib.crc32(name.encode()) % n


def encoding_color(encoding: str) -> tuple[float, float, float]:
    names = ENCODINGS.names()
    n = len(ENCODING_COLORS)
    if encoding in names:
        index = names.index(encoding)
    elif len(names) < n:  # other labels: a colour no registered encoding has, chosen by a hash of the label
        index = len(names) + _stable_index(encoding, n - len(names))
    else:
        index = _stable_index(encoding, n)
    return ENCODING_COLORS[index % n]


def variant_dashes(variant: str) -> tuple[float, ...] | str:
    """"" (solid) for the plain encoding, else a dash pattern fixed by the variant's rope_type."""
    if variant == BASE_VARIANT:
        return ""
    from lenbench.encodings.rope_scaling import ROPE_TYPES

    rope_type = variant_rope_type(variant)
    index = ROPE_TYPES.names().index(rope_type) if rope_type else _stable_index(variant, len(VARIANT_DASHES))
    return VARIANT_DASHES[index % len(VARIANT_DASHES)]


def variant_marker(variant: str) -> str:
    if variant == BASE_VARIANT:
        return "o"
    rope_type = variant_rope_type(variant)
    if rope_type is None:
        return "D"
    return "o" if variant == rope_type else "^"


#: Hues of inference-time variants, indexed by the rope_type's registry index: seaborn's "dark"
#: palette, mixed with the family's colour (`VARIANT_FAMILY_MIX`) so a family's lines stay related.
VARIANT_COLORS: list[tuple[float, float, float]] = list(sns.color_palette("dark", 10))
VARIANT_FAMILY_MIX = 0.25


def series_color(encoding: str, variant: str) -> tuple[float, float, float]:
    """The encoding's colour for its trained model; for a variant a colour of its own (by rope_type,
    so `rope+yarn` and `xpos+yarn` share a hue), a quarter of it the family's colour."""
    family = encoding_color(encoding)
    if variant == BASE_VARIANT:
        return family
    from lenbench.encodings.rope_scaling import ROPE_TYPES

    rope_type = variant_rope_type(variant)
    index = ROPE_TYPES.names().index(rope_type) if rope_type else _stable_index(variant, len(VARIANT_COLORS))
    hue = VARIANT_COLORS[index % len(VARIANT_COLORS)]
    if variant != rope_type and rope_type:  # a fine-tuned or re-parametrised variant: a darker shade of its hue
        hue = tuple(0.7 * c for c in hue)
    return tuple(float((1 - VARIANT_FAMILY_MIX) * h + VARIANT_FAMILY_MIX * f) for h, f in zip(hue, family, strict=True))


def series_style(encoding: str, variant: str) -> dict:
    """Colour (`series_color`), dashes and marker of the line of (encoding, variant) in every figure."""
    return {"color": series_color(encoding, variant), "dashes": variant_dashes(variant), "marker": variant_marker(variant)}


def legend_handles(pairs: list[tuple[str, str]]) -> list[Line2D]:
    handles = []
    for encoding, variant in pairs:
        style = series_style(encoding, variant)
        handle = Line2D([], [], color=style["color"], marker=style["marker"], markersize=5, linewidth=1.6,
                        label=series_label(encoding, variant))
        if style["dashes"]:
            handle.set_dashes(style["dashes"])
        handles.append(handle)
    return handles


# --- axes and panels ---------------------------------------------------------------------------


def plain_log_labels(axis) -> None:
    """Label a log axis 5, 10, 20 rather than 5×10⁰, 10¹, 2×10¹."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))


#: A two-column paper's text width in inches (a figure* in a NeurIPS/ICML/ACL template); report
#: figures are this wide, panels wrapping `PANEL_COLUMNS` to a row, at `PAPER_FONT_SIZE`.
PAPER_WIDTH = 6.75
PANEL_COLUMNS = 2
PAPER_FONT_SIZE = 8


def grid(n: int, width: float, height: float, ncols: int = 3):
    ncols = min(ncols, max(1, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


#: Line styles of baseline rows ("baseline:<name>"): grey, no marker.
BASELINE_STYLES = {"chance": {"color": "0.45", "dashes": (1, 1.5)}, "repeat-previous": {"color": "0.3", "dashes": (5, 2, 1, 2)},
                   "unigram": {"color": "0.3", "dashes": (6, 2)}}
NOT_LEARNED_ALPHA = 0.3


def baseline_style(encoding: str) -> dict:
    """Colour and dashes of a baseline's line (grey; chance dotted)."""
    name = encoding.split(":", 1)[-1]
    return BASELINE_STYLES.get(name, {"color": "0.35", "dashes": (3, 1.5, 1, 1.5, 1, 1.5)})
