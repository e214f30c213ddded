"""Publishing a run as the tracked baseline: `lenbench publish RUN_DIR [--benchmark-json FILE] [--to results]`.

The main command (`pytest bench --benchmark-json runs/bench.json`) and `lenbench run` write only
under `runs/` (ignored by git); a user's run never touches the published `results/`. Maintainers
publish a finished run explicitly:

    lenbench publish runs/quick --benchmark-json runs/bench.json --to results

which stages a new directory beside the target (the run's finished cell files ``cells/*.json``,
the benchmark JSON as ``bench.json``, and the report rebuilt from them by
`lenbench.page.write_report`), then swaps it in place of the target with renames: a reader (or
a kill at any moment) sees the old published directory or the complete new one, never a mix. The
target is replaced as a whole, so a stale plot or cell of an older publication never survives.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from lenbench.atomic import check_writable

DEFAULT_TARGET = Path("results")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish(run_dir: str | Path, to: str | Path = DEFAULT_TARGET, *, benchmark_json: str | Path | None = None,
            plots: bool = True) -> list[Path]:
    """Copy a run's cells (and benchmark JSON) into `to` and rebuild the report there, atomically.

    Args:
        run_dir: a results directory of `lenbench run` / `pytest bench` (with ``cells/*.json``).
        to: the published directory (default ``results``); replaced as a whole.
        benchmark_json: the run's pytest-benchmark JSON (``--benchmark-json``); its extrapolation
            rows must be the rows of ``run_dir/cells`` (the published tests check that), and its
            kernel timings become the published speed baseline. None: cells only, and the report
            is built from them.
        plots: also write the figures (`write_report`'s `plots`).

    Returns:
        The published paths, under `to`.

    Raises:
        ValueError: one line naming the problem and the fix (no cells, rows that differ between
            the benchmark JSON and the cells, `to` equal to `run_dir`, an unwritable target).
    """
    from lenbench.page import write_report
    from lenbench.results import load_results

    run_dir, to = Path(run_dir), Path(to)
    cells = run_dir / "cells"
    if not cells.is_dir() or not any(cells.glob("*.json")):
        raise ValueError(f"{run_dir} has no cells/*.json; give the results directory of a finished run "
                         "(e.g. runs/quick after `pytest bench --benchmark-json runs/bench.json`)")
    if to.resolve() == run_dir.resolve():
        raise ValueError(f"--to {to} is the run directory itself; publish into another directory (default results)")
    if benchmark_json is not None:
        benchmark_json = Path(benchmark_json)
        if not benchmark_json.is_file():
            raise ValueError(f"--benchmark-json {benchmark_json}: no such file; give the file written by "
                             "`pytest bench --benchmark-json FILE`")
        from_cells, from_json = load_results(run_dir), load_results(benchmark_json)
        if not from_cells.equals(from_json):
            raise ValueError(f"{benchmark_json} and {cells} hold different rows ({len(from_json)} vs {len(from_cells)}); "
                             "publish the benchmark JSON of the same run (same --suite and --results-dir, no -k)")
    parent = check_writable(to.resolve().parent, "publish target's parent directory")
    stage = Path(tempfile.mkdtemp(dir=parent, prefix=f".{to.name}.publish-"))
    os.chmod(stage, 0o777 & ~_umask())
    old = parent / f".{to.name}.replaced-{os.getpid()}"
    try:
        (stage / "cells").mkdir()
        for path in sorted(cells.glob("*.json")):  # finished cells only: no locks, checkpoints, *.corrupt
            shutil.copy2(path, stage / "cells" / path.name)
        if benchmark_json is not None:
            shutil.copy2(benchmark_json, stage / "bench.json")
        write_report(stage / "bench.json" if benchmark_json is not None else stage, stage, plots=plots)
        if to.exists():
            os.replace(to, old)
        os.replace(stage, to)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if old.exists() and not to.exists():
            os.replace(old, to)  # put the previous publication back
        raise
    shutil.rmtree(old, ignore_errors=True)
    return sorted(p for p in to.rglob("*") if p.is_file())
