"""The docs site builds with `mkdocs build --strict`, and its pages keep the repository's conventions.

`mkdocs.yml` turns every link, anchor and nav problem into a warning (its `validation:` section) and
`--strict` makes a warning fail: a broken link or anchor, a page named in the nav that does not
exist, and a page of docs/ left out of the nav all fail the build. The test builds into a temporary
directory, so the checkout gains no site/.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest
from docs_markdown import DOCS, ROOT, nav_pages, pages

pytestmark = pytest.mark.docs

MKDOCS = importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("material") is not None


@pytest.mark.subprocess
@pytest.mark.skipif(not MKDOCS, reason="mkdocs / mkdocs-material are not installed: pip install -e '.[dev]'")
def test_the_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-4000:]}"
    assert (site / "index.html").is_file() and (site / "board" / "index.html").is_file()
    # the hook serves the published board with the site, so the pages' ../results/ links resolve
    assert (site / "results" / "index.html").is_file() and (site / "results" / "extrapolation.png").is_file()
    shutil.rmtree(site)


@pytest.mark.subprocess
@pytest.mark.skipif(not MKDOCS, reason="mkdocs / mkdocs-material are not installed: pip install -e '.[dev]'")
def test_a_broken_link_fails_the_build(tmp_path):
    """The strict build is not vacuous: a copy of the docs with one broken link, one broken anchor
    and one page outside the nav fails, naming each."""
    work = tmp_path / "repo"
    shutil.copytree(DOCS, work / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "mkdocs.yml", work / "mkdocs.yml")
    (work / "results").mkdir()
    (work / "docs" / "hooks" / "results.py").write_text(
        (DOCS / "hooks" / "results.py").read_text())  # its ROOT is the copy's, results/ empty there
    index = work / "docs" / "index.md"
    index.write_text(index.read_text() + "\n[a](no-such-page.md) [b](board.md#no-such-anchor)\n")
    (work / "docs" / "stray.md").write_text("# stray\n")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=work, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode != 0
    for needle in ("no-such-page.md", "#no-such-anchor", "stray.md", "results/index.html"):
        assert needle in proc.stderr, f"{needle!r} not reported:\n{proc.stderr[-4000:]}"


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    """What the strict build checks, also where mkdocs is not installed."""
    on_disk = {p.relative_to(DOCS).as_posix() for p in pages()}
    nav = nav_pages()
    assert len(nav) == len(set(nav)), f"a page is twice in mkdocs.yml's nav: {nav}"
    assert not set(nav) - on_disk, f"mkdocs.yml's nav names pages that do not exist: {sorted(set(nav) - on_disk)}"
    assert not on_disk - set(nav), f"pages missing from mkdocs.yml's nav: {sorted(on_disk - set(nav))}"


def test_design_doc_stays_where_its_test_reads_it():
    assert "DESIGN.md" in nav_pages() and (DOCS / "DESIGN.md").is_file()


def test_no_prose_line_is_longer_than_110_characters():
    """Hard-wrapped pages (ruff's line length); a table row cannot be wrapped and is exempt."""
    long = [f"{p.relative_to(ROOT)}:{i}" for p in pages() for i, line in enumerate(p.read_text().split("\n"), 1)
            if len(line) > 110 and not line.startswith("|")]
    assert not long, f"lines over 110 characters (rewrap them): {long}"


def test_the_dev_extra_installs_the_site_tools():
    line = re.search(r"^dev = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert line, "pyproject.toml has no one-line `dev = [...]` extra"
    dev = re.findall(r'"([^"]+)"', line.group(1))
    names = {re.split(r"[<>=\[ ]", d, maxsplit=1)[0] for d in dev}
    assert {"mkdocs", "mkdocs-material"} <= names, f"pyproject's [dev] extra lacks mkdocs / mkdocs-material: {dev}"


def test_the_built_site_is_ignored_by_git():
    assert "site/" in (ROOT / ".gitignore").read_text().split()
