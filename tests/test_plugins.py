"""Plugins (`lenbench.plugins`): an encoding and a task from outside the package, loaded from a
file, a module, an entry point; refused names; one-line errors; the fingerprint of their sources.

The end-to-end runs (every way in, with the process executor, the page, the kernel benchmarks,
and an edit recomputing exactly the plugin's cells) are in tests/run/test_plugins_e2e.py; the Ray
ones in tests/run/test_ray.py.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from lenbench_testing import PLUGIN_ENCODING, plugin_sandbox, write_dedented

from lenbench import plugins
from lenbench.config import load_suite, parse_suite
from lenbench.config.fields import SuiteError
from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding
from lenbench.plugins import PluginError, load_plugins
from lenbench.registry import UnknownNameError
from lenbench.tasks import TASKS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "plugins"

#: The encoding plugin every test writes (lenbench_testing's, the end-to-end tests' too).
ENCODING_PLUGIN = PLUGIN_ENCODING


@pytest.fixture
def sandbox():
    with plugin_sandbox(fresh=True):
        yield


write = write_dedented


def test_a_file_plugin_registers_its_encoding_with_its_origin(tmp_path, sandbox):
    path = write(tmp_path / "mype.py", ENCODING_PLUGIN.format(name="alibi-steep", scale=2.0))
    [plugin] = load_plugins([path])
    assert (plugin.kind, plugin.module, plugin.label) == ("file", "lenbench_plugin_mype", "mype.py")
    assert ENCODINGS.origin("alibi-steep") == plugin and ENCODINGS.origin("alibi") is None
    assert "alibi-steep" not in ENCODINGS.builtin_names() and "alibi" in ENCODINGS.builtin_names()
    enc = build_encoding("alibi-steep", EncodingDims(d_model=32, n_heads=4))
    assert enc.slopes.tolist() == [2 * s for s in build_encoding("alibi", EncodingDims(32, 4)).slopes.tolist()]
    assert load_plugins([path]) == [plugin]  # once per process
    assert plugins.loaded()[-1] == plugin


def test_an_edited_file_plugin_is_loaded_again_and_its_old_names_go(tmp_path, sandbox):
    path = write(tmp_path / "mype.py", ENCODING_PLUGIN.format(name="alibi-steep", scale=2.0))
    load_plugins([path])
    write(path, ENCODING_PLUGIN.format(name="alibi-steeper", scale=4.0))
    plugins.refresh()
    assert "alibi-steep" not in ENCODINGS and "alibi-steeper" in ENCODINGS
    enc = build_encoding("alibi-steeper", EncodingDims(d_model=32, n_heads=4))
    assert enc.slopes[0].item() == pytest.approx(4 * 0.25)


def test_a_plugin_cannot_take_a_built_in_name(tmp_path, sandbox):
    path = write(tmp_path / "mype.py", ENCODING_PLUGIN.format(name="alibi", scale=2.0))
    with pytest.raises(PluginError) as err:
        load_plugins([path])
    assert str(err.value) == ("plugin mype.py registers encoding 'alibi', which is already the built-in lenbench "
                              "encoding; give yours another name (e.g. 'mype-alibi')")
    assert ENCODINGS.origin("alibi") is None and "lenbench_plugin_mype" not in sys.modules


def test_two_plugins_cannot_take_one_name(tmp_path, sandbox):
    load_plugins([write(tmp_path / "a" / "one.py", ENCODING_PLUGIN.format(name="steep", scale=2.0))])
    with pytest.raises(PluginError, match=r"^plugin two.py registers encoding 'steep', which is already encoding "
                                          r"'steep' of plugin one.py; give yours another name"):
        load_plugins([write(tmp_path / "two.py", ENCODING_PLUGIN.format(name="steep", scale=3.0))])


#: Loads a plugin before anything imported the built-ins (the plugin's own import brings them in),
#: then edits and reloads it; prints what each registry says about who registered what.
FIRST_IMPORT = """
import json, sys
from pathlib import Path
from lenbench import plugins
path = Path(sys.argv[1])
plugins.load_plugins([path])
from lenbench.encodings import ENCODINGS
from lenbench.tasks import TASKS
def origins():
    return {r.kind: {n: (o.label if (o := r.origin(n)) else None) for n in r.names()} for r in (ENCODINGS, TASKS)}
before = origins()
path.write_text(path.read_text().replace('"eco-steep"', '"eco-steeper"'))
plugins.refresh()
print(json.dumps({"before": before, "after": origins()}))
"""


@pytest.mark.subprocess
def test_built_ins_imported_by_a_plugin_stay_built_in_and_a_reload_replaces_only_the_plugins_names(tmp_path):
    path = write(tmp_path / "p.py", ENCODING_PLUGIN.format(name="eco-steep", scale=2.0))
    out = subprocess.run([sys.executable, "-c", FIRST_IMPORT, str(path)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    before, after = seen["before"], seen["after"]
    assert {n: o for n, o in before["encoding"].items() if o} == {"eco-steep": "p.py"}
    assert {"alibi", "rope", "fox"} <= set(before["encoding"]) and not any(before["task"].values())
    assert {n: o for n, o in after["encoding"].items() if o} == {"eco-steeper": "p.py"}
    assert {n for n, o in after["encoding"].items() if o is None} == {n for n, o in before["encoding"].items() if o is None}
    assert after["task"] == before["task"]


def test_a_reload_replaces_only_that_plugins_names(tmp_path, sandbox):
    one = write(tmp_path / "one.py", ENCODING_PLUGIN.format(name="one-steep", scale=2.0))
    [two] = load_plugins([write(tmp_path / "two.py", ENCODING_PLUGIN.format(name="two-steep", scale=3.0))])
    load_plugins([one])
    builtins = ENCODINGS.builtin_names()
    write(one, ENCODING_PLUGIN.format(name="one-steeper", scale=4.0))
    [one_again] = load_plugins([one])
    assert ENCODINGS.builtin_names() == builtins and "rope" in ENCODINGS
    assert ENCODINGS.origin("two-steep") == two and ENCODINGS.origin("one-steeper") == one_again
    assert "one-steep" not in ENCODINGS
    assert [p.label for p in plugins.loaded()] == ["two.py", "one.py"]


@pytest.mark.subprocess
def test_list_marks_exactly_the_plugins_entries(tmp_path):
    """`lenbench list` loads the plugin before it imports the built-ins: only the plugin's entry is marked."""
    path = write(tmp_path / "p.py", ENCODING_PLUGIN.format(name="eco-alibi-learn", scale=2.0))
    out = subprocess.run([sys.executable, "-m", "lenbench.cli", "list", "encodings", "--plugin", str(path)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    marked = [lines[i - 1].split()[0] for i, line in enumerate(lines) if line.strip().startswith("plugin:")]
    assert marked == ["eco-alibi-learn"]
    names = [line.split()[0] for line in lines if line and not line.startswith(" ")]
    assert {"alibi", "rope", "dape", "eco-alibi-learn"} <= set(names)


@pytest.mark.parametrize("spec, message", [
    ("missing.py", r"^plugin 'missing.py' not found: no file .*missing.py; give a path to a .py file"),
    ("no_such_module_xyz.enc", r"^plugin 'no_such_module_xyz.enc': no module named 'no_such_module_xyz'; install it"),
    ("not a module", r"^plugin 'not a module' is neither a module name"),
    ("", r"^a plugin entry is empty"),
])
def test_a_plugin_that_cannot_be_found_is_one_line(tmp_path, spec, message, sandbox):
    with pytest.raises(PluginError, match=message) as err:
        load_plugins([spec], base_dir=tmp_path)
    assert "\n" not in str(err.value)


def test_an_error_inside_a_plugin_is_one_line_naming_it(tmp_path, sandbox):
    path = write(tmp_path / "broken.py", "import torch\nraise RuntimeError('slopes\\nmissing')\n")
    with pytest.raises(PluginError) as err:
        load_plugins([path])
    assert str(err.value) == "plugin broken.py failed to load: RuntimeError: slopes missing"


def test_a_module_plugin_and_the_unknown_name_error_naming_the_plugins(tmp_path, monkeypatch, sandbox):
    write(tmp_path / "mypkg" / "__init__.py", "")
    write(tmp_path / "mypkg" / "enc.py", ENCODING_PLUGIN.format(name="pkg-steep", scale=2.0))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownNameError, match=r"no plugins loaded: an encoding or task from outside lenbench "
                                               r"comes in with the suite's `plugins:`, --plugin"):
        ENCODINGS.get("pkg-steep")
    [plugin] = load_plugins(["mypkg.enc"])
    assert ENCODINGS.origin("pkg-steep") == plugin and plugin.kind == "module"
    assert str(tmp_path.resolve()) in plugins.import_roots()
    with pytest.raises(UnknownNameError, match=r"unknown encoding 'pkg-stepe'; did you mean 'pkg-steep'\? .*"
                                               r"; plugins loaded: mypkg.enc\)$"):
        ENCODINGS.get("pkg-stepe")


def dist(site: Path, *, broken: bool = False) -> Path:
    """A distribution installed into `site` (a sys.path directory) declaring both entry points;
    its classes carry no decorator: the entry point registers them."""
    write(site / "mype_dist" / "__init__.py", "")
    write(site / "mype_dist" / "enc.py", """
        from lenbench.encodings.alibi import ALiBi


        class Steep(ALiBi):
            description = "ALiBi from an entry point"
    """)
    write(site / "mype_dist" / "task.py", (EXAMPLES / "running_max.py").read_text().replace(
        '@register_task("running-max")\n', ""))
    info = site / "mype_dist-0.1.dist-info"
    write(info / "METADATA", "Metadata-Version: 2.1\nName: mype-dist\nVersion: 0.1\n")
    broken_line = "ep-broken = mype_dist.nothing:Missing\n" if broken else ""
    write(info / "entry_points.txt", "[lenbench.encodings]\nep-steep = mype_dist.enc:Steep\n" + broken_line
          + "\n[lenbench.tasks]\nep-running-max = mype_dist.task:RunningMax\n")
    return site


def test_entry_points_load_on_demand(tmp_path, monkeypatch, sandbox):
    monkeypatch.syspath_prepend(str(dist(tmp_path / "site")))
    assert "ep-steep" not in ENCODINGS.names()
    cls = ENCODINGS.get("ep-steep")  # loaded now, registered under the entry point's name
    assert cls.name == "ep-steep" and ENCODINGS.origin("ep-steep").label == "entry point lenbench.encodings:ep-steep"
    assert "ep-running-max" in TASKS and TASKS.get("ep-running-max").name == "ep-running-max"


@pytest.mark.subprocess
def test_a_broken_entry_point_is_one_line_and_the_rest_still_list(tmp_path, sandbox):
    site = dist(tmp_path / "site", broken=True)
    env = {"PYTHONPATH": f"{site}:{ROOT}", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "lenbench.cli", "list", "encodings"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("lenbench: warning:")]
    assert len(warnings) == 1 and "entry point lenbench.encodings:ep-broken = mype_dist.nothing:Missing " \
        "(distribution mype-dist 0.1) failed to load: ModuleNotFoundError" in warnings[0]
    names = [line.split()[0] for line in out.stdout.splitlines() if line and not line.startswith(" ")]
    assert {"alibi", "rope", "fox", "ep-steep"} <= set(names) and "ep-broken" not in names
    assert "plugin: entry point lenbench.encodings:ep-steep" in out.stdout


@pytest.mark.subprocess
def test_list_shows_a_file_plugin_marked_with_its_source():
    out = subprocess.run([sys.executable, "-m", "lenbench.cli", "list", "encodings", "--plugin",
                          str(EXAMPLES / "alibi_steep.py")], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    block = out.stdout.split("alibi-steep ", 1)[1].splitlines()
    assert block[0].strip() == "ALiBi with slopes multiplied by `scale` (a plugin example)"
    assert block[1].strip() == f"plugin: alibi_steep.py ({EXAMPLES / 'alibi_steep.py'})"
    tasks = subprocess.run([sys.executable, "-m", "lenbench.cli", "list", "tasks", "--plugin", "examples/plugins/running_max.py"],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "running-max" in tasks.stdout and "(plugin: running_max.py" in tasks.stdout


def test_suite_plugins_are_relative_to_the_suite_file_and_validated(tmp_path, sandbox):
    suite = load_suite(EXAMPLES / "suite.yaml")
    assert suite.plugins == ("alibi_steep.py", "running_max.py")
    assert {e.name for e in suite.encodings} >= {"alibi-steep"} and suite.tasks[0].name == "running-max"
    with pytest.raises(SuiteError, match=r"^<suite>: plugins\[0\]: plugin 'nothere.py' not found"):
        parse_suite({"plugins": ["nothere.py"], "tasks": [{"name": "copy", "train_len": 4}], "encodings": ["nope"]},
                    base_dir=tmp_path)
    with pytest.raises(SuiteError, match=r"^<suite>: plugins must be a list of module names or paths"):
        parse_suite({"plugins": [3], "tasks": [{"name": "copy", "train_len": 4}], "encodings": ["nope"]})


def test_a_plugin_cell_fingerprint_holds_the_plugin_and_the_lenbench_modules_it_imports(tmp_path, sandbox):
    from lenbench.run.fingerprint import cell_fingerprint, source_files

    path = write(tmp_path / "mype.py", ENCODING_PLUGIN.format(name="alibi-steep", scale=2.0))
    suite = parse_suite({"plugins": [str(path)], "tasks": [{"name": "copy", "train_len": 4}],
                         "encodings": ["alibi", "alibi-steep"]})
    alibi, steep = suite.cells()
    files = source_files(steep)
    assert "plugin:mype.py" in files and "encodings/alibi.py" in files  # it subclasses ALiBi
    assert set(files) - set(source_files(alibi)) == {"plugin:mype.py"}
    before = cell_fingerprint(steep, "cpu", 1, "")
    write(path, ENCODING_PLUGIN.format(name="alibi-steep", scale=3.0))
    assert cell_fingerprint(steep, "cpu", 1, "") == before  # the source as loaded: what this process runs
    plugins.refresh()
    after = cell_fingerprint(steep, "cpu", 1, "")
    assert after.sources["plugin:mype.py"] != before.sources["plugin:mype.py"]
    assert {k for k in after.sources if after.sources[k] != before.sources[k]} == {"plugin:mype.py"}
    assert cell_fingerprint(alibi, "cpu", 1, "") .sources == {k: v for k, v in before.sources.items() if k != "plugin:mype.py"}


def test_a_package_plugin_fingerprints_exactly_the_modules_its_module_imports(tmp_path, monkeypatch, sandbox):
    from lenbench.run.fingerprint import encoding_files

    write(tmp_path / "mypkg" / "__init__.py", "")
    write(tmp_path / "mypkg" / "helpers.py", "SCALE = 2.0\n")
    write(tmp_path / "mypkg" / "unrelated.py", "import torch\n")
    write(tmp_path / "mypkg" / "enc.py", """
        from lenbench.encodings import register_encoding
        from lenbench.encodings.t5 import T5Bias

        from .helpers import SCALE


        @register_encoding("pkg-t5")
        class PkgT5(T5Bias):
            description = "T5 from a package"
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    load_plugins(["mypkg.enc"])
    files = encoding_files("pkg-t5", {})
    assert {"plugin:mypkg/enc.py", "plugin:mypkg/helpers.py", "encodings/t5.py", "encodings/base.py"} <= set(files)
    assert "plugin:mypkg/unrelated.py" not in files and "encodings/alibi.py" not in files


def test_a_worker_without_the_plugin_fails_the_cell_in_one_line_naming_the_plugins(tmp_path, sandbox):
    from lenbench.run.cell import CellJob, compute_cell

    path = write(tmp_path / "mype.py", ENCODING_PLUGIN.format(name="alibi-steep", scale=2.0))
    suite = parse_suite({"plugins": [str(path)], "tasks": [{"name": "copy", "train_len": 4}],
                         "encodings": ["alibi-steep"], "train": {"steps": 2}, "eval": {"ratios": [1], "samples": 2}})
    [cell] = suite.cells()
    lost = dataclasses.replace(plugins.loaded()[-1], source=b"raise ImportError('gone')\n")
    ENCODINGS.forget(plugins.loaded()[-1])
    plugins._LOADED.clear()
    sys.modules.pop("lenbench_plugin_mype", None)
    outcome = compute_cell(CellJob(cell=cell, device="cpu", threads=1, plugins=(lost,)))
    error = outcome.result.error
    assert outcome.result.failed and "\n" not in error
    assert "unknown encoding 'alibi-steep'" in error
    assert "not loaded here: plugin mype.py failed to load: ImportError: gone" in error
    # the worker's environment, not the cell: recorded, and never reused by the next run (issue 38)
    assert outcome.result.outside.endswith("(plugin not loaded here)")


def test_the_examples_run_and_their_reference_test_passes(tmp_path, sandbox):
    """Both documented examples (docs/add-encoding.md, docs/add-task.md) run as files of the repository."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import test_alibi_steep
    finally:
        sys.path.remove(str(EXAMPLES))
    test_alibi_steep.test_bias_is_scaled_alibi_in_closed_form()
    test_alibi_steep.test_scale_one_is_alibi_and_bias_is_translation_invariant()
    suite = load_suite(EXAMPLES / "suite.yaml")
    import torch

    from lenbench.tasks import build_task

    task = build_task("running-max")
    batch = task.sample(3, 6, torch.Generator().manual_seed(0))
    assert (batch.targets == batch.inputs.cummax(dim=1).values).all() and batch.loss_mask.all()
    from lenbench.run.driver import run_suite

    tiny = dataclasses.replace(suite, train=dataclasses.replace(suite.train, steps=5, warmup=1),
                               eval=dataclasses.replace(suite.eval, ratios=(1, 2), samples=4))
    results = run_suite(tiny, tmp_path / "run", device="cpu", executor="serial", progress=False, log=lambda _: None).computed
    assert sorted(r.title for r in results) == sorted(c.title for c in tiny.cells())
    assert all(r.status == "ok" for r in results)
