"""studies/protocol/halfmax.py: the budget-sensitivity study at a smaller maximum retrains exactly the runs
the smaller maximum changes, borrows the others' rows, and compares boards over the same entries."""

import json
from pathlib import Path

import pandas as pd
import pytest
from lenbench_testing import load_script

from lenbench.config import load_suite

ROOT = Path(__file__).resolve().parents[2]
halfmax = load_script(ROOT / "studies" / "protocol" / "halfmax.py")

SMALL = """\
name: small
seeds: [0, 1]
model: {d_model: 16, n_layers: 1, n_heads: 1, ff_mult: 2}
train: {steps: 1000, batch_size: 4, lr: 1.0e-3, warmup: 10, patience: 3, validate_every: 100, schedule: plateau}
eval: {ratios: [1, 2], samples: 4}
tasks:
  - {name: copy, train_len: 4}
  - {name: count, train_len: 4}
  - {name: reverse, train_len: 4, train: {schedule: cosine}}
encodings: [nope, rope]
kernels: {enabled: false}
"""

#: (task, encoding, seed) -> (stop reason, steps) of the full suite's twin; copy/rope/1 has none.
TWINS = {("copy", "nope", 0): ("converged", 600), ("copy", "nope", 1): ("converged", 1200),
         ("copy", "rope", 0): ("budget", 2000),
         ("count", "nope", 0): ("converged", 300), ("count", "nope", 1): ("converged", 900),
         ("count", "rope", 0): ("converged", 1000), ("count", "rope", 1): ("converged", 500),
         ("reverse", "nope", 0): ("converged", 400), ("reverse", "nope", 1): ("converged", 400),
         ("reverse", "rope", 0): ("converged", 400), ("reverse", "rope", 1): ("converged", 400)}


@pytest.fixture
def study(tmp_path):
    suite = tmp_path / "small.yaml"
    suite.write_text(SMALL)
    full = tmp_path / "full"
    (full / "cells").mkdir(parents=True)
    for i, ((task, enc, seed), (reason, steps)) in enumerate(TWINS.items()):
        row = {"task": task, "encoding": enc, "seed": seed, "stop_reason": reason, "train_steps": steps}
        (full / "cells" / f"twin{i}.json").write_text(json.dumps({"status": "ok", "rows": [row]}))
    cells = {(c.task.key, c.encoding.key, c.seed): c.cell_id for c in load_suite(str(suite)).cells()}
    return str(suite), full, cells


def test_only_runs_past_the_smaller_maximum_or_without_a_converged_twin_retrain(study):
    suite, full, cells = study
    retrain, _, pairs = halfmax.plan(suite, full, 0)
    # past M (1200 > 1000), stopped by its budget, no twin, and every cosine run (its rate spans its maximum)
    assert sorted(retrain) == sorted(cells[k] for k in [("copy", "nope", 1), ("copy", "rope", 0), ("copy", "rope", 1),
                                                       *[("reverse", e, s) for e in ("nope", "rope") for s in (0, 1)]])
    # converged by M (1000 included): the same run, bit for bit, so its twin's rows are borrowed
    borrowed = [("copy", "nope", 0), ("count", "nope", 0), ("count", "nope", 1), ("count", "rope", 0),
                ("count", "rope", 1)]
    assert {cid: twin["rows"][0]["train_steps"] for cid, twin in pairs.items()} == {
        cells[k]: TWINS[k][1] for k in borrowed}


def test_witnesses_are_the_longest_borrowed_runs_taken_task_by_task(study):
    suite, full, cells = study
    _, witnesses, _ = halfmax.plan(suite, full, 3)
    # count's longest (1000) and copy's only borrowed run (600) come first, then count's next (900)
    assert witnesses == [cells["count", "rope", 0], cells["copy", "nope", 0], cells["count", "nope", 1]]
    assert halfmax.plan(suite, full, 99)[1][3:] == [cells["count", "rope", 1], cells["count", "nope", 0]]


def test_table_refuses_while_a_retrained_cell_is_missing(study, tmp_path, capsys):
    suite, full, cells = study
    run = tmp_path / "run"
    (run / "cells").mkdir(parents=True)
    retrain = halfmax.plan(suite, full, 0)[0]
    for cid in retrain[1:]:
        (run / "cells" / f"{cid}.json").write_text("{}")
    assert halfmax.missing(retrain, run) == retrain[:1]
    assert halfmax.main(["table", str(full), suite, str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1 retrained cell(s) missing" in err and "halfmax.py run" in err


def test_a_witness_equals_its_twin_row_by_measurement_the_buckets_of_one_metric_apart():
    """A passkey or lm cell holds one row per depth bucket of each metric and length: each is its own
    measurement, so an identical witness is identical even though the bucketed rows share the rest."""
    def row(bucket, value, suite):
        return {"suite": suite, "task": "passkey", "encoding": "rope", "variant": "none", "train_len": 32, "seed": 0,
                "ratio": 2.0, "eval_len": 64, "metric": "exact_match", "bucket": bucket, "value": value,
                "timestamp": suite}
    twin = [row("", 0.5, "catalog"), row("0-25%", 0.25, "catalog"), row("75-100%", 0.75, "catalog")]
    witness = [row("", 0.5, "half"), row("0-25%", 0.25, "half"), row("75-100%", 0.75, "half")]
    assert halfmax.same_rows(witness, twin)
    assert not halfmax.same_rows([*witness[:1], row("0-25%", 0.3, "half"), witness[2]], twin)
    assert not halfmax.same_rows([*witness, row("25-50%", 0.5, "half")], twin)  # a measurement the twin lacks


def test_the_two_boards_compare_over_the_entries_and_seeds_both_hold():
    scale = load_script(ROOT / "studies" / "protocol" / "scale.py")
    full = pd.DataFrame({"task": ["sort"] * 5 + ["lm"], "encoding": ["nope", "rope", "pope", "rope", "rope", "rope"],
                         "variant": ["none", "none", "none", "yarn", "none", "yarn"], "seed": [0, 0, 0, 0, 1, 0],
                         "value": range(6)})
    core = pd.DataFrame({"task": ["sort"] * 3 + ["lm"], "encoding": ["nope", "rope", "rope", "rope"],
                         "variant": ["none", "none", "yarn", "none"], "seed": [0, 0, 0, 0], "value": [7, 8, 9, 10]})
    a, b = scale.common(full, core)  # lm's yarn is on one side only: dropped, as pope and seed 1 are
    assert sorted(a["value"]) == [0, 1, 3] and sorted(b["value"]) == [7, 8, 9]
