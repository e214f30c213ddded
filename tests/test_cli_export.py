"""`lenbench export`: the parser offers the declared formats, writes through them, and bad input is one line, exit 2."""

import json
import sys

import pytest
from export_rows import tiny_rows

from lenbench.cli import main
from lenbench.cli_export import FORMAT_NAMES
from lenbench.export import FORMATS
from lenbench.report.formatting import to_csv_text


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text(to_csv_text(tiny_rows()))
    return path


def test_the_parser_offers_exactly_the_declared_formats():
    assert FORMAT_NAMES == tuple(FORMATS)


def test_lm_eval_from_a_results_csv(source, tmp_path, capsys):
    assert main(["export", "lm-eval", str(source), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("wrote 6 run(s)")
    for path in (tmp_path / "out").glob("*/results_*.json"):
        assert json.loads(path.read_text())["model_source"] == "lenbench"
        assert str(path) in out


@pytest.mark.parametrize(("argv", "message"), [
    (["export", "lm-eval", "SRC"], "lenbench export lm-eval needs --out DIR"),
    (["export", "lm-eval", "SRC", "--out", "x", "--mode", "online"], "--mode does not apply to lenbench export lm-eval"),
    (["export", "mlflow", "SRC", "--mode", "offline"], "--mode does not apply to lenbench export mlflow"),
    (["export", "lm-eval", "missing.csv", "--out", "x"], "missing.csv: no such file or directory"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, source, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [str(source) if a == "SRC" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lenbench: error: {message}") and err.count("\n") == 1


def test_a_missing_extra_names_it(source, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # what an environment without it imports
    assert main(["export", "hf", str(source), "--out", "cards"]) == 2
    assert "pip install 'lenbench[hf]'" in capsys.readouterr().err
    assert not (tmp_path / "cards").exists()
