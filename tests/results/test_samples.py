"""The tidy per-sample frame (`lenbench.results.samples`) and the report's samples.csv."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from export_rows import tiny_rows

from lenbench.report.build import write_report
from lenbench.report.rows import load_results, read_csv_strings
from lenbench.results.samples import SAMPLE_COLUMNS, SAMPLE_KEY, row_value, sample_frame

PUBLISHED = Path(__file__).resolve().parents[2] / "results" / "results.csv"


def test_each_row_unpacks_into_its_samples_and_their_sums_give_its_value():
    rows = tiny_rows()
    samples = sample_frame(rows)
    assert tuple(samples.columns) == SAMPLE_COLUMNS
    with_scores = rows[rows["sample_scores"] != ""]
    assert len(samples) == with_scores["n_samples"].sum()
    for key, group in samples.groupby(list(SAMPLE_KEY)):
        row = with_scores.set_index(list(SAMPLE_KEY)).loc[key]
        assert list(group["sample"]) == list(range(len(group)))
        assert row_value(key[-1], group["numerator"].to_numpy(), group["denominator"].to_numpy()) == \
            pytest.approx(row["value"])
    token = samples[samples["metric"] == "token_accuracy"]
    assert np.allclose(token["score"], token["numerator"] / token["denominator"])


def test_rows_without_sample_scores_add_nothing_and_none_gives_the_columns():
    rows = tiny_rows()
    failed_or_bucketed = rows[(rows["status"] != "ok") | (rows["bucket"] != "")]
    assert len(failed_or_bucketed) == 2 and sample_frame(failed_or_bucketed).empty
    assert tuple(sample_frame(failed_or_bucketed).columns) == SAMPLE_COLUMNS


@pytest.mark.slow
def test_the_published_rows_values_are_their_samples_sums():
    """The invariant samples.csv documents, on every published row with sample scores: f(Σ num / Σ den)."""
    rows = load_results(PUBLISHED)
    samples = sample_frame(rows)
    sums = samples.groupby(list(SAMPLE_KEY), dropna=False)[["numerator", "denominator"]].sum().reset_index()
    merged = sums.merge(rows, on=list(SAMPLE_KEY))
    assert len(merged) == len(sums) > 0
    recomputed = [row_value(m, np.array([n]), np.array([d]))
                  for m, n, d in zip(merged["metric"], merged["numerator"], merged["denominator"], strict=True)]
    assert np.allclose(recomputed, merged["value"], rtol=1e-6)


def test_the_report_writes_samples_csv_that_reads_back(tmp_path):
    """samples.csv.gz reads back as the frame, and a second report writes the same bytes (no timestamp)."""
    rows = tiny_rows()
    written = write_report(rows, tmp_path, plots=False, page=False)
    assert tmp_path / "samples.csv.gz" in written
    back = read_csv_strings(tmp_path / "samples.csv.gz")
    assert list(back.columns) == list(SAMPLE_COLUMNS)
    expected = sample_frame(rows)
    pd.testing.assert_series_equal(back["numerator"].astype(float), expected["numerator"], check_names=False)
    assert (back["cell_id"] == expected["cell_id"]).all()

    again = tmp_path / "again"
    write_report(rows, again, plots=False, page=False)
    assert (again / "samples.csv.gz").read_bytes() == (tmp_path / "samples.csv.gz").read_bytes()
