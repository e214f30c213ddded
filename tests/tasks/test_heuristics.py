"""Each task's trivial predictors (`Task.heuristics`): what they predict, against an independent
implementation, and that they become baseline rows beside chance and repeat-previous."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from lenbench.baselines import baseline_rows, task_baselines
from lenbench.tasks import build_task
from lenbench.tasks._common import most_frequent_so_far

#: task → (params, length, its heuristics): every task that declares one.
DECLARED = {
    "copy": ({}, 6, ["most-frequent"]), "reverse": ({}, 6, ["most-frequent", "copy-input"]),
    "sort": ({}, 6, ["most-frequent", "copy-input"]),
    "addition": ({}, 3, ["most-frequent"]), "passkey": ({}, 30, ["most-frequent"]),
    "recall": ({}, 4, ["most-frequent"]), "count": ({}, 6, ["the-length"]), "mqar": ({}, 8, ["most-frequent"]),
}


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_most_frequent_so_far_is_a_running_mode_with_the_lowest_id_on_ties():
    inputs = torch.randint(0, 12, (50, 30), generator=gen(0))
    tokens = range(3, 9)
    got = most_frequent_so_far(inputs, tokens)
    for b in range(inputs.shape[0]):
        counts: Counter = Counter()
        for t in range(inputs.shape[1]):
            if inputs[b, t].item() in tokens:
                counts[inputs[b, t].item()] += 1
            best = max(counts.values(), default=0)
            want = min((k for k, c in counts.items() if c == best), default=tokens[0])
            assert got[b, t].item() == want, (b, t)


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_declared_heuristics_are_causal_baseline_rows(name):
    params, length, names = DECLARED[name]
    task = build_task(name, **params)
    assert list(task.heuristics()) == names
    assert [b.name for b in task_baselines(task)][-len(names):] == names
    batch = task.sample(16, length, gen(1), split="eval")
    for predict in task.heuristics().values():
        full = predict(batch.inputs)
        for t in (1, batch.inputs.shape[1] // 2):  # a prefix predicts what the whole does there
            assert torch.equal(predict(batch.inputs[:, :t]), full[:, :t])
    rows = baseline_rows(task, length, [1, 2], samples=8, tokens_per_batch=512, seed=0, base={"task": name})
    assert {r["encoding"] for r in rows} >= {f"baseline:{n}" for n in names}


def test_copy_input_writes_the_prompt_in_order_after_the_separator():
    task = build_task("sort")
    batch = task.sample(8, 5, gen(2), split="eval")
    seq = torch.cat([batch.inputs, batch.targets[:, -1:]], dim=1)  # (B, 11): x_1 … x_5 SEP y_1 … y_5
    pred = task.copy_input(batch.inputs)  # (B, 10)
    assert torch.equal(pred[:, 5:], seq[:, :5])  # at SEP and after: x_1 … x_5
    assert (pred[:, :5] == 0).all()  # before the separator: nothing to copy yet


def test_the_length_scores_the_share_of_samples_whose_count_is_the_length():
    task = build_task("count")
    for length in (8, 20):
        (batch,) = [task.sample(256, length, gen(length), split="eval")]
        (predict,) = task.heuristics().values()
        pred = predict(batch.inputs)[:, -1]  # (B,): at the marker
        assert (pred == task.count_token(length)).all()
        hits = (pred == batch.targets[:, -1]).double().mean().item()
        full_count = (batch.targets[:, -1] == task.count_token(length)).double().mean().item()
        assert hits == full_count and 0.4 < hits < 0.6  # n is uniform on {length - 1, length}


def test_recall_with_repeated_values_has_a_floor_above_chance_and_distinct_values_put_it_at_chance():
    def most_frequent(params: dict, pairs: int) -> float:
        task = build_task("recall", **params)
        rows = baseline_rows(task, pairs, [1], samples=512, tokens_per_batch=4096, seed=0, base={"task": "recall"})
        return next(r["value"] for r in rows if r["encoding"] == "baseline:most-frequent" and r["metric"] == "token_accuracy")

    assert most_frequent({}, 2) > 0.45  # 8 values with replacement, one query: the shortcut
    mqar = {"queries": "all", "distinct_values": True, "feed_answers": False, "num_keys": 64, "num_values": 64}
    assert most_frequent(mqar, 8) == pytest.approx(1 / 8)  # one of 8 distinct values in context, every query


def test_a_heuristic_named_like_a_kind_baseline_is_a_one_line_error(monkeypatch):
    task = build_task("copy")
    monkeypatch.setattr(type(task), "heuristics", lambda self: {"chance": lambda x: x})
    with pytest.raises(ValueError, match="task 'copy': heuristic 'chance' has the name of a sequence baseline; rename it"):
        task_baselines(task)
