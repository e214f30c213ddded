"""Seed a results directory with the cells of other results directories that are current for this checkout.

    python .github/seed_cells.py --suite quick --device cpu --into runs/head runs/base [MORE ...]

The pull-request workflow (.github/workflows/bench.yml) runs the base branch's suite and then this
checkout's; most cells of the two are the same computation (a pull request usually touches one
encoding, or none of the compute path). For every cell of the suite that `--into` has no current
result for, this copies in the first source's cell file whose stored fingerprint matches the
fingerprint this checkout would record (`lenbench.run.driver.expected_fingerprint`: the sha256 of
every source in the cell's import closure, torch, device, dtype, threads, numerics, task data).
It decides nothing lenbench would not: `lenbench run` / `pytest bench` then reuse exactly these
cells and compute the rest. A cell failed for a reason outside the cell is never copied (it is
never reused either).

What it does not see, the caller must hold fixed: the CPU model and the Python version are not in
lenbench's fingerprint, so the sources must come from this machine kind and this Python (the
workflow's cache key holds both). Sources are only read; a file of `--into` is replaced only by a
current one, atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lenbench.atomic import atomic_write_bytes
from lenbench.config import load_suite
from lenbench.results.cell import CellResult
from lenbench.run.cell import default_threads
from lenbench.run.driver import expected_fingerprint
from lenbench.run.fingerprint import stale_reasons
from lenbench.run.store import cell_path


def current_result(path: Path, cell, fingerprint) -> tuple[bytes | None, str]:
    """(the file's bytes, "") when `path` holds a result of `cell` that lenbench would reuse here;
    (None, why not) otherwise. Reads only."""
    if not path.is_file():
        return None, "no file"
    try:
        data = path.read_bytes()
        obj = json.loads(data)
        if not isinstance(obj, dict) or obj.get("cell_id") != cell.cell_id:
            return None, f"not the result of cell {cell.cell_id}"
        result = CellResult.from_json(obj, path)
    except (OSError, ValueError, UnicodeDecodeError) as err:
        return None, f"unreadable ({err})"
    if result.outside:
        return None, "failed for a reason outside the cell"
    reasons = stale_reasons(result.fingerprint, fingerprint)
    return (None, "; ".join(reasons)) if reasons else (data, "")


def seed(suite_name: str, device: str, into: Path, sources: list[Path], threads: int | None = None) -> dict[str, int]:
    """Copy current cells from `sources` into `into` (see the module docstring); returns counts:
    current (already current in `into`), seeded (copied now), missing (to be computed)."""
    suite = load_suite(suite_name)
    threads = threads or default_threads()
    counts = {"current": 0, "seeded": 0, "missing": 0}
    for cell in suite.cells():
        fingerprint = expected_fingerprint(cell, device, threads)
        target = cell_path(into, cell)
        if current_result(target, cell, fingerprint)[0] is not None:
            counts["current"] += 1
            continue
        for source in sources:
            data, _ = current_result(cell_path(source, cell), cell, fingerprint)
            if data is not None:
                atomic_write_bytes(target, data)
                counts["seeded"] += 1
                break
        else:
            counts["missing"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", type=Path, help="results directories to copy current cells from")
    parser.add_argument("--into", type=Path, required=True, help="the results directory to seed")
    parser.add_argument("--suite", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        counts = seed(args.suite, args.device, args.into, [s for s in args.sources if s.is_dir()], args.threads)
    except Exception as err:  # one line, never a traceback
        print(f"seed_cells: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    print(f"seed_cells: {counts['seeded']} cell(s) copied from {', '.join(map(str, args.sources))}, "
          f"{counts['current']} already current in {args.into}, {counts['missing']} to compute")
    return 0


if __name__ == "__main__":
    sys.exit(main())
