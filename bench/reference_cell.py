"""Keep a cell's rows as a reference of its numeric kind, for tests/run/test_trust_reference_cells.py.

    python bench/reference_cell.py CELL_FILE SUITE [--name NAME]

CELL_FILE is a finished cell (``cells/<id>.json``) and SUITE the suite it came from (a preset name or
a YAML file). Writes ``tests/run/reference_cells/<NAME>.json``: a suite holding just that cell (its
task entry, its encoding entry, its seed; the cell id is checked), the numeric kind it was computed
on (`lenbench.numerics.numeric_kind`: mode and CPU vendor) and each row's value and a digest of its
per-sample scores. The test recomputes the cell and expects the same bits on a machine of that
kind, and float noise on a machine of the same mode and another vendor.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lenbench.config import load_suite, parse_suite  # noqa: E402
from lenbench.config.parse import list_suites  # noqa: E402
from lenbench.numerics import numeric_kind  # noqa: E402

OUT = ROOT / "tests" / "run" / "reference_cells"


def row_key(row: dict) -> str:
    """One row's identity within its cell."""
    return "|".join(str(row.get(k, "")) for k in ("encoding", "variant", "metric", "eval_len", "bucket"))


def samples_digest(row: dict) -> str:
    return hashlib.sha256(str(row.get("sample_scores") or "").encode()).hexdigest()[:16]


def single_cell_suite(suite_name: str, config: dict) -> dict:
    """The suite `suite_name` cut down to the cell whose `Cell.config()` is `config`."""
    import yaml

    raw = yaml.safe_load(Path(list_suites().get(suite_name, suite_name)).read_text())
    label = config.get("label") or config["encoding"]
    tasks = [t for t in raw["tasks"] if (t.get("label") or t["name"]) == config.get("task_label", config["task"])
             and t["train_len"] == config["train_len"]]
    encodings = [e for e in raw["encodings"] if (e if isinstance(e, str) else e.get("label") or e["name"]) == label]
    return {**raw, "tasks": tasks, "encodings": encodings, "seeds": [config["seed"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cell_file", type=Path)
    parser.add_argument("suite")
    parser.add_argument("--name", default=None)
    args = parser.parse_args()
    cell = json.loads(args.cell_file.read_text())
    suite = single_cell_suite(args.suite, cell["config"])
    [built] = parse_suite(suite).cells()
    if built.cell_id != cell["cell_id"]:
        sys.exit(f"{args.cell_file}: suite {args.suite} does not make this cell (it makes {built.cell_id})")
    load_suite(args.suite)  # the preset must load as it is
    provenance = cell["provenance"]
    kind = numeric_kind(provenance["numerics"], provenance["cpu_model"])
    name = args.name or f"{kind.rsplit('@', 1)[-1]}-{built.task.key}-{built.encoding.key}-s{built.seed}"
    record = {"kind": kind, "cell_id": cell["cell_id"], "from": str(args.cell_file), "cpu_model": provenance["cpu_model"],
              "git_sha": provenance.get("git_sha", ""), "suite": suite,
              "rows": {row_key(r): [r["value"], samples_digest(r)] for r in cell["rows"] if r["status"] == "ok"}}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}: {len(record['rows'])} rows of kind {kind}")


if __name__ == "__main__":
    main()
