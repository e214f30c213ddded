"""The page's layout in a real browser (headless Chromium, `headless`): at a 1400 px window the page
never scrolls sideways, every table sits in a box of its own that does, inside the window, with the
entry's name sticky; a table too wide for the layout scrolls in its box instead of widening the page.

Skipped where no Chromium is on PATH (`headless.NO_BROWSER`). Each check starts the browser once
(a few seconds): slow.
"""

import pandas as pd
import pytest
from headless import NO_BROWSER, browser, measure, screenshot, section_script
from PIL import Image
from test_published_catalog import CATALOG
from test_results import row

from lenbench.report.build import write_report

pytestmark = [pytest.mark.slow, pytest.mark.skipif(browser() is None, reason=NO_BROWSER)]

#: The window the layout is built for (its max-width is 1180 px) and one narrower than it.
WIDTHS = (1400, 800)
#: Length ratios enough to make the by-ratio table wider than any window tried.
RATIOS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def wide_rows() -> list[dict]:
    """A board wider than the layout: ten length ratios, a secondary metric (token accuracy: one
    more column in the main table) and long variant names, two seeds (every score with its ±)."""
    curves = {("rope", "none"): 0.93, ("alibi", "none"): 0.97, ("nope", "none"): 0.91,
              ("rope", "yarn-factor-32-extrapolated-further"): 0.95}
    rows = []
    for seed in (0, 1):
        for (encoding, variant), keep in curves.items():
            for ratio in RATIOS:
                value = min(1.0, keep ** (ratio - 1) + 0.01 * seed)
                rows.append(row("copy", encoding, variant, 10, ratio, "exact_match", value, seed))
                rows.append(row("copy", encoding, variant, 10, ratio, "token_accuracy", value ** 0.5, seed))
    return rows


def assert_fits(layout: dict, where: str) -> None:
    """No page-level horizontal scroll, and every table in a scrolling box within the window."""
    assert layout["tables"], f"{where}: no table measured"
    assert layout["scrollWidth"] <= layout["clientWidth"], (
        f"{where}: the page scrolls sideways ({layout['scrollWidth']} px of content in a {layout['clientWidth']} px "
        "viewport): a table or a line outgrows the layout")
    unboxed = [i for i, t in enumerate(layout["tables"]) if not t["boxed"]]
    assert not unboxed, f"{where}: tables {unboxed} are not inside a horizontally scrolling box"
    outside = [i for i, t in enumerate(layout["tables"]) if t["boxRight"] > layout["clientWidth"] + 0.5]
    assert not outside, f"{where}: the scrolling boxes of tables {outside} reach past the window"


@pytest.fixture(scope="module")
def wide_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("wide")
    write_report(pd.DataFrame(wide_rows()), out, plots=False)
    return out / "index.html"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_wide_board_scrolls_in_its_boxes_not_the_page(wide_page, width):
    layout = measure(browser(), wide_page, width=width)
    assert layout["innerWidth"] == width
    assert_fits(layout, f"a wide board at {width} px")
    wider = [t for t in layout["tables"] if t["boxScrollWidth"] > t["boxClientWidth"]]
    assert wider, "the constructed board must be wider than the layout, or this test shows nothing"
    assert all(t["width"] > t["boxClientWidth"] for t in wider)  # the table keeps its width and scrolls
    assert all(t["sticky"] == 1 for t in layout["tables"]), "each row's name cell stays at the box's left edge"


def test_a_screenshot_shows_the_board_at_the_window_size(wide_page, tmp_path):
    """The page paints (a blank or failed render is one colour) at the window's size, with a board
    shown alone and its table scrolled sideways, as docs/figures/catalog-page.png was taken."""
    out = screenshot(browser(), wide_page, tmp_path / "wide.png", section_script("copy-10"))
    with Image.open(out) as image:
        assert image.size == (1400, 1000)
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or ()) > 16, "the screenshot is blank"


def test_the_probe_sees_a_page_that_scrolls_sideways(tmp_path):
    """The measurement itself: a bare table wider than the window makes the page scroll, outside any box."""
    cells = "".join(f"<td>column {i} holds a long value</td>" for i in range(40))
    page = tmp_path / "bare.html"
    page.write_text(f"<!DOCTYPE html><html><body><table><tr>{cells}</tr></table></body></html>", encoding="utf-8")
    layout = measure(browser(), page)
    assert layout["scrollWidth"] > layout["clientWidth"] and not layout["tables"][0]["boxed"]
    with pytest.raises(AssertionError, match="scrolls sideways"):
        assert_fits(layout, "bare")


@pytest.mark.skipif(not (CATALOG / "index.html").is_file(), reason="results/catalog/ is not published")
def test_the_published_catalog_page_fits_the_window():
    """The published page (rebuilt by `lenbench report results/catalog` after a change of the page)."""
    assert_fits(measure(browser(), CATALOG / "index.html"), "results/catalog/index.html at 1400 px "
                "(stale? rerun `lenbench report results/catalog`)")
