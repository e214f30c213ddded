"""docs/DESIGN.md's layout names every module of the package, and only modules that exist."""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "DESIGN.md"
PACKAGE = ROOT / "lenbench"


def layout_paths(text: str) -> set[str]:
    """Package-relative paths named in the layout block: a `name/` line opens a folder for the
    lines indented below it; each `x.py` token on a line is a module of the current folder."""
    block = text.split("<!-- layout", 1)[1].split("```", 2)[1]
    paths, stack = set(), []  # stack of (indent, folder)
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        folder = "".join(f for _, f in stack)
        first = line.split()[0]
        if first.endswith("/") and not first.endswith("*.yaml"):
            stack.append((indent, first))
            continue
        # tokens before the description: the leading run of words that look like file names
        for token in line.split():
            if token.endswith(".py"):
                paths.add(folder + token)
            elif not re.fullmatch(r"[\w*./]+", token):
                break
    return paths


def test_every_module_named_in_the_layout_exists():
    missing = sorted(p for p in layout_paths(DESIGN.read_text()) if not (PACKAGE / p).is_file())
    assert not missing, f"docs/DESIGN.md names modules that do not exist: {missing}"


def test_every_module_of_the_package_is_in_the_layout():
    named = layout_paths(DESIGN.read_text())
    modules = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")}
    unnamed = sorted(modules - named - {"__main__.py"})
    assert not unnamed, f"docs/DESIGN.md's layout does not name: {unnamed}"


def test_the_parser_reads_nesting():
    text = "<!-- layout -->\n```\na.py  top\nsub/  a folder\n  b.py c.py   two\n  inner/\n    d.py  deep\ne.py  back\n```\n"
    assert layout_paths(text) == {"a.py", "sub/b.py", "sub/c.py", "sub/inner/d.py", "e.py"}


def test_the_docstrings_cite_a_design_doc_that_exists():
    citing = [p for p in PACKAGE.rglob("*.py") if "DESIGN.md" in p.read_text()]
    assert citing and DESIGN.is_file()
