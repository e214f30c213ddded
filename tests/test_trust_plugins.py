"""Plugins that exit while imported, and entry points that take a built-in's name: one line each.

A plugin calling ``sys.exit(3)`` at import used to end the command silently with status 3; an
installed entry point named like a built-in (``rope``, ``copy``) was silently ignored, where a
file plugin taking the name is refused. The rest of the plugin tests are in tests/test_plugins.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lenbench_testing import PLUGIN_ENCODING, plugin_sandbox, write_dedented

from lenbench import plugins
from lenbench.cli import main
from lenbench.encodings import ENCODINGS
from lenbench.plugins import PluginError, load_plugins
from lenbench.tasks import TASKS

EXIT = "it called sys.exit({code}) while being imported; a plugin must not exit (raise an exception instead)"


@pytest.fixture
def sandbox():
    with plugin_sandbox(fresh=True):
        yield


write = write_dedented


def site(root: Path, entry_points: str, module: str = "") -> Path:
    """A distribution ``exit-dist`` installed into `root` (a sys.path directory) with `entry_points`
    (entry_points.txt) and a module ``exit_dist.enc`` of source `module` (default: a bare class)."""
    write(root / "exit_dist" / "__init__.py", "")
    write(root / "exit_dist" / "enc.py", module or """
        from lenbench.encodings.alibi import ALiBi


        class Steep(ALiBi):
            description = "ALiBi from an entry point"
    """)
    info = root / "exit_dist-0.1.dist-info"
    write(info / "METADATA", "Metadata-Version: 2.1\nName: exit-dist\nVersion: 0.1\n")
    write(info / "entry_points.txt", entry_points)
    return root


# --- sys.exit at import -------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "code"), [("sys.exit(3)", "3"), ("sys.exit()", ""), ("sys.exit('no GPU')", "'no GPU'")])
def test_a_file_plugin_that_exits_is_one_line_naming_it_and_the_call(tmp_path, sandbox, call, code):
    path = write(tmp_path / "quitter.py", f"import sys\n{call}\n")
    with pytest.raises(PluginError) as err:
        load_plugins([path])
    assert str(err.value) == f"plugin quitter.py failed to load: {EXIT.format(code=code)}"
    assert "lenbench_plugin_quitter" not in plugins._LOADED


def test_lenbench_exits_2_with_one_line_when_a_plugin_exits(tmp_path, sandbox, capsys):
    path = write(tmp_path / "quitter.py", "import sys\nsys.exit(3)\n")
    assert main(["list", "encodings", "--plugin", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"lenbench: error: plugin quitter.py failed to load: {EXIT.format(code='3')}"]
    assert captured.out == ""


def test_a_module_plugin_that_exits_is_one_line(tmp_path, monkeypatch, sandbox):
    write(tmp_path / "quitpkg" / "__init__.py", "")
    write(tmp_path / "quitpkg" / "enc.py", "import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as err:
        load_plugins(["quitpkg.enc"])
    assert str(err.value) == f"plugin quitpkg.enc failed to load: {EXIT.format(code='3')}"


def test_an_entry_point_that_exits_is_one_line_and_the_rest_still_list(tmp_path, monkeypatch, sandbox):
    monkeypatch.syspath_prepend(str(site(tmp_path, "[lenbench.encodings]\nep-quit = exit_dist.enc:Steep\n",
                                         "import sys\nsys.exit(3)\n")))
    assert ENCODINGS.load_all() == [f"entry point lenbench.encodings:ep-quit = exit_dist.enc:Steep (distribution "
                                    f"exit-dist 0.1) failed to load: {EXIT.format(code='3')}"]
    assert "rope" in ENCODINGS.names() and "ep-quit" not in ENCODINGS.names()


# --- an entry point named like a built-in -------------------------------------------------------


@pytest.mark.parametrize(("registry", "group", "name"), [(ENCODINGS, "lenbench.encodings", "rope"),
                                                         (TASKS, "lenbench.tasks", "copy")])
def test_an_entry_point_taking_a_built_in_name_is_refused_as_a_file_plugin_is(tmp_path, monkeypatch, sandbox,
                                                                              registry, group, name):
    monkeypatch.syspath_prepend(str(site(tmp_path, f"[{group}]\n{name} = exit_dist.enc:Steep\n")))
    builtin = registry.get(name)
    with pytest.raises(PluginError) as err:
        plugins.load_entry_point(group, name)
    assert str(err.value) == (f"plugin entry point {group}:{name} registers {registry.kind} {name!r}, which is "
                              f"already the built-in lenbench {registry.kind}; give yours another name "
                              f"(e.g. 'enc-{name}')")
    assert registry.get(name) is builtin and registry.origin(name) is None  # the built-in keeps its name
    assert registry.load_all() == [str(err.value)]
    assert f"{group}:{name}" not in plugins._LOADED


def test_lenbench_list_prints_the_refusal_of_an_entry_point_named_like_a_built_in(tmp_path, monkeypatch, sandbox,
                                                                                 capsys):
    monkeypatch.syspath_prepend(str(site(tmp_path, "[lenbench.encodings]\nrope = exit_dist.enc:Steep\n"
                                                   "ep-steep = exit_dist.enc:Steep\n")))
    assert main(["list", "encodings"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "lenbench: warning: plugin entry point lenbench.encodings:rope registers encoding 'rope', which is already "
        "the built-in lenbench encoding; give yours another name (e.g. 'enc-rope')"]
    assert "ep-steep" in captured.out and "plugin: entry point lenbench.encodings:rope" not in captured.out


def test_an_entry_point_taking_another_plugins_name_is_refused(tmp_path, monkeypatch, sandbox):
    [file_plugin] = load_plugins([write(tmp_path / "mine.py", PLUGIN_ENCODING.format(name="steep", scale=2.0))])
    monkeypatch.syspath_prepend(str(site(tmp_path / "site", "[lenbench.encodings]\nsteep = exit_dist.enc:Steep\n")))
    with pytest.raises(PluginError, match=r"^plugin entry point lenbench.encodings:steep registers encoding 'steep', "
                                          r"which is already encoding 'steep' of plugin mine.py; give yours"):
        plugins.load_entry_point("lenbench.encodings", "steep")
    assert ENCODINGS.origin("steep") == file_plugin


def test_an_entry_point_loaded_once_loads_again_without_a_refusal(tmp_path, monkeypatch, sandbox):
    monkeypatch.syspath_prepend(str(site(tmp_path, "[lenbench.encodings]\nep-steep = exit_dist.enc:Steep\n")))
    assert ENCODINGS.get("ep-steep").name == "ep-steep"
    assert plugins.load_entry_point("lenbench.encodings", "ep-steep") and ENCODINGS.load_all() == []
    plugins.ensure(plugins.loaded())  # what a worker does: no refusal of its own name
    assert plugins._FAILED == {}
