"""docs/board.md quotes the published quick board's summary (results/summary.md) verbatim."""

from docs_markdown import DOCS, ROOT, block

SUMMARY = ROOT / "results" / "summary.md"


def test_the_board_page_quotes_the_published_summary_verbatim():
    quoted = block((DOCS / "board.md").read_text(), "summary", "results/summary.md verbatim")
    assert quoted == " ".join(SUMMARY.read_text().split()), \
        "docs/board.md's summary differs from results/summary.md: paste it between the summary markers"


def test_the_board_page_quotes_the_published_findings_verbatim():
    findings = (ROOT / "results" / "findings.md").read_text().split("\n", 2)[2]  # after "# What the board shows"
    quoted = block((DOCS / "board.md").read_text(), "findings", "results/findings.md verbatim")
    assert quoted == " ".join(findings.split()), \
        "docs/board.md's findings differ from results/findings.md: paste them between the findings markers"
