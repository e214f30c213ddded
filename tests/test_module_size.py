"""No module of the package exceeds `MAX_LINES` lines: a module that grows past it holds more than one
concern and is split along its seams (as `report/stats.py`, `report/tables.py`, `config/parse.py` and
`encodings/rope_scaling.py` were). `ALLOWED` names the modules that cannot be split, each with why; it
is empty, and a module listed there that shrinks below the limit must leave it.
"""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lenbench"
MAX_LINES = 450
#: Modules over `MAX_LINES` that cannot be split, by path under lenbench/, with why.
ALLOWED: dict[str, str] = {}


def line_counts() -> dict[str, int]:
    """Every Python module of the package, by path under lenbench/, with its number of lines."""
    return {p.relative_to(PACKAGE).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_module_exceeds_the_limit():
    counts = line_counts()
    over = {name: n for name, n in counts.items() if n > MAX_LINES and name not in ALLOWED}
    assert not over, f"modules over {MAX_LINES} lines, split them by concern: {over}"


def test_the_allow_list_holds_only_modules_still_over_the_limit():
    counts = line_counts()
    stale = [name for name in ALLOWED if counts.get(name, 0) <= MAX_LINES]
    assert not stale, f"these modules are within {MAX_LINES} lines (or gone), remove them from ALLOWED: {stale}"


def test_the_count_sees_the_package():
    """Guards the check itself: it reads the package's modules, large ones included."""
    counts = line_counts()
    assert "model.py" in counts and "report/stats.py" in counts
    assert max(counts.values()) > MAX_LINES // 2
