"""The report path is rows → statistics → tables → figures → page, one module each, without an
import cycle: read from the source (every import, module-level or inside a function)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lenbench"
REPORT_PATH = ("lenbench.report.rows", "lenbench.report.stats", "lenbench.report.tables", "lenbench.report.plots", "lenbench.report.page")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The lenbench modules a source file imports anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        found |= {n for n in names if n in modules}
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imports_of(path, set(files)) - {name} for name, path in files.items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_each_report_step_imports_only_earlier_steps(graph):
    for i, module in enumerate(REPORT_PATH):
        later = set(REPORT_PATH[i + 1:])
        assert not (reachable(graph, module) & later), f"{module} reaches a later step: {reachable(graph, module) & later}"


def test_no_report_module_is_on_an_import_cycle(graph):
    for module in REPORT_PATH:
        assert module not in reachable(graph, module), f"{module} imports itself through a cycle"


def test_the_graph_sees_real_imports(graph):
    """Guards the check itself: known edges are found, including a function-level one."""
    assert "lenbench.report.rows" in graph["lenbench.report.tables"] and "lenbench.report.stats" in graph["lenbench.report.tables"]
    assert "lenbench.report.page" in graph["lenbench.cli"]  # imported inside _report
