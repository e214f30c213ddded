"""`mqar`: multi-query associative recall as Zoology (Arora et al. 2023) defines it, registered under
its own name with Zoology's defaults: `recall`'s samples at those parameters, every key queried once,
distinct values, no frequency shortcut, one-line errors that name `mqar`."""

from __future__ import annotations

import inspect

import pytest
import torch
from lenbench_testing import TINY_SUITE

from lenbench.baselines import baseline_rows, task_baselines
from lenbench.config import parse_suite
from lenbench.run.driver import check_eval_lengths
from lenbench.tasks import TASKS, AssociativeRecallTask, build_task
from lenbench.tasks.mqar import MQARTask

#: Zoology's MQAR as `recall` parameters (docs/suite-reference.md), which `mqar` has as its defaults.
ZOOLOGY = {"num_keys": 128, "num_values": 128, "queries": "all", "distinct_values": True, "feed_answers": False}


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_defaults_are_zoology_s_and_the_parameters_are_recall_s():
    assert TASKS.get("mqar") is MQARTask and issubclass(MQARTask, AssociativeRecallTask)
    defaults = {n: p.default for n, p in inspect.signature(MQARTask.__init__).parameters.items() if n != "self"}
    assert defaults == ZOOLOGY
    assert MQARTask.PARAMS is AssociativeRecallTask.PARAMS
    task = build_task("mqar")
    assert {n: getattr(task, n) for n in ZOOLOGY} == ZOOLOGY
    assert (task.name, task.length_unit, task.kind, task.paper) == ("mqar", "items", "sequence", AssociativeRecallTask.paper)
    assert task.chance == MQARTask.chance == 1 / 128 and task.fingerprint() == {}


@pytest.mark.parametrize("length", [1, 8, 37, 128])
@pytest.mark.parametrize("split", ["train", "eval"])
def test_mqar_is_recall_with_zoology_s_parameters_sample_for_sample(length, split):
    mqar, recall = build_task("mqar"), build_task("recall", **ZOOLOGY)
    assert (mqar.vocab_size, mqar.seq_len(length), mqar.chance) == (recall.vocab_size, recall.seq_len(length), recall.chance)
    for seed in (0, 1, 7):
        a, b = mqar.sample(16, length, gen(seed), split), recall.sample(16, length, gen(seed), split)
        for x, y in ((a.inputs, b.inputs), (a.targets, b.targets), (a.loss_mask, b.loss_mask)):
            assert torch.equal(x, y)
        assert a.feeds_answers == b.feeds_answers is False


def test_a_user_may_still_change_every_parameter():
    params = {"num_keys": 40, "num_values": 50, "queries": 3, "distinct_values": False, "feed_answers": True}
    a = build_task("mqar", **params).sample(8, 6, gen(2))
    b = build_task("recall", **params).sample(8, 6, gen(2))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets) and torch.equal(a.loss_mask, b.loss_mask)


def test_vocabulary_and_layout():
    task = build_task("mqar")
    assert task.vocab_size == 128 + 128 + 1 == 257 and task.query_token == 256
    assert [task.seq_len(n) for n in (1, 8, 128)] == [4, 25, 385]  # 3n + 1: n pairs, the marker, n queries


@pytest.mark.parametrize("length", [1, 2, 8, 128])
def test_every_key_is_queried_once_and_the_values_of_a_sample_are_distinct(length):
    """Decoded without the task's code: the pairs, the marker, each key once as a query; the target at
    each query is its key's value, no value is ever an input after the pairs, only answers are scored."""
    task = build_task("mqar")
    n, K, V = length, task.num_keys, task.num_values
    batch = task.sample(64, n, gen(n), split="eval")
    assert batch.inputs.shape == (64, 3 * n + 1)
    orders = set()
    for inputs, targets, mask in zip(batch.inputs.tolist(), batch.targets.tolist(), batch.loss_mask.tolist(), strict=True):
        keys, values, asked = inputs[0 : 2 * n : 2], inputs[1 : 2 * n : 2], inputs[2 * n + 1 :]
        assert all(0 <= k < K for k in keys) and all(K <= v < K + V for v in values)
        assert len(set(keys)) == n and len(set(values)) == n  # distinct keys, distinct values
        assert inputs[2 * n] == task.query_token
        assert sorted(asked) == sorted(keys)  # every key queried, once
        lookup = dict(zip(keys, values, strict=True))
        assert targets[2 * n + 1 :] == [lookup[k] for k in asked]  # each answer at its query
        assert [i for i, m in enumerate(mask) if m] == list(range(2 * n + 1, 3 * n + 1))
        orders.add(tuple(keys.index(k) for k in asked))
    assert n == 1 or len(orders) > 1, "the keys are queried in random order"


def most_frequent(task, pairs: int, samples: int) -> float:
    rows = baseline_rows(task, pairs, [1], samples=samples, tokens_per_batch=1 << 16, seed=0, base={"task": task.name})
    return next(r["value"] for r in rows if r["encoding"] == "baseline:most-frequent" and r["metric"] == "token_accuracy")


def test_the_most_frequent_value_has_nothing_to_count():
    """Distinct values: every value of a sample occurs once, so "the most frequent value read so far"
    names the sample's lowest value, the answer of exactly one of its n queries: 1/n token accuracy,
    the score of a uniform guess among the n values read. Measured on 4096 samples per length: with
    the whole pool in a sample (n = num_values = 128) it is chance, 1/num_values; at 8 pairs, 1/8.
    Tolerance 1e-9: one hit per sample makes it exact, not a sampling estimate."""
    task = build_task("mqar")
    assert [b.name for b in task_baselines(task)] == ["chance", "repeat-previous", "most-frequent"]
    assert most_frequent(task, 128, 4096) == pytest.approx(1 / task.num_values, abs=1e-9) == task.chance
    assert most_frequent(task, 8, 4096) == pytest.approx(1 / 8, abs=1e-9)
    small = build_task("mqar", num_keys=16, num_values=8)  # a pool of 8: 8 pairs hold all of it
    assert most_frequent(small, 8, 4096) == pytest.approx(small.chance, abs=1e-9) == 1 / 8
    # one hit per sample, counted here without the baseline code
    batch = task.sample(512, 8, gen(3), split="eval")
    predict = task.heuristics()["most-frequent"](batch.inputs)
    hits = ((predict == batch.targets) & batch.loss_mask).sum(dim=1)
    assert hits.eq(1).all()
    # against recall's default (values from 8 symbols, with replacement, one query), where it is a shortcut
    assert most_frequent(build_task("recall"), 8, 4096) > 1 / 8 + 0.1


@pytest.mark.parametrize("params, shown", [
    ({"num_values": 1}, "parameter num_values must be an int >= 2, got 1"),
    ({"num_keys": 0}, "parameter num_keys must be an int >= 1, got 0"),
    ({"queries": "some"}, "parameter queries must be an int >= 1 or 'all', got 'some'"),
    ({"distinct_values": "yes"}, "parameter distinct_values must be true or false, got 'yes'"),
    ({"feed_answers": 1}, "parameter feed_answers must be true or false, got 1"),
])
def test_a_bad_parameter_is_one_line_naming_mqar(params, shown):
    with pytest.raises(ValueError) as err:
        build_task("mqar", **params)
    assert str(err.value) == f"task 'mqar': {shown}"


def test_other_errors_are_one_line_naming_mqar():
    with pytest.raises(ValueError, match="^task 'mqar' has no parameter 'num_value'; did you mean 'num_values'") as err:
        build_task("mqar", num_value=64)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError) as err:
        build_task("mqar").sample(2, 129, gen(0))
    assert str(err.value) == ("task 'mqar': length 129 exceeds num_keys=128 (keys of a sample are distinct); "
                              "pass num_keys >= 129 or a length <= 128")
    with pytest.raises(ValueError) as err:
        build_task("mqar", num_keys=256).seq_len(129)
    assert str(err.value) == ("task 'mqar': length 129 exceeds num_values=128 (distinct_values: the values of a "
                              "sample are distinct); pass num_values >= 129 or a length <= 128")
    for length in (0, 2.5):
        with pytest.raises(ValueError, match="^task 'mqar'") as err:
            build_task("mqar").sample(2, length, gen(0))
        assert "\n" not in str(err.value)


def test_a_suite_at_8_pairs_evaluates_to_16x_with_the_defaults_and_is_refused_past_them():
    def suite(train_len: int) -> dict:
        return {**TINY_SUITE, "tasks": [{"name": "mqar", "train_len": train_len}],
                "eval": {**TINY_SUITE.get("eval", {}), "ratios": [1, 2, 4, 8, 16]}}

    check_eval_lengths(parse_suite(suite(8)))  # 128 pairs: the whole pool of keys and of values
    with pytest.raises(ValueError, match=r"^suite 'tiny', task 'mqar' at train_len 16: the run needs length 256 "
                                         r"\(16x\) and task 'mqar': length 256 exceeds num_keys=128"):
        check_eval_lengths(parse_suite(suite(16)))
