"""How tables and figures show each encoding: its place, colour, marker and dashes, declared with no torch.

The report path reads these facts without importing the encodings (`lenbench.report.rows` for the
order, `lenbench.report.plots._style` for colours and markers), so they are declared here, by name,
rather than taken from where a module happens to be imported:

- lenbench's own encodings, in `BUILTIN` (table and legend order), each with a fixed colour,
  marker and dash pattern;
- any other encoding (a plugin's, or a built-in not declared here) comes after the declared ones,
  alphabetically, and takes its colour, marker and dashes from a CRC-32 of its name: the colour from
  `OTHER_COLORS`, strong shades far from every declared one and never grey (grey is the
  baselines' and the faded "not learned" lines'). Loading a plugin, or loading two in another
  order, never moves a colour or a row.

So adding an encoding needs only its own module and its test; declaring it here pins its place and
colour. `ROPE_TYPES` is the order of the inference-time rope_types (their variants' colours and
order); a test holds it equal to the rope_type registry.

    >>> encoding_color("alibi"), encoding_rank("alibi") < encoding_rank("my-plugin")
    ('#1f77b4', True)
"""

from __future__ import annotations

import dataclasses
import zlib

#: Dash patterns of the encodings' lines (matplotlib ``dashes``; "" solid), so that two lines of like
#: colour also differ in pattern. Disjoint from the variants' dash patterns (`lenbench.report.plots._style`).
SOLID, DASHED, DASH_DOT = "", (6.0, 2.0), (6.0, 1.5, 1.0, 1.5)
DASHES: tuple = (SOLID, DASHED, DASH_DOT)


@dataclasses.dataclass(frozen=True)
class Look:
    """How one encoding is drawn: a colour (hex), a matplotlib marker and a line's dash pattern."""

    color: str
    marker: str
    dashes: tuple[float, ...] | str = SOLID


#: lenbench's own encodings in table and legend order, with their colour, marker and dashes. The colours
#: are colorcet's glasbey_category10 in order (tab10 first, then the most distinct colours it adds),
#: leaving out its grey and its palest and darkest entries; every two are at least 22 apart in CIELAB
#: (ΔE*76), and none is grey (chroma ≥ 25: grey is the baselines'). `rope`, the reference of most
#: comparisons, has navy in place of tab10's grey.
BUILTIN: dict[str, Look] = {
    "alibi": Look("#1f77b4", "o"),
    "cope": Look("#ff7f0e", "s"),
    "fire": Look("#2ca02c", "^"),
    "kerple": Look("#d62728", "D"),
    "learned": Look("#9467bd", "v"),
    "nope": Look("#8c564b", "P", DASHED),
    "randomized": Look("#e377c2", "X", DASHED),
    "rope": Look("#00458a", "<"),
    "sandwich": Look("#bcbd22", ">", DASHED),
    "sinusoidal": Look("#17becf", "p", DASHED),
    "t5": Look("#bcbcff", "h", DASH_DOT),
    "xpos": Look("#b80080", "*", DASHED),
    "fox": Look("#6b6500", "d", DASH_DOT),
    "stickbreaking": Look("#6126ff", "H"),
    "prope": Look("#8cb894", "8", DASH_DOT),
    "ssmax": Look("#028268", "o", DASH_DOT),
    "dape": Look("#8300a0", "s", DASH_DOT),
    "pope": Look("#ad8944", "^", DASH_DOT),
    "hybrid": Look("#5b3400", "D", DASHED),
    "path": Look("#ff6f76", "v", DASH_DOT),
    "path-fox": Look("#798cff", "P", DASH_DOT),
}

#: Colours of encodings not in `BUILTIN` (plugins, labelled entries): the next entries of glasbey_category10
#: that lie at least 18 apart (ΔE*76) from every declared colour and from each other, with HLS lightness
#: under 0.7 and saturation over 0.25: none grey, pale or near-black, so a plugin never looks like a
#: baseline or a faded "not learned" line.
OTHER_COLORS: tuple[str, ...] = (
    "#dd00ff", "#ffbf60", "#ff018d", "#b75700", "#027000", "#1dd646", "#a56089", "#8b2945", "#00adff", "#00d4b1",
    "#c6c78a", "#ce506c", "#ff07d6", "#8b3a05", "#ff4902", "#aa3baf", "#d99c00", "#3f6aff", "#46490d", "#845cff",
    "#81b755", "#bd004a", "#da6d43", "#8b5800",
)
#: Markers of encodings not in `BUILTIN`.
OTHER_MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*", "d", "H", "8")

#: The rope_types of inference-time variants, in order (`lenbench.encodings.rope_scaling.ROPE_TYPES`).
ROPE_TYPES: tuple[str, ...] = ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "drope")


def encoding_look(name: str) -> Look:
    """The declared look of a built-in encoding, else one fixed by a CRC-32 of `name`: its colour from
    the hash modulo `OTHER_COLORS`, its marker and dashes from the quotient, so two names that share a
    colour still differ in marker or dashes unless their hashes agree modulo colours × markers × dashes."""
    look = BUILTIN.get(name)
    if look is not None:
        return look
    h = zlib.crc32(name.encode())
    color, rest = h % len(OTHER_COLORS), h // len(OTHER_COLORS)
    return Look(OTHER_COLORS[color], OTHER_MARKERS[rest % len(OTHER_MARKERS)],
                DASHES[rest // len(OTHER_MARKERS) % len(DASHES)])


def encoding_color(name: str) -> str:
    """An encoding's colour in every figure, as hex."""
    return encoding_look(name).color


def encoding_rank(name: str) -> tuple[int, int, str]:
    """Sort key of an encoding label: the declared ones in `BUILTIN` order, then any other alphabetically."""
    order = list(BUILTIN)
    return (0, order.index(name), "") if name in BUILTIN else (1, 0, name)
