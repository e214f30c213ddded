"""CLI conventions: --version, `list suites` (description, cells, time estimate), defaults in --help,
and the bare task-name shorthand's error."""

import json
import re
from pathlib import Path

import pytest

import lenbench
from lenbench.cli import build_parser, main
from lenbench.config import SuiteError, list_suites, load_suite, parse_suite
from lenbench.run import estimate


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"lenbench {lenbench.__version__}\n"


def test_list_suites_shows_description_cells_and_estimate(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no runs/ here: every estimate is the model's
    assert main(["list", "suites"]) == 0
    out = capsys.readouterr().out.splitlines()
    for name, path in list_suites().items():
        suite = load_suite(path)
        line = next(i for i, x in enumerate(out) if x.startswith(f"{name} "))
        assert f" {len(suite.cells())} cells  ~" in out[line] and out[line].endswith("(model)")
        assert " serial, ~" in out[line] and (" on serial; " in out[line] or " processes; " in out[line])
        assert "; lenbench run ~" in out[line] and ", pytest bench ~" in out[line]  # the whole commands too
        assert out[line + 1].strip() == suite.description


def test_wall_estimate_shares_the_cells_out_over_the_workers():
    shared = (110.0 - estimate.RUN_OVERHEAD_S) / (2 * estimate.PARALLEL_EFFICIENCY)
    assert estimate.wall_seconds(110.0, 10, 2) == pytest.approx(estimate.RUN_OVERHEAD_S + shared)
    assert estimate.wall_seconds(110.0, 10, 1) == 110.0
    assert estimate.wall_seconds(110.0, 1, 8) == 110.0  # one cell cannot be shared out
    assert estimate.wall_seconds(5.0, 3, 2) == 5.0  # never more than serial


def test_command_estimates_add_the_report_and_the_kernels():
    """`lenbench run` is the cells and the report; `pytest bench` adds the kernels of the suite's `kernels:`."""
    smoke = load_suite("smoke")
    t = estimate.command_seconds(smoke, estimate.estimate_suite(smoke), 2)
    assert t.run == pytest.approx(t.cells_wall + estimate.REPORT_S)
    assert t.main - t.run == pytest.approx(estimate.kernel_seconds(smoke)) and t.main > t.run
    off = parse_suite({"tasks": [{"name": "copy", "train_len": 8}], "encodings": ["nope"], "kernels": {"enabled": False}})
    assert estimate.kernel_seconds(off) == 0.0


def test_the_main_command_estimate_is_within_30_percent_of_its_measurement():
    """The README's measured main command (docs/measurements/main-command.json, the reference machine) and
    `lenbench list suites`' model of it on that machine's two processes agree within 30 %."""
    measured = json.loads((Path(__file__).resolve().parent.parent / "docs" / "measurements"
                           / "main-command.json").read_text())["wall_seconds"]
    quick = load_suite("quick")
    model = estimate.command_seconds(quick, estimate.estimate_suite(quick), 2).main
    assert abs(model - measured) <= 0.3 * measured, (model, measured)


def test_estimate_is_measured_when_a_run_exists(tmp_path):
    suite = load_suite("smoke")
    cells = tmp_path / "cells"
    cells.mkdir()
    for i, seconds in enumerate((2.0, 4.0)):
        (cells / f"{i}.json").write_text(json.dumps({"rows": [], "status": "ok", "seconds": seconds}))
    (cells / "2.json").write_text(json.dumps({"rows": [], "status": "failed", "seconds": 100.0}))  # not a finished cell
    est = estimate.estimate_suite(suite, tmp_path)
    assert est.kind == "measured" and est.seconds == pytest.approx(3.0 * len(suite.cells()))


def test_estimate_model_is_additive_over_cells_and_grows_with_steps():
    base = {"tasks": [{"name": "copy", "train_len": 8}], "encodings": ["nope"], "train": {"steps": 10}}
    one = estimate.estimate_suite(parse_suite(base)).seconds
    two = estimate.estimate_suite(parse_suite({**base, "seeds": [0, 1]})).seconds
    assert two - estimate.RUN_OVERHEAD_S == pytest.approx(2 * (one - estimate.RUN_OVERHEAD_S))
    longer = estimate.estimate_suite(parse_suite({**base, "train": {"steps": 20}})).seconds
    assert longer > one
    assert estimate.format_seconds(42) == "42 s" and estimate.format_seconds(3600) == "60 min"
    assert estimate.format_seconds(7200) == "2.0 h"


def test_help_shows_defaults():
    sub = build_parser()._subparsers._group_actions[0].choices
    run_help = " ".join(sub["run"].format_help().split())  # line wrapping aside
    assert "(default: quick)" in run_help and "(default: auto)" in run_help
    assert "(default: results)" in " ".join(sub["publish"].format_help().split())
    assert "(default: None)" not in run_help and "(default: False)" not in run_help


def test_bare_task_name_is_a_one_line_error():
    with pytest.raises(SuiteError, match=r"^x.yaml: tasks\[0\] is the bare task name 'copy', which has no training "
                                         r"length; write \{name: copy, train_len: N\} \(N in items\)$"):
        parse_suite({"tasks": ["copy"], "encodings": ["nope"]}, source="x.yaml")


def test_the_presets_are_listed_in_one_place():
    """The presets are the YAML files of `lenbench/config/suites/`; help texts and docstrings point at
    `lenbench list suites` instead of copying the names (copies drift: one said four presets, the CLI six)."""
    root = Path(__file__).resolve().parents[1]
    presets = list(list_suites())
    assert {"smoke", "quick", "catalog"} <= set(presets)
    sources = [*sorted((root / "lenbench").rglob("*.py")), root / "conftest.py", *sorted((root / "bench").glob("*.py"))]
    for path in sources:
        if not path.is_file():
            continue
        names = "|".join(map(re.escape, presets))
        copy = re.search(rf"\b(?:{names})(?:, (?:{names})\b){{2,}}", path.read_text())
        assert copy is None, f"{path.relative_to(root)} copies the preset list: {copy.group()!r}"
