"""studies/protocol/paste_page.py: the republished catalog page is the draft with the published board's
findings and claims pasted where tests/docs/test_docs_catalog_page.py looks for them."""

from pathlib import Path

import pytest
from lenbench_testing import load_script

ROOT = Path(__file__).resolve().parents[2]
paste = load_script(ROOT / "studies" / "protocol" / "paste_page.py")

DRAFT = f"""<!-- a note for the editor -->
# What the catalog shows

Prose ⟨a measurement⟩.

{paste.FINDINGS}
⟨paste⟩
<!-- /findings -->

{paste.CLAIMS}
⟨paste⟩
<!-- /claims -->
"""
FINDINGS = "# What the board shows\n\nPer board: the intro.\n\n## sort\n\n- learned at 1×: 2 of 8\n"
CLAIMS = "# The papers' claims on this board\n\nThe intro.\n\n- **A** (X 2025): a claim. **agrees**.\n- **B**: **mixed**.\n"


def test_the_blocks_are_the_published_text_and_the_places_to_fill_stay():
    out = paste.page(DRAFT, FINDINGS, CLAIMS)
    assert out.startswith("# What the catalog shows"), "the editor's note is dropped"
    assert f"{paste.FINDINGS}\nPer board: the intro.\n\n## sort\n\n- learned at 1×: 2 of 8\n<!-- /findings -->" in out
    assert f"{paste.CLAIMS}\n\n- **A** (X 2025): a claim. **agrees**.\n- **B**: **mixed**.\n\n<!-- /claims -->" in out
    assert "⟨paste⟩" not in out and "⟨a measurement⟩" in out


def test_a_draft_without_a_block_is_refused():
    with pytest.raises(ValueError, match="claims"):
        paste.page(DRAFT.replace(f"{paste.CLAIMS}\n⟨paste⟩", paste.CLAIMS), FINDINGS, CLAIMS)


def test_the_command_names_a_missing_input_and_exits_2(tmp_path, capsys):
    assert paste.main(["--results", str(tmp_path), "--out", str(tmp_path / "page.md")]) == 2
    assert "findings.md" in capsys.readouterr().err and not (tmp_path / "page.md").exists()


def test_the_committed_draft_has_both_blocks_to_paste():
    draft = paste.DRAFT.read_text()
    assert f"{paste.FINDINGS}\n⟨paste⟩\n" in draft and f"{paste.CLAIMS}\n⟨paste⟩\n" in draft
