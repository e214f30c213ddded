"""docs/cli-reference.md documents every option of every command, with the parsers' defaults and choices.

Read from the parsers themselves: `lenbench.cli.build_parser()` (what `lenbench <cmd> --help`
prints) for the `lenbench` command and each subcommand, and the pytest plugin's
(`lenbench.benchmark.pytest_plugin`) `pytest_addoption` for `pytest bench`. A table row names an option by all its spellings (`--all`,
`--verbose`) or a positional by its metavar (`RUN_DIR`); a default other than None / False must be
the row's first code span; every choice of an option must appear in its row. The environment table
names every `LENBENCH_*` variable the code reads.
"""

import argparse
import re

import pytest
from docs_markdown import DOCS, ROOT, code_spans, table_after

from lenbench.cli import build_parser

pytestmark = pytest.mark.docs

PAGE = DOCS / "cli-reference.md"
#: Variables the code reads that are not for users: one the GPU check passes itself.
INTERNAL_ENV = {"LENBENCH_TF32_OVERRIDES"}


def page() -> str:
    return PAGE.read_text()


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"lenbench": parser, **sub.choices}


def documented(marker: str) -> dict[str, dict[str, str]]:
    """Option spelling(s) joined by ', ' → the row, of the table after `<!-- options: marker -->`."""
    rows = table_after(page(), f"<!-- options: {marker} -->")
    return {", ".join(code_spans(r["option"])): r for r in rows}


def name_of(action: argparse.Action) -> str:
    if action.option_strings:
        return ", ".join(action.option_strings)
    return action.metavar or action.dest.upper()


def check_table(marker: str, actions: list[argparse.Action]) -> None:
    rows = documented(marker)
    want = {name_of(a): a for a in actions}
    assert sorted(rows) == sorted(want), \
        f"cli-reference.md's `{marker}` table documents {sorted(rows)}; the parser has {sorted(want)}"
    for name, action in want.items():
        row = rows[name]
        if action.default not in (None, False, argparse.SUPPRESS) and action.option_strings:
            spans = code_spans(row["default"])
            assert spans and spans[0] == str(action.default), \
                f"{marker} {name}: the default is `{action.default}`, the page says {row['default']!r}"
        if not action.option_strings:  # "required", or for zero-or-more positionals what none means
            optional = action.nargs in ("*", "?")
            assert (row["default"] == "required") != optional, \
                f"{marker} {name}: the page says {row['default']!r}, the parser's nargs is {action.nargs!r}"
        for choice in action.choices or ():
            assert f"`{choice}`" in row["meaning"], f"{marker} {name}: the choice `{choice}` is not documented"


def user_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


@pytest.mark.parametrize("command", sorted(subparsers()))
def test_every_option_of_the_command_is_documented(command):
    check_table(command, user_actions(subparsers()[command]))


def test_every_subcommand_has_a_table():
    for command in subparsers():
        assert f"<!-- options: {command} -->" in page(), f"cli-reference.md has no table for `lenbench {command}`"


class _Recorder:
    """Stands in for pytest's parser and option group: records `addoption` as argparse actions."""

    def __init__(self):
        self.parser = argparse.ArgumentParser(add_help=False)

    def getgroup(self, name, description=""):
        return self

    def addoption(self, *names, **kwargs):
        self.parser.add_argument(*names, **kwargs)


def test_every_pytest_bench_option_is_documented():
    from lenbench.benchmark import pytest_plugin

    recorder = _Recorder()
    pytest_plugin.pytest_addoption(recorder)
    check_table("pytest bench", list(recorder.parser._actions))


def test_the_table_checker_catches_an_undocumented_option():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--new-flag", action="store_true")
    with pytest.raises(AssertionError, match="--new-flag"):
        check_table("report", user_actions(parser))


def env_variables_in_code() -> set[str]:
    files = [*(ROOT / "lenbench").rglob("*.py"), *(ROOT / "bench").glob("*.py"), *(ROOT / "bench").glob("*.sh"),
             ROOT / "conftest.py"]
    found = set()
    for path in files:
        found |= set(re.findall(r"\bLENBENCH_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    return found


def test_every_environment_variable_is_documented():
    rows = table_after(page(), "<!-- environment: checked against the LENBENCH_* names in lenbench/, bench/ "
                               "and conftest.py -->")
    documented_vars = {code_spans(r["variable"])[0] for r in rows}
    in_code = env_variables_in_code() - INTERNAL_ENV
    assert sorted(in_code - documented_vars) == [], f"undocumented environment variables: {sorted(in_code - documented_vars)}"
    assert sorted(documented_vars - in_code) == [], f"documented but never read: {sorted(documented_vars - in_code)}"
