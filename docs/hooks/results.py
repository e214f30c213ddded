"""MkDocs hook: the published board (`results/`) becomes part of the site, under `results/`.

The pages link to the board as `../results/...`, the path that is right in the repository (GitHub
renders docs/*.md with links relative to docs/). MkDocs only knows the files of `docs_dir`, so
`mkdocs build --strict` would call those links broken. This hook

- adds the board's page, figures and tables (`BOARD_FILES`, not the raw `cells/` and `bench.json`:
  tens of MB that no page links to) to the site's files at `results/<name>`, and
- rewrites a top-level page's `](../results/` links to `](results/`, so that MkDocs resolves them
  against those files: a link to a file the board lacks still fails the strict build.

Markdown files of the board (`leaderboard.md`, `summary.md`, `cost.md`) are not added: MkDocs would
take them for pages outside the nav. The pages quote what they need of them (checked by tests).
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
#: The board files the site serves: its page, its figures and its CSVs (relative to results/).
BOARD_FILES = tuple(f"{where}{pattern}" for where in ("", "catalog/")  # the quick board and the catalog
                    for pattern in ("*.html", "*.png", "*.svg", "*.csv", "encodings/*.png", "encodings/*.svg"))


def on_files(files: Files, config) -> Files:
    """Add the published board's files to the site at `results/<name>`."""
    for pattern in BOARD_FILES:
        for path in sorted(RESULTS.glob(pattern)):
            uri = "results/" + path.relative_to(RESULTS).as_posix()
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    """`../results/x` (the repository path from docs/) → `results/x` (the site path), top-level pages only."""
    if "/" in page.file.src_uri:
        return markdown
    return markdown.replace("](../results/", "](results/")
