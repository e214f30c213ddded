"""The checkpoint format of a cell's trained models: one file of weights and metadata, its names,
its reader, and the per-job cache that loads a valid checkpoint or trains and keeps a new one.

The compute path (`lenbench.run.cell`) trains through `CheckpointCache`; the driver checks the
checkpoints it hands a job with `load_checkpoint_bytes` and `checkpoint_mismatch`. A checkpoint's
metadata names the checkpoint it was saved as (its cell's `train_id`, or a fine-tune's name), so a
file copied over another cell's checkpoint is refused, never loaded.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import re
from typing import TYPE_CHECKING

import torch

from lenbench.config import Cell, VariantSpec, digest
from lenbench.results.labels import error_line
from lenbench.run.fingerprint import Fingerprint
from lenbench.train import TrainStats

if TYPE_CHECKING:
    from lenbench.model import Transformer

CHECKPOINT_FORMAT = 1


def finetune_checkpoint_name(cell: Cell, variant: VariantSpec) -> str:
    return f"{cell.train_id}-ft-{digest(dataclasses.asdict(variant))}"


def checkpoint_names(cell: Cell) -> list[str]:
    """Names of every checkpoint a cell trains or reuses: its base model, then each fine-tune."""
    return [cell.train_id, *(finetune_checkpoint_name(cell, v) for v in cell.variants if v.finetune_steps)]


def checkpoint_bytes(state_dict: dict, meta: dict) -> bytes:
    """One checkpoint file: weights and their metadata (train_seconds, final loss, config) together,
    so a kill can never leave one without the other."""
    buf = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, "state_dict": state_dict, "meta": meta}, buf)
    return buf.getvalue()


def load_checkpoint_bytes(data: bytes, device: torch.device) -> tuple[dict, dict]:
    """(state_dict, meta) of a checkpoint file's bytes.

    Raises:
        ValueError: not a lenbench checkpoint; one line (torch's several-paragraph refusal of a
            file holding pickled objects becomes "not a weights-only file …").
    """
    try:
        obj = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        found = re.search(r"GLOBAL (\S+)", text)
        if found:
            raise ValueError(f"not a weights-only file: it holds pickled objects such as {found.group(1)}, which are "
                             "never loaded") from None
        advice = ("Weights only load failed", "Check the documentation", "Please file an issue", "(1)", "(2)")
        lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith(advice)]
        raise ValueError(f"unreadable checkpoint ({lines[0] if lines else 'UnpicklingError'})") from None
    if not isinstance(obj, dict) or obj.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"not a lenbench checkpoint of format {CHECKPOINT_FORMAT}")
    return obj["state_dict"], obj["meta"]


def saved_as_another(meta: dict, name: str) -> str:
    """Why a checkpoint found as `name` is another one (its metadata names the checkpoint it was
    saved as: a file copied over this one); "" when it is not (or names none)."""
    saved_as = meta.get("checkpoint") if isinstance(meta, dict) else None
    return f"it is checkpoint {saved_as} (copied over this one?)" if saved_as and saved_as != name else ""


def checkpoint_mismatch(meta: dict, name: str, fingerprint: Fingerprint | None) -> str:
    """Why a checkpoint's metadata does not fit checkpoint `name` made by the code and environment
    of `fingerprint` (None: not checked); "" when it does. The metadata names the checkpoint it was
    saved as, so a file copied over another cell's is refused."""
    if not isinstance(meta, dict):
        return "no metadata"
    if meta.get("checkpoint") != name:
        return saved_as_another(meta, name) or "its metadata names no checkpoint (made by an older lenbench)"
    if fingerprint is None:
        return ""
    stored = meta.get("fingerprint")
    if not (isinstance(stored, dict) and stored.get("code_fingerprint") == fingerprint.code
            and stored.get("data", "") == fingerprint.data):
        return "made by other code or environment (fingerprint differs)"
    return ""


class CheckpointCache:
    """Checkpoints of one job: those handed in (bytes) and those trained now (returned as bytes).

    A checkpoint handed in that does not load, does not fit the model or was made by other code
    (`fingerprint`) is ignored and retrained; `rejected` says which and why.
    """

    def __init__(self, given: dict[str, bytes], device: torch.device) -> None:
        self.given = given
        self.device = device
        self.made: dict[str, bytes] = {}
        self.rejected: dict[str, str] = {}
        self.fingerprint: Fingerprint | None = None

    def load_or_train(self, model: Transformer, name: str, train) -> dict:
        """Load `model`'s weights from checkpoint `name` when given and valid (returns its meta); else
        run `train()` (returns TrainStats), keep the checkpoint to hand back, and return its meta."""
        if name in self.given:
            initial = {k: v.clone() for k, v in model.state_dict().items()}
            try:
                state, meta = load_checkpoint_bytes(self.given[name], self.device)
                mismatch = checkpoint_mismatch(meta, name, self.fingerprint)
                if mismatch:
                    raise ValueError(mismatch)
                model.load_state_dict(state)
                return meta
            except Exception as err:  # a damaged or mismatched checkpoint is retrained, never fatal
                self.rejected[name] = error_line(err)
                model.load_state_dict(initial)  # a partial load must not change the retrained model
        stats: TrainStats = train()
        meta = {"checkpoint": name, "train_seconds": stats.seconds, "final_loss": stats.final_loss,
                "train_steps": stats.steps, "stop_reason": stats.stop_reason, "best_step": stats.best_step,
                "val_loss": stats.val_loss, "val_history": [list(v) for v in stats.val_history],
                "fingerprint": self.fingerprint.to_json() if self.fingerprint else None}
        self.made[name] = checkpoint_bytes(model.state_dict(), meta)
        return meta
