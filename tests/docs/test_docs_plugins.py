"""The extension pages show the example plugins as they are in the repository: every code block
marked `<!-- example: PATH -->` equals that file (which tests/test_plugins.py runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[2]
MARKED = re.compile(r"<!-- example: (?P<path>\S+) -->\n(?P<indent> *)```\w*\n(?P<code>.*?)\n(?P=indent)```", re.S)


@pytest.mark.parametrize("page, expected", [
    ("add-encoding.md", {"examples/plugins/alibi_steep.py", "examples/plugins/suite.yaml",
                         "examples/plugins/test_alibi_steep.py"}),
    ("add-task.md", {"examples/plugins/running_max.py"}),
])
def test_the_pages_examples_are_the_repositorys_files(page, expected):
    text = (ROOT / "docs" / page).read_text()
    blocks = {m["path"]: (m["indent"], m["code"]) for m in MARKED.finditer(text)}
    assert set(blocks) == expected
    for path, (indent, code) in blocks.items():
        shown = "\n".join(line[len(indent):] for line in code.splitlines())
        assert shown.strip() == (ROOT / path).read_text().strip(), f"{page}: the copy of {path} differs from the file"
