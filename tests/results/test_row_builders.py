"""The row builders: the rows the compute path writes, key for key and in the cell file's order,
and every built row a valid row of the contract that reads back through the frame."""

import pandas as pd
import pytest

from lenbench.results.build import failed_row, measured_row, point
from lenbench.results.check import check_row
from lenbench.results.frame import normalize
from lenbench.results.schema import COLUMNS, SCHEMA_VERSION, ResultsError

BASE = {"schema_version": SCHEMA_VERSION, "cell_id": "c1", "suite": "s", "task": "copy", "encoding": "rope",
        "train_len": 16, "seed": 0, "lenbench_version": "0", "git_sha": "", "torch_version": "2", "device": "cpu",
        "dtype": "float32", "threads": 1, "python_version": "3.11", "code_fingerprint": "a",
        "data_fingerprint": "b", "settings": {}}


def stamped(row):
    return {**row, "timestamp": "2026-01-01T00:00:00+00:00", "train_seconds": 1.0}


def test_a_point_holds_the_base_then_the_variant_length_ratio_and_bucket():
    at = point(BASE, "none", 32, 2)
    assert list(at) == [*BASE, "variant", "eval_len", "ratio", "bucket"]
    assert (at["ratio"], type(at["ratio"]), at["bucket"]) == (2.0, float, "")


def test_a_measured_row_is_the_dict_the_engine_wrote_key_for_key_in_order():
    at = point(BASE, "none", 32, 2.0)
    row = measured_row(at, {"metric": "token_accuracy", "value": 0.5, "n_samples": 4}, True, sample_scores="x")
    expected = {**at, "metric": "token_accuracy", "value": 0.5, "n_samples": 4, "higher_is_better": True,
                "status": "ok", "error": "", "sample_scores": "x"}
    assert row == expected and list(row) == list(expected)
    assert "sample_scores" not in measured_row(at, {"metric": "nll", "value": 1.0, "n_samples": 4}, False)
    assert measured_row(at, {"metric": "nll", "value": 1.0, "n_samples": 4}, False, sample_scores=None)[
        "sample_scores"] is None


def test_a_measurement_overrides_a_point_field_in_place():
    row = measured_row(point(BASE, "none", 32, 2.0), {"metric": "nll", "bucket": "pos:0-7", "value": 1.0,
                                                      "n_samples": 4}, False)
    assert row["bucket"] == "pos:0-7"
    assert list(row).index("bucket") < list(row).index("metric")


def test_a_failed_row_has_no_value_no_samples_and_the_error_line():
    row = failed_row(point(BASE, "none", 32, 2.0), "exact_match", True, "ValueError: too long")
    assert (row["value"], row["n_samples"], row["status"], row["error"]) == (None, 0, "failed",
                                                                             "ValueError: too long")
    assert list(row)[-6:] == ["metric", "value", "n_samples", "higher_is_better", "status", "error"]


def test_built_rows_are_valid_rows_and_read_back_through_the_frame():
    at = point(BASE, "none", 32, 2.0)
    rows = [stamped(measured_row(at, {"metric": "token_accuracy", "value": 0.5, "n_samples": 4}, True,
                                 sample_scores="1/2")),
            stamped(failed_row(at, "exact_match", True, "ValueError: too long"))]
    for row in rows:
        check_row("built", row)
        assert set(row) <= set(COLUMNS)
    frame = normalize(pd.DataFrame(rows))
    assert list(frame.columns) == list(COLUMNS)
    by_metric = frame.set_index("metric")
    assert by_metric.loc["token_accuracy", "value"] == 0.5 and pd.isna(by_metric.loc["exact_match", "value"])
    assert (by_metric.loc["token_accuracy", "status"], by_metric.loc["exact_match", "status"]) == ("ok", "failed")


def test_a_built_row_without_its_metric_is_refused():
    row = stamped(measured_row(point(BASE, "none", 32, 2.0), {"metric": "nll", "value": 1.0, "n_samples": 4}, False))
    del row["metric"]
    with pytest.raises(ResultsError):
        check_row("built", row)
