"""The builders the compute path writes rows with: one measured row, one failed row, and the point
(variant, length, ratio, bucket) they share, on top of a cell's identity and provenance fields.

Every row the engine writes (`lenbench.run.cell`, `lenbench.baselines`) comes from here, so its
keys, their order in the cell file and the failed row's fixed values (no value, no samples) are
stated once. A metric's direction is passed in: it is the metric registry's fact
(`lenbench.metrics`), read by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Row = dict[str, Any]
#: `measured_row`'s "no per-sample scores" (a row without the column, not one holding None).
NO_SCORES: Any = object()


def point(base: Mapping[str, Any], variant: str, eval_len: int, ratio: float, bucket: str = "") -> Row:
    """The fields every row of one (variant, length) shares: `base` (identity and provenance of the
    cell) then the variant, the evaluated length, its ratio to the training length and the bucket
    ("" for a whole-length measurement)."""
    return {**base, "variant": variant, "eval_len": eval_len, "ratio": float(ratio), "bucket": bucket}


def measured_row(at: Mapping[str, Any], measurement: Mapping[str, Any], higher_is_better: bool,
                 sample_scores: Any = NO_SCORES) -> Row:
    """One measured row: the fields of `at`, the measurement (metric, value, n_samples and any field
    it overrides, e.g. a bucket), its direction, status "ok", and the per-sample scores when given."""
    row = {**at, **measurement, "higher_is_better": higher_is_better, "status": "ok", "error": ""}
    if sample_scores is not NO_SCORES:
        row["sample_scores"] = sample_scores
    return row


def failed_row(at: Mapping[str, Any], metric: str, higher_is_better: bool, error: str) -> Row:
    """One failed row: no value, no samples, status "failed" and the error's one line."""
    return {**at, "metric": metric, "value": None, "n_samples": 0, "higher_is_better": higher_is_better,
            "status": "failed", "error": error}
