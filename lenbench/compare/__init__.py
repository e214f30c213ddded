"""`lenbench compare BASE HEAD`: quality and speed regressions of one run against another.

One module per step, each importing only the ones before it:

- `lenbench.compare.inputs`: shape checks of a benchmark JSON compare reads, and the one-line guard (exit 2);
  rows and cell files are checked by the results contract (`lenbench.results.check`).
- `lenbench.compare.sides`: one side (results directory, results / leaderboard CSV, benchmark JSON),
  its cells, data fingerprints, machine facts and provenance, and how two sides' setups differ.
- `lenbench.compare.stats`: the statistical quality comparison (paired bootstrap against margins).
- `lenbench.compare.across`: quality across numeric kinds (seeds unpaired, Welch t, Holm).
- `lenbench.compare.quality`: metric regressions (exact, paired or unpaired), cells failed / missing in head.
- `lenbench.compare.speed`: kernel timings and training steps.
- `lenbench.compare.gate`: `compare`, the `Comparison` (verdict, report text, exit code).
"""

from lenbench.compare.gate import Comparison, compare
from lenbench.compare.quality import (
    FAILED,
    IMPROVED,
    MISSING,
    NEW,
    REGRESSION,
    UNCHANGED,
    WITHIN,
    compare_boards,
    compare_cells,
    compare_rows,
)
from lenbench.compare.sides import (
    Side,
    check_fingerprints,
    cpu_capability_from_flags,
    load_side,
    machine_difference,
)
from lenbench.compare.speed import FASTER, SLOWER, compare_kernels

__all__ = [
    "FAILED", "FASTER", "IMPROVED", "MISSING", "NEW", "REGRESSION", "SLOWER", "UNCHANGED", "WITHIN", "Comparison",
    "Side", "check_fingerprints", "compare", "compare_boards", "compare_cells", "compare_kernels", "compare_rows",
    "cpu_capability_from_flags", "load_side", "machine_difference",
]
