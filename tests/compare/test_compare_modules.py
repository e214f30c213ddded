"""The compare package is one module per step, each importing only the steps before it (read from
the source), and none of them imports the evaluation (torch's model) for a metric's facts."""

import ast
from pathlib import Path

import lenbench.compare as package

COMPARE = Path(package.__file__).parent
#: The steps in import order (`lenbench/compare/__init__.py` lists them).
STEPS = ("inputs", "sides", "stats", "across", "quality", "speed", "gate")


def lenbench_imports(path: Path) -> set[str]:
    """The lenbench modules a source file imports anywhere in it (`from x import y`: x and x.y)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return {n for n in found if n.startswith("lenbench")}


def test_every_compare_module_is_a_step():
    assert sorted(p.stem for p in COMPARE.glob("*.py") if p.stem != "__init__") == sorted(STEPS)


def test_each_step_imports_only_earlier_steps_and_not_the_package():
    for i, step in enumerate(STEPS):
        found = lenbench_imports(COMPARE / f"{step}.py")
        later = {f"lenbench.compare.{s}" for s in STEPS[i:]}
        assert not found & later, f"compare/{step}.py imports {found & later}"
        assert "lenbench.compare" not in found, f"compare/{step}.py imports the package (an import cycle)"
        assert "lenbench.evaluate" not in found, f"compare/{step}.py imports lenbench.evaluate (use lenbench.metrics)"


def test_the_package_exports_what_the_command_line_uses():
    from lenbench.compare.gate import compare

    assert package.compare is compare
    assert {"compare", "Comparison", "load_side", "compare_rows", "REGRESSION", "SLOWER"} <= set(package.__all__)
