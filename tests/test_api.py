"""The Python API (`lenbench.api`, docs/api.md): its names, what `import lenbench` does to a process
(exactly `lenbench.numerics.PINNED_ENV`, nothing else), and that each wrapper gives what the command
line's functions give, with their one-line errors.

tests/docs/test_docs_api.py holds docs/api.md to this: its table of the import's effects is
`PINNED_ENV`, and its example runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from lenbench_testing import TINY_RUN, write_suite

import lenbench
from lenbench import api, numerics
from lenbench.config import SuiteError, parse_suite
from lenbench.registry import UnknownNameError
from lenbench.results.schema import ResultsError

ROOT = Path(__file__).resolve().parent.parent


# --- the names -----------------------------------------------------------------------------------


def test_the_package_states_the_apis_names():
    assert lenbench.__all__ == api.__all__
    assert all(getattr(lenbench, name) is getattr(api, name) for name in api.__all__)
    assert set(api.__all__) <= set(dir(lenbench))


def test_no_api_name_is_a_module_of_the_package():
    """An imported submodule is an attribute of its package: `lenbench.report` (a package) would shadow a
    function named `report` once anything imported the report."""
    package = ROOT / "lenbench"
    clashes = [n for n in api.__all__ if (package / n).is_dir() or (package / f"{n}.py").is_file()]
    assert not clashes


def test_other_names_are_plain_attribute_errors():
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        lenbench.nonexistent  # noqa: B018
    assert not hasattr(lenbench, "Leaderboard")  # the API's, not everything api.py imports


@pytest.mark.parametrize("name", [n for n in api.__all__ if n != "Board"])
def test_every_function_documents_its_arguments_and_result(name):
    doc = getattr(api, name).__doc__
    assert "Args:" in doc and "Returns:" in doc and "Raises:" in doc


# --- what `import lenbench` does -------------------------------------------------------------------

#: Run in a fresh interpreter: the process's state before and after `import lenbench`, as JSON.
PROBE = r"""
import json, logging, os, sys, threading, warnings
IMPORT_TORCH_FIRST = {torch_first}
def torch_state():
    import torch
    return {{"threads": torch.get_num_threads(), "interop": torch.get_num_interop_threads(),
            "dtype": str(torch.get_default_dtype()), "deterministic": torch.are_deterministic_algorithms_enabled(),
            "matmul": torch.get_float32_matmul_precision(), "mkldnn": torch.backends.mkldnn.enabled,
            "grad": torch.is_grad_enabled()}}
def state():
    root = logging.getLogger()
    return {{"env": dict(os.environ), "threads": sorted(t.name for t in threading.enumerate()),
            "warnings": [repr(f) for f in warnings.filters], "handlers": [repr(h) for h in root.handlers],
            "level": root.level, "loggers": sorted(logging.Logger.manager.loggerDict),
            "torch": torch_state() if IMPORT_TORCH_FIRST else None}}
before = state()
import lenbench
after = state()
print(json.dumps({{"before": before, "after": after, "modules": sorted(sys.modules)}}))
"""


def probe(env: dict[str, str], *, torch_first: bool = False) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(torch_first=torch_first)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def clean_env(**extra: str) -> dict[str, str]:
    """A minimal environment for the probe: this process imported lenbench already, so a variable it
    inherited from here could hide one the import sets."""
    keep = ("PATH", "HOME", "SYSTEMROOT", "TMPDIR")
    return {**{k: os.environ[k] for k in keep if k in os.environ}, **extra}


def env_changes(result: dict) -> dict[str, str | None]:
    before, after = result["before"]["env"], result["after"]["env"]
    return {k: after.get(k) for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


@pytest.mark.subprocess
def test_import_sets_exactly_the_documented_variables_and_nothing_else():
    result = probe(clean_env())
    expected = numerics.PINNED_ENV if numerics.pinnable() else {}
    assert env_changes(result) == expected
    before, after = result["before"], result["after"]
    assert {k: v for k, v in before.items() if k != "env"} == {k: v for k, v in after.items() if k != "env"}
    assert "torch" not in result["modules"] and "pandas" not in result["modules"]
    assert "lenbench.api" not in result["modules"]


@pytest.mark.subprocess
def test_native_mode_sets_nothing():
    result = probe(clean_env(LENBENCH_NUMERICS="native"))
    assert env_changes(result) == {}


@pytest.mark.subprocess
def test_import_changes_no_torch_setting():
    """torch imported first (a notebook that did): lenbench's import changes none of its settings."""
    result = probe(clean_env(), torch_first=True)
    assert result["before"]["torch"] == result["after"]["torch"]
    assert result["before"]["threads"] == result["after"]["threads"]


@pytest.mark.subprocess
def test_the_api_loads_on_first_use_and_the_run_path_never_loads_it():
    """`from lenbench import plugins` (every module's way in) imports the submodule, not the API; the run
    path reaches neither the API nor the report; the board, report and compare names need no torch."""
    code = ("import sys\nfrom lenbench import plugins\nimport lenbench.run.driver\n"
            "assert 'lenbench.api' not in sys.modules, 'api'\n"
            "assert not [m for m in sys.modules if m.startswith('lenbench.report')], 'report'\n"
            "print('run path ok')\n")
    lazy = ("import sys\nfrom lenbench import load_board, write_report, compare_runs\n"
            "assert 'lenbench.api' in sys.modules and 'torch' not in sys.modules\nprint('lazy ok')\n")
    for snippet, says in ((code, "run path ok"), (lazy, "lazy ok")):
        proc = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and says in proc.stdout, proc.stderr


# --- the wrappers ---------------------------------------------------------------------------------


def test_load_suite_takes_a_mapping_a_file_or_a_preset(tmp_path):
    from_mapping = api.load_suite(TINY_RUN)
    from_file = api.load_suite(write_suite(tmp_path, TINY_RUN))
    assert [c.cell_id for c in from_mapping.cells()] == [c.cell_id for c in from_file.cells()]
    assert [c.cell_id for c in from_mapping.cells()] == [c.cell_id for c in parse_suite(TINY_RUN).cells()]
    assert api.load_suite("smoke").name == "smoke"


def test_load_suite_errors_are_one_line():
    with pytest.raises(SuiteError, match="unknown suite 'smok'.*did you mean") as err:
        api.load_suite("smok")
    with pytest.raises(SuiteError, match="missing required key 'encodings'"):
        api.load_suite({"tasks": [{"name": "copy", "train_len": 4}]})
    assert "\n" not in str(err.value)


def test_run_suite_refuses_an_unknown_executor_before_anything_trains(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown executor 'proces'.*did you mean 'process'"):
        api.run_suite(TINY_RUN, tmp_path / "out", executor="proces", progress=False, log=lambda _: None)
    assert not list((tmp_path / "out").rglob("*.json"))
    assert not list((tmp_path / "out").rglob("*.pt"))


def test_run_suite_reuses_the_finished_run(tiny_run, tmp_path):
    """The wrapper is the driver: a copy of the session's run (trained by the driver itself) is all reused."""
    out = shutil.copytree(tiny_run, tmp_path / "run")
    run = api.run_suite(TINY_RUN, out, progress=False, log=lambda _: None)
    assert run.computed == [] and run.done == len(parse_suite(TINY_RUN).cells())


def test_load_board_is_the_reports_board(tiny_run, tmp_path):
    board = api.load_board(tiny_run)
    assert board.source == str(tiny_run)
    assert set(board.rows["encoding"]) >= {"nope", "rope"}
    entries = board.entries
    assert set(entries["encoding"]) >= {"nope", "rope"} and (entries["kind"] == "model").sum() == 2
    for stat in ("in_dist", "past_train_area"):
        ok = entries[stat].notna()
        assert (entries.loc[ok, f"{stat}_ci_low"] <= entries.loc[ok, stat] + 1e-12).all()
        assert (entries.loc[ok, stat] <= entries.loc[ok, f"{stat}_ci_high"] + 1e-12).all()
    # the same board from the report's own files and from a frame: the rows round-trip
    api.write_report(tiny_run, tmp_path / "report", plots=False)
    again = api.load_board(tmp_path / "report" / "results.csv")
    pd.testing.assert_frame_equal(again.rows, board.rows)
    from_frame = api.load_board(board.rows)
    assert from_frame.source == "rows"
    pd.testing.assert_frame_equal(from_frame.entries, board.entries)
    written = pd.read_csv(tmp_path / "report" / "leaderboard_wide.csv")
    assert len(written) == len(board.wide)


def test_load_board_errors_are_one_line(tmp_path):
    with pytest.raises(ResultsError, match="no such file or directory") as err:
        api.load_board(tmp_path / "missing")
    assert "\n" not in str(err.value)


def test_write_report_refuses_a_directory_it_does_not_own(tiny_run, tmp_path):
    theirs = tmp_path / "thesis"
    theirs.mkdir()
    (theirs / "summary.md").write_text("mine")
    with pytest.raises(ValueError, match="thesis") as err:
        api.write_report(tiny_run, theirs, plots=False)
    assert "\n" not in str(err.value)
    assert [p.name for p in theirs.iterdir()] == ["summary.md"] and (theirs / "summary.md").read_text() == "mine"


def test_write_report_of_a_frame_needs_a_directory(tiny_run, tmp_path):
    rows = api.load_board(tiny_run).rows
    with pytest.raises(ValueError, match="needs out_dir"):
        api.write_report(rows)
    written = api.write_report(rows, tmp_path / "r", plots=False)
    assert tmp_path / "r" / "leaderboard.csv" in written


def test_compare_runs_of_a_run_with_itself_passes(tiny_run):
    result = api.compare_runs(tiny_run, tiny_run)
    assert result.exit_code == 0 and result.failures() == []
    assert (result.quality["status"] == "unchanged").all()


def test_compare_runs_errors_are_one_line(tiny_run):
    with pytest.raises(ResultsError, match="--method 'bogus'"):
        api.compare_runs(tiny_run, tiny_run, method="bogus")
