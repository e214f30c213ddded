"""Reading a package's imports from its source, for the layering and report-order tests: every
import a file makes, module-level or inside a function, except under `if TYPE_CHECKING:`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lenbench"


def module_name(path: Path) -> str:
    """The dotted module name of a source file under `ROOT` (a package's `__init__` names the package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST):
    """Every node of `tree` except those under `if TYPE_CHECKING:` (imports for annotations only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", getattr(child.test, "attr", "")) == "TYPE_CHECKING":
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imported_names(path: Path) -> set[str]:
    """Every absolute module name a source file imports anywhere in it (`from a import b` gives
    `a` and `a.b`: b may be a module)."""
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return found
