"""Reading the checked parts of the Markdown pages: marked tables and marked blocks.

A checked table follows a marker comment on the line before its header, e.g.
``<!-- keys: model -->``; a checked block lies between ``<!-- NAME: KEY -->`` and ``<!-- /NAME -->``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def marker_keys(text: str, name: str) -> list[str]:
    """The KEYs of every ``<!-- NAME: KEY -->`` marker in `text`, in order."""
    return [m.group(1).strip() for m in re.finditer(rf"<!-- {re.escape(name)}: (.*?) -->", text)]


def table_after(text: str, marker: str) -> list[dict[str, str]]:
    """The rows of the Markdown table right after `marker` (a whole line), as header → cell text.

    Raises AssertionError naming the marker when it is missing or not followed by a table."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == marker]
    assert len(starts) == 1, f"expected one line {marker!r}, found {len(starts)}"
    body = []
    for line in lines[starts[0] + 1:]:
        if not line.startswith("|"):
            break
        body.append(line)
    assert len(body) >= 2 and set(body[1].replace("|", "").strip()) <= set("-: "), \
        f"{marker!r} is not followed by a Markdown table"
    header = split_row(body[0])
    rows = [split_row(line) for line in body[2:]]
    for row in rows:
        assert len(row) == len(header), f"a row of the table after {marker!r} has {len(row)} cells, not {len(header)}: {row}"
    return [dict(zip(header, row, strict=True)) for row in rows]


def split_row(line: str) -> list[str]:
    """The cells of one Markdown table row (no escaped pipes in the checked tables)."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def block(text: str, name: str, key: str) -> str:
    """The text between ``<!-- NAME: KEY -->`` and the next ``<!-- /NAME -->``, whitespace collapsed."""
    start = f"<!-- {name}: {key} -->"
    assert text.count(start) == 1, f"expected one {start!r}, found {text.count(start)}"
    inner = text.split(start, 1)[1].split(f"<!-- /{name} -->", 1)
    assert len(inner) == 2, f"{start!r} has no closing <!-- /{name} -->"
    return " ".join(inner[0].split())


def code_spans(cell: str) -> list[str]:
    """The contents of every `code` span of a cell, in order."""
    return re.findall(r"`([^`]*)`", cell)


def pages() -> list[Path]:
    """Every Markdown page of the docs site."""
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)


def nav_pages() -> list[str]:
    """The pages named in mkdocs.yml's nav, relative to docs/, in order."""
    import yaml

    def walk(item):
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for value in item.values():
                yield from walk(value)
        elif isinstance(item, list):
            for value in item:
                yield from walk(value)

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    return list(walk(config["nav"]))
