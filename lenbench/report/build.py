"""The report build: one load of the source, then every table, figure and the page from those frames.

`load_source` reads a results source once: its tidy rows (`lenbench.report.rows.load_results`),
and from its benchmark JSON (the source itself, or ``bench.json`` in a results directory) the
kernel timings and the training steps (`lenbench.report.timings`), once each.
`build_report` computes the leaderboard (`lenbench.report.tables`) and the cost tables
(`lenbench.report.cost`) from those frames, draws the figures (`lenbench.report.plots`, the
position patterns loaded by `lenbench.report.geometry` from the run directory) and renders the page
(`lenbench.report.page`). `write_report` is both in one call: what the command line (`lenbench
report`), the pytest plugin (`lenbench.benchmark.pytest_plugin`) and `lenbench.publish` call. Nothing in the report
package imports this module.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from lenbench.atomic import atomic_write_bytes, atomic_write_text
from lenbench.names import RULE, is_safe_name
from lenbench.report.claims import claims_markdown
from lenbench.report.cost import cost_markdown, cost_table, quality_cost_frame
from lenbench.report.figures import FIGURES, FORMATS, FigureInputs
from lenbench.report.findings import findings_markdown
from lenbench.report.formatting import to_csv_text
from lenbench.report.markdown import leaderboard_markdown, summary_markdown
from lenbench.report.page import Figure, render_page
from lenbench.report.rows import is_benchmark_json, load_results
from lenbench.report.tables import Leaderboard, leaderboard
from lenbench.report.timings import load_kernel_timings, load_training_steps
from lenbench.results.samples import gzipped, sample_frame
from lenbench.results.schema import EXPECTED_SOURCES, ResultsError

REPORT_FILES = ("results.csv", "samples.csv.gz", "leaderboard.csv", "leaderboard_wide.csv", "leaderboard.md", "summary.md", "findings.md",
                "learnability.csv", "claims.md")
COST_FILES = ("cost.csv", "cost.md")


def benchmark_json_of(source: str | Path | pd.DataFrame) -> Path | None:
    """The pytest-benchmark JSON behind a source: the source itself, or ``bench.json`` in a
    results directory; None for frames, CSVs and directories without one."""
    if isinstance(source, (pd.DataFrame, list)):
        return None
    path = Path(source)
    if path.is_dir():
        path = path / "bench.json"
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    try:
        return path if is_benchmark_json(json.loads(path.read_text(encoding="utf-8"))) else None
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True)
class ReportSource:
    """Everything a report is built from, read once.

    Attributes:
        name: how errors name the source (its path, or "rows" for frames and lists of rows).
        rows: the tidy results frame (`load_results`; empty for a kernel-only benchmark JSON).
        kernels: `load_kernel_timings` of the source's benchmark JSON, or None without one.
        steps: `load_training_steps` of it, or None without one.
        run_dir: the results directory when the source is one (the position patterns read its
            cells and checkpoints), else None.
    """

    name: str
    rows: pd.DataFrame
    kernels: pd.DataFrame | None = None
    steps: pd.DataFrame | None = None
    run_dir: Path | None = None

    def cost(self) -> pd.DataFrame | None:
        """`lenbench.report.cost.cost_table` of the kernel timings, or None without any."""
        if self.kernels is None:
            return None
        cost = cost_table(self.kernels, self.steps)
        return cost if len(cost) else None


def load_source(source: str | Path | pd.DataFrame, *, cell_ids: Iterable[str] | None = None,
                benchmark_json: str | Path | None = None) -> ReportSource:
    """Read a results source once (module docstring); of a results directory, only the cells
    `cell_ids` when given (`load_results`).

    Args:
        source: a results directory, a tidy CSV, a benchmark JSON or rows.
        cell_ids: of a results directory, only these cells.
        benchmark_json: the kernel timings and training steps from this pytest-benchmark JSON
            instead of the source's own (`benchmark_json_of`): `pytest bench --benchmark-json X`
            reports its results directory's cells with the timings of X, wherever X lies.

    Raises:
        ResultsError: an unreadable source (`load_results`) or `benchmark_json`.
    """
    rows = load_results(source, cell_ids=cell_ids)
    bench = Path(benchmark_json) if benchmark_json is not None else benchmark_json_of(source)
    kernels = load_kernel_timings(bench) if bench is not None else None
    steps = load_training_steps(bench) if bench is not None else None
    run_dir = None if isinstance(source, (pd.DataFrame, list)) else Path(source)
    run_dir = run_dir if run_dir is not None and run_dir.is_dir() else None
    return ReportSource(str(source) if not isinstance(source, pd.DataFrame) else "rows", rows, kernels, steps, run_dir)


def write_report(source: str | Path | pd.DataFrame, out_dir: str | Path, *, plots: bool = True,
                 page: bool = True, cell_ids: Iterable[str] | None = None,
                 benchmark_json: str | Path | None = None, notes: Callable[[str], None] | None = None,
                 note: str = "") -> list[Path]:
    """Write the report of a results source into `out_dir`, every file atomically: `build_report`
    of `load_source(source, cell_ids=cell_ids, benchmark_json=benchmark_json)`, its `notes` and `note` too.

    Returns:
        The paths written, in order (`build_report`).

    Raises:
        ResultsError: unreadable source, or a source without any rows or kernel timings.
    """
    return build_report(load_source(source, cell_ids=cell_ids, benchmark_json=benchmark_json), out_dir,
                        plots=plots, page=page, notes=notes, note=note)


def build_report(src: ReportSource, out_dir: str | Path, *, plots: bool = True, page: bool = True,
                 notes: Callable[[str], None] | None = None, note: str = "") -> list[Path]:
    """Write the report of a loaded source into `out_dir`, every file atomically; `notes` is told,
    one line each, of a figure left out that the user can get (a plugin encoding's position pattern
    without its plugin: `lenbench.report.geometry.unregistered_encodings`), and its caption says so;
    `note` is the suite's note (`lenbench.config.Suite.note`: a smoke suite's says its models are not
    expected to learn), first in ``summary.md`` and ``leaderboard.md``.

    Files, from the extrapolation rows: ``results.csv`` (the tidy rows, re-loadable by
    `load_results`), ``samples.csv.gz`` (its per-sample scores, one row per sample, gzipped:
    `lenbench.results.samples.sample_frame`), ``leaderboard.csv`` (`Leaderboard.long`), ``leaderboard_wide.csv`` (primary
    metric, encoding × length ratio per task), ``leaderboard.md``, ``summary.md`` (the tables
    docs/board.md quotes, `summary_markdown`), ``findings.md`` (what each board shows, in sentences
    read off its numbers: `lenbench.report.findings`), ``learnability.csv`` (each seed's verdict at
    1×, `Leaderboard.seeds`), ``claims.md`` (the papers' claims judged by the board's paired test,
    `lenbench.report.claims`), and with `plots`: ``extrapolation.{png,svg,pdf}``
    (metric against length), ``leaderboard_heatmap.{png,svg,pdf}`` and ``encodings/<name>.{png,svg,pdf}`` (the position
    pattern of each registered encoding in the results that can be drawn,
    `lenbench.report.geometry.encoding_patterns`, except a trainable one without its checkpoint
    and an all-zero one such as `nope`'s: `lenbench.report.plots.geometry.pattern_left_out`). From the kernel timings of a benchmark JSON (the
    source, or ``bench.json`` in a results directory; a kernel-only JSON is enough):
    ``cost.csv`` / ``cost.md`` (`lenbench.report.cost.cost_table`), with `plots` ``cost.{png,svg,pdf}``,
    and when both halves exist ``quality_cost.{png,svg,pdf}``. Where the rows hold bucketed
    measurements: ``position_loss.{png,svg,pdf}`` (lm loss by position) and ``needle_depth.{png,svg,pdf}``
    (passkey depth × length). With `page`: ``index.html`` (`lenbench.report.page`), every figure
    with its caption (the ``CAPTION`` of its plot module and the panels it left out). Rerunning on
    the same source rewrites identical files.

    Returns:
        The paths written, in that order.

    Raises:
        ResultsError: a source without any rows or kernel timings.
    """
    df = src.rows
    cost = src.cost()
    if df.empty and cost is None:
        raise ResultsError(f"{src.name}: no extrapolation rows to report and no kernel timings; expected "
                           f"{EXPECTED_SOURCES} with at least one cell, or a benchmark JSON of bench/test_kernels.py")
    out = Path(out_dir)
    board = leaderboard(df) if not df.empty else None
    written: list[Path] = []
    figures: dict[str, Figure] = {}
    points = quality_cost_frame(board, cost) if board is not None and cost is not None else None
    if board is not None:
        long = board.long()
        written += [
            atomic_write_text(out / "results.csv", to_csv_text(df)),
            atomic_write_bytes(out / "samples.csv.gz", gzipped(to_csv_text(sample_frame(df)))),
            atomic_write_text(out / "leaderboard.csv", to_csv_text(long)),
            atomic_write_text(out / "leaderboard_wide.csv", to_csv_text(board.wide)),
            atomic_write_text(out / "leaderboard.md", leaderboard_markdown(board, df, note=note)),
            atomic_write_text(out / "summary.md", summary_markdown(board, note=note)),
            atomic_write_text(out / "findings.md", findings_markdown(long)),
            atomic_write_text(out / "learnability.csv", to_csv_text(board.seeds)),
            atomic_write_text(out / "claims.md", claims_markdown(board, regime=_regime_writer(src))),
        ]
    if plots and board is not None:
        written += _result_figures(src, board, out, figures, notes or (lambda line: None))
    if cost is not None:
        written += [atomic_write_text(out / "cost.csv", to_csv_text(cost)),
                    atomic_write_text(out / "cost.md", cost_markdown(cost))]
        if plots:
            written += _draw_figures("cost", FigureInputs(df, board, cost, points), out, figures)
    if page:
        written.append(atomic_write_text(out / "index.html", render_page(board, df, cost, figures)))
    return written


def _regime_writer(src: ReportSource):
    """`lenbench.report.regimes.regime_writer` of the source's rows and the cells beside them: a results
    directory's ``cells/``, or those of the directory a benchmark JSON lies in."""
    from lenbench.report import regimes

    cells = src.run_dir / "cells" if src.run_dir is not None else None
    if cells is None and src.name.endswith(".json") and Path(src.name).is_file():
        cells = Path(src.name).parent / "cells"
    return regimes.regime_writer(src.rows, cells)


def _draw_figures(source: str, inputs: FigureInputs, out: Path, figures: dict[str, Figure]) -> list[Path]:
    """Every figure of `lenbench.report.figures.FIGURES` drawn from `source` that `inputs` can
    draw, in each format; adds each to `figures` (title → its PNG and caption, with what it left out)."""
    from lenbench.report.plots._style import left_out_note

    written: list[Path] = []
    for spec in FIGURES:
        if spec.source != source or not spec.available(inputs):
            continue
        written += [spec.render(inputs, out / f"{spec.stem}.{fmt}") for fmt in FORMATS]
        figures[spec.title] = Figure((out / f"{spec.stem}.{FORMATS[0]}",),
                                     spec.caption_text() + left_out_note(spec.panels_left_out(inputs)))
    return written


def _result_figures(src: ReportSource, board: Leaderboard, out: Path, figures: dict[str, Figure],
                    notes: Callable[[str], None]) -> list[Path]:
    """The figures of the extrapolation rows, each as PNG, SVG and PDF; adds them to `figures` (title →
    `Figure`: the PNGs and the caption, the plot module's ``CAPTION`` and what it left out).
    Position patterns are drawn only for encodings with something to show
    (`lenbench.report.plots.geometry.pattern_left_out`): not a trainable one without its checkpoint,
    nor an encoding no loaded plugin registers (`lenbench.report.geometry.unregistered_encodings`:
    one line to `notes` each, naming the ``--plugin`` that draws it)."""
    from lenbench.report import geometry
    from lenbench.report.plots import geometry as geometry_plot
    from lenbench.report.plots._style import left_out_note

    df = src.rows
    written = _draw_figures("rows", FigureInputs(df, board), out, figures)
    drawn: list[Path] = []
    skipped = geometry.unregistered_encodings(df, src.run_dir)  # a plugin's, without it: said, never silent
    for encoding, reason in skipped.items():
        notes(f"figure encodings/{encoding}.{FORMATS[0]} not drawn: {reason}")
    for encoding, pattern in geometry.encoding_patterns(df, src.run_dir).items():
        if not is_safe_name(encoding):  # never a path outside encodings/ (rows are data anyone can write)
            skipped[encoding] = f"its name is not a safe file name ({RULE})"
            continue
        reason = geometry_plot.pattern_left_out(pattern)
        if reason is not None:
            skipped[encoding] = reason
            continue
        for suffix in FORMATS:
            path = geometry_plot.safe_encoding_heatmap(pattern.matrix, out / "encodings" / f"{encoding}.{suffix}",
                                                       title=pattern.title, note=pattern.note)
            if path is not None:
                written.append(path)
                if suffix == FORMATS[0]:
                    drawn.append(path)
    if drawn or skipped:
        figures["position patterns"] = Figure(tuple(drawn), geometry_plot.CAPTION + left_out_note(skipped))
    return written
