"""A cell result: what one cell of a grid made, as stored in ``cells/<cell_id>.json``.

The compute path (`lenbench.run.cell`) builds a `CellResult`, the store writes `CellResult.to_json`
and every reader (`lenbench run`'s cache, `calibrate`, `compare`'s cell records, the pytest
benchmark) gets one back from `CellResult.from_json`, which checks the file against the contract
first (`lenbench.results.check.check_cell_result`). Only `rows` is required: a hand-written cell
file with rows alone is a cell result whose rows speak for it. Keys this version does not know are
kept in `extra`, so reading and writing a file changes nothing in it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from lenbench.results.check import check_cell_result
from lenbench.results.schema import SCHEMA_VERSION

OK, FAILED = "ok", "failed"


@dataclasses.dataclass
class CellResult:
    """One cell's result.

    Args:
        rows: the measurement rows (`lenbench.results.build`), the cell's baseline rows included.
        cell_id: the cell's id (its file name), `train_id` its trained model's (the checkpoint name).
        title: "task / encoding / train_len / seed", for people.
        config: the cell's configuration (`Cell.config`).
        status: "ok", or "failed" with the reason in `error` (one line) and `traceback`.
        provenance: versions, device, threads and machine facts the cell was computed with.
        fingerprint: what the cell's result depends on (`Fingerprint.to_json`); None when even
            that could not be computed (e.g. an encoding no loaded plugin registers).
        task_fingerprint: the task's data facts (e.g. an lm corpus's sha256), when the task was built.
        memory: the evaluation memory budget and any batch shrunk to fit it.
        plugins: the plugins the run loaded, when any.
        executor: an executor's bookkeeping (e.g. Ray's node and retries), never part of the rows.
        outside: why the cell, or one of its lengths, failed for a reason outside the cell (the
            environment, the machine's memory, a plugin this worker could not load), when one did:
            such a result is kept for the record but never reused (`lenbench.run.driver.cell_state`).
        training: a run that validated (trained until convergence): `best_step`, `val_loss` and
            `val_history` ([step, validation loss, learning rate] per validation), so a reader
            can check where it stopped and why; absent for a run that never validated.
        seconds: wall seconds of the whole cell; `train_seconds` of its training (NaN when reused
            from a checkpoint or never trained); `timestamp` when it finished (UTC, ISO 8601).
        extra: keys of a stored file this version does not know, written back unchanged.
    """

    rows: list[dict[str, Any]]
    cell_id: str = ""
    train_id: str = ""
    title: str = ""
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    status: str = OK
    error: str = ""
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    fingerprint: dict[str, Any] | None = None
    task_fingerprint: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    plugins: list[dict[str, Any]] | None = None
    traceback: str | None = None
    executor: dict[str, Any] | None = None
    outside: str | None = None
    training: dict[str, Any] | None = None
    seconds: float = math.nan
    train_seconds: float = math.nan
    timestamp: str = ""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    def fail(self, error: str, traceback: str | None = None) -> None:
        """Mark the whole cell failed with a one-line reason (and the traceback that led to it)."""
        self.status, self.error = FAILED, error
        if traceback is not None:
            self.traceback = traceback

    def to_json(self) -> dict[str, Any]:
        """The stored object: every field, the optional ones (None) left out, `fingerprint` always
        written (null when it could not be computed), `extra` merged back."""
        out: dict[str, Any] = dict(self.extra)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or (value is None and f.name in _OPTIONAL):
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Any, where: str | Path = "cell result") -> CellResult:
        """A stored object as a `CellResult`; missing fields take their defaults.

        Raises:
            ResultsError: one line naming `where` and the field that breaks the contract.
        """
        check_cell_result(Path(where), data)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs = {k: v for k, v in data.items() if k in known}
        return cls(**kwargs, extra={k: v for k, v in data.items() if k not in known})


#: Fields written only when set.
_OPTIONAL = frozenset({"task_fingerprint", "memory", "plugins", "traceback", "executor", "outside",
                       "training"})
