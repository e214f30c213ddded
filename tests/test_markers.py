"""The fast tier's markers are on the tests they describe: every test that starts a Python interpreter
(directly or through a helper of its module) is marked `subprocess`, and every `subprocess`, `ray` or
`compile` test of this session is `slow`, so `-m "not slow"` never starts an interpreter."""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
STARTS_PYTHON = ("sys.executable",)


def _marks(node: ast.FunctionDef, src: str) -> set[str]:
    return {ast.get_source_segment(src, d).removeprefix("@").split("(")[0].rsplit(".", 1)[-1]
            for d in node.decorator_list}


def _module_marks(tree: ast.Module, src: str) -> set[str]:
    marks = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            marks |= {part.rsplit(".", 1)[-1] for part in ast.get_source_segment(src, node.value).strip("[]").split(",")}
    return {m.strip() for m in marks}


def unmarked_interpreter_tests(path: Path, root: Path = TESTS) -> list[str]:
    """The test functions of `path` that reach `sys.executable` (through module-level functions and
    fixtures of the module) without the `subprocess` marker."""
    src = path.read_text()
    tree = ast.parse(src)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    uses = {name: {x.id for x in ast.walk(n) if isinstance(x, ast.Name)} | {a.arg for a in n.args.args}
            for name, n in funcs.items()}

    def starts(name: str, seen: frozenset = frozenset()) -> bool:
        if any(p in (ast.get_source_segment(src, funcs[name]) or "") for p in STARTS_PYTHON):
            return True
        return any(starts(c, seen | {name}) for c in uses[name] & funcs.keys() if c not in seen | {name})

    module = _module_marks(tree, src)
    return [f"{path.relative_to(root)}::{name}" for name, n in funcs.items()
            if name.startswith("test_") and starts(name) and "subprocess" not in _marks(n, src) | module]


def test_every_test_that_starts_python_is_marked_subprocess():
    files = sorted(p for p in TESTS.rglob("test_*.py") if p != Path(__file__).resolve())  # not this scanner
    missing = [t for path in files for t in unmarked_interpreter_tests(path)]
    assert not missing, f"mark these @pytest.mark.subprocess (they start a Python interpreter): {missing}"


def test_the_scan_finds_an_unmarked_interpreter_test(tmp_path):
    """The scan itself: a helper that starts Python makes its caller an interpreter test."""
    (tmp_path / "test_x.py").write_text("import subprocess, sys\nimport pytest\n\n"
                                        "def _cli():\n    return subprocess.run([sys.executable, '-V'])\n\n"
                                        "def test_a():\n    _cli()\n\n"
                                        "@pytest.mark.subprocess\ndef test_b():\n    _cli()\n\n"
                                        "def test_c():\n    pass\n")
    assert unmarked_interpreter_tests(tmp_path / "test_x.py", root=tmp_path) == ["test_x.py::test_a"]


def test_subprocess_ray_and_compile_tests_are_slow(request):
    kinds = ("subprocess", "ray", "compile")
    fast = [item.nodeid for item in request.session.items
            if any(item.get_closest_marker(k) for k in kinds) and not item.get_closest_marker("slow")]
    assert not fast, f"left in the fast tier: {fast}"


@pytest.mark.subprocess
def test_a_subprocess_mark_brings_slow(request):
    assert request.node.get_closest_marker("slow") is not None
