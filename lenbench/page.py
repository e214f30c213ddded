"""The page, step 5 of the report path: `write_report` writes a report directory.

rows (`lenbench.results`) → statistics (`lenbench.stats`) → tables (`lenbench.tables`) → figures
(`lenbench.plots`) → page (this module). Nothing imports this module but the command line, the
pytest plugin (`conftest.py`) and `lenbench.publish`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lenbench.atomic import atomic_write_text
from lenbench.results import EXPECTED_SOURCES, ResultsError, load_results
from lenbench.tables import leaderboard, leaderboard_markdown, summary_markdown, to_csv_text

REPORT_FILES = ("results.csv", "leaderboard.csv", "leaderboard_wide.csv", "leaderboard.md", "summary.md")


def write_report(source: str | Path | pd.DataFrame, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write the report of a results source into `out_dir`, every file atomically.

    Files: ``results.csv`` (the tidy rows, re-loadable by `load_results`), ``leaderboard.csv``
    (`Leaderboard.long`), ``leaderboard_wide.csv`` (primary metric, encoding × length ratio per
    task), ``leaderboard.md``, ``summary.md`` (the README's tables, `summary_markdown`), and with `plots`: ``extrapolation.{png,svg}`` (metric against
    length), ``leaderboard_heatmap.{png,svg}`` and ``encodings/<name>.{png,svg}`` (the position
    heatmap of each registered encoding in the results whose pattern is fixed by its definition,
    see `lenbench.plots.has_fixed_pattern`). Rerunning on the same source rewrites
    identical files.

    Returns:
        The paths written, in that order.

    Raises:
        ResultsError: unreadable source, or a source without any rows.
    """
    df = load_results(source)
    if df.empty:
        raise ResultsError(f"{source if not isinstance(source, pd.DataFrame) else 'rows'}: no extrapolation rows to "
                           f"report; expected {EXPECTED_SOURCES} with at least one cell")
    out = Path(out_dir)
    board = leaderboard(df)
    written = [
        atomic_write_text(out / "results.csv", to_csv_text(df)),
        atomic_write_text(out / "leaderboard.csv", to_csv_text(board.long())),
        atomic_write_text(out / "leaderboard_wide.csv", to_csv_text(board.wide)),
        atomic_write_text(out / "leaderboard.md", leaderboard_markdown(board, df)),
        atomic_write_text(out / "summary.md", summary_markdown(board)),
    ]
    if plots:
        from lenbench import plots as lplots

        for suffix in ("png", "svg"):
            written.append(lplots.extrapolation_plot(df, out / f"extrapolation.{suffix}", board=board))
        for suffix in ("png", "svg"):
            written.append(lplots.leaderboard_heatmap(df, out / f"leaderboard_heatmap.{suffix}", board=board))
        from lenbench.encodings import ENCODINGS

        for encoding in [e for e in ENCODINGS.names() if e in set(df["encoding"]) and lplots.has_fixed_pattern(e)]:
            for suffix in ("png", "svg"):
                path = lplots.safe_encoding_heatmap(encoding, out / "encodings" / f"{encoding}.{suffix}")
                if path is not None:
                    written.append(path)
    return written
