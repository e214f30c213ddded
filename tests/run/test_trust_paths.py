"""A directory where a run writes one of a cell's files is one line before anything trains.

A cell writes its result (``cells/<id>.json``), a lock while it runs (``locks/<id>.lock``) and
every checkpoint it trains (``checkpoints/<train_id>.pt`` and one per fine-tuned variant). A
directory in any of those places used to be an IsADirectoryError traceback, after training for
the result and checkpoints. The base checkpoint and result of `run_suite` are in
tests/config/test_trust_inputs.py; these are the other files and the other entries
(`ensure_cell`, what `pytest bench` calls per cell, and the command line).
"""

from __future__ import annotations

import pytest
from lenbench_testing import TINY_SUITE, write_suite

from lenbench.cli import main
from lenbench.config import parse_suite
from lenbench.run import store
from lenbench.run.checkpoint import checkpoint_names
from lenbench.run.driver import ensure_cell, run_suite

#: One rope cell with a fine-tuned variant: it writes a base and a fine-tune checkpoint.
FINETUNED = {**TINY_SUITE, "encodings": ["rope"], "seeds": [0], "train": {**TINY_SUITE["train"], "steps": 2},
             "variants": [{"rope_type": "linear", "finetune_steps": 1, "finetune_ratio": 2}]}


def blocked(out, cell, where):
    """Make a directory where `cell`'s file `where` goes; returns its path."""
    path = {"cell": store.cell_path(out, cell), "lock": store.lock_path(out, cell),
            "finetune": store.checkpoint_path(out, checkpoint_names(cell)[-1])}[where]
    path.mkdir(parents=True)
    return path


def trained(out) -> list:
    return [p for p in (out / "checkpoints").glob("*.pt") if p.is_file()]


@pytest.mark.parametrize(("where", "what"), [("lock", "lock"), ("finetune", "checkpoint")])
def test_run_suite_refuses_a_directory_in_a_lock_or_fine_tune_checkpoint_place(tmp_path, where, what):
    suite = parse_suite(FINETUNED)
    [cell] = suite.cells()
    path = blocked(tmp_path, cell, where)
    with pytest.raises(ValueError) as err:
        run_suite(suite, tmp_path, device="cpu", executor="serial", progress=False, log=lambda _: None)
    assert str(err.value) == (f"{path} is a directory where lenbench writes the {what} file of cell {cell.cell_id}; "
                              "move it aside and rerun")
    assert path.is_dir() and not trained(tmp_path)


@pytest.mark.parametrize("where", ["cell", "lock", "finetune"])
def test_ensure_cell_refuses_a_directory_before_training(tmp_path, where):
    [cell] = parse_suite(FINETUNED).cells()
    path = blocked(tmp_path, cell, where)
    with pytest.raises(ValueError, match=rf"^{path} is a directory where lenbench writes the .* file of cell"):
        ensure_cell(cell, tmp_path, "cpu", progress=False, log=lambda _: None)
    assert path.is_dir() and not trained(tmp_path)


def test_lenbench_run_says_it_in_one_line_and_exits_2(tmp_path, capsys):
    suite_file = write_suite(tmp_path, FINETUNED)
    [cell] = parse_suite(FINETUNED).cells()
    path = blocked(tmp_path / "out", cell, "lock")
    assert main(["run", "--suite", str(suite_file), "--out", str(tmp_path / "out"), "--executor", "serial",
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"lenbench: error: {path} is a directory where lenbench writes the lock file of cell "
                   f"{cell.cell_id}; move it aside and rerun"]


def test_a_directory_named_like_a_temporary_file_is_left_alone(tmp_path):
    """A killed run's temporary files are removed; a directory of that name is not lenbench's."""
    kept = tmp_path / "cells" / ".mine.tmp"
    kept.mkdir(parents=True)
    left = tmp_path / "cells" / ".abc.json.x1y2.tmp"
    left.write_text("{")
    store.prepare_output(tmp_path, log=lambda _: None)
    assert kept.is_dir() and not left.exists()
