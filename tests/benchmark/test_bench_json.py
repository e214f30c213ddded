"""The benchmark JSON as lenbench writes it (`lenbench.benchmark.bench_json`): a cell's stats are its
compute time, the compact layout, and `lenbench slim-bench` on an earlier file."""

import json
import math

import pytest
from pytest_benchmark.stats import Stats

from lenbench.benchmark.bench_json import CELL_TIMED, cell_timing, dumps, one_round_stats, slim, time_cells
from lenbench.cli import main
from lenbench.report.rows import load_results
from lenbench.results.bench_rows import LEGACY, TABLE, cell_rows


def row(cell_id: str, ratio: float, value: float) -> dict:
    return {"cell_id": cell_id, "task": "copy", "encoding": "rope", "variant": "none", "train_len": 8,
            "eval_len": int(8 * ratio), "ratio": ratio, "metric": "exact_match", "value": value, "seed": 0,
            "settings": "train: steps=2", "git_sha": "abc"}


def legacy_json() -> dict:
    """A file as lenbench 0.1 wrote it: rows as dicts, the stats of a 5 ms cache read."""
    cell = {"cell_id": "c1", "title": "copy-rope-L8-s0", "status": "ok", "error": "", "train_seconds": 20.0,
            "reused": False, "timed": "cache load", "computed_by": "process"}
    read = {"min": 0.005, "max": 0.005, "mean": 0.005, "median": 0.005, "stddev": 0, "rounds": 1, "data": [0.005]}
    kernel = {"name": "test_kernel[rope-fused-T8-fp32]", "fullname": "bench/test_kernels.py::test_kernel[x]",
              "group": "rotary", "extra_info": {"encoding": "rope", "kind": "rotary", "impl": "fused"},
              "stats": {"min": 0.001, "median": 0.002, "rounds": 20, "stddev": 0.0001}}
    return {"machine_info": {"cpu": {"flags": ["avx2", "fma"]}}, "benchmarks": [
        {"name": "test_cell[copy-rope-L8-s0]", "fullname": "bench/test_extrapolation.py::test_cell[copy-rope-L8-s0]",
         "group": "extrapolation-tiny", "extra_info": {LEGACY: [row("c1", 1.0, 1.0), row("c1", 2.0, 0.5)],
                                                       "lenbench_cell": cell}, "stats": read}, kernel]}


def test_one_round_stats_are_pytest_benchmarks_own():
    stats = Stats()
    stats.update(23.5)
    ours = one_round_stats(23.5)
    assert {k: v for k, v in ours.items() if k not in ("data", "iterations")} == stats.as_dict()
    assert (ours["data"], ours["iterations"]) == ([23.5], 1)  # what pytest-benchmark's JSON adds to them


def test_a_cells_stats_become_its_recorded_compute_time():
    data = legacy_json()
    data["benchmarks"][0]["extra_info"]["lenbench_cell"].update(cell_timing(42.0, "cache load"))
    time_cells(data)
    cell = data["benchmarks"][0]
    assert cell["stats"] == one_round_stats(42.0) and cell["stats"]["median"] == 42.0 != 0.005
    assert cell["extra_info"]["lenbench_cell"]["timed"] == CELL_TIMED
    assert data["benchmarks"][1]["stats"]["median"] == 0.002  # a kernel's stats are its own


def test_a_cell_without_a_recorded_time_keeps_its_round_and_says_so():
    assert cell_timing(math.nan, "cache load") == {"seconds": None, "round": "cache load", "timed": "cache load"}
    data = slim(legacy_json())
    cell = data["benchmarks"][0]
    assert cell["stats"]["median"] == 0.005 and cell["extra_info"]["lenbench_cell"]["timed"] == "cache load"


def test_slim_packs_the_rows_and_times_cells_from_their_cell_files(tmp_path):
    old = legacy_json()
    new = slim(old, {"c1": 42.0})
    assert old == legacy_json()  # the input is left as it was
    extra = new["benchmarks"][0]["extra_info"]
    assert LEGACY not in extra and cell_rows(extra) == old["benchmarks"][0]["extra_info"][LEGACY]
    assert new["benchmarks"][0]["stats"]["median"] == 42.0
    info = extra["lenbench_cell"]
    assert (info["seconds"], info["round"], info["timed"]) == (42.0, "cache load", CELL_TIMED)
    assert new["benchmarks"][1] == old["benchmarks"][1]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(old))
    b.write_text(dumps(new))
    assert load_results(a).equals(load_results(b))
    assert slim(new, {"c1": 1.0}) == new  # converting twice changes nothing


def test_the_layout_is_the_same_json_with_one_line_per_row():
    data = slim(legacy_json(), {"c1": 42.0})
    text = dumps(data)
    assert json.loads(text) == data
    lines = text.splitlines()
    table = data["benchmarks"][0]["extra_info"][TABLE]
    for values in table["blocks"][0]["data"]:
        assert any(line.strip().rstrip(",") == json.dumps(values) for line in lines)
    assert any(line.strip() == '"flags": ["avx2", "fma"]' for line in lines)
    assert dumps({"nan": math.nan, "empty": [], "obj": {}}) == '{\n "nan": NaN,\n "empty": [],\n "obj": {}\n}\n'


def test_slim_bench_command_converts_and_reads_cell_times_beside_it(tmp_path, capsys):
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "c1.json").write_text(json.dumps({"cell_id": "c1", "rows": [row("c1", 1.0, 1.0)],
                                                             "seconds": 42.0}))
    source = tmp_path / "bench.json"
    source.write_text(json.dumps(legacy_json(), indent=4))
    assert main(["slim-bench", str(source), str(source)]) == 0
    assert "bytes" in capsys.readouterr().out
    data = json.loads(source.read_text())
    assert data["benchmarks"][0]["stats"]["median"] == 42.0 and TABLE in data["benchmarks"][0]["extra_info"]


@pytest.mark.parametrize("content", ["", "[1, 2]", '{"benchmarks": {}}',
                                     '{"benchmarks": [{"name": "x", "extra_info": {"lenbench_rows": "rows"}}]}'])
def test_slim_bench_on_malformed_input_is_one_line_exit_2(tmp_path, capsys, content):
    source = tmp_path / "bad.json"
    source.write_text(content)
    assert main(["slim-bench", str(source), str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lenbench: error: ") and str(source) in err
    assert not (tmp_path / "out.json").exists()


def test_slim_bench_with_cells_that_are_not_there_is_one_line_exit_2(tmp_path, capsys):
    source = tmp_path / "bench.json"
    source.write_text(json.dumps(legacy_json()))
    assert main(["slim-bench", str(source), str(tmp_path / "out.json"), "--cells", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--cells" in err and not (tmp_path / "out.json").exists()
