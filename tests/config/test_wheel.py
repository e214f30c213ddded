"""`pip install .` (a wheel, not editable) finds its own presets: issue 20, "presets inside the package".

One slow test (~1 min on 2 loaded cores: build, venv, install, `list suites`, a smoke run):

1. The wheel is built with `pip wheel --no-deps --no-build-isolation` from a clean copy of the
   checkout's build inputs (pyproject.toml, README.md, lenbench/). Not in the checkout itself:
   setuptools builds in-tree into build/lib and never removes a file there, so a module moved or
   deleted since an earlier build would still ship (and would hide a missing one); and the checkout
   stays untouched while other tests read it.
2. Its file list holds every preset YAML of lenbench/config/suites/ and exactly the checkout's
   lenbench modules.
3. It is installed with `pip install --no-deps --no-index` into a fresh venv made with
   `--system-site-packages` (torch, pandas ... come from the system). The system site may hold an
   editable lenbench (a setuptools `__editable__` finder pointing at some checkout): that finder
   sits after the path finder on `sys.meta_path`, so the venv's own copy wins and pip needs no
   `--force-reinstall` (it says it will not uninstall the system's copy, and installs); but for a
   direct child `lenbench.X` missing from the wheel that finder still answers from the editable
   checkout (seen: `lenbench.suite` found in /work/main), so the test asserts that every lenbench
   module of the checkout resolves to a file inside the venv.
   Every command runs without PYTHONPATH (the test suite's own runs set it to the checkout) and
   from a temporary directory outside the checkout.
4. `lenbench list suites` (the venv's console script) names every preset, and
   `lenbench run --suite smoke --out DIR --quiet` ends with every cell ok.
5. The installed benchmarks run without a checkout: `pytest --pyargs lenbench.benchmark.bench
   --suite smoke -k attention_baseline` (the `--suite` option comes from the plugin's `pytest11`
   entry point) writes a benchmark JSON with the attention baseline's timings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from lenbench.config import load_suite

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lenbench"
#: What setuptools reads to build the wheel (pyproject's `readme`, the package).
BUILD_INPUTS = ("pyproject.toml", "README.md")


def _run(cmd: list[str], cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def _modules() -> set[str]:
    """The checkout's lenbench modules as wheel paths, e.g. 'lenbench/config/parse.py'."""
    return {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}


def _presets() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (PACKAGE / "config" / "suites").glob("*.yaml")}


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


@pytest.fixture(scope="module")
def env() -> dict:
    """The environment of every command: this one without PYTHONPATH (it would put a checkout first)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH")}


@pytest.mark.subprocess
def test_wheel_install_outside_the_checkout_lists_the_presets_and_runs_smoke(tmp_path, env):
    src = tmp_path / "src"
    src.mkdir()
    for name in BUILD_INPUTS:
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(PACKAGE, src / "lenbench", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist),
          str(src)], cwd=tmp_path, env=env)
    (wheel,) = dist.glob("lenbench-*.whl")

    files = set(zipfile.ZipFile(wheel).namelist())
    assert _presets() and _presets() <= files, f"presets missing from the wheel: {sorted(_presets() - files)}"
    shipped = {f for f in files if f.startswith("lenbench/") and f.endswith(".py")}
    assert shipped == _modules(), f"missing: {sorted(_modules() - shipped)}; extra: {sorted(shipped - _modules())}"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], cwd=tmp_path, env=env)
    python = _bin(venv, "python")
    if sys.prefix != sys.base_prefix:
        # Run from a virtual environment (the README's install): `--system-site-packages` exposes the base
        # interpreter's site, not this environment's, where torch and pandas are. A path in a .pth file adds
        # this environment's packages after the new venv's own; it is not scanned for .pth files itself, so
        # the checkout's editable install stays out and the wheel's copy is the one imported.
        inner = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path, env=env).stdout.strip()
        (Path(inner) / "_outer_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], cwd=tmp_path, env=env)

    away = tmp_path / "elsewhere"  # outside the checkout: no lenbench/ beside the cwd
    away.mkdir()
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=away, env=env)
    installed = Path(site.stdout.strip()) / "lenbench"
    names = sorted(m[:-3].replace("/", ".").removesuffix(".__init__") for m in _modules())
    where = _run([str(python), "-c", "import importlib.util, json, sys\n"
                  "print(json.dumps({n: getattr(importlib.util.find_spec(n), 'origin', None) for n in sys.argv[1:]}))", *names],
                 cwd=away, env=env)
    origins = json.loads(where.stdout)
    outside = {n: o for n, o in origins.items() if o is None or not Path(o).resolve().is_relative_to(installed.resolve())}
    assert not outside, f"modules not from the installed wheel (an editable install shadows it?): {outside}"

    lenbench = str(_bin(venv, "lenbench"))
    listed = _run([lenbench, "list", "suites"], cwd=away, env=env).stdout
    listed_names = {line.split()[0] for line in listed.splitlines() if line[:1].strip()}
    assert {Path(p).stem for p in _presets()} <= listed_names, listed

    out = away / "out"
    _run([lenbench, "run", "--suite", "smoke", "--out", str(out), "--quiet"], cwd=away, env=env, timeout=600)
    cells = [json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))]
    assert cells and all(c["status"] == "ok" for c in cells), [(c["cell_id"], c["status"], c["error"]) for c in cells]
    assert len(cells) == len(load_suite("smoke").cells())

    bench_json = away / "kernels.json"
    _run([str(python), "-m", "pytest", "--pyargs", "lenbench.benchmark.bench", "--suite", "smoke", "-k",
          "attention_baseline", "-q", "-p", "no:cacheprovider", "--benchmark-json", str(bench_json)],
         cwd=away, env=env, timeout=600)
    timed = json.loads(bench_json.read_text())["benchmarks"]
    assert timed and {b["name"].split("[")[0] for b in timed} == {"test_attention_baseline"}, [b["name"] for b in timed]
    assert all(b["extra_info"]["kind"] == "attention-baseline" and b["extra_info"]["seconds"] > 0 for b in timed)
