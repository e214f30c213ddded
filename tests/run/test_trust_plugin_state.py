"""Issue 38, gap 1: a plugin that changes lenbench without registering anything (it rebinds the
model's initialisation, as a calibration pilot did) was in no fingerprint, so a cached run reused
cells computed without it. Now a plugin that changes lenbench or torch at import, or registers
nothing, is in every cell's fingerprint; a plugin that only registers classes stays in its own cells'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lenbench_testing import TINY_SUITE, plugin_sandbox, write_suite

from lenbench import plugin_changes, plugins
from lenbench.config import parse_suite
from lenbench.run.fingerprint import cell_sources

ROOT = Path(__file__).resolve().parents[2]
CLI = "import sys; from lenbench.cli import main; sys.exit(main())"

#: Rebinds the model's weight initialisation (token embeddings N(0, 1)) and registers nothing.
PATCH_INIT = '''
import torch.nn as nn
from lenbench import model as _model

_before = _model.Transformer._init_weights


def _init_weights(self):
    _before(self)
    nn.init.normal_(self.tok.weight, std=1.0)


_model.Transformer._init_weights = _init_weights
'''

#: Registers an encoding and changes nothing else.
REGISTER_ONLY = '''
from lenbench.encodings import register_encoding
from lenbench.encodings.alibi import ALiBi


@register_encoding("steep-{tag}")
class Steep(ALiBi):
    """ALiBi with steeper slopes."""
'''


@pytest.fixture
def sandbox():
    with plugin_sandbox(fresh=True):
        yield


def builtin_cell():
    return parse_suite({**TINY_SUITE, "encodings": ["rope"]}).cells()[0]


def test_changed_since_sees_rebinding_deleting_and_adding_to_a_class(monkeypatch):
    import torch.nn.init

    from lenbench import metrics, model

    before = plugin_changes.snapshot()
    assert plugin_changes.changed_since(before) == ()
    monkeypatch.setattr(model.Transformer, "_init_weights", lambda self: None)
    monkeypatch.setattr(torch.nn.init, "normal_", lambda *a, **k: None)
    monkeypatch.setattr(model.Transformer, "extra_method", lambda self: None, raising=False)
    monkeypatch.delattr(metrics, "encode_samples")
    assert plugin_changes.changed_since(before) == (
        "lenbench.metrics.encode_samples", "lenbench.model.Transformer._init_weights",
        "lenbench.model.Transformer.extra_method", "torch.nn.init.normal_")


def test_importing_a_module_for_the_first_time_is_no_change():
    import importlib

    sys.modules.pop("lenbench.escape", None)  # registers nothing, so it can be imported again
    before = plugin_changes.snapshot()
    importlib.import_module("lenbench.escape")  # what a plugin's `import lenbench.escape` does

    assert plugin_changes.changed_since(before) == ()


def test_a_plugin_that_changes_lenbench_is_in_every_cells_fingerprint(sandbox, tmp_path, monkeypatch):
    from lenbench import model

    monkeypatch.setattr(model.Transformer, "_init_weights", model.Transformer._init_weights)  # restored after
    cell = builtin_cell()
    before = cell_sources(cell)
    (tmp_path / "patch_init.py").write_text(PATCH_INIT)
    [plugin] = plugins.load_plugins([str(tmp_path / "patch_init.py")])
    assert plugins.changes(plugin) == ("lenbench.model.Transformer._init_weights",)
    after = cell_sources(cell)
    assert set(after) - set(before) == {"plugin:patch_init.py"}


def test_a_plugin_that_only_registers_stays_out_of_builtin_cells(sandbox, tmp_path):
    cell = builtin_cell()
    before = cell_sources(cell)
    (tmp_path / "steep.py").write_text(REGISTER_ONLY.format(tag="a"))
    [plugin] = plugins.load_plugins([str(tmp_path / "steep.py")])
    assert plugins.changes(plugin) == () and not plugins.reaches_every_cell(plugin)
    assert cell_sources(cell) == before
    mine = parse_suite({**TINY_SUITE, "encodings": ["steep-a"]}).cells()[0]
    assert "plugin:steep.py" in cell_sources(mine)


def test_a_plugin_that_registers_and_also_patches_is_in_every_cell(sandbox, tmp_path, monkeypatch):
    from lenbench import model

    monkeypatch.setattr(model.Transformer, "_init_weights", model.Transformer._init_weights)
    (tmp_path / "both.py").write_text(REGISTER_ONLY.format(tag="b") + PATCH_INIT)
    plugins.load_plugins([str(tmp_path / "both.py")])
    assert "plugin:both.py" in cell_sources(builtin_cell())


@pytest.mark.subprocess
def test_a_cached_run_recomputes_builtin_cells_once_a_patching_plugin_is_loaded(tmp_path):
    """The issue's probe, end to end: the same suite and directory, run without and then with the
    plugin. Before the fix the second run said `0 cell(s) run, 2 already done` and kept the old numbers."""
    suite = write_suite(tmp_path, {**TINY_SUITE, "encodings": ["nope"], "variants": []})
    (tmp_path / "patch_init.py").write_text(PATCH_INIT)
    out = tmp_path / "out"

    def run(*extra: str) -> tuple[str, dict]:
        done = subprocess.run([sys.executable, "-c", CLI, "run", "--suite", str(suite), "--out", str(out),
                               "--executor", "serial", *extra], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        [cell] = (out / "cells").glob("*.json")
        data = json.loads(cell.read_text())
        return done.stderr, {(r["encoding"], r["metric"], r["eval_len"]): r["value"] for r in data["rows"]}

    _, plain = run()
    log, patched = run("--plugin", str(tmp_path / "patch_init.py"))
    assert "recomputing 1 stale cell(s): source changed: plugin:patch_init.py" in log
    model_rows = [k for k in plain if not k[0].startswith("baseline:")]
    assert any(plain[k] != patched[k] for k in model_rows)
