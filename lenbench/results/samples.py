"""Per-sample scores in tidy form: one row per (row, sample index), the score's numerator, denominator
and value, instead of the packed ``sample_scores`` string of a results row.

A results row keeps its per-sample scores packed (`lenbench.metrics.encode_samples`: "num/den" entries in
generator order), which round-trips through every source but needs lenbench to read. This module unpacks
them into the long frame the report writes as ``samples.csv.gz`` (docs/board.md, "samples.csv.gz"; gzipped:
the catalog's is 38 MB as text, 2 MB gzipped, and pandas reads it as it is) and the
exports read (`lenbench.export`): key columns of the row (`SAMPLE_KEY`), ``sample`` (the sample's index
in the row's evaluation samples: the same index is the same example for every encoding, variant and
metric of one (task, eval length, seed)), ``numerator`` and ``denominator`` (the metric's per-sample
sums, `lenbench.metrics.SUMS`) and ``score`` (the metric of that one sample, f(num / den)). A metric's
value over samples is f(Σ numerator / Σ denominator), not the mean of ``score`` (they agree for exact
match, where every denominator is 1); `row_value` recomputes it, and the tests hold that it equals
the row's ``value``.
"""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd

from lenbench.metrics import decode_arrays, find_metric

#: The columns of a results row that identify a sample's measurement, in `samples.csv.gz` order.
SAMPLE_KEY = ("cell_id", "suite", "task", "encoding", "variant", "train_len", "eval_len", "ratio", "seed",
              "bucket", "metric")
#: Every column of the tidy sample frame, in order.
SAMPLE_COLUMNS = (*SAMPLE_KEY, "sample", "numerator", "denominator", "score")


def sample_scores(metric: str, numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Each sample's own value of `metric`, f(num / den) (`lenbench.metrics.Metric.values`); the
    ratio itself for a metric the registry does not know.

    Args:
        metric: the metric's name.
        numerator, denominator: (n,) the per-sample sums.

    Returns:
        (n,) float scores (NaN where a denominator is 0).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = numerator / denominator  # (n,)
    facts = find_metric(metric)
    return ratio if facts is None else np.asarray(facts.values(ratio), dtype=float)


def sample_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """The tidy per-sample frame of a results frame (`lenbench.results.frame.normalize` columns).

    Args:
        rows: tidy results rows; rows without sample scores (failed lengths, bucketed rows,
            baselines scored without samples, results from before schema version 2) add nothing.

    Returns:
        One row per (results row, sample index), `SAMPLE_COLUMNS` in order, in the order of `rows`
        and then of the samples; empty (with the columns) when no row has sample scores.
    """
    parts: list[pd.DataFrame] = []
    for row in rows.itertuples(index=False):
        decoded = decode_arrays(getattr(row, "sample_scores", ""))
        if decoded is None:
            continue
        num, den = decoded  # (n,), (n,)
        part = {key: [getattr(row, key)] * len(num) for key in SAMPLE_KEY}
        part.update(sample=np.arange(len(num)), numerator=num, denominator=den,
                    score=sample_scores(row.metric, num, den))
        parts.append(pd.DataFrame(part, columns=list(SAMPLE_COLUMNS)))
    if not parts:
        return pd.DataFrame({c: [] for c in SAMPLE_COLUMNS})
    return pd.concat(parts, ignore_index=True)


def row_value(metric: str, numerator: np.ndarray, denominator: np.ndarray) -> float:
    """A metric's value over samples, f(Σ num / Σ den): what a results row's ``value`` is."""
    return float(sample_scores(metric, np.array([numerator.sum()]), np.array([denominator.sum()]))[0])


def gzipped(text: str) -> bytes:
    """`text` as UTF-8, gzipped with no timestamp or file name in the header, so the same text always
    gives the same bytes (a rebuilt report is byte-identical)."""
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)
