"""The report is built from one load of its source: rows once, kernel timings once, training steps
once; every table, figure and the page then come from those frames (`lenbench.report.build`)."""

from collections import Counter

import pytest
from test_page import KERNELS
from test_results import bench_json, tiny_rows

from lenbench.report import build, rows
from lenbench.report.build import ReportSource, build_report, load_source, write_report
from lenbench.report.rows import empty_frame
from lenbench.report.schema import ResultsError


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
