"""The sensitivity study at a smaller maximum budget, retraining only the runs the smaller maximum changes.

    python studies/protocol/halfmax.py run FULL_CELLS SMALL_SUITE --out DIR [--stage DIR] [--witness N]
    python studies/protocol/halfmax.py table FULL_CELLS SMALL_SUITE DIR

FULL_CELLS is a directory (a run or staging directory) holding the cells of a suite trained with
`schedule: plateau` (e.g. studies/protocol/calibration-plateau.yaml); SMALL_SUITE is the same suite with
smaller maxima (`train.steps`), every other setting equal. Under the plateau schedule nothing a run does
before its maximum depends on the maximum (the warm-up, min(warmup, steps / 10), is the same for both
maxima once they are at least ten warm-ups), so a run that stopped on convergence at step s <= M in the
full suite is the same run, bit for bit, at maximum M: its rows are its twin's. `run` retrains only the
runs that went past M (each cell of SMALL_SUITE whose twin trained more than M steps, or has no twin, and
every cell of an entry under another schedule: a cosine schedule spans its maximum),
plus `--witness N` runs that converged by M, to check that claim rather than assume it. `table` prints,
per task, the full maximum against M with `scale.findings` (the board's own verdicts, statistics
and ranks; M's board from the retrained cells and, for the rest, their twins' rows; both sides cut to the
entries and seeds SMALL_SUITE holds, so that ranks count the same entries), then each paper claim the two
boards judge (`scale.claims`), then each witness: whether its rows equal its twin's. DIR may be the run
directory or the staging publication (`--stage`); `table` refuses while a retrained cell is missing from it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from scale import claims, common, findings  # noqa: E402

from lenbench.config import load_suite  # noqa: E402
from lenbench.report.rows import load_results  # noqa: E402
from lenbench.results.schema import ROW_KEY  # noqa: E402

#: Row fields that differ between a run and its twin at another maximum without changing what it measured.
BOOKKEEPING = ("cell_id", "suite", "settings", "timestamp", "train_seconds", "git_sha", "code_fingerprint")


def _key(cell) -> tuple[str, str, int]:
    return cell.task.key, cell.encoding.key, cell.seed


def twins(full_cells: Path) -> dict[tuple[str, str, int], dict]:
    """The full suite's cell files by (task label, encoding label, seed), as rows record them."""
    out = {}
    for path in sorted((full_cells / "cells").glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("status") == "ok" and data["rows"]:
            row = data["rows"][0]
            out[row["task"], row["encoding"], int(row["seed"])] = data
    return out


def plan(small_suite: str, full_cells: Path, witness: int) -> tuple[list[str], list[str], dict]:
    """(cell ids to retrain, witness cell ids, the twin of every small cell borrowed or witnessed)."""
    full = twins(full_cells)
    retrain, borrowed, pairs = [], [], {}
    for cell in load_suite(small_suite).cells():
        twin = full.get(_key(cell))
        steps = cell.train.steps
        if (cell.train.schedule != "plateau" or twin is None or twin["rows"][0]["stop_reason"] != "converged"
                or twin["rows"][0]["train_steps"] > steps):  # a cosine run's rate depends on its maximum
            retrain.append(cell.cell_id)
        else:
            borrowed.append((twin["rows"][0]["train_steps"], cell.task.key, cell.cell_id))
            pairs[cell.cell_id] = twin
    # the witnesses: per task, its borrowed run that trained longest (closest to M), task by task in turn
    by_task: dict[str, list[str]] = {}
    for _, task, cid in sorted(borrowed, reverse=True):
        by_task.setdefault(task, []).append(cid)
    turns = [cids[i] for i in range(max(map(len, by_task.values()), default=0)) for cids in by_task.values()
             if i < len(cids)]
    return retrain, turns[:witness], pairs


def _run(args: argparse.Namespace) -> int:
    from lenbench.numerics import numerics_tag
    from lenbench.run.cell import default_threads
    from lenbench.run.driver import run_suite
    from lenbench.run.staging import open_staging

    retrain, witnesses, _ = plan(args.small_suite, Path(args.full_cells), args.witness)
    suite = load_suite(args.small_suite)
    print(f"{len(suite.cells())} cells at the smaller maxima: {len(retrain)} retrained (past M or not converged), "
          f"{len(witnesses)} witnesses, the rest their twins'", file=sys.stderr)
    staging = None
    if args.stage:
        staging = open_staging(args.stage, args.small_suite, suite.name, [c.cell_id for c in suite.cells()],
                               kind=numerics_tag(), device="cpu", threads=default_threads(),
                               commit_every=60.0 * args.stage_commit if args.stage_commit else None)
    run_suite(suite, args.out, device="cpu", executor="process", workers=args.workers, only=retrain + witnesses,
              staging=staging)
    return 0


def _measurement(row: dict) -> tuple:
    """A row's identity (`ROW_KEY`) but its suite, which a witness and its twin do not share."""
    return tuple(row.get(k) for k in ROW_KEY if k != "suite")


def same_rows(mine: list[dict], theirs: list[dict]) -> bool:
    """Whether each row of `mine` equals the row of `theirs` of the same measurement, bookkeeping aside."""
    by_measurement = {_measurement(row): row for row in theirs}
    return all((twin := by_measurement.get(_measurement(row))) is not None
               and all(k in twin and twin[k] == v for k, v in row.items() if k not in BOOKKEEPING) for row in mine)


def small_rows(small_suite: str, pairs: dict, run_dir: Path) -> tuple[pd.DataFrame, list[str]]:
    """The board at the smaller maxima: the retrained cells' rows and each borrowed twin's rows under
    its small cell's id and settings (read by the same loader), of the variants the retrained cells
    evaluate (a catalog rope cell also evaluates RoPE's inference-time variants; SMALL_SUITE need not);
    with one line per witness saying whether each of its rows equals its twin's row of that measurement.
    `pairs` is `plan`'s third value: each borrowed or witnessed small cell's twin."""
    by_id = {c.cell_id: c for c in load_suite(small_suite).cells()}
    mine_rows = {path.stem: json.loads(path.read_text())["rows"] for path in (run_dir / "cells").glob("*.json")}
    variants = {row["variant"] for rows in mine_rows.values() for row in rows}
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cells").mkdir()
        for cid, twin in pairs.items():
            if cid in mine_rows:  # a witness: retrained although its twin converged by M
                same = same_rows(mine_rows[cid], twin["rows"])
                lines.append(f"- witness {by_id[cid].title}: each of its {len(mine_rows[cid])} rows "
                             f"{'identical to' if same else 'NOT all equal to'} its twin's "
                             f"({twin['rows'][0]['train_steps']} steps, converged)")
                continue
            settings = by_id[cid].settings
            rows = [{**row, "cell_id": cid, "settings": settings} for row in twin["rows"] if row["variant"] in variants]
            (Path(tmp) / "cells" / f"{cid}.json").write_text(json.dumps({**twin, "cell_id": cid, "rows": rows}))
        for path in (run_dir / "cells").glob("*.json"):  # one load, so baselines shared by a task and seed are kept once
            shutil.copyfile(path, Path(tmp) / "cells" / path.name)
        return load_results(Path(tmp)), lines


def missing(cell_ids: list[str], run_dir: Path) -> list[str]:
    """The cells of `cell_ids` (those `run` retrains) that `run_dir` holds no finished file for."""
    return [cid for cid in cell_ids if not (run_dir / "cells" / f"{cid}.json").is_file()]


def _table(args: argparse.Namespace) -> int:
    full_cells, run_dir = Path(args.full_cells), Path(args.run_dir)
    retrain, _, pairs = plan(args.small_suite, full_cells, 0)  # reads the full cells once
    if gone := missing(retrain, run_dir):
        print(f"halfmax: {len(gone)} retrained cell(s) missing from {run_dir / 'cells'} (e.g. {gone[0]}): finish "
              f"`halfmax.py run` first (it resumes from its --stage directory)", file=sys.stderr)
        return 2
    small, lines = small_rows(args.small_suite, pairs, run_dir)
    full, small = common(load_results(full_cells), small)
    tasks = sorted(set(small["task"]) & set(full["task"]))
    for task in tasks:
        print("\n".join(findings(full, small, task, ("full", "M"), "maxima")))
    print("\n".join([*claims(full, small, tasks, ("full", "M"), "maximum"), "", *lines]))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("full_cells")
    r.add_argument("small_suite")
    r.add_argument("--out", required=True)
    r.add_argument("--stage", default=None)
    r.add_argument("--stage-commit", type=float, default=15.0)
    r.add_argument("--witness", type=int, default=2)
    r.add_argument("--workers", type=int, default=2)
    t = sub.add_parser("table")
    t.add_argument("full_cells")
    t.add_argument("small_suite")
    t.add_argument("run_dir")
    args = ap.parse_args(argv)
    return _run(args) if args.command == "run" else _table(args)


if __name__ == "__main__":
    sys.exit(main())
