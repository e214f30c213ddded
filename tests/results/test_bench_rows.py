"""A cell's rows in a benchmark JSON (`lenbench.results.bench_rows`): packed rows read back as the same
rows, and a file of either form loads to the same frame."""

import copy
import json
import math
from pathlib import Path

import pytest

from lenbench.report.rows import load_results
from lenbench.results.bench_rows import LEGACY, TABLE, cell_rows, is_cell_benchmark, pack, unpack
from lenbench.results.schema import ResultsError

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "results" / "bench.json"


def rows() -> list[dict]:
    base = {"cell_id": "c1", "task": "copy", "encoding": "rope", "train_len": 8, "seed": 0, "settings": "s",
            "metric": "exact_match", "higher_is_better": True, "status": "ok", "error": ""}
    return [
        {**base, "variant": "none", "eval_len": 8, "ratio": 1.0, "value": 1.0, "bucket": "", "sample_scores": "1 1"},
        {**base, "variant": "none", "eval_len": 16, "ratio": 2.0, "value": 0.5, "bucket": "", "sample_scores": "1 0"},
        {**base, "variant": "none", "eval_len": 32, "ratio": 4.0, "value": math.nan, "status": "failed",
         "error": "ValueError: past max_len", "bucket": ""},  # no sample_scores: a new block
        {**base, "encoding": "baseline:chance", "variant": "none", "eval_len": 8, "ratio": 1.0, "value": 1},  # an int
    ]


def same(a: list[dict], b: list[dict]) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # NaN == NaN, 1 != 1.0


def test_packed_rows_read_back_as_the_same_rows():
    table = pack(rows())
    assert same(unpack(table), rows())
    assert table["same"]["settings"] == "s" and "value" not in table["same"]  # shared values once
    assert len(table["blocks"]) == 3  # the columns change at the failed row and at the baseline
    assert unpack(pack([])) == []


def test_values_equal_only_as_stored_stay_per_row():
    """1, 1.0 and True are different JSON values: none is hoisted as shared."""
    mixed = [{"task": "t", "value": 1}, {"task": "t", "value": 1.0}, {"task": "t", "value": True}]
    table = pack(mixed)
    assert "value" not in table["same"] and same(unpack(table), mixed)
    assert [type(r["value"]) for r in unpack(table)] == [int, float, bool]


def benchmark_json(form: str, cells: dict[str, list[dict]]) -> dict:
    extra = (lambda rs: {LEGACY: rs}) if form == "legacy" else (lambda rs: {TABLE: pack(rs)})
    return {"machine_info": {}, "benchmarks": [
        {"name": f"test_cell[{c}]", "fullname": f"test_cell[{c}]", "group": None, "extra_info": extra(rs),
         "stats": {"median": 1.0}} for c, rs in cells.items()]}


@pytest.mark.slow
@pytest.mark.skipif(not PUBLISHED.is_file(), reason="no published results/bench.json")
def test_the_published_file_loads_to_the_same_frame_in_either_form(tmp_path):
    data = json.loads(PUBLISHED.read_text())
    assert any(LEGACY in b["extra_info"] for b in data["benchmarks"]) or \
        any(TABLE in b["extra_info"] for b in data["benchmarks"])
    by_cell = {b["fullname"]: cell_rows(b["extra_info"]) for b in data["benchmarks"] if is_cell_benchmark(b["extra_info"])}
    legacy, packed = tmp_path / "legacy.json", tmp_path / "packed.json"
    legacy.write_text(json.dumps(benchmark_json("legacy", by_cell)))
    packed.write_text(json.dumps(benchmark_json("packed", by_cell)))
    assert load_results(legacy).equals(load_results(packed))
    assert load_results(packed).equals(load_results(PUBLISHED))
    assert packed.stat().st_size < legacy.stat().st_size / 3


@pytest.mark.parametrize(("table", "field"), [
    ("rows", "extra_info.lenbench_table is a string"),
    ({"format": 2, "same": {}, "blocks": []}, "extra_info.lenbench_table.format is 2, expected 1"),
    ({"format": 1, "same": [], "blocks": []}, "extra_info.lenbench_table.same is a list"),
    ({"format": 1, "same": {}, "blocks": {}}, "extra_info.lenbench_table.blocks is an object"),
    ({"format": 1, "same": {}, "blocks": [{"columns": "task", "data": []}]}, "blocks.0.columns is a string"),
    ({"format": 1, "same": {}, "blocks": [{"columns": ["task"], "data": [["a", "b"]]}]},
     "blocks.0.data.0 is a list (['a', 'b']), expected a list of 1 values"),
])
def test_a_malformed_table_is_one_line_naming_the_field(table, field):
    with pytest.raises(ResultsError) as err:
        cell_rows({TABLE: table}, "bench.json: benchmark 'x'")
    assert field in str(err.value) and str(err.value).startswith("bench.json: benchmark 'x': ")
    assert "\n" not in str(err.value)


def test_a_malformed_table_in_a_file_is_exit_2_for_report_and_compare(tmp_path, capsys):
    from lenbench.cli import main

    data = benchmark_json("packed", {"c1": rows()[:2]})
    bad = copy.deepcopy(data)
    bad["benchmarks"][0]["extra_info"][TABLE]["blocks"][0]["data"][0].pop()
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    for argv in (["report", str(path), "--out", str(tmp_path / "out"), "--no-plots"], ["compare", str(path), str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "blocks.0.data.0" in err, err
