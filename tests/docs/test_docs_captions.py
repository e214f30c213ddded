"""docs/board.md lists every figure's caption as the page shows it (each caption is one constant in
its plot module) and the definition of "effective length"."""

from __future__ import annotations

from pathlib import Path

import pytest

from lenbench.report import markdown
from lenbench.report.plots import cost, extrapolation, geometry, heatmap, needle, position

pytestmark = pytest.mark.docs

BOARD = Path(__file__).resolve().parents[2] / "docs" / "board.md"


@pytest.mark.parametrize("caption", [extrapolation.CAPTION, heatmap.CAPTION, position.CAPTION, needle.CAPTION,
                                     cost.COST_CAPTION, cost.QUALITY_COST_CAPTION, geometry.CAPTION, markdown.EFFECTIVE_LENGTH])
def test_board_page_quotes_the_caption(caption):
    text = " ".join(BOARD.read_text().split())
    assert " ".join(caption.split()) in text
