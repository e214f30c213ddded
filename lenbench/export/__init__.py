"""Exports of a results source into the formats other tools read (docs/exports.md): one module per format.

`FORMATS` declares each format once (its module, its writer and its optional extra); `lenbench export`
(`lenbench.cli_export`) reads it. Nothing here imports torch; an extra's library is imported only by its
own format's writer, through `require`.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType


@dataclasses.dataclass(frozen=True)
class ExportFormat:
    """One export format.

    Attributes:
        name: the FORMAT of ``lenbench export FORMAT``.
        module: the `lenbench.export` module that writes it.
        writer: the name of its function ``writer(rows, out, **options) -> list[str]`` (lines to print).
        consumer: what reads it, in a few words (the help text and docs/exports.md).
        extra: the lenbench extra its library comes in (``pip install 'lenbench[<extra>]'``), None: none.
        options: the keyword options its writer takes besides the rows and ``out`` (the command's
            ``--experiment``, ``--mode``); the command refuses the others for this format.
    """

    name: str
    module: str
    writer: str
    consumer: str
    extra: str | None = None
    options: tuple[str, ...] = ()

    def write(self, rows, out, **options) -> list[str]:
        """Run the format's writer (imported on demand)."""
        return getattr(importlib.import_module(self.module), self.writer)(rows, out, **options)


FORMATS: dict[str, ExportFormat] = {f.name: f for f in (
    ExportFormat("lm-eval", "lenbench.export.lm_eval", "export_lm_eval",
                 "lm-evaluation-harness: results JSON and --log_samples JSONL per run"),
    ExportFormat("hf", "lenbench.export.hf", "export_hf",
                 "Hugging Face model card metadata (model-index) per encoding", extra="hf"),
    ExportFormat("mlflow", "lenbench.export.mlflow_runs", "export_mlflow",
                 "MLflow: one run per cell and variant, metrics by evaluation length", extra="tracking",
                 options=("experiment",)),
    ExportFormat("wandb", "lenbench.export.wandb_runs", "export_wandb",
                 "Weights & Biases: one run per cell and variant, metrics by evaluation length", extra="tracking",
                 options=("experiment", "mode")),
)}


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import `module`, or a one-line ValueError naming the extra that installs it.

    Args:
        module: the library to import (``huggingface_hub``).
        extra: lenbench's extra that installs it.
        what: what needs it, for the message (``the hf export``).
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"{what} needs {module}, which is not installed; "
                         f"pip install 'lenbench[{extra}]' (or pip install {module})") from None
