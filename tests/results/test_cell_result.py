"""`CellResult`: the committed cell files round-trip byte for byte, a minimal file reads, unknown
keys survive, and a file that breaks the contract is one `ResultsError` line."""

import json
import math
from pathlib import Path

import pytest

from lenbench.results.cell import CellResult
from lenbench.results.schema import SCHEMA_VERSION, ResultsError

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted(p for p in ROOT.glob("**/cells/*.json") if ".git" not in p.parts and "runs" not in p.parts)


def test_the_committed_boards_have_cell_files():
    assert len(COMMITTED) >= 400  # results/cells and results/catalog/cells at least


def test_every_committed_cell_file_round_trips_unchanged():
    changed = []
    for path in COMMITTED:
        text = path.read_text()
        data = json.loads(text)
        again = json.dumps(CellResult.from_json(data, path).to_json(), indent=1, sort_keys=True, allow_nan=True) + "\n"
        if again != text:
            changed.append(path.relative_to(ROOT))
    assert changed == []


def test_a_file_with_rows_alone_reads_with_defaults():
    result = CellResult.from_json({"rows": []}, "x.json")
    assert (result.status, result.error, result.config, result.fingerprint) == ("ok", "", {}, None)
    assert not result.failed and math.isnan(result.seconds) and result.schema_version == SCHEMA_VERSION


def test_unknown_keys_are_kept_and_optional_ones_left_out():
    data = {"rows": [], "cell_id": "c", "status": "failed", "error": "boom", "from_the_future": [1, 2]}
    out = CellResult.from_json(data, "x.json").to_json()
    assert out["from_the_future"] == [1, 2] and out["status"] == "failed"
    assert "traceback" not in out and "memory" not in out and "executor" not in out and "training" not in out
    assert out["fingerprint"] is None  # always written: null says it could not be computed


def test_fail_marks_the_cell_and_keeps_the_traceback():
    result = CellResult(rows=[])
    result.fail("ValueError: x", "Traceback ...")
    assert result.failed and result.to_json()["traceback"] == "Traceback ..." and result.error == "ValueError: x"


@pytest.mark.parametrize("data, expected", [
    ([1, 2], "the cell result is a list"),
    ({"status": "ok"}, "cell result without 'rows'"),
    ({"rows": [], "config": []}, "config is a list"),
    ({"rows": [], "training": [1]}, "training is a list"),
    ({"rows": [], "training": {"best_step": "10"}}, "training: best_step is a string"),
    ({"rows": [], "training": {"val_history": [[10, 2.5]]}},
     r"training: val_history.0 is a list \(\[10, 2.5\]\), expected \[step, validation loss, learning rate\]"),
])
def test_a_file_that_breaks_the_contract_is_one_line(data, expected):
    with pytest.raises(ResultsError, match=expected) as err:
        CellResult.from_json(data, "cells/x.json")
    assert "\n" not in str(err.value) and str(err.value).startswith("cells/x.json")
