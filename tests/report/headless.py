"""A page's layout measured in a headless Chromium: the system browser's binary run as a plain
subprocess (no Selenium, no Playwright, no browser download), its measurements read off the DOM it
dumps after loading the page with a probe script appended.

Chromium comes from the system's packages (Debian: `apt-get install -y chromium`); `browser()` is
None where none is on PATH, and the tests that need one skip with `NO_BROWSER`.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

#: The names a Chromium binary goes by on PATH, first found wins.
BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
NO_BROWSER = ("no headless Chromium on PATH (looked for " + ", ".join(BINARIES) + "): on Debian or Ubuntu, "
              "`apt-get install -y chromium` (about 480 MB installed)")

#: Appended before </body>: measures the document and every table's scrolling box after layout, and
#: writes the result as JSON into a <pre> the dumped DOM carries.
PROBE = """<script>(function(){
function box(el){for(var p=el.parentElement;p&&p!==document.body;p=p.parentElement){
  var x=getComputedStyle(p).overflowX;if(x==='auto'||x==='scroll'){return p;}}return null;}
var d=document.documentElement,out={innerWidth:window.innerWidth,clientWidth:d.clientWidth,
  scrollWidth:d.scrollWidth,bodyScrollWidth:document.body.scrollWidth,tables:[]};
document.querySelectorAll('table').forEach(function(t){var b=box(t),r=t.getBoundingClientRect();
  out.tables.push({width:r.width,right:r.right,boxed:!!b,boxRight:b?b.getBoundingClientRect().right:null,
    boxClientWidth:b?b.clientWidth:null,boxScrollWidth:b?b.scrollWidth:null,
    sticky:Array.from(t.querySelectorAll('tbody tr:first-child td')).filter(function(c){
      return getComputedStyle(c).position==='sticky';}).length});});
var pre=document.createElement('pre');pre.id='layout-probe';pre.textContent=JSON.stringify(out);
document.body.appendChild(pre);})();</script>"""


def browser() -> str | None:
    """The path of a Chromium binary on PATH, or None."""
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


def run_chromium(binary: str, url: str, *args: str, width: int = 1400, height: int = 1000,
                 timeout: float = 120) -> subprocess.CompletedProcess:
    """Chromium, headless, on `url` at a window of `width` × `height` CSS pixels, with `args`
    (``--dump-dom``, ``--screenshot=PATH``); a profile of its own in a temporary directory, no
    sandbox (tests run as root in containers), no GPU. Its scrollbars are shown: the layout
    viewport is the window less the page's vertical scrollbar, as on a desktop."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions", "--force-device-scale-factor=1",
                               f"--user-data-dir={profile}", f"--window-size={width},{height}", *args, url],
                              capture_output=True, text=True, timeout=timeout, check=False)


def measure(binary: str, page: Path, width: int = 1400, height: int = 1000) -> dict:
    """The layout of `page` (an HTML file) at a window `width` wide: the probe's JSON (`PROBE`):
    innerWidth, clientWidth, scrollWidth of the document, and per table its width, right edge,
    whether it sits in a horizontally scrolling box, that box's right edge, client and scroll
    widths, and how many cells of its first body row are sticky.

    The page is copied next to itself with the probe appended, so the original is never changed.
    """
    text = page.read_text(encoding="utf-8")
    assert text.count("</body>") == 1, f"{page}: expected one </body>"
    with tempfile.TemporaryDirectory(prefix="layout-") as tmp:
        probed = Path(tmp) / "page.html"
        probed.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
        done = run_chromium(binary, probed.as_uri(), "--dump-dom", width=width, height=height)
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium printed no measurement (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def screenshot(binary: str, page: Path, out: Path, script: str = "", width: int = 1400, height: int = 1000) -> Path:
    """A PNG of `page` as a `width` × `height` window shows it, written to `out`; `script`
    (JavaScript, e.g. scrolling to a section) runs after the page's own, in a copy of the page."""
    text = page.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="screenshot-") as tmp:
        shown = Path(tmp) / "page.html"
        shown.write_text(text.replace("</body>", f"<script>{script}</script></body>") if script else text,
                         encoding="utf-8")
        done = run_chromium(binary, shown.as_uri(), f"--screenshot={out.resolve()}", "--virtual-time-budget=10000",
                            width=width, height=height)
    assert out.is_file(), f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    return out


def section_script(section: str) -> str:
    """JavaScript showing only `section` (a board's anchor, e.g. "lm-64") of the page's main part,
    under the page's header, its first table's box scrolled sideways to its end (the sticky name
    column stays): the docs' picture of a page (docs/board.md). The other sections are hidden, not
    scrolled past: a headless screenshot of a scrolled window comes out blank."""
    return ("document.querySelectorAll('main > section').forEach(function(s){if(s.id!==" + json.dumps(section)
            + "){s.style.display='none';}});var b=document.querySelector('#' + CSS.escape(" + json.dumps(section)
            + ") + ' .scroll');if(b){b.scrollLeft=b.scrollWidth;}")


def main(argv: list[str] | None = None) -> None:
    """`python tests/report/headless.py PAGE OUT.png [--section lm-64]`: the screenshot of docs/board.md."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("page", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--section", default="", help="a board's anchor to show alone, its table scrolled sideways")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args(argv)
    binary = browser()
    if binary is None:
        raise SystemExit(NO_BROWSER)
    screenshot(binary, args.page, args.out, section_script(args.section) if args.section else "", args.width, args.height)
    print(args.out)


if __name__ == "__main__":
    main()
