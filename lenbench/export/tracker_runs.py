"""What an experiment tracker's run is, from the rows alone: shared by the MLflow and the W&B exports.

The tracker exports replay a finished results source into a tracker rather than log from inside
``lenbench run``: the compute path stays free of trackers (no network, no extra import in a worker, no
failure mode added to a cell), any finished directory or published ``results.csv`` can be replayed, and
a replay is idempotent (`TrackerRun.key`), so exporting the same source twice adds nothing.

One run is one (cell, variant): a trained model as evaluated (``rope``) or one of its inference-time
variants (``rope+yarn``), which is what a tracker's run records elsewhere (one model, its config, its
curves). Its **params** are the cell's identity and provenance (`PARAM_COLUMNS`); its **metrics** are
the whole-length values, logged at ``step`` = the evaluation length, so a tracker's metric chart is the
extrapolation curve (``ratio`` is logged beside them). Failed lengths log nothing (their error is the tag
``lenbench.failed``); baseline rows (no trained model) and bucketed rows are not runs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math

import pandas as pd

from lenbench.report.rows import series_label, whole_length
from lenbench.results.labels import is_baseline

#: The columns of a run's rows logged as its params (constant within a (cell, variant)).
PARAM_COLUMNS = ("suite", "task", "encoding", "variant", "train_len", "seed", "cell_id", "settings",
                 "lenbench_version", "git_sha", "torch_version", "device", "dtype", "threads", "numerics",
                 "cpu_model", "code_fingerprint", "data_fingerprint", "schema_version")
#: The columns that identify one run: a cell (its id, and what names it where a source has no ids) and a variant.
RUN_KEY = ("cell_id", "suite", "task", "encoding", "train_len", "seed", "variant")
#: The tag that carries a run's `TrackerRun.key`: what makes a replay idempotent.
KEY_TAG = "lenbench.key"


@dataclasses.dataclass(frozen=True)
class TrackerRun:
    """One tracker run (module docstring).

    Attributes:
        key: 16 hex digits of sha256(`RUN_KEY`, the rows' first timestamp): the same for the same
            measurement, new when the cell was computed again; the W&B run id, the MLflow tag `KEY_TAG`.
        name: ``<task>/<series>/L<train_len>/seed<seed>`` (the run's display name).
        params: `PARAM_COLUMNS` as strings.
        steps: [(eval_len, {metric: value, "ratio": ratio})], eval_len ascending.
        failed: "<metric>@<eval_len>: <error>" of each failed measurement.
        timestamp_ms: the rows' timestamp (milliseconds since the epoch), 0 without one.
    """

    key: str
    name: str
    params: dict[str, str]
    steps: list[tuple[int, dict[str, float]]]
    failed: list[str]
    timestamp_ms: int

    @property
    def tags(self) -> dict[str, str]:
        """The run's tags: its key and, where a length failed, what failed."""
        tags = {KEY_TAG: self.key, "lenbench.series": series_label(self.params["encoding"], self.params["variant"])}
        if self.failed:
            tags["lenbench.failed"] = "; ".join(self.failed)[:5000]
        return tags


def _timestamp_ms(stamps) -> int:
    parsed = [dt.datetime.fromisoformat(t) for t in stamps if t]
    return int(min(parsed).timestamp() * 1000) if parsed else 0


def tracker_runs(df: pd.DataFrame) -> list[TrackerRun]:
    """The runs of a tidy results frame, in (cell, variant) order.

    Raises:
        ValueError: no whole-length row of a trained model.
    """
    rows = whole_length(df)
    rows = rows[~rows["encoding"].map(is_baseline)]
    if rows.empty:
        raise ValueError("no whole-length rows of a trained model to export (only baselines, or no rows)")
    runs = []
    for identity, group in rows.groupby(list(RUN_KEY), sort=True):
        first = group.iloc[0]
        stamp = min((t for t in group["timestamp"] if t), default="")
        key = hashlib.sha256("\0".join(map(str, (*identity, stamp))).encode()).hexdigest()[:16]
        variant = first.variant
        steps, failed = [], []
        for eval_len, at in group.groupby("eval_len", sort=True):
            values = {}
            for row in at.itertuples(index=False):
                if row.status == "ok" and not math.isnan(row.value):
                    values[row.metric] = float(row.value)
                else:
                    failed.append(f"{row.metric}@{eval_len}: {row.error or row.status}")
            if values:
                steps.append((int(eval_len), {**values, "ratio": float(at["ratio"].iloc[0])}))
        params = {c: str(first[c]) for c in PARAM_COLUMNS}
        name = f"{first.task}/{series_label(first.encoding, variant)}/L{first.train_len}/seed{first.seed}"
        runs.append(TrackerRun(key, name, params, steps, failed, _timestamp_ms(group["timestamp"])))
    return runs
