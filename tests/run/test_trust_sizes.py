"""Issue 38, items 10-11: no suite exhausts the machine; a cell that cannot fit is refused up front.

`lenbench.run.estimate.check_suite_fits` sizes every cell before anything is allocated (training
memory, per-sample scores, the cost model's time) and refuses, in one line with the numbers, what
cannot fit: `lenbench run` exits 2 and no cell starts. These tests never allocate the sizes they
name: the check runs on arithmetic and the meta device, and a run that got past it would meet the
tripwire below instead of an executor.
"""

import pytest
from lenbench_testing import TINY_SUITE, write_suite

from lenbench.cli import main
from lenbench.config import list_suites, load_suite, parse_suite
from lenbench.run import driver
from lenbench.run.estimate import (
    GIB,
    MAX_CELL_HOURS,
    MAX_CELL_HOURS_ENV,
    TRAIN_BYTES_PER_PARAM,
    cell_size,
    check_suite_fits,
)

#: What this repository's 2-core CPU machine has available (24 GB, about 22 GiB free), and an H200's.
HERE = 22 * GIB
H200 = 139 * GIB
COPY = {"name": "copy", "train_len": 16}


def suite(**sections) -> dict:
    return {"name": "big", "tasks": [COPY], "encodings": ["nope"], **sections}


@pytest.fixture
def no_cell_runs(monkeypatch):
    """A run that got past the checks would start cells: fail instead of allocating anything."""
    def tripwire(*args, **kwargs):
        raise AssertionError("a cell was about to run")

    monkeypatch.setattr(driver, "get_executor", tripwire)
    monkeypatch.delenv(MAX_CELL_HOURS_ENV, raising=False)


def refused(tmp_path, capsys, data: dict) -> str:
    path = write_suite(tmp_path, data)
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "out"), "--device", "cpu", "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lenbench: error: suite 'big', cell copy-")
    assert not (tmp_path / "out").exists()  # refused before the results directory is made
    return lines[0]


def test_ten_million_layers_are_refused_for_training_memory(tmp_path, capsys, no_cell_runs):
    line = refused(tmp_path, capsys, suite(model={"n_layers": 10_000_000}))
    assert "cell copy-nope-L16-s0: training needs ~" in line
    assert "4.97e+11 parameters x 16 B with gradients and AdamW state" in line
    assert "GiB of memory available" in line and "shrink model (n_layers, d_model)" in line


def test_a_million_fold_evaluation_is_refused_for_time(tmp_path, capsys, no_cell_runs):
    line = refused(tmp_path, capsys, suite(eval={"ratios": [1, 1_000_000]}))
    assert "of compute on the reference CPU" in line
    assert "most of it evaluating 64 samples of 32000000 tokens (1e+06x)" in line
    assert f"over the limit of {MAX_CELL_HOURS:g} h per cell" in line and MAX_CELL_HOURS_ENV in line


def test_a_billion_samples_are_refused_for_their_scores(tmp_path, capsys, no_cell_runs):
    line = refused(tmp_path, capsys, suite(eval={"samples": 1_000_000_000}))
    assert "the per-sample scores of 1000000000 evaluation samples need ~" in line and "lower eval.samples" in line


def test_a_huge_vocabulary_is_refused_like_a_huge_model():
    with pytest.raises(ValueError, match=r"training needs ~.* GiB \(1\.28e\+11 parameters"):
        check_suite_fits(parse_suite(suite(tasks=[{**COPY, "params": {"vocab": 10**9}}])), available=HERE)


def test_a_learned_table_is_sized_on_the_meta_device():
    """`learned` holds a row per position up to the longest evaluation: 4 M rows of 64 at 125000x of 16
    items (32 tokens each), counted without allocating the 1 GiB table."""
    cells = parse_suite({**suite(eval={"ratios": [1, 125_000]}), "encodings": ["nope", "learned"]}).cells()
    nope, learned = (cell_size(c) for c in cells)
    assert learned.params - nope.params == 4_000_000 * 64
    assert learned.train_bytes - nope.train_bytes == 4_000_000 * 64 * TRAIN_BYTES_PER_PARAM


def test_the_time_limit_can_be_lifted_or_moved(monkeypatch):
    data = parse_suite(suite(eval={"ratios": [1, 1_000_000]}))
    monkeypatch.setenv(MAX_CELL_HOURS_ENV, "0")
    check_suite_fits(data, available=None)
    monkeypatch.setenv(MAX_CELL_HOURS_ENV, "1e9")
    check_suite_fits(data, available=None)
    monkeypatch.setenv(MAX_CELL_HOURS_ENV, "soon")
    with pytest.raises(ValueError, match=f"^{MAX_CELL_HOURS_ENV}='soon' is not a number of hours >= 0"):
        check_suite_fits(data, available=None)


@pytest.mark.parametrize("name", [n for n in list_suites() if n != "paper"])
def test_every_preset_fits_this_machine(name, monkeypatch):
    monkeypatch.delenv(MAX_CELL_HOURS_ENV, raising=False)
    check_suite_fits(load_suite(name), available=HERE)


def test_the_example_plugin_suite_fits_this_machine(monkeypatch):
    from pathlib import Path

    from lenbench_testing import plugin_sandbox

    monkeypatch.delenv(MAX_CELL_HOURS_ENV, raising=False)
    with plugin_sandbox():  # its plugins leave the registries as they were
        check_suite_fits(load_suite(Path(__file__).resolve().parents[2] / "examples" / "plugins" / "suite.yaml"),
                         available=HERE)


def test_paper_needs_an_accelerators_memory(monkeypatch):
    """`paper` trains 128 sequences at a time of a 6-layer d_model-256 model: DAPE's per-head MLP over
    the (T, T) scores is the first cell past a 24 GB machine (passkey at 256 tokens, ~22.4 GiB); it is
    refused there and fits an H200, within the time limit."""
    monkeypatch.delenv(MAX_CELL_HOURS_ENV, raising=False)
    paper = load_suite("paper")
    with pytest.raises(ValueError, match=r"^suite 'paper', cell passkey-dape-L256-s0: training needs ~.* of 128 "
                                         r"sequences of 256 tokens\), more than the 22 GiB of memory available"):
        check_suite_fits(paper, available=HERE)
    check_suite_fits(paper, available=H200)


def test_the_tiny_suite_still_runs(tmp_path):
    """The check lets the suites the engine tests run through, on this machine's real memory."""
    path = write_suite(tmp_path, {**TINY_SUITE, "encodings": ["nope"], "variants": []})
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "out"), "--device", "cpu", "--quiet",
                 "--executor", "serial"]) == 0
