"""How tables and figures show each encoding: its place, colour and marker, declared with no torch.

The report path reads these facts without importing the encodings (`lenbench.report.rows` for the
order, `lenbench.report.plots._style` for colours and markers), so they are declared here, by name,
rather than taken from where a module happens to be imported:

- lenbench's own encodings, in `BUILTIN` (table and legend order), each with a fixed colour and
  marker: the ones published figures have always shown;
- any other encoding (a plugin's, or a built-in not declared here) comes after the declared ones,
  alphabetically, and takes its colour and marker from a CRC-32 of its name: the colour from
  `OTHER_COLORS`, strong shades that no declared encoding has and that are never grey (grey is the
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


@dataclasses.dataclass(frozen=True)
class Look:
    """How one encoding is drawn: a colour (hex) and a matplotlib marker."""

    color: str
    marker: str


#: lenbench's own encodings in table and legend order, with their colour and marker.
BUILTIN: dict[str, Look] = {
    "alibi": Look("#1f77b4", "o"),
    "cope": Look("#ff7f0e", "s"),
    "fire": Look("#2ca02c", "^"),
    "kerple": Look("#d62728", "D"),
    "learned": Look("#9467bd", "v"),
    "nope": Look("#8c564b", "P"),
    "randomized": Look("#e377c2", "X"),
    "rope": Look("#7f7f7f", "<"),
    "sandwich": Look("#bcbd22", ">"),
    "sinusoidal": Look("#17becf", "p"),
    "t5": Look("#aec7e8", "h"),
    "xpos": Look("#ffbb78", "*"),
    "fox": Look("#98df8a", "d"),
    "stickbreaking": Look("#ff9896", "H"),
    "prope": Look("#c5b0d5", "8"),
    "ssmax": Look("#c49c94", "o"),
    "dape": Look("#f7b6d2", "s"),
    "pope": Look("#dbdb8d", "^"),
    "hybrid": Look("#9edae5", "D"),
    "path": Look("#c7c7c7", "^"),
    "path-fox": Look("#fdae6b", "v"),
}

#: Colours of encodings not in `BUILTIN`: the two strongest shades of each hue of matplotlib's
#: tab20b and tab20c (their greys and pale shades left out).
OTHER_COLORS: tuple[str, ...] = (
    "#393b79", "#5254a3", "#637939", "#8ca252", "#8c6d31", "#bd9e39", "#843c39", "#ad494a", "#7b4173", "#a55194",
    "#3182bd", "#6baed6", "#e6550d", "#fd8d3c", "#31a354", "#74c476", "#756bb1", "#9e9ac8",
)
#: Markers of encodings not in `BUILTIN`.
OTHER_MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*", "d", "H", "8")

#: The rope_types of inference-time variants, in order (`lenbench.encodings.rope_scaling.ROPE_TYPES`).
ROPE_TYPES: tuple[str, ...] = ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "drope")


def _hash(name: str, n: int) -> int:
    return zlib.crc32(name.encode()) % n


def encoding_look(name: str) -> Look:
    """The declared look of a built-in encoding, else one fixed by a hash of `name`."""
    look = BUILTIN.get(name)
    if look is not None:
        return look
    return Look(OTHER_COLORS[_hash(name, len(OTHER_COLORS))], OTHER_MARKERS[_hash(name, len(OTHER_MARKERS))])


def encoding_color(name: str) -> str:
    """An encoding's colour in every figure, as hex."""
    return encoding_look(name).color


def encoding_rank(name: str) -> tuple[int, int, str]:
    """Sort key of an encoding label: the declared ones in `BUILTIN` order, then any other alphabetically."""
    order = list(BUILTIN)
    return (0, order.index(name), "") if name in BUILTIN else (1, 0, name)
