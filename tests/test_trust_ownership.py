"""Nothing of a user's is overwritten (issue 38, second round): `lenbench report --out` writes only
into a directory lenbench owns or a new one; a republish keeps what a user put into the publication
and refuses only what stands where it writes; a name becomes a file name only once it follows the
one safe-name rule (`lenbench.names`), checked where it is registered or loaded."""

from __future__ import annotations

import hashlib
import json
import os
import textwrap
from pathlib import Path

import pytest
from lenbench_testing import PLUGIN_ENCODING, TINY_SUITE, plugin_sandbox

from lenbench.cli import main
from lenbench.config import load_suite, parse_suite
from lenbench.config.fields import SuiteError
from lenbench.encodings import ENCODINGS
from lenbench.names import RULE, is_safe_name
from lenbench.plugins import PluginError, load_plugins
from lenbench.publication import MARKER, read_marker
from lenbench.publish import publish
from lenbench.registry import Registry
from lenbench.report_target import MARKER as REPORT_MARKER
from lenbench.tasks import TASKS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run(tiny_run) -> Path:
    """A finished tiny run (2 cells): what is reported and published in every test."""
    return tiny_run


@pytest.fixture
def sandbox():
    with plugin_sandbox():
        yield


def digest(directory: Path) -> dict[str, str]:
    """Every file (links as their target path) under `directory`, by relative name."""
    return {str(p.relative_to(directory)): (f"-> {os.readlink(p)}" if p.is_symlink()
                                            else hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(directory.rglob("*")) if p.is_file() or p.is_symlink()}


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lenbench: error: "), err
    return err.strip()


def report(run: Path, out: Path) -> int:
    return main(["report", str(run), "--out", str(out), "--no-plots"])


# --- report --out: only into a directory lenbench owns, or a new or empty one ---------------------


def test_report_out_refuses_a_users_own_index_and_summary(run, tmp_path, capsys):
    """Files under the very names a report writes are not a report's unless the directory says so."""
    mine = tmp_path / "site"
    mine.mkdir()
    (mine / "index.html").write_text("<p>my homepage</p>")
    (mine / "summary.md").write_text("my summary")
    before = digest(mine)
    assert report(run, mine) == 2
    assert one_error_line(capsys) == (
        f"lenbench: error: --out {mine} is not a directory lenbench made (no {REPORT_MARKER}) and it holds index.html, "
        "summary.md; a report replaces the files it names (index.html, summary.md, …) and so writes only into a new "
        f"or empty directory or its own: give another --out (or, if a report wrote these, `touch {mine / REPORT_MARKER}`)")
    assert digest(mine) == before
    (mine / REPORT_MARKER).touch()  # the fix the line names: now it is a report directory
    assert report(run, mine) == 0 and (mine / "index.html").read_text() != "<p>my homepage</p>"


@pytest.mark.parametrize("start", ["absent", "empty"])
def test_report_out_marks_a_new_directory_and_rewrites_it_keeping_a_users_files(run, tmp_path, start):
    out = tmp_path / "report"
    if start == "empty":
        out.mkdir()
    assert report(run, out) == 0
    assert (out / REPORT_MARKER).is_file() and (out / "leaderboard.md").is_file()
    (out / "NOTES.md").write_text("what I make of it")
    (out / "drafts").mkdir()
    (out / "drafts" / "fig.svg").write_text("<svg/>")
    (out / "summary.md").write_text("stale")
    assert report(run, out) == 0  # its own directory: written again
    assert (out / "summary.md").read_text() != "stale"
    assert (out / "NOTES.md").read_text() == "what I make of it" and (out / "drafts" / "fig.svg").read_text() == "<svg/>"


def test_report_out_into_a_run_keeps_a_users_file_beside_it(run, tmp_path):
    """A run's results directory is lenbench's own: the report goes beside its cells, and a file of
    the user's there is left as it is (it was refused before, which sent users to delete it)."""
    copy = tmp_path / "run"
    (copy / "cells").mkdir(parents=True)
    for cell in (run / "cells").glob("*.json"):
        (copy / "cells" / cell.name).write_bytes(cell.read_bytes())
    (copy / "thesis.txt").write_text("four years of work")
    assert report(copy, copy) == 0
    assert (copy / "thesis.txt").read_text() == "four years of work" and (copy / "index.html").is_file()
    assert not (copy / REPORT_MARKER).exists()  # a run is marked by its cells, not by a report


def test_report_out_refuses_a_link_where_it_writes_a_file(run, tmp_path, capsys):
    out = tmp_path / "report"
    assert report(run, out) == 0
    precious = tmp_path / "precious.md"
    precious.write_text("mine")
    (out / "summary.md").unlink()
    (out / "summary.md").symlink_to(precious)
    assert report(run, out) == 2
    assert one_error_line(capsys) == (f"lenbench: error: --out {out} holds summary.md under a name the report writes "
                                      "(a link or a directory, not its file); move it out of the way and rerun")
    assert precious.read_text() == "mine" and (out / "summary.md").is_symlink()


# --- republishing: a user's entries are kept; only what stands where it writes is refused ----------


def plant(target: Path, what: str, outside: Path) -> None:
    if what == "NOTES.md":
        (target / "NOTES.md").write_text("my notes")
    elif what == "drafts/":
        (target / "drafts" / "deep").mkdir(parents=True)
        (target / "drafts" / "deep" / "plan.txt").write_text("a plan")
        (target / "drafts" / "link").symlink_to("deep/plan.txt")
    elif what == ".hidden":
        (target / ".hidden").write_text("a dotfile")
    elif what == "link":
        (target / "link").symlink_to(outside)


@pytest.mark.parametrize("what", ["NOTES.md", "drafts/", ".hidden", "link"])
def test_republishing_keeps_what_a_user_put_into_the_publication(run, tmp_path, what):
    target = tmp_path / "results"
    publish(run, target, plots=False)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "data.txt").write_text("not copied, linked")
    plant(target, what, outside)
    name = what.rstrip("/")
    kept = {k: v for k, v in digest(target).items() if k == name or k.startswith(name + "/")}
    (target / "summary.md").write_text("stale")
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 0
    assert (target / "summary.md").read_text() != "stale"  # the publication's own files are replaced
    assert {k: v for k, v in digest(target).items() if k == name or k.startswith(name + "/")} == kept
    if what == "link":
        assert (target / "link").is_symlink() and os.readlink(target / "link") == str(outside)
    assert name not in read_marker(target)["files"]  # still the user's, not the publication's
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no stage left


def test_republishing_keeps_a_users_files_inside_a_nested_publication(run, tmp_path):
    target = tmp_path / "results"
    publish(run, target, plots=False)
    nested = target / "catalog"
    publish(run, nested, plots=False)
    (nested / "NOTES.md").write_text("catalog notes")
    (nested / "link").symlink_to("NOTES.md")
    assert main(["publish", str(run), "--to", str(nested), "--no-plots"]) == 0  # the nested one alone
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 0  # the outer one, carrying it
    assert (nested / "NOTES.md").read_text() == "catalog notes" and os.readlink(nested / "link") == "NOTES.md"


@pytest.mark.parametrize("what", ["cells/mine.txt", "encodings/notes.md", "summary.md/", "index.html"])
def test_republishing_refuses_what_stands_where_it_writes(run, tmp_path, capsys, what):
    """In cells/ or encodings/ (rewritten whole), or under a name it writes: a directory there, or
    a user's file under a name the previous publication did not write (its marker lists its files)."""
    target = tmp_path / "results"
    publish(run, target, plots=False)
    path = target / what.rstrip("/")
    path.parent.mkdir(exist_ok=True)
    if what.endswith("/"):
        path.unlink()
        path.mkdir()
    elif what == "index.html":  # a publication without a page, and the user's own index.html
        marker = json.loads((target / MARKER).read_text())
        marker["files"].remove("index.html")
        (target / MARKER).write_text(json.dumps(marker))
        path.write_text("<p>my own page</p>")
    else:
        path.write_text("mine")
    before = digest(target)
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 2
    assert one_error_line(capsys) == (
        f"lenbench: error: --to {target} holds {what} where a publication writes its own files (in cells/ or "
        "encodings/, which it rewrites whole, or under a name it writes); publishing would delete them: move them "
        f"out of {target} first (other files of yours there are kept)")
    assert digest(target) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # nothing staged


def test_a_file_the_previous_publication_wrote_does_not_survive(run, tmp_path):
    """A file the old publication lists as its own (a figure an older version drew) is replaced, not
    kept as if it were the user's."""
    target = tmp_path / "results"
    publish(run, target, plots=False)
    marker = json.loads((target / MARKER).read_text())
    marker["files"].append("retired_figure.png")
    (target / MARKER).write_text(json.dumps(marker))
    (target / "retired_figure.png").write_bytes(b"\x89PNG")
    assert main(["publish", str(run), "--to", str(target), "--no-plots"]) == 0
    assert not (target / "retired_figure.png").exists()


def test_publish_to_a_read_only_parent_names_its_own_option(run, tmp_path, capsys, monkeypatch):
    """Permission denied on the parent (as for a non-root user in a read-only directory)."""
    import tempfile

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", denied)
    assert main(["publish", str(run), "--to", str(tmp_path / "ro" / "results"), "--no-plots"]) == 2
    line = one_error_line(capsys)
    assert "is not writable (Permission denied)" in line and "(--to)" in line and "--out" not in line


# --- names: one rule, checked where a name enters ----------------------------------------------------

BAD_NAMES = ["../../../../tmp/x", "a/b", "a\\b", ".hidden", "", "-x", "x" * 129, "a b"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_plugin_registering_an_unsafe_name_is_refused_in_one_line(tmp_path, sandbox, name):
    path = tmp_path / "evil.py"
    path.write_text(textwrap.dedent(PLUGIN_ENCODING.format(name=name.replace("\\", "\\\\"), scale=2.0)))
    with pytest.raises(PluginError) as err:
        load_plugins([path])
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"plugin evil.py registers encoding {name!r}, which is not a "
                                                      f"safe name ({RULE})")
    assert name not in ENCODINGS.names()


def test_report_plugin_named_like_a_path_writes_nothing_outside_out(run, tmp_path, capsys, sandbox):
    path = tmp_path / "evil.py"
    path.write_text(PLUGIN_ENCODING.format(name="../../../../tmp/x", scale=2.0))
    out = tmp_path / "deep" / "er" / "report"
    assert main(["report", str(run), "--out", str(out), "--plugin", str(path)]) == 2
    assert one_error_line(capsys).startswith("lenbench: error: plugin evil.py registers encoding '../../../../tmp/x'")
    assert not list(tmp_path.rglob("x.png")) and not list(tmp_path.rglob("x.svg")) and not out.exists()


def test_a_built_in_registration_follows_the_rule_too():
    things = Registry("thing")
    with pytest.raises(ValueError, match=r"lenbench registers thing 'a/b', which is not a safe name"):
        things.register("a/b")(object)
    assert "a/b" not in things


@pytest.mark.parametrize("key, value", [("label", "a/b"), ("label", "../../x"), ("label", ".x")])
def test_a_suite_encoding_label_must_be_a_safe_name(key, value):
    data = {**TINY_SUITE, "encodings": [{"name": "alibi", key: value}]}
    with pytest.raises(SuiteError) as err:
        parse_suite(data, source="s.yaml")
    assert str(err.value).startswith(f"s.yaml: encodings[0].label {value!r} is not a safe name ({RULE}); e.g. label: ")


def test_a_suite_variant_name_must_be_a_safe_name():
    data = {**TINY_SUITE, "encodings": ["rope"], "variants": [{"rope_type": "linear", "factor": 2, "name": "a/b"}]}
    with pytest.raises(SuiteError, match=r"variants\[0\]\.name 'a/b' is not a safe name"):
        parse_suite(data, source="s.yaml")


def test_every_name_in_use_follows_the_rule():
    """The rule accepts every name lenbench and its published boards use: built-in and example
    registrations, the presets' and examples' suite names and labels, and the published labels."""
    import pandas as pd

    assert all(map(is_safe_name, [*ENCODINGS.builtin_names(), *TASKS.builtin_names()]))
    suites = [load_suite(p) for p in sorted((ROOT / "lenbench" / "config" / "suites").glob("*.yaml"))]
    for suite in suites:
        assert is_safe_name(suite.name)
        assert all(is_safe_name(t.key) for t in suite.tasks) and all(is_safe_name(e.key) for e in suite.encodings)
        assert all(is_safe_name(v.key) for v in suite.variants)
    for csv in sorted((ROOT / "results").rglob("results.csv")):
        df = pd.read_csv(csv)
        labels = {*df["task"], *(e for e in df["encoding"] if not str(e).startswith("baseline:")), *df["suite"]}
        assert all(map(is_safe_name, labels)), csv
    assert all(is_safe_name(n) for n in ("ssmax+rope", "fire-relthresh", "randomized-rope", "yarn@4", "running-max"))
