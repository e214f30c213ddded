"""Weights & Biases: a results source replayed into a W&B project, one run per (cell, variant).

The consumer is W&B (the ``tracking`` extra installs ``wandb``). What a run holds is
`lenbench.export.tracker_runs`: the cell as the run's config, each length's metrics logged at step =
evaluation length. The default mode is ``offline`` (runs written under ``<dir>/wandb/``, nothing sent;
``wandb sync`` uploads them); ``online`` logs to the server of the machine's W&B login. A run's id is its
key (`lenbench.export.tracker_runs.TrackerRun.key`) and it is resumed, not duplicated, when logged again:
W&B keeps one run per id and drops history steps at or below those it already has, so exporting the
same source twice online adds nothing; offline, each export writes a run directory that ``wandb sync``
merges into the one run of that id.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from lenbench.export import require
from lenbench.export.tracker_runs import TrackerRun, tracker_runs

MODES = ("offline", "online")


def log_runs(runs: list[TrackerRun], project: str, directory: str | Path | None, mode: str) -> int:
    """Log `runs` into the W&B `project`.

    Args:
        runs: the runs to log (`tracker_runs`).
        project: the W&B project.
        directory: where W&B writes its files (``<directory>/wandb/``); None: W&B's default (``./wandb``).
        mode: one of `MODES`.

    Returns:
        The number of runs logged.
    """
    if mode not in MODES:
        raise ValueError(f"--mode {mode!r}: expected one of {', '.join(MODES)}")
    wandb = require("wandb", "tracking", "the wandb export")
    if directory is not None:
        Path(directory).mkdir(parents=True, exist_ok=True)
    hooks = sys.exit, sys.excepthook  # wandb.init replaces them (sys.exit() then exits 0); a replay leaves them be
    try:
        _log(wandb, runs, project, directory, mode)
    finally:
        sys.exit, sys.excepthook = hooks
    return len(runs)


def _log(wandb, runs: list[TrackerRun], project: str, directory: str | Path | None, mode: str) -> None:
    for run in runs:
        handle = wandb.init(project=project, id=run.key, name=run.name, config=run.params, tags=[run.params["task"]],
                            dir=str(directory) if directory is not None else None, mode=mode, resume="allow",
                            settings=wandb.Settings(silent=True, console="off"))
        for step, values in run.steps:
            handle.log(values, step=step)
        for key, value in run.tags.items():
            handle.summary[key] = value
        handle.finish()


def export_wandb(df: pd.DataFrame, out: str | None, *, experiment: str, mode: str = "offline") -> list[str]:
    """`lenbench export wandb`: `log_runs` of the source's runs; the lines to print.

    Args:
        df: tidy results rows.
        out: W&B's directory (--out), None for W&B's default.
        experiment: the W&B project (--experiment).
        mode: offline or online (--mode).
    """
    logged = log_runs(tracker_runs(df), experiment, out, mode)
    require("wandb", "tracking", "the wandb export").teardown()  # the service writes the last run after finish()
    where = f"{out or '.'}/wandb" if mode == "offline" else "the W&B server"
    return [f"logged {logged} run(s) to project {experiment!r} ({mode}) in {where}"]
