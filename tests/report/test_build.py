"""The report is built from one load of its source: rows once, kernel timings once, training steps
once; every table, figure and the page then come from those frames (`lenbench.report.build`)."""

from collections import Counter

import pytest
from test_page import KERNELS
from test_results import bench_json, tiny_rows

from lenbench.report import build, rows
from lenbench.report.build import ReportSource, build_report, load_source, write_report
from lenbench.report.rows import empty_frame
from lenbench.results.schema import ResultsError


@pytest.mark.slow
def test_write_report_reads_its_source_once(tmp_path, monkeypatch):
    source = bench_json(tmp_path / "bench.json", tiny_rows(seeds=(0, 1)), KERNELS)
    calls: Counter = Counter()

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(rows, "normalize", counting("normalize", rows.normalize))  # every load_results ends here
    for name in ("load_results", "load_kernel_timings", "load_training_steps"):
        monkeypatch.setattr(build, name, counting(name, getattr(build, name)))
    written = {p.name for p in write_report(source, tmp_path / "out")}
    assert {"extrapolation.png", "leaderboard_heatmap.svg", "cost.png", "quality_cost.svg", "index.html"} <= written
    assert calls == {"load_results": 1, "normalize": 1, "load_kernel_timings": 1, "load_training_steps": 1}


def test_a_source_loaded_once_builds_the_same_report_as_the_file(tmp_path):
    source = bench_json(tmp_path / "bench.json", tiny_rows(seeds=(0, 1)), KERNELS)
    from_file = write_report(source, tmp_path / "a", plots=False)
    loaded = load_source(source)
    assert loaded.run_dir is None and loaded.name == str(source) and len(loaded.kernels) and len(loaded.steps)
    in_memory = ReportSource("rows", loaded.rows.copy(), loaded.kernels.copy(), loaded.steps.copy())
    from_frames = build_report(in_memory, tmp_path / "b", plots=False)
    assert [p.name for p in from_frames] == [p.name for p in from_file]
    for a, b in zip(from_file, from_frames, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_a_source_without_rows_or_timings_is_a_one_line_error(tmp_path):
    with pytest.raises(ResultsError, match=r"^nothing: no extrapolation rows to report and no kernel timings; "):
        build_report(ReportSource("nothing", empty_frame()), tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_the_figures_written_are_the_declared_list(tmp_path, monkeypatch):
    """`lenbench.report.figures.FIGURES` is the one figure list: the build draws exactly the
    declared figures the source can draw, in that order, the page shows each under its title, and a
    publication may hold exactly their files. A figure added to the list is drawn with no other edit
    (one declared in a new plot module joins the list by itself: tests/test_extension.py)."""
    import importlib

    from lenbench import publication
    from lenbench.report import figures
    from lenbench.report.figures import FIGURES, FigureSpec

    for spec in FIGURES:  # every declared name resolves in its plot module
        module = importlib.import_module(f"lenbench.report.plots.{spec.module}")
        for name in (spec.draw, spec.caption, spec.left_out, spec.needs):
            assert not name or callable(getattr(module, name)) or isinstance(getattr(module, name), str), (spec, name)
    source = bench_json(tmp_path / "bench.json", tiny_rows(seeds=(0, 1)), KERNELS)
    out = tmp_path / "out"
    written = [p.relative_to(out).as_posix() for p in write_report(source, out, page=False)]
    figure_files = [n for n in written if n.rsplit(".", 1)[-1] in figures.FORMATS and "/" not in n]
    drawn = list(dict.fromkeys(n.rsplit(".", 1)[0] for n in figure_files))
    assert drawn == ["extrapolation", "leaderboard_heatmap", "cost", "quality_cost"]  # no bucketed rows here
    assert set(figure_files) <= publication.published_names()
    assert figures.figure_files() <= publication.published_names()

    toy = FigureSpec("toy_figure", "a toy figure", "cost", "cost_figure", order=70, caption="COST_CAPTION", module="cost")
    monkeypatch.setattr(figures, "FIGURES", (*FIGURES, toy))
    monkeypatch.setattr(build, "FIGURES", figures.FIGURES)
    written = [p.name for p in write_report(source, tmp_path / "toy")]
    assert written.index("toy_figure.png") > written.index("quality_cost.svg")
    assert "a toy figure" in (tmp_path / "toy" / "index.html").read_text()
