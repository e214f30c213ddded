"""The pytest plugin's wiring: its `pytest11` entry point, the root conftest's guard against
registering it twice, its options registered once on either path, and `pytest-benchmark compare`
from the repository root."""

import importlib
import json
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import tomllib

from lenbench.benchmark import entry_point, pytest_plugin

ROOT = Path(__file__).resolve().parents[2]


def test_the_entry_point_is_declared_and_resolves_to_the_plugin():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[entry_point.GROUP] == {entry_point.NAME: entry_point.PLUGIN_MODULE}
    module = importlib.import_module(entry_point.PLUGIN_MODULE)
    assert module is pytest_plugin
    for hook in ("pytest_addoption", "pytest_configure", "pytest_sessionfinish", "pytest_benchmark_group_stats"):
        assert callable(getattr(module, hook)), hook


def test_the_root_conftest_is_wiring_only():
    """No option, fixture or hook of its own: only the guarded `pytest_plugins`."""
    namespace: dict = {}
    exec(compile((ROOT / "conftest.py").read_text(), "conftest.py", "exec"), namespace)
    own = sorted(k for k in namespace if not k.startswith("__") and k != "conftest_plugins")
    assert own == ["pytest_plugins"]


@pytest.mark.parametrize(("installed", "environ", "expected"), [
    (True, {}, []),  # the entry point loads it: listing it again would be a double registration
    (True, {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, [entry_point.PLUGIN_MODULE]),
    (False, {}, [entry_point.PLUGIN_MODULE]),  # an install without the entry point (older metadata)
])
def test_the_conftest_lists_the_plugin_only_where_the_entry_point_does_not_load_it(
        monkeypatch, installed, environ, expected):
    eps = [EntryPoint("lenbench", entry_point.PLUGIN_MODULE, "pytest11")] if installed else []
    eps.append(EntryPoint("lenbench", "somewhere.else", "pytest11"))  # another package's name: not ours
    monkeypatch.setattr(entry_point, "entry_points", lambda group: [e for e in eps if e.group == group])
    assert entry_point.conftest_plugins(environ) == expected


def _pytest(tmp_path: Path, with_entry_point: bool, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """pytest with a distribution first on the path that declares the entry point (as an install
    of this checkout does), or without one."""
    site = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    if with_entry_point:
        info = site / "lenbench_entry_point_probe-0.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lenbench-entry-point-probe\nVersion: 0.0\n")
        (info / "entry_points.txt").write_text(f"[pytest11]\nlenbench = {entry_point.PLUGIN_MODULE}\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.subprocess
@pytest.mark.parametrize("with_entry_point", [True, False], ids=["entry-point", "conftest"])
def test_the_options_are_registered_once_on_either_path(tmp_path, with_entry_point):
    proc = _pytest(tmp_path, with_entry_point, "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("--lenbench-plugin=") == 1
    assert proc.stdout.count("--results-dir=") == 1


BENCHES = [
    {"group": "attention-T64-fp32", "name": "test_kernel[alibi-cached-T64-fp32]", "params": {"T": 64},
     "fullname": "bench/test_kernels.py::test_kernel[alibi-cached-T64-fp32]", "param": "alibi-cached-T64-fp32"},
    {"group": "training-step-smoke-lm", "name": "test_training_step[nope]", "params": {"name": "nope"},
     "fullname": "bench/test_kernels.py::test_training_step[nope]", "param": "nope"},
]


@pytest.mark.parametrize(("group_by", "expected"), [
    ("group", ["attention-T64-fp32", "training-step-smoke-lm"]),
    ("param:T", ["T=64", "training-step-smoke-lm"]),  # the training step has no T: its own group
])
def test_group_stats_always_returns_the_groups(group_by, expected):
    """Never None (pytest-benchmark compare iterates what a conftest's implementation returns)."""
    groups = pytest_plugin.pytest_benchmark_group_stats(None, [dict(b) for b in BENCHES], group_by)
    assert [name for name, _ in groups] == expected
    assert sum(len(members) for _, members in groups) == len(BENCHES)


@pytest.mark.subprocess
def test_the_installed_plugin_groups_by_a_parameter_some_benchmarks_lack(tmp_path):
    """Outside a checkout (no conftest.py), loaded by its entry point before pytest-benchmark's own
    plugin: its grouping still answers first, so `param:T` does not fail on a benchmark without T."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_timings.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('T', [1, 2])\n"
        "def test_kernel(benchmark, T):\n    benchmark(lambda: None)\n\n"
        "def test_step(benchmark):\n    benchmark.group = 'steps'\n    benchmark(lambda: None)\n")
    proc = _pytest(tmp_path, True, "--benchmark-group-by=param:T", "-q", cwd=project)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "benchmark 'T=1'" in proc.stdout and "benchmark 'T=2'" in proc.stdout
    assert "benchmark 'steps'" in proc.stdout


@pytest.mark.subprocess
def test_pytest_benchmark_compare_works_from_the_repository_root(tmp_path):
    """On a benchmark JSON the plugin wrote (the published kernel timings); it crashed with
    `TypeError: 'NoneType' object is not iterable` while the override lived in conftest.py."""
    published = ROOT / "results" / "bench.json"
    data = json.loads(published.read_text())
    assert "lenbench" in data["machine_info"]  # written by this plugin's machine-info hook
    csv = tmp_path / "compare"
    proc = subprocess.run([sys.executable, "-c", "from pytest_benchmark.cli import main; main()", "compare",
                           str(published), "--group-by=group", f"--csv={csv}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {b["name"] for b in data["benchmarks"]}
    rows = Path(f"{csv}.csv").read_text()
    assert sum(name in rows for name in names) == len(names)
