"""The tidy row of docs/DESIGN.md ("Results schema"): its version, columns and identity.

A row is one measurement (task, encoding, variant, lengths, metric, value) with its provenance.
Each column is declared once here with its type and whether a source must provide it; the loaders
(`lenbench.results.frame`), the shape checks (`lenbench.results.check`) and the compute path
(`lenbench.run.cell`) all read these declarations.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

#: Version of the rows and cell files the engine writes. 2: rows carry sample_scores; baseline rows;
#: exact match primary. 3: a sequence task's token_accuracy and exact_match score the generated answer
#: (`lenbench.tasks.decoding`), tf_token_accuracy the teacher-forced one. A row without a
#: schema_version is version 1 (`lenbench.results.frame.normalize`).
SCHEMA_VERSION = 3
#: The first version whose token_accuracy is of generated answers; older rows' token_accuracy was
#: teacher-forced, and loads as tf_token_accuracy (`lenbench.results.frame.normalize`).
GENERATED_ANSWERS_VERSION = 3
#: The version a row without a ``schema_version`` field is read as.
FIRST_SCHEMA_VERSION = 1
#: Why training stopped (the ``stop_reason`` column): its budget (``steps``) ran out, or, with
#: ``train.patience``, its validation loss stopped improving (`lenbench.train`).
STOP_BUDGET, STOP_CONVERGED = "budget", "converged"


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of a tidy row.

    Attributes:
        name: the column name (also the key of a row dict and of a cell file's row).
        kind: the stored type: "int", "float", "bool" or "str".
        required: a source must provide it; otherwise a missing value gets the column's default
            (`lenbench.results.frame.normalize`).
        doc: what the column holds, where the name does not say it.
    """

    name: str
    kind: Literal["int", "float", "bool", "str"]
    required: bool = False
    doc: str = ""


#: Every column of a tidy row, in the fixed order of every frame `lenbench.results.frame.normalize` returns.
SCHEMA: tuple[Column, ...] = (
    Column("schema_version", "int", doc=f"the row's schema version; {FIRST_SCHEMA_VERSION} when absent"),
    Column("cell_id", "str"),
    Column("suite", "str"),
    Column("task", "str", required=True),
    Column("encoding", "str", required=True, doc="an encoding label, or baseline:<name> (lenbench.results.labels)"),
    Column("variant", "str", required=True, doc="an inference-time variant key; 'none' for the model as trained"),
    Column("train_len", "int", required=True),
    Column("eval_len", "int", required=True),
    Column("ratio", "float", doc="eval_len / train_len when absent"),
    Column("bucket", "str", doc="'' for a whole-length measurement, else e.g. 'pos:0-31' / 'depth:0.20-0.40'"),
    Column("metric", "str", required=True),
    Column("value", "float", required=True, doc="NaN (null in JSON) where the measurement failed"),
    Column("n_samples", "int"),
    Column("seed", "int"),
    Column("higher_is_better", "bool", doc="from the metric registry when absent"),
    Column("status", "str", doc="'ok' where a value is present, else 'failed', when absent"),
    Column("error", "str"),
    # provenance; "" when absent
    Column("lenbench_version", "str"),
    Column("git_sha", "str"),
    Column("torch_version", "str"),
    Column("device", "str"),
    Column("dtype", "str"),
    Column("timestamp", "str"),
    Column("train_seconds", "float"),
    Column("python_version", "str"),
    Column("threads", "str"),
    Column("code_fingerprint", "str"),
    Column("data_fingerprint", "str"),
    # the machine and numeric stack (lenbench.numerics.MACHINE_KEYS)
    Column("cpu_model", "str"),
    Column("cpu_isa", "str"),
    Column("cpu_capability", "str"),
    Column("blas", "str"),
    Column("numerics", "str"),
    Column("numpy_version", "str"),
    Column("pandas_version", "str"),
    Column("settings", "str", doc="the cell's effective train / eval settings (lenbench.config.schema.Cell.settings)"),
    Column("train_steps", "int", doc="optimisation steps the model trained: the budget, or fewer where training "
           "converged (train.patience); when absent, the settings' steps= (rows from before training could stop "
           "early trained exactly that), else 0"),
    Column("stop_reason", "str", doc="why training stopped: 'budget' or 'converged' (lenbench.train); when absent, "
           "'budget' where train_steps was read off the settings"),
    Column("sample_scores", "str", doc="per-sample scores, compact string (lenbench.metrics.encode_samples)"),
)

COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA)
INT_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.kind == "int")
FLOAT_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.kind == "float")
BOOL_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.kind == "bool")
STR_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.kind == "str")
#: Columns a source must provide; the rest get defaults.
REQUIRED: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.required)
#: One measurement: the identity of a row (duplicates are dropped, keeping the last).
ROW_KEY = ("suite", "task", "encoding", "variant", "train_len", "seed", "ratio", "eval_len", "metric", "bucket")
SORT_KEY = (*ROW_KEY, "cell_id")

EXPECTED_SOURCES = ("a results directory (cells/*.json), a tidy results CSV (results.csv) "
                    "or a pytest-benchmark JSON")


class ResultsError(ValueError):
    """A results source that cannot be read; the message is one line naming the file."""


def read_json(path: Path) -> Any:
    """The parsed JSON of `path`; a one-line `ResultsError` naming it when unreadable or not JSON."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ResultsError(f"{path}: invalid JSON ({err.msg} at line {err.lineno}); "
                           f"expected {EXPECTED_SOURCES}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: cannot read ({err}); expected {EXPECTED_SOURCES}") from None
