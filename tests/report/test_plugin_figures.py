"""A plugin encoding's position-pattern figure: drawn whenever its class can be had (loaded with --plugin, or
a module plugin the cells record that this environment can import), else left out with one line naming the
plugin the run loaded and the --plugin that draws it (never silently)."""

from __future__ import annotations

import pytest
from lenbench_testing import PLUGIN_ENCODING, TINY_RUN, plugin_sandbox, write_plugins

from lenbench.cli import main
from lenbench.config import parse_suite
from lenbench.plugins import load_plugins
from lenbench.report.build import write_report
from lenbench.run.driver import run_suite

pytestmark = pytest.mark.slow

SUITE = {**TINY_RUN, "encodings": ["nope", "alibi-steep"]}


def _run(plugin: str, out) -> None:
    with plugin_sandbox(fresh=True):
        load_plugins([plugin])
        run_suite(parse_suite(SUITE), out, device="cpu", executor="serial", progress=False, log=lambda _: None)


def test_a_file_plugins_figure_without_its_plugin_is_one_line_naming_the_plugin(tmp_path, capsys):
    enc, _ = write_plugins(tmp_path / "plug")
    _run(str(enc), tmp_path / "run")
    with plugin_sandbox(fresh=True):
        assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "bare")]) == 0
        lines = capsys.readouterr().err.splitlines()
        assert lines == [f"lenbench: note: figure encodings/alibi-steep.png not drawn: encoding 'alibi-steep' is not "
                         f"registered (its run loaded the plugin(s) {enc.resolve()}, not loaded here); rerun the report "
                         f"with --plugin {enc.resolve()}"]
        assert not (tmp_path / "bare" / "encodings" / "alibi-steep.png").exists()
        assert f"--plugin {enc.resolve()}" in (tmp_path / "bare" / "index.html").read_text()  # the caption says it too
        assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "drawn"), "--plugin", str(enc)]) == 0
        assert capsys.readouterr().err == ""
        assert (tmp_path / "drawn" / "encodings" / "alibi-steep.png").is_file()


def test_an_importable_module_plugins_figure_is_drawn_without_being_asked(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "steepmod.py").write_text(PLUGIN_ENCODING.format(name="alibi-steep", scale=2.0))
    monkeypatch.syspath_prepend(str(site))
    _run("steepmod", tmp_path / "run")
    with plugin_sandbox(fresh=True):
        notes: list[str] = []
        write_report(tmp_path / "run", tmp_path / "rep", notes=notes.append)
        assert notes == []
        assert (tmp_path / "rep" / "encodings" / "alibi-steep.png").is_file()


def test_rows_without_cells_name_no_plugin_but_say_how(tmp_path):
    enc, _ = write_plugins(tmp_path / "plug")
    _run(str(enc), tmp_path / "run")
    with plugin_sandbox(fresh=True):
        notes: list[str] = []
        write_report(tmp_path / "run", tmp_path / "rep", plots=False, notes=notes.append)
        assert notes == []  # no figures asked for: nothing left out
        write_report(tmp_path / "rep" / "results.csv", tmp_path / "csv", notes=notes.append)
        assert notes == ["figure encodings/alibi-steep.png not drawn: encoding 'alibi-steep' is not registered (no "
                         "plugin loaded here registers it); rerun the report with --plugin MODULE_OR_PATH (the plugin "
                         "that defines it)"]


def test_a_labelled_builtin_is_no_missing_plugin(tmp_path):
    """A label of a registered encoding (``alibi-wide``: alibi with other parameters) is not an encoding of
    its own: no note claims a plugin is missing for it, from the cells or from rows without them."""
    suite = {**TINY_RUN, "name": "labelled", "encodings": ["nope", {"name": "alibi", "label": "alibi-wide",
                                                                     "params": {}}]}
    run_suite(parse_suite(suite), tmp_path / "run", device="cpu", executor="serial", progress=False,
              log=lambda _: None)
    notes: list[str] = []
    write_report(tmp_path / "run", tmp_path / "rep", notes=notes.append)
    assert notes == []
    import pandas as pd

    rows = pd.read_csv(tmp_path / "rep" / "results.csv")
    assert "alibi-wide" in set(rows["encoding"])
