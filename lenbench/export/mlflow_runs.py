"""MLflow: a results source replayed into an MLflow experiment, one run per (cell, variant).

The consumer is MLflow's tracking server or a local store (the ``tracking`` extra installs
``mlflow-skinny``, MLflow's client without its server and UI). What a run holds is
`lenbench.export.tracker_runs`: params from the cell, each metric logged at step = evaluation length.
A replay is idempotent: a run whose key (tag ``lenbench.key``) is already in the experiment is skipped,
so exporting the same source again logs nothing, and a cell computed again (a new timestamp) is a new run.
"""

from __future__ import annotations

import pandas as pd

from lenbench.export import require
from lenbench.export.tracker_runs import KEY_TAG, TrackerRun, tracker_runs

#: MLflow's limits per ``log_batch`` call (metrics; params are far fewer than its 100).
MAX_METRICS_PER_BATCH = 1000


def log_runs(runs: list[TrackerRun], tracking_uri: str | None, experiment: str) -> tuple[int, int]:
    """Log `runs` into `experiment` (created when absent) of the store at `tracking_uri`.

    Args:
        runs: the runs to log (`tracker_runs`).
        tracking_uri: an MLflow tracking URI (``sqlite:///mlflow.db``, ``http://host:5000``, ``file:DIR``);
            None: MLflow's own default (``$MLFLOW_TRACKING_URI``).
        experiment: the experiment's name.

    Returns:
        (logged, skipped): runs logged now, and runs whose key the experiment already held.
    """
    mlflow = require("mlflow", "tracking", "the mlflow export")
    from mlflow.entities import Metric, Param, RunTag

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    logged = skipped = 0
    for run in runs:
        existing = client.search_runs([experiment_id], filter_string=f"tags.`{KEY_TAG}` = '{run.key}'", max_results=1)
        if existing:
            skipped += 1
            continue
        created = client.create_run(experiment_id, start_time=run.timestamp_ms or None, tags=run.tags,
                                    run_name=run.name)
        run_id = created.info.run_id
        metrics = [Metric(name, value, run.timestamp_ms, step)
                   for step, values in run.steps for name, value in values.items()]
        params = [Param(k, v) for k, v in run.params.items()]
        for start in range(0, max(len(metrics), 1), MAX_METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=metrics[start:start + MAX_METRICS_PER_BATCH],
                             params=params if start == 0 else [], tags=[RunTag(k, v) for k, v in run.tags.items()]
                             if start == 0 else [])
        client.set_terminated(run_id, status="FINISHED", end_time=run.timestamp_ms or None)
        logged += 1
    return logged, skipped


def export_mlflow(df: pd.DataFrame, out: str | None, *, experiment: str) -> list[str]:
    """`lenbench export mlflow`: `log_runs` of the source's runs; the lines to print.

    Args:
        df: tidy results rows.
        out: the tracking URI (--out), None for MLflow's default.
        experiment: the experiment's name (--experiment).
    """
    logged, skipped = log_runs(tracker_runs(df), out, experiment)
    where = out or "MLflow's default tracking URI"
    return [f"logged {logged} run(s) to experiment {experiment!r} at {where}"
            + (f"; {skipped} already there (skipped)" if skipped else "")]
