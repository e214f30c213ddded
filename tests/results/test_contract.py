"""The results contract (`lenbench.results`): the committed boards load through it unchanged, rows
of an older schema version are upgraded, and the declared columns are what the engine writes."""

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lenbench.atomic import atomic_write_json
from lenbench.compare.inputs import check_cells_directory
from lenbench.metrics import METRICS
from lenbench.report.rows import load_results
from lenbench.results.check import check_row
from lenbench.results.frame import normalize
from lenbench.results.schema import (
    COLUMNS,
    GENERATED_ANSWERS_VERSION,
    REQUIRED,
    SCHEMA,
    SCHEMA_VERSION,
    ResultsError,
)
from lenbench.run.store import cell_files

ROOT = Path(__file__).resolve().parent.parent.parent
BOARDS = [ROOT / "results", ROOT / "results" / "catalog"]


@pytest.mark.parametrize("board", BOARDS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_committed_board_loads_to_its_own_results_csv(board):
    """The cell files and the results.csv the report wrote from them give one frame, every value equal."""
    from_cells = load_results(board)
    from_csv = load_results(board / "results.csv")
    assert len(from_cells) > 0
    pd.testing.assert_frame_equal(from_cells, from_csv, check_exact=True)
    assert list(from_cells.columns) == list(COLUMNS)


def loaded_metric(row: dict) -> str:
    """The metric a stored row loads as: before schema 3 a token_accuracy was teacher-forced."""
    old = row["schema_version"] < GENERATED_ANSWERS_VERSION and row["metric"] == "token_accuracy"
    return "tf_token_accuracy" if old else row["metric"]


@pytest.mark.parametrize("board", BOARDS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_committed_cell_files_are_rows_of_the_declared_columns_and_round_trip_byte_for_byte(board, tmp_path):
    """Every stored row has the required columns and only declared ones, at the current version; rewriting a cell
    file as the store writes it gives the same bytes; loading keeps each value bit for bit."""
    files = cell_files(board)
    assert files and check_cells_directory(board) == files
    for path in files[:5]:
        data = json.loads(path.read_text())
        assert data["schema_version"] <= SCHEMA_VERSION
        for row in data["rows"]:
            assert set(REQUIRED) <= set(row) <= set(COLUMNS), path
            assert row["schema_version"] == data["schema_version"]
        atomic_write_json(tmp_path / path.name, data)
        assert (tmp_path / path.name).read_bytes() == path.read_bytes()
        frame = normalize(pd.DataFrame(data["rows"]), str(path))
        stored = {(r["task"], r["encoding"], r["variant"], r["eval_len"], loaded_metric(r), r.get("bucket", ""),
                   r.get("seed", 0)): r["value"] for r in data["rows"]}
        for rec in frame.to_dict("records"):
            value = stored[(rec["task"], rec["encoding"], rec["variant"], rec["eval_len"], rec["metric"], rec["bucket"],
                            rec["seed"])]
            if value is None:
                assert math.isnan(rec["value"])
            elif rec["status"] == "ok":
                assert rec["value"].hex() == float(value).hex()


def test_a_version_1_row_is_upgraded_with_the_declared_defaults():
    """A row of the first schema (no schema_version, sample_scores, ratio, higher_is_better, status)
    loads with its values unchanged and the later columns defaulted."""
    old = {"task": "copy", "encoding": "rope", "variant": "none", "train_len": 32, "eval_len": 64,
           "metric": "token_accuracy", "value": 0.8125, "seed": 1}
    row = normalize(pd.DataFrame([old])).iloc[0]
    assert row["schema_version"] == 1 and row["metric"] == "tf_token_accuracy"  # it was teacher-forced
    assert row["value"] == 0.8125 and row["ratio"] == 2.0 and row["seed"] == 1
    assert row["higher_is_better"] == METRICS["token_accuracy"] and row["status"] == "ok"
    assert row["sample_scores"] == "" and row["n_samples"] == 0 and math.isnan(row["train_seconds"])
    failed = normalize(pd.DataFrame([{**old, "value": None}])).iloc[0]
    assert failed["status"] == "failed" and math.isnan(failed["value"])


def test_only_rows_before_generated_answers_have_their_token_accuracy_renamed():
    row = {"task": "copy", "encoding": "rope", "variant": "none", "train_len": 8, "eval_len": 8, "value": 0.5}
    rows = [{**row, "metric": m, "schema_version": v, "seed": i}
            for i, (m, v) in enumerate([("token_accuracy", 2), ("exact_match", 2), ("token_accuracy", 3),
                                        ("tf_token_accuracy", 3)])]
    frame = normalize(pd.DataFrame(rows)).sort_values("seed")
    assert frame["metric"].tolist() == ["tf_token_accuracy", "exact_match", "token_accuracy", "tf_token_accuracy"]


def test_the_required_columns_are_declared_once_and_enforced_by_loader_and_check():
    assert REQUIRED == tuple(c.name for c in SCHEMA if c.required)
    assert set(REQUIRED) == {"task", "encoding", "variant", "train_len", "eval_len", "metric", "value"}
    row = {"task": "copy", "encoding": "rope", "variant": "none", "train_len": 32, "eval_len": 64,
           "metric": "exact_match", "value": 1.0}
    check_row("x.json: row 0", row)
    with pytest.raises(ResultsError, match=r"^x.json: row 0: row without metric \(every row needs"):
        check_row("x.json: row 0", {k: v for k, v in row.items() if k != "metric"})
    with pytest.raises(ResultsError, match=r"^rows: missing column\(s\) metric; expected the tidy rows"):
        normalize(pd.DataFrame([{k: v for k, v in row.items() if k != "metric"}]))
    with pytest.raises(ResultsError, match=r"train_len is a number \(0\), expected a length of at least 1"):
        check_row("x.json: row 0", {**row, "train_len": 0})


@pytest.mark.subprocess
def test_the_contract_imports_no_torch():
    code = ("import sys, lenbench.results.frame, lenbench.results.check, lenbench.results.values; "
            "assert 'torch' not in sys.modules and 'lenbench.encodings' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_store_writes_only_cell_files_the_contract_accepts(tmp_path):
    from lenbench.results.cell import CellResult
    from lenbench.run.store import write_cell

    source = cell_files(BOARDS[0])[0]
    result = CellResult.from_json(json.loads(source.read_text()))
    assert write_cell(tmp_path, result.cell_id, result).read_bytes() == source.read_bytes()
    bad = dataclasses.replace(result, rows=[{k: v for k, v in result.rows[0].items() if k != "metric"}])
    with pytest.raises(ResultsError, match=r"row 0: row without metric"):
        write_cell(tmp_path / "bad", result.cell_id, bad)
    assert not (tmp_path / "bad" / "cells").exists() or not list((tmp_path / "bad" / "cells").iterdir())
