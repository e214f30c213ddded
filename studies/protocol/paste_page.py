"""Write docs/catalog.md from the republication's draft (catalog-page.md) and the published catalog.

    python studies/protocol/paste_page.py [--results results/catalog] [--out docs/catalog.md]

The draft's two verbatim blocks get the published board's text: the findings (results/catalog/findings.md
without its title) and the claims' bullets (results/catalog/claims.md after its intro), as
tests/docs/test_docs_catalog_page.py checks them. The draft's header comment is dropped. The ⟨…⟩ places
the draft leaves for measurements are kept, and each is printed with its line number, so the page is not
finished until none is left. Exits 2 with one line when an input is missing or a marker is not in the draft.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DRAFT = Path(__file__).resolve().parent / "catalog-page.md"
FINDINGS = "<!-- findings: results/catalog/findings.md verbatim -->"
CLAIMS = "<!-- claims: results/catalog/claims.md verbatim -->"


def page(draft: str, findings: str, claims: str) -> str:
    """The page: the draft from its title on, each ⟨paste⟩ after a verbatim marker replaced by its text."""
    body = draft[draft.index("# What the catalog shows"):]
    findings_body = findings[findings.index("\n\n") + 2:].rstrip("\n")  # below "# What the board shows"
    bullets = claims[claims.index("\n- ") + 1:].rstrip("\n")  # the bullets after the intro
    for marker, text in ((FINDINGS, f"{findings_body}\n"), (CLAIMS, f"\n{bullets}\n\n")):
        slot = f"{marker}\n⟨paste⟩\n"
        if slot not in body:
            raise ValueError(f"the draft has no '{marker}' followed by ⟨paste⟩")
        body = body.replace(slot, f"{marker}\n{text}")
    return body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results" / "catalog")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "catalog.md")
    args = parser.parse_args(argv)
    try:
        text = page(DRAFT.read_text(), (args.results / "findings.md").read_text(),
                    (args.results / "claims.md").read_text())
    except (OSError, ValueError) as exc:
        print(f"paste_page: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(text)
    left = [(i, line) for i, line in enumerate(text.splitlines(), 1) if "⟨" in line]
    for i, line in left:
        print(f"{args.out}:{i}: to fill: {line.strip()[:100]}")
    print(f"wrote {args.out}; {len(left)} place(s) left to fill")
    return 0


if __name__ == "__main__":
    sys.exit(main())
