"""The tidy schema of docs/DESIGN.md, and what every reader of a results source shares.

The columns of a tidy row and their types (`COLUMNS`), the identity of a measurement (`ROW_KEY`),
the one error of a source that cannot be read (`ResultsError`) and the JSON reader that raises it.
Its own module, the base of step 1 of the report path, so that the loaders of rows
(`lenbench.report.rows`), the cell-file checks (`lenbench.report.cells`) and the timing loaders
(`lenbench.report.timings`) share them without an import cycle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The tidy schema of docs/DESIGN.md, in the fixed column order of every frame
#: `lenbench.report.rows.load_results` returns.
COLUMNS: tuple[str, ...] = (
    "schema_version", "cell_id", "suite", "task", "encoding", "variant", "train_len", "eval_len", "ratio",
    "bucket",  # "" for a whole-length measurement, else e.g. "pos:0-31" / "depth:0.20-0.40" (evaluate.parse_bucket)
    "metric", "value", "n_samples", "seed", "higher_is_better", "status", "error",
    "lenbench_version", "git_sha", "torch_version", "device", "dtype", "timestamp", "train_seconds",
    "python_version", "threads", "code_fingerprint", "data_fingerprint",  # provenance; "" when absent
    # the machine and numeric stack (lenbench.numerics.MACHINE_KEYS); "" in rows made before issue 19
    "cpu_model", "cpu_isa", "cpu_capability", "blas", "numerics", "numpy_version", "pandas_version",
    "settings",  # the cell's effective train / eval settings (lenbench.config.schema.Cell.settings); "" before issue 24
    "sample_scores",  # per-sample scores, compact string (lenbench.metrics.encode_samples); "" when absent
)
INT_COLUMNS = ("schema_version", "train_len", "eval_len", "n_samples", "seed")
FLOAT_COLUMNS = ("ratio", "value", "train_seconds")
BOOL_COLUMNS = ("higher_is_better",)
STR_COLUMNS = tuple(c for c in COLUMNS if c not in (*INT_COLUMNS, *FLOAT_COLUMNS, *BOOL_COLUMNS))
#: Columns a source must provide; the rest get defaults (see `lenbench.report.rows.normalize`).
REQUIRED = ("task", "encoding", "variant", "train_len", "eval_len", "metric", "value")
#: One measurement: the identity of a row (duplicates are dropped, keeping the last).
ROW_KEY = ("suite", "task", "encoding", "variant", "train_len", "seed", "ratio", "eval_len", "metric", "bucket")
SORT_KEY = (*ROW_KEY, "cell_id")


EXPECTED_SOURCES = ("a results directory (cells/*.json), a tidy results CSV (results.csv) "
                    "or a pytest-benchmark JSON")


class ResultsError(ValueError):
    """A results source that cannot be read; the message is one line naming the file."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ResultsError(f"{path}: invalid JSON ({err.msg} at line {err.lineno}); "
                           f"expected {EXPECTED_SOURCES}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: cannot read ({err}); expected {EXPECTED_SOURCES}") from None
