"""Encodings' places, colours and markers (`lenbench.encoding_display`): declared, distinct,
never grey for a plugin, and the same whatever was imported first."""

from __future__ import annotations

import colorsys
import json
import subprocess
import sys
from pathlib import Path

import pytest
from lenbench_testing import PLUGIN_ENCODING
from matplotlib.colors import to_rgb

from lenbench import encoding_display
from lenbench.encoding_display import BUILTIN, OTHER_COLORS, encoding_color, encoding_rank
from lenbench.encodings import ENCODINGS
from lenbench.encodings.rope_types import ROPE_TYPES
from lenbench.report.plots._style import BASELINE_STYLES

ROOT = Path(__file__).resolve().parents[1]
#: The greys of figures that are not a trained encoding: the baselines and the faded "not learned" key.
GREYS = {to_rgb(s["color"]) for s in BASELINE_STYLES.values()} | {to_rgb("0.3"), to_rgb("0.35")}


def test_declared_encodings_are_built_ins_and_rope_types_match_the_registry():
    assert set(BUILTIN) <= set(ENCODINGS.builtin_names())
    assert encoding_display.ROPE_TYPES == tuple(ROPE_TYPES.names())


def test_every_built_in_and_a_plugin_get_distinct_colours_none_grey():
    names = [*ENCODINGS.builtin_names(), "eco-alibi-learn", "mype-rope"]
    colours = [to_rgb(encoding_color(n)) for n in names]
    assert len(set(colours)) == len(names)
    assert not set(colours) & GREYS
    for colour in OTHER_COLORS:  # a plugin's shade: strong, neither grey nor pale (a faded line)
        _, lightness, saturation = colorsys.rgb_to_hls(*to_rgb(colour))
        assert saturation > 0.25 and lightness < 0.7, colour
    assert not {to_rgb(c) for c in OTHER_COLORS} & {to_rgb(look.color) for look in BUILTIN.values()}


def test_built_ins_keep_their_published_colours_and_order():
    assert list(BUILTIN)[:4] == ["alibi", "cope", "fire", "kerple"] and list(BUILTIN)[16] == "dape"
    assert list(BUILTIN)[-1] == "path-fox"
    # rope left tab10's grey (#7f7f7f) for navy: grey is the baselines' and the faded lines' shade
    assert encoding_color("alibi") == "#1f77b4" and encoding_color("rope") == "#00458a"
    assert sorted(["zz", "dape", "aa", "alibi"], key=encoding_rank) == ["alibi", "dape", "aa", "zz"]


#: Prints every encoding's colour, marker and rank, after importing in the order argv[2] names.
LOOKS = """
import json, sys
if sys.argv[2] == "plugin-first":
    from lenbench import plugins
    plugins.load_plugins([sys.argv[1]])
from lenbench.report.plots._style import encoding_color, encoding_marker
from lenbench.report.rows import encoding_sort_key
report_only = "lenbench.encodings" not in sys.modules
names = ["alibi", "rope", "fox", "dape", "eco-alibi-learn", "zz-label"]
print(json.dumps({"report_only": report_only,
                  "looks": {n: [encoding_color(n), encoding_marker(n), encoding_sort_key(n)] for n in names}}))
"""


@pytest.mark.subprocess
def test_colours_and_order_are_the_same_whatever_is_imported_first(tmp_path):
    plugin = tmp_path / "p.py"
    plugin.write_text(PLUGIN_ENCODING.format(name="eco-alibi-learn", scale=2.0))
    seen = {}
    for order in ("report-first", "plugin-first"):
        out = subprocess.run([sys.executable, "-c", LOOKS, str(plugin), order], capture_output=True, text=True,
                             timeout=300, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        seen[order] = json.loads(out.stdout)
    assert seen["report-first"]["report_only"]  # the report's colours and order need no encoding module
    assert seen["report-first"]["looks"] == seen["plugin-first"]["looks"]
    assert seen["plugin-first"]["looks"]["eco-alibi-learn"][0] != seen["plugin-first"]["looks"]["alibi"][0]
