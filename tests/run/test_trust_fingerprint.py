"""Issue 19, defect 4: the fingerprint hashes the import closure of a cell's compute path, so
editing any module of that closure marks exactly the cells that import it stale, with a reason.

Every edit is made in a temporary copy of the package: the fingerprint's `PACKAGE` points at the
copy (in process, fingerprints only) or the copy is the `PYTHONPATH` of a real `lenbench run`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lenbench_testing import TINY_SUITE, write_suite

from lenbench.config import parse_suite
from lenbench.run import fingerprint
from lenbench.run.closure import dynamic_loads, import_closure
from lenbench.run.executors.base import executor_modules
from lenbench.run.fingerprint import cell_fingerprint, source_files, stale_reasons

ROOT = Path(__file__).resolve().parents[2]
#: Representative cells: alibi, rope with a variant, randomized wrapping rope; a copy and an lm task.
SUITE = {**TINY_SUITE, "encodings": ["alibi", "rope", {"name": "randomized", "params": {"base": "rope"}}],
         "tasks": [{"name": "copy", "train_len": 4}, {"name": "lm", "train_len": 8}]}
#: Package modules no cell's compute path imports: among them the driver, the results-directory
#: layout and the executors, which only read and write files or decide where cells run.
OUTSIDE = ("report/plots/_style.py", "compare/gate.py", "cli.py", "report/rows.py", "report/tables.py", "report/page.py", "publish.py", "kernels/bias.py",
           "encodings/t5.py", "tasks/parity.py",
           "run/driver.py", "run/store.py", "run/executors/base.py", "run/executors/local.py", "run/executors/ray.py",
           "run/executors/parent_watch.py", "atomic.py", "config/kernels.py")


def label(cell) -> str:
    return f"{cell.encoding.key}/{cell.task.name}"


@pytest.fixture(scope="module")
def cells():
    found = {label(c): c for c in parse_suite(SUITE).cells()}
    assert sorted(found) == ["alibi/copy", "alibi/lm", "randomized/copy", "randomized/lm", "rope/copy", "rope/lm"]
    assert all(v.key == "linear" for c in found.values() for v in c.variants)
    return found


@pytest.fixture
def package(tmp_path, monkeypatch) -> Path:
    """A copy of the package, which the fingerprint reads instead of the real one."""
    copy = tmp_path / "lenbench"
    shutil.copytree(ROOT / "lenbench", copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fingerprint, "PACKAGE", copy)
    return copy


def fingerprints(cells: dict) -> dict:
    return {name: cell_fingerprint(cell, "cpu", 1, "") for name, cell in cells.items()}


def edit(package: Path, rel: str, line: str = "# edited by a test") -> bytes:
    """Add `line` to module `rel` of the copy; returns the original bytes."""
    path = package / rel
    original = path.read_bytes()
    path.write_text(original.decode() + f"\n{line}\n")
    return original


def stale_after_edit(package: Path, cells: dict, before: dict, rel: str, line: str = "# edited by a test") -> dict:
    """cell label → stale reasons once `rel` is edited (the copy is restored afterwards)."""
    original = edit(package, rel, line)
    try:
        after = fingerprints(cells)
    finally:
        (package / rel).write_bytes(original)
    return {name: stale_reasons(before[name].to_json(), after[name]) for name in cells
            if stale_reasons(before[name].to_json(), after[name])}


@pytest.mark.slow
def test_editing_any_module_of_the_closure_marks_exactly_its_cells_stale(package, cells):
    before = fingerprints(cells)
    assert {n: f.code for n, f in before.items()} == {n: f.code for n, f in fingerprints_of_real(cells).items()}
    closures = {name: set(source_files(cell)) for name, cell in cells.items()}
    modules = sorted(set().union(*closures.values()))
    assert len(modules) > 15 and "config/schema.py" in modules
    for rel in modules:
        expected = {name for name, files in closures.items() if rel in files}
        assert stale_after_edit(package, cells, before, rel) == {n: [f"source changed: {rel}"] for n in expected}, rel
    assert fingerprints(cells) == before  # every edit was undone


def fingerprints_of_real(cells: dict) -> dict:
    real = fingerprint.PACKAGE
    try:
        fingerprint.PACKAGE = ROOT / "lenbench"
        return fingerprints(cells)
    finally:
        fingerprint.PACKAGE = real


def test_editing_factor_at_marks_the_rope_variant_cells_stale(package, cells):
    before = fingerprints(cells)
    scaling = package / "encodings/rope_scaling.py"
    needle = "        return max(1.0, float(ratio))\n"
    source = scaling.read_text()
    assert source.count(needle) == 1 and source.split(needle)[0].rsplit("\ndef ", 1)[1].startswith("factor_at(")
    scaling.write_text(source.replace(needle, "        return max(1.0, 2 * float(ratio))\n"))
    after = fingerprints(cells)
    for name in ("rope/copy", "rope/lm", "randomized/copy", "randomized/lm"):
        assert stale_reasons(before[name].to_json(), after[name]) == ["source changed: encodings/rope_scaling.py"], name


@pytest.mark.parametrize("rel", OUTSIDE)
def test_editing_a_module_outside_the_closure_changes_no_fingerprint(package, cells, rel):
    before = fingerprints(cells)
    assert stale_after_edit(package, cells, before, rel) == {}
    assert fingerprints(cells) == before


def test_editing_the_driver_changes_no_fingerprint_and_the_cell_module_every_one(package, cells):
    """The driver is its own module, outside every closure (no cell imports it); the compute path
    of a cell, `run/cell.py`, is hashed whole."""
    before = fingerprints(cells)
    (package / "run/driver.py").write_text((package / "run/driver.py").read_text() + "\n# the driver, edited\n")
    assert fingerprints(cells) == before
    assert stale_after_edit(package, cells, before, "run/cell.py") == {
        name: ["source changed: run/cell.py"] for name in cells}


def test_editing_alibi_marks_exactly_the_alibi_cells_stale(package, cells):
    before = fingerprints(cells)
    stale = stale_after_edit(package, cells, before, "encodings/alibi.py")
    assert stale == {"alibi/copy": ["source changed: encodings/alibi.py"],
                     "alibi/lm": ["source changed: encodings/alibi.py"]}


def test_the_closure_of_an_alibi_copy_cell(cells):
    """What the compute path imports today, stated in full (a change here is a deliberate one).
    No driver, store or executor module: the compute path (`run/cell.py`) imports none of them."""
    assert source_files(cells["alibi/copy"]) == [
        "__init__.py", "baselines.py", "config/fields.py", "config/resources.py",
        "config/schema.py", "device.py", "encodings/__init__.py", "encodings/alibi.py", "encodings/attention.py",
        "encodings/base.py", "encodings/rope_scaling.py", "encodings/rope_types.py",
        "evaluate.py", "metrics.py", "model.py", "names.py", "numerics.py", "plugin_changes.py", "plugins.py", "registry.py",
        "results/build.py", "results/cell.py", "results/check.py", "results/labels.py",
        "results/schema.py", "rope_factors.py", "run/cell.py",
        "run/checkpoint.py", "run/closure.py",
        "run/fingerprint.py", "run/memory.py", "tasks/__init__.py", "tasks/_common.py", "tasks/base.py", "tasks/copying.py",
        "tasks/decoding.py", "tasks/eval_data.py", "tasks/params.py", "train.py"]
    assert set(source_files(cells["rope/lm"])) - set(source_files(cells["alibi/copy"])) == {
        "encodings/params.py", "encodings/rope.py", "tasks/corpora.py", "tasks/lm.py", "tasks/lm_context.py"}
    assert set(source_files(cells["randomized/copy"])) - set(source_files(cells["rope/copy"])) == {
        "encodings/randomized.py"}


def test_code_in_a_package_init_is_hashed_but_its_registrations_are_not_followed(package, cells):
    before = fingerprints(cells)
    stale = stale_after_edit(package, cells, before, "encodings/__init__.py", "SCALE = 2")
    assert stale == {name: ["source changed: encodings/__init__.py"] for name in cells}
    assert "encodings/t5.py" not in set().union(*(source_files(c) for c in cells.values()))


def test_the_compute_closure_loads_no_code_by_path(cells):
    """The closure follows imports; a load by file path would be a hole. The compute closure's only
    dynamic loads are `plugins.py`'s, which load the plugins themselves — code outside lenbench
    whose sources the fingerprint hashes as ``plugin:…`` keys (tests/test_plugins.py) — and
    `registry.import_members`, with which the encodings' and tasks' `__init__`s import their own
    members so that each registers itself: the closure never follows a package `__init__` into its
    members (its rule), and a cell's own encoding and task modules are roots of its closure. The
    executors (outside it) import the module that declares an executor's name
    (`executor_modules`)."""
    files = sorted(set().union(*(source_files(c) for c in cells.values())))
    loads = [site for rel in files for site in dynamic_loads(rel, ROOT / "lenbench")]
    assert {site.split(":")[0] for site in loads} == {"plugins.py", "registry.py"}
    assert sorted({site.split()[-1] for site in loads}) == ["exec", "import_module"]
    assert [site.split()[-1] for site in loads if site.startswith("registry.py")] == ["import_module"]
    loads = dynamic_loads("run/executors/base.py", ROOT / "lenbench")
    assert [site.split(":")[0] + " " + site.split()[-1] for site in loads] == ["run/executors/base.py import_module"]
    # the executors' modules are found from their own EXECUTOR_NAMES declarations, not by import: outside the closure
    assert set(executor_modules().values()) == {"lenbench.run.executors.local", "lenbench.run.executors.ray"}
    # `python -m lenbench.benchmark` (benchmark/__main__.py, outside the closure) imports its plans: no load by path
    assert "spec_from_file_location" not in (ROOT / "lenbench" / "benchmark/__main__.py").read_text()
    assert not any(rel.startswith(("kernels/", "benchmark/")) for rel in files)


def test_import_closure_rules_on_a_small_package(tmp_path):
    """Relative, function-level and by-name imports are followed; an aggregating __init__ is not
    followed into its members, a name imported through it reaches its defining module, and an
    __init__ with code of its own is hashed."""
    pkg = tmp_path / "lenbench"
    files = {
        "__init__.py": '"""top."""\n__version__ = "1"\n',
        "a.py": "from . import b\ndef f():\n    from .sub import helper\n",
        "b.py": 'LAZY = {"x": "lenbench.c"}\n',
        "c.py": "from lenbench.sub import Thing\n",
        "d.py": "",
        "sub/__init__.py": '"""agg."""\nfrom lenbench.sub import one, two  # registers\n'
                           'from lenbench.sub.one import Thing\n__all__ = ["Thing"]\n',
        "sub/one.py": "Thing = 1\n",
        "sub/two.py": "from lenbench import d\n",
        "sub/helper.py": "",
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    assert import_closure(["a.py"], pkg) == ["__init__.py", "a.py", "b.py", "c.py", "sub/helper.py", "sub/one.py"]
    (pkg / "sub/__init__.py").write_text(files["sub/__init__.py"] + "def build():\n    return Thing\n")
    assert "sub/__init__.py" in import_closure(["a.py"], pkg)
    assert "sub/two.py" not in import_closure(["a.py"], pkg)
    # a remembered closure is reused only while every file it read, or looked for, is unchanged
    (pkg / "b.py").write_text(files["b.py"] + "import lenbench.d\n")
    assert "d.py" in import_closure(["a.py"], pkg)
    (pkg / "sub/Thing.py").write_text("")  # `from lenbench.sub import Thing` now names this module
    assert "sub/Thing.py" in import_closure(["a.py"], pkg)


#: Run with the copied package on PYTHONPATH: store each cell of SUITE_FILE as done under the
#: fingerprint of the code it finds (with "write"), then print which cells the engine would
#: recompute and why (`pending_cells`, as `lenbench run` asks before it runs anything).
ENGINE_SCRIPT = """
import json, sys
from pathlib import Path
from lenbench.atomic import atomic_write_json
from lenbench.run.driver import expected_fingerprint, pending_cells
from lenbench.run.store import cell_path
from lenbench.run import fingerprint
from lenbench.config import load_suite
suite, out = load_suite(sys.argv[1]), Path(sys.argv[2])
if sys.argv[3] == "write":
    for cell in suite.cells():
        atomic_write_json(cell_path(out, cell), {"schema_version": 1, "cell_id": cell.cell_id, "status": "ok",
                          "error": "", "rows": [], "fingerprint": expected_fingerprint(cell, "cpu", 1).to_json()})
stale = {}
todo = pending_cells(suite, out, device="cpu", threads=1, stale=stale, log=print)
print(json.dumps({"package": str(fingerprint.PACKAGE), "pending": [c.encoding.key for c in todo], "stale": stale}))
"""


@pytest.mark.subprocess
def test_the_engine_recomputes_rope_variant_cells_after_factor_at_is_edited(tmp_path):
    """The issue's reproduction without training: cells stored under the copy's code, then
    `rope_scaling.factor_at` edited in the copy; the engine (in its own process, reading the copy
    as its installed package) must now call them stale and say why."""
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "lenbench", pkg / "lenbench", ignore=shutil.ignore_patterns("__pycache__"))
    suite = write_suite(tmp_path, {**TINY_SUITE, "encodings": ["rope", {"name": "randomized", "params": {"base": "rope"}}]})

    def engine(mode: str) -> dict:
        env = {**os.environ, "PYTHONPATH": str(pkg)}
        done = subprocess.run([sys.executable, "-c", ENGINE_SCRIPT, str(suite), str(tmp_path / "out"), mode],
                              capture_output=True, text=True, env=env, cwd=pkg, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    stored = engine("write")
    assert stored == {"package": str(pkg / "lenbench"), "pending": [], "stale": {}}
    suite_py = pkg / "lenbench" / "encodings/rope_scaling.py"
    needle = "return max(1.0, float(ratio))"
    assert suite_py.read_text().count(needle) == 1
    suite_py.write_text(suite_py.read_text().replace(needle, "return max(1.0, 2 * float(ratio))"))
    assert engine("check") == {"package": str(pkg / "lenbench"), "pending": ["rope", "randomized"],
                               "stale": {"source changed: encodings/rope_scaling.py": 2}}
