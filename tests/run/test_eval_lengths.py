"""A task entry that cannot be sampled at a length the suite needs is refused before any cell runs
(`lenbench.run.driver.check_eval_lengths`): recall's keys are distinct, so 16× of 8 pairs needs 128
keys. The catalog preset once asked for 64 and lost all 57 recall cells at run time."""

import pytest
from lenbench_testing import TINY_SUITE

from lenbench.cli import main
from lenbench.config import load_suite, parse_suite
from lenbench.run.driver import check_eval_lengths, run_suite
from lenbench.run.store import cell_files

PRESETS = ["smoke", "quick", "standard", "paper", "calibration", "catalog"]


def recall_suite(num_keys: int, ratios=(1, 2, 4)) -> dict:
    return {**TINY_SUITE, "tasks": [{"name": "recall", "train_len": 8, "params": {"num_keys": num_keys}}],
            "eval": {**TINY_SUITE.get("eval", {}), "ratios": list(ratios)}}


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_can_sample_every_length_it_needs(name):
    check_eval_lengths(load_suite(name))


def test_too_few_keys_for_the_longest_evaluation_is_one_line_before_any_cell(tmp_path):
    suite = parse_suite(recall_suite(num_keys=16))
    with pytest.raises(ValueError) as err:
        run_suite(suite, tmp_path / "run", device="cpu", executor="serial", progress=False, log=lambda _: None)
    assert str(err.value) == (
        "suite 'tiny', task 'recall' at train_len 8: the run needs length 32 (4x) and task 'recall': length 32 "
        "exceeds num_keys=16 (keys of a sample are distinct); pass num_keys >= 32 or a length <= 16")
    assert not cell_files(tmp_path / "run")
    check_eval_lengths(parse_suite(recall_suite(num_keys=32)))  # exactly enough keys


def test_the_command_line_says_it_in_one_line_and_exits_2(tmp_path, capsys):
    import yaml

    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(recall_suite(num_keys=16)))
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lenbench: error: suite 'tiny', task 'recall'"), err
