"""The package's layers, read from the source: every import, at module level or inside a function
(only imports under `if TYPE_CHECKING:` are left out, as they never run).

`LAYERS` is the rule table docs/DESIGN.md states: for each layer (a module or package prefix; the
longest prefix that names a module is its layer) the lenbench modules it may import besides its
own, and whether it may reach torch. Importing `a.b.c` from outside `a.b` also runs `a/b/__init__.py`,
so the graph has that edge too: a cycle through a package `__init__` is a cycle here. The root
package `lenbench` (version and the numeric pins, whose torch imports sit inside functions) is
imported by every process and is not walked.

`PENDING` lists the edges that break a rule today, each with what removes it; the checks ignore
them, and `test_pending_edges_are_still_there` fails once one is gone, so the list only shrinks.
"""

from dataclasses import dataclass
from pathlib import Path

import pytest
from import_reading import PACKAGE, ROOT, imported_names, module_name

#: Imported by every process before anything else; not a layer, not walked.
ROOT_MODULES = frozenset({"lenbench", "lenbench.numerics"})
TORCH = "torch"


@dataclass(frozen=True)
class Layer:
    """What the modules of one layer may import (lenbench prefixes, besides the layer itself) and
    whether anything they reach may import torch. Allowing `a.b.c` allows the package `__init__`s
    importing it runs (`a.b`); what those import is held by the reach checks."""

    may_import: tuple[str, ...]
    torch: bool


FOUNDATION = ("lenbench.registry", "lenbench.plugins", "lenbench.plugin_changes", "lenbench.names")
#: The torch-free shared modules every layer may read.
LEAVES = ("lenbench.metrics", "lenbench.escape", "lenbench.atomic", "lenbench.encoding_display",
          "lenbench.rope_factors", "lenbench.task_display", "lenbench.results")

LAYERS: dict[str, Layer] = {
    "lenbench.plugin_changes": Layer((), torch=False),
    "lenbench.plugins": Layer(("lenbench.plugin_changes",), torch=False),
    "lenbench.names": Layer((), torch=False),
    "lenbench.registry": Layer(("lenbench.plugins", "lenbench.names"), torch=False),
    "lenbench.escape": Layer((), torch=False),
    "lenbench.atomic": Layer((), torch=False),
    "lenbench.rope_factors": Layer((), torch=False),
    "lenbench.task_display": Layer((), torch=False),
    "lenbench.encoding_display": Layer(FOUNDATION, torch=False),
    "lenbench.metrics": Layer(FOUNDATION, torch=False),
    # the results contract: the row's columns, version, coercion and checks
    "lenbench.results": Layer((*FOUNDATION, "lenbench.metrics", "lenbench.escape"), torch=False),
    # ops: the encodings, then the fused kernels over them
    "lenbench.encodings": Layer((*FOUNDATION, "lenbench.rope_factors"), torch=True),
    "lenbench.kernels": Layer((*FOUNDATION, "lenbench.encodings"), torch=True),
    # the tasks: data and their own measurements; never the evaluation that scores them
    "lenbench.tasks": Layer((*FOUNDATION, *LEAVES), torch=True),
    # the suite: its public API and the modules that check a suite against the encoding and task
    # registries (parse, checks, kernels) may import them
    "lenbench.config": Layer((*FOUNDATION, *LEAVES, "lenbench.encodings", "lenbench.tasks"), torch=True),
    # the suite's data, which the compute path and the report read: no torch, no registries of torch objects
    "lenbench.config.schema": Layer((*FOUNDATION, *LEAVES, "lenbench.config.resources"), torch=False),
    "lenbench.config.fields": Layer((*FOUNDATION, *LEAVES), torch=False),
    "lenbench.config.resources": Layer((*FOUNDATION, *LEAVES, "lenbench.config.fields"), torch=False),
    # the report path: rows in, tables, figures and pages out; the one results-directory layout it reads
    "lenbench.report": Layer((*FOUNDATION, *LEAVES, "lenbench.run.store"), torch=False),
    # the two report modules that build encodings: from checkpoints (the figures), from the cells'
    # configs (the claims' regimes)
    "lenbench.report.geometry": Layer((*FOUNDATION, *LEAVES, "lenbench.report", "lenbench.config",
                                       "lenbench.encodings", "lenbench.run"), torch=True),
    "lenbench.report.regimes": Layer((*FOUNDATION, *LEAVES, "lenbench.report", "lenbench.config",
                                      "lenbench.encodings", "lenbench.tasks", "lenbench.run"), torch=True),
    # the Python API (docs/api.md): thin wrappers over the suite, the driver, the report and compare; no
    # layer imports it (none names it), the root only inside its PEP 562 `__getattr__`
    "lenbench.api": Layer((*FOUNDATION, *LEAVES, "lenbench.config", "lenbench.run", "lenbench.report",
                           "lenbench.compare", "lenbench.publication", "lenbench.report_target"), torch=True),
    # the exports: a results source read through the report's rows and tables, written in other tools' formats
    "lenbench.export": Layer((*FOUNDATION, *LEAVES, "lenbench.report", "lenbench.run.store"), torch=False),
}

#: Modules a torch-free layer may import inside a function, behind which torch stays: the reach walk
#: stops at them (tests/report/test_import_graph.py holds that only the report's build imports it).
TORCH_DOORS = frozenset({"lenbench.report.geometry", "lenbench.report.regimes"})

#: Edges that break a rule today, each with what removes it.
PENDING: dict[tuple[str, str], str] = {}


def packages_run(importer: str, target: str) -> set[str]:
    """The package `__init__`s importing `target` runs that `importer` is not already inside."""
    parts = target.split(".")
    return {p for p in (".".join(parts[:i]) for i in range(2, len(parts)))
            if not (importer == p or importer.startswith(p + "."))}


@pytest.fixture(scope="module")
def files() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


@pytest.fixture(scope="module")
def full_graph(files) -> dict[str, set[str]]:
    """Module → the lenbench modules (and `torch`) importing it runs, package `__init__`s included."""
    graph = {}
    for name, path in files.items():
        names = imported_names(path)
        edges = {n for n in names if n in files}
        edges |= {p for n in edges for p in packages_run(name, n) if p in files}
        if any(n == TORCH or n.startswith(TORCH + ".") for n in names):
            edges.add(TORCH)
        graph[name] = edges - {name}
    return graph


@pytest.fixture(scope="module")
def graph(full_graph) -> dict[str, set[str]]:
    """The graph without the `PENDING` edges (and the package `__init__` edges they imply)."""
    return {name: {m for m in edges if not any(name == a and (m == b or m in packages_run(a, b))
                                               for a, b in PENDING)}
            for name, edges in full_graph.items()}


def reachable(graph: dict[str, set[str]], start: str, *, skip: frozenset[str] = frozenset()) -> set[str]:
    """Every module `start` runs by importing, directly or through others (not through the root,
    and not through `skip`)."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen and nxt not in ROOT_MODULES:
                seen.add(nxt)
                if nxt not in skip:
                    todo.append(nxt)
    return seen


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> str | None:
    """The longest prefix of `module` that `LAYERS` names."""
    return max((p for p in LAYERS if within(module, p)), key=len, default=None)


def test_every_layer_names_a_module(files):
    assert all(p in files for p in LAYERS), sorted(p for p in LAYERS if p not in files)
    assert all(p in files for layer in LAYERS.values() for p in layer.may_import)


@pytest.mark.parametrize("prefix", sorted(LAYERS))
def test_a_layer_imports_only_what_the_table_allows(prefix, graph, files):
    rule = LAYERS[prefix]
    for module in (m for m in files if layer_of(m) == prefix):
        bad = {m for m in graph[module] - {TORCH} - ROOT_MODULES
               if not within(m, prefix) and not any(within(m, ok) or within(ok, m) for ok in rule.may_import)}
        assert not bad, f"{module} ({prefix} layer) imports {sorted(bad)}"


@pytest.mark.parametrize("prefix", sorted(p for p, layer in LAYERS.items() if not layer.torch))
def test_a_torch_free_layer_reaches_no_torch(prefix, graph, files):
    for module in (m for m in files if layer_of(m) == prefix):
        path = [m for m in reachable(graph, module, skip=TORCH_DOORS) | {module}
                if m not in TORCH_DOORS and TORCH in graph.get(m, ())]
        assert not path, f"{module} reaches torch through {sorted(path)}"


def test_tasks_never_import_the_evaluation(graph, files):
    for module in (m for m in files if within(m, "lenbench.tasks")):
        assert not {m for m in reachable(graph, module) if within(m, "lenbench.evaluate")}, module


def test_no_module_is_on_an_import_cycle(graph):
    for module in graph:
        assert module not in reachable(graph, module), f"{module} imports itself through a cycle"


def test_pending_edges_are_still_there(full_graph):
    """An edge of `PENDING` that the code no longer has must leave the list (the checks then hold it)."""
    gone = {edge: why for edge, why in PENDING.items() if edge[1] not in full_graph.get(edge[0], set())}
    assert not gone, f"these edges are gone, remove them from PENDING: {gone}"


def test_the_graph_sees_function_level_imports_and_package_inits(full_graph):
    """Guards the check itself."""
    g = full_graph
    assert "lenbench.report.build" in g["lenbench.api"]  # imported inside a function (write_report)
    assert TORCH in g["lenbench.numerics"]  # torch imported inside numerics_tag
    assert "lenbench.tasks" in g["lenbench.evaluate"]  # evaluate imports tasks.base, which runs tasks/__init__
    assert "lenbench.tasks" not in packages_run("lenbench.tasks.lm", "lenbench.tasks.base")  # already inside it
    assert "lenbench.encodings" in g["lenbench.kernels.rotary"]  # from lenbench.encodings.rope import ...


def test_the_rules_catch_a_cycle_through_a_package_init():
    """A task importing a module that imports `lenbench.tasks.base` is a cycle through tasks/__init__."""
    g = {"lenbench.tasks": {"lenbench.tasks.lm", "lenbench.tasks.base"},  # the layout before the measurements moved
         "lenbench.tasks.lm": {"lenbench.evaluate"},
         "lenbench.evaluate": {"lenbench.tasks.base", *packages_run("lenbench.evaluate", "lenbench.tasks.base")}}
    assert "lenbench.tasks.lm" in reachable(g, "lenbench.tasks.lm")


def test_the_root_imports_the_api_only_on_first_use():
    """The root package is not walked (every process imports it first), so what it imports is held
    here: numerics at import, and the API (`lenbench.api`, which reaches torch and the report) only
    inside its `__getattr__` (PEP 562), never at module level."""
    import ast

    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    inside = {f"{n.module}.{a.name}" for f in functions for n in ast.walk(f) if isinstance(n, ast.ImportFrom)
              for a in n.names}
    at_import = {f"{n.module}.{a.name}" for stmt in tree.body if not isinstance(stmt, ast.FunctionDef)
                 for n in ast.walk(stmt) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert at_import == {"lenbench.numerics"}
    assert inside == {"lenbench.api"}
    assert [f.name for f in functions if inside & {f"{n.module}.{a.name}" for n in ast.walk(f)
                                                   if isinstance(n, ast.ImportFrom) for a in n.names}] == ["__getattr__"]


def test_docs_design_states_the_table():
    """docs/DESIGN.md's layer table is `LAYERS`, row for row."""
    text = (ROOT / "docs" / "DESIGN.md").read_text().split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    groups = {"foundation": FOUNDATION, "leaves": LEAVES}
    stated = {}
    for line in text.strip().splitlines()[2:]:
        layer, may, torch = (c.strip() for c in line.strip("|").split("|"))
        names = [] if may == "—" else [n.strip() for n in may.split(",")]
        allowed = [m for n in names for m in (groups[n] if n in groups else ("lenbench." + n.strip("`"),))]
        stated["lenbench." + layer.strip("`")] = Layer(tuple(sorted(allowed)), torch == "yes")
    assert stated == {p: Layer(tuple(sorted(r.may_import)), r.torch) for p, r in LAYERS.items()}


def private_imports(path: Path) -> list[str]:
    """`module.name` for each underscore name a file imports from another lenbench module (a name
    another module relies on is part of its owner's interface and is spelt as such)."""
    import ast
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lenbench"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_name(files):
    offenders = {name: found for name, p in files.items() if (found := private_imports(p))}
    assert offenders == {}


def test_a_private_import_is_seen(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from lenbench.report.rows import _secret, public\n")
    assert private_imports(probe) == ["lenbench.report.rows._secret"]
