"""The package's import graph, read from the source (every import, module-level or inside a function).

- The report path is cell files → rows → timings → statistics → secondary metric → tables → findings
  → cost → figures → page → build, each step importing only the ones before it; `lenbench.report.geometry`
  and `lenbench.report.regimes` (the report modules that build encodings) stand beside it and only the
  build imports them.
- Nothing on the report path (every `lenbench.report` module but geometry) reaches the model, the
  training loop or `lenbench.run`; the figures and the page never load a results source.
- Nothing in `lenbench.run` reaches `lenbench.report`.

The root package (`lenbench`, `lenbench.numerics`) is not walked, as in `tests/test_layers.py`: every
process imports it first, and it imports the API (`lenbench.api`) only on first use of an API name.

No module of the package is on an import cycle, and edges that break a rule are listed as pending:
both are `tests/test_layers.py`'s, over the same graph with package `__init__` edges added.
"""

import ast
from pathlib import Path

import pytest
from import_reading import PACKAGE, imported_names, module_name

#: The report path in order; a step may import only earlier steps ("lenbench.report.plots" stands
#: for every module of the figures package).
REPORT_PATH = ("lenbench.report.cells", "lenbench.report.rows", "lenbench.report.timings",
               "lenbench.report.intervals", "lenbench.report.ranks", "lenbench.report.stats", "lenbench.report.secondary",
               "lenbench.report.formatting", "lenbench.report.tables", "lenbench.report.markdown",
               "lenbench.report.findings", "lenbench.report.claims", "lenbench.report.cost",
               "lenbench.report.figures", "lenbench.report.plots", "lenbench.report.page", "lenbench.report.build")
GEOMETRY = "lenbench.report.geometry"
#: The report modules that build encodings (torch): beside the report path, imported by the build alone.
DOORS = frozenset({GEOMETRY, "lenbench.report.regimes"})
#: Modules the report path must never reach.
HEAVY = ("lenbench.model", "lenbench.train", "lenbench.run")
#: The one run module the report path reads: the results-directory layout (no torch, no model).
LAYOUT = "lenbench.run.store"
#: The root package, imported by every process before anything else and not walked (tests/test_layers.py):
#: `from lenbench import plugins` imports the submodule, not the API `lenbench/__init__.py` imports on
#: first use of one of its names (tests/test_api.py holds both at run time).
ROOT_MODULES = frozenset({"lenbench", "lenbench.numerics"})
#: Names of the report modules that read a results source from disk, by module.
LOADERS = {"lenbench.report.cells": ("cell_rows",),
           "lenbench.report.rows": ("load_results", "resolve_source", "readable_cell_results"),
           "lenbench.report.timings": ("load_kernel_timings", "load_training_steps")}


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The lenbench modules a source file imports anywhere in it."""
    return imported_names(path) & modules


def names_imported_from(path: Path, module: str) -> set[str]:
    return {a.name for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module == module for a in node.names}


@pytest.fixture(scope="module")
def files() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


@pytest.fixture(scope="module")
def full_graph(files) -> dict[str, set[str]]:
    return {name: imports_of(path, set(files)) - {name} for name, path in files.items()}


def reachable(graph: dict[str, set[str]], start: str, *, skip: frozenset[str] = frozenset()) -> set[str]:
    """Every module `start` imports, directly or through others, not walking through `skip` nor the
    root package (`ROOT_MODULES`)."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                if nxt not in skip | ROOT_MODULES:
                    todo.append(nxt)
    return seen


def step_of(module: str) -> int | None:
    for i, step in enumerate(REPORT_PATH):
        if module == step or module.startswith(step + "."):
            return i
    return None


def report_path_modules(files) -> list[str]:
    return sorted(m for m in files if step_of(m) is not None)


def in_package(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_layout_is_the_one_this_test_names(files):
    assert {m for m in files if m.startswith("lenbench.report.")} == {*report_path_modules(files), *DOORS}
    assert {"lenbench.report.plots._style", "lenbench.report.plots.extrapolation",
            "lenbench.report.plots.geometry", "lenbench.report.plots.cost"} <= set(files)


def test_each_report_step_imports_only_earlier_steps(full_graph, files):
    for module in report_path_modules(files):
        later = {m for m in report_path_modules(files) if step_of(m) > step_of(module)}
        found = reachable(full_graph, module, skip=DOORS) & later
        assert not found, f"{module} reaches a later step: {found}"


@pytest.mark.parametrize("door", sorted(DOORS))
def test_only_the_build_imports_a_door_and_a_door_imports_no_later_step(full_graph, files, door):
    importers = {m for m, edges in full_graph.items() if door in edges}
    assert importers <= {"lenbench.report.build"}, f"{importers - {'lenbench.report.build'}} import {door}"
    found = {m for m in reachable(full_graph, door) if m.startswith(("lenbench.report.plots", "lenbench.report.page",
                                                                  "lenbench.report.build"))}
    assert not found, f"{door} reaches {found}"


def test_the_report_path_never_reaches_the_model_training_or_run(full_graph, files):
    for module in report_path_modules(files):
        heavy = {m for m in reachable(full_graph, module, skip=DOORS) if in_package(m, HEAVY)} - {LAYOUT}
        assert not heavy, f"{module} reaches {sorted(heavy)}"


def test_figures_and_the_page_never_load_a_source(files):
    for module in report_path_modules(files):
        if in_package(module, ("lenbench.report.plots", "lenbench.report.page")):
            loaders = {name for source, names in LOADERS.items()
                       for name in names_imported_from(files[module], source) & set(names)}
            assert not loaders, f"{module} imports {loaders}: figures and the page take frames"
            assert not names_imported_from(files[module], "json"), module


def test_run_never_reaches_the_report(full_graph, files):
    for module in (m for m in files if in_package(m, ("lenbench.run",))):
        report = {m for m in reachable(full_graph, module) if in_package(m, ("lenbench.report",))}
        assert not report, f"{module} reaches {sorted(report)}"


def test_the_graph_sees_real_imports(full_graph):
    """Guards the check itself: known edges are found, including function-level ones."""
    g = full_graph
    assert "lenbench.report.rows" in g["lenbench.report.tables"] and "lenbench.report.stats" in g["lenbench.report.tables"]
    assert "lenbench.report.cells" in g["lenbench.report.rows"]
    assert "lenbench.report.rows" in g["lenbench.report.timings"]
    assert "lenbench.report.build" in g["lenbench.api"]  # imported inside write_report
    assert GEOMETRY in g["lenbench.report.build"]  # imported inside _result_figures
    assert "lenbench.report.regimes" in g["lenbench.report.build"]  # imported inside _regime_writer
    assert "lenbench.run.checkpoint" in g[GEOMETRY]  # the checkpoint reader, imported inside encoding_geometries
    assert "lenbench.report.plots._style" in g["lenbench.report.plots.extrapolation"]
