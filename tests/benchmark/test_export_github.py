"""`lenbench export-bench`: github-action-benchmark's customBiggerIsBetter / customSmallerIsBetter files
(`lenbench.benchmark.export_github`), checked against that format and the metric registry."""

import json
import math
from pathlib import Path

import pytest

from lenbench.benchmark.bench_json import cell_timing, dumps
from lenbench.benchmark.export_github import BIGGER, SMALLER
from lenbench.cli import main
from lenbench.metrics import METRICS, find_metric
from lenbench.results.bench_rows import TABLE, pack


def row(task, encoding, metric, ratio, value, seed, **extra):
    return {"cell_id": f"{task}-{encoding}-{seed}", "task": task, "encoding": encoding, "variant": "none",
            "train_len": 8, "eval_len": int(8 * ratio), "ratio": ratio, "metric": metric, "value": value,
            "seed": seed, "higher_is_better": METRICS[metric], **extra}


def cell(task, encoding, seed, rows, seconds=30.0):
    title = f"{task}-{encoding}-L8-s{seed}"
    info = {"cell_id": f"{task}-{encoding}-{seed}", "title": title, "status": "ok", "error": "", "train_seconds": 20.0,
            **cell_timing(seconds, "cache load")}
    return {"name": f"test_cell[{title}]", "fullname": f"bench/test_extrapolation.py::test_cell[{title}]",
            "group": "extrapolation", "extra_info": {TABLE: pack(rows), "lenbench_cell": info},
            "stats": {"min": seconds, "median": seconds, "rounds": 1, "stddev": 0}}


def bench_json(path: Path) -> Path:
    benches = []
    for seed in (0, 1):
        for enc in ("rope", "alibi"):
            benches.append(cell("copy", enc, seed, [
                row("copy", enc, "exact_match", 1.0, 1.0, seed), row("copy", enc, "exact_match", 2.0, 0.5 + seed / 10, seed),
                row("copy", enc, "token_accuracy", 2.0, 0.9, seed),  # secondary: not charted
                row("copy", "baseline:chance", "exact_match", 2.0, 0.0, seed),  # a baseline: not charted
                row("copy", enc, "exact_match", 4.0, math.nan if enc == "rope" and seed else 0.25, seed)]))
            benches.append(cell("lm", enc, seed, [row("lm", enc, "perplexity", 1.0, 4.0 + seed, seed),
                                                  row("lm", enc, "nll", 1.0, 1.4, seed)]))
    benches.append({"name": "test_kernel[rope-fused-T8-fp32]", "fullname": "bench/test_kernels.py::test_kernel[x]",
                    "group": "rotary", "extra_info": {"encoding": "rope", "kind": "rotary", "impl": "fused"},
                    "stats": {"min": 0.001, "median": 0.002, "rounds": 20, "stddev": 0.0001}})
    path.write_text(dumps({"machine_info": {}, "benchmarks": benches}))
    return path


def exported(tmp_path) -> dict[str, list[dict]]:
    assert main(["export-bench", str(bench_json(tmp_path / "bench.json")), "--out", str(tmp_path / "out")]) == 0
    return {name: json.loads((tmp_path / "out" / name).read_text()) for name in (BIGGER, SMALLER)}


def test_both_files_are_github_action_benchmark_custom_arrays(tmp_path):
    files = exported(tmp_path)
    for entries in files.values():
        assert isinstance(entries, list) and entries
        for e in entries:
            assert set(e) <= {"name", "unit", "value", "range", "extra"} and {"name", "unit", "value"} <= set(e)
            assert isinstance(e["name"], str) and isinstance(e["unit"], str)
            assert isinstance(e["value"], (int, float)) and not isinstance(e["value"], bool) and math.isfinite(e["value"])
            assert all(isinstance(e[k], str) for k in ("range", "extra") if k in e)
    names = [e["name"] for entries in files.values() for e in entries]
    assert len(names) == len(set(names))


def test_each_quality_entry_is_in_the_file_of_its_metrics_direction(tmp_path):
    files = exported(tmp_path)
    quality = {name: [e for e in entries if e["name"].startswith("quality ")] for name, entries in files.items()}
    assert quality[BIGGER] and quality[SMALLER]
    assert all(find_metric(e["unit"]).higher_is_better for e in quality[BIGGER])
    assert not any(find_metric(e["unit"]).higher_is_better for e in quality[SMALLER])
    assert all(not e["name"].startswith(("time ", "compute ")) for e in files[BIGGER])


def test_quality_is_the_mean_over_seeds_of_the_primary_metric_per_board_entry(tmp_path):
    by_name = {e["name"]: e for entries in exported(tmp_path).values() for e in entries}
    assert by_name["quality copy alibi L8 x2 exact_match"]["value"] == pytest.approx(0.55)
    assert by_name["quality copy alibi L8 x2 exact_match"]["extra"] == "mean over 2 seed(s)"
    assert by_name["quality lm rope L8 x1 perplexity"]["value"] == pytest.approx(4.5)
    assert "quality copy rope L8 x4 exact_match" not in by_name  # failed in one seed: no finite mean
    assert not any("token_accuracy" in n or "baseline" in n or " nll" in n for n in by_name)


def test_timings_are_kernels_fastest_round_and_each_cells_compute_time(tmp_path):
    by_name = {e["name"]: e for e in exported(tmp_path)[SMALLER]}
    kernel = by_name["time test_kernel[rope-fused-T8-fp32]"]
    assert (kernel["unit"], kernel["value"]) == ("ms", 1.0) and "median 2 ms" in kernel["extra"]
    compute = by_name["compute copy-rope-L8-s0"]
    assert (compute["unit"], compute["value"]) == ("s", 30.0) and "train 20.0 s" in compute["extra"]


@pytest.mark.parametrize("content", ["", "{}", '{"benchmarks": [1]}', '{"benchmarks": [{"name": "x", "extra_info": '
                                                                      '{"lenbench_table": {"format": 1}}}]}'])
def test_malformed_input_is_one_line_exit_2(tmp_path, capsys, content):
    source = tmp_path / "bad.json"
    source.write_text(content)
    assert main(["export-bench", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lenbench: error: ") and str(source) in err
    assert not (tmp_path / "out").exists()
