"""Tests of the tasks: layout, shift, loss mask, determinism, correct answers, errors, lm corpus."""

from __future__ import annotations

import doctest
import hashlib
import random
import sysconfig
from pathlib import Path

import pytest
import torch

import lenbench.tasks as tasks_pkg
from lenbench.tasks import (
    TASKS,
    addition,
    build_task,
    copying,
    count,
    lm,
    mqar,
    parity,
    passkey,
    recall,
    reversal,
    sorting,
)
from lenbench.tasks.lm import STDLIB_MODULES, ByteLMTask

B = 16

# name -> (params, a valid length, number of answer tokens at that length)
CASES = {
    "copy": ({}, 7, 7),
    "reverse": ({}, 7, 7),
    "sort": ({}, 7, 7),
    "recall": ({}, 7, 1),
    "mqar": ({}, 7, 7),  # every key queried: 7 answers
    "passkey": ({}, 40, 5),
    "addition": ({}, 7, 8),
    "parity": ({}, 7, 1),
    "count": ({}, 7, 1),
    "lm": ({}, 40, 40),  # train split: every target
}
EXPECTED_SEQ_LEN = {  # length 7 (40 for token-unit tasks) → T, from each task's documented layout
    "copy": 14, "reverse": 14, "sort": 14, "recall": 16, "mqar": 22, "passkey": 40, "addition": 23, "parity": 8, "count": 8, "lm": 40,
}  # fmt: skip
EXPECTED_VOCAB = {
    "copy": 9,
    "reverse": 9,
    "sort": 9,
    "recall": 137,
    "mqar": 257,
    "passkey": 17,
    "addition": 12,
    "parity": 3,
    "count": 263,
    "lm": 256,
}
EXPECTED_CHANCE = {
    "copy": 1 / 8,
    "reverse": 1 / 8,
    "sort": 1 / 8,
    "recall": 1 / 8,
    "mqar": 1 / 128,
    "passkey": 0.1,
    "addition": 0.1,
    "parity": 0.5,
    "count": 1 / 257,
    "lm": None,
}


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def full(batch) -> torch.Tensor:
    """Reassemble the whole sequence S (B, T+1) from inputs = S[:, :-1], targets = S[:, 1:]."""
    return torch.cat([batch.inputs[:, :1], batch.targets], dim=1)


def draw(name: str, seed: int = 0, length: int | None = None, split: str = "train", **params):
    p, default_len, _ = CASES[name]
    task = build_task(name, **{**p, **params})
    return task, task.sample(B, default_len if length is None else length, gen(seed), split=split)


def test_all_tasks_registered():
    assert set(TASKS.names()) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_shapes_dtypes_and_vocab(name):
    task, batch = draw(name)
    length = CASES[name][1]
    T = task.seq_len(length)
    assert T == EXPECTED_SEQ_LEN[name]
    assert task.vocab_size == EXPECTED_VOCAB[name]
    assert task.chance == EXPECTED_CHANCE[name]
    for t in (batch.inputs, batch.targets, batch.loss_mask):
        assert tuple(t.shape) == (B, T)
    assert batch.inputs.dtype == batch.targets.dtype == torch.long
    assert batch.loss_mask.dtype == torch.bool
    s = full(batch)
    assert int(s.min()) >= 0 and int(s.max()) < task.vocab_size
    assert task.kind == ("lm" if name == "lm" else "sequence")


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("length_scale", [1, 3])
def test_targets_are_inputs_shifted(name, length_scale):
    """Every target is the next input, but a scored one in a batch that feeds no answers (recall with
    `feed_answers: false` predicts each answer at its query and never reads it)."""
    _, batch = draw(name, length=CASES[name][1] * length_scale)
    shifted = batch.inputs[:, 1:] == batch.targets[:, :-1]  # (B, T-1)
    assert shifted[~batch.loss_mask[:, :-1]].all()
    if batch.feeds_answers:
        assert shifted.all()


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_mask_covers_exactly_the_answer(name):
    _, batch = draw(name)
    T = batch.targets.shape[1]
    answer = CASES[name][2]
    expected = (torch.arange(T) >= T - answer).expand(B, T)
    assert torch.equal(batch.loss_mask, expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_determinism(name):
    _, a = draw(name, seed=1)
    _, b = draw(name, seed=1)
    _, c = draw(name, seed=2)
    for x, y in ((a.inputs, b.inputs), (a.targets, b.targets), (a.loss_mask, b.loss_mask)):
        assert torch.equal(x, y)
    assert not torch.equal(a.inputs, c.inputs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_only_the_generator_is_used(name):
    """The global torch RNG must not influence (or be consumed by) sampling."""
    torch.manual_seed(123)
    _, a = draw(name, seed=5)
    after_a = torch.rand(1)
    torch.manual_seed(999)
    _, b = draw(name, seed=5)
    assert torch.equal(a.inputs, b.inputs)
    torch.manual_seed(123)
    assert torch.equal(torch.rand(1), after_a)


# ---- answers are correct (decoded independently of the task code) ----


def split_items(name):
    task, batch = draw(name)
    n = CASES[name][1]
    s = full(batch)  # (B, 2n+1)
    assert (s[:, n] == task.vocab).all(), "separator at position n"
    assert (s[:, :n] < task.vocab).all() and (s[:, n + 1 :] < task.vocab).all()
    return s[:, :n], s[:, n + 1 :]


def test_copy_answer():
    x, y = split_items("copy")
    assert torch.equal(x, y)


def test_reverse_answer():
    x, y = split_items("reverse")
    assert torch.equal(y, x.flip(1))
    assert not torch.equal(x, y)


def test_sort_answer():
    x, y = split_items("sort")
    for xi, yi in zip(x.tolist(), y.tolist(), strict=True):
        assert yi == sorted(yi)
        assert sorted(xi) == yi  # a permutation of the input


def test_recall_answer():
    task, batch = draw("recall")
    n, K = CASES["recall"][1], task.num_keys
    s = full(batch).tolist()
    for row in s:
        keys, values = row[0 : 2 * n : 2], row[1 : 2 * n : 2]
        assert len(set(keys)) == n and all(0 <= k < K for k in keys)
        assert all(K <= v < K + task.num_values for v in values)
        assert row[2 * n] == task.query_token
        query, answer = row[2 * n + 1], row[2 * n + 2]
        assert query in keys
        assert answer == dict(zip(keys, values, strict=True))[query]


def test_recall_queries_vary_in_position():
    task, batch = draw("recall")
    n = CASES["recall"][1]
    s = full(batch)
    where = [row[0 : 2 * n : 2].index(row[2 * n + 1]) for row in s.tolist()]
    assert len(set(where)) > 1


def test_passkey_answer():
    task, batch = draw("passkey")
    D = task.digits
    depths = []
    for row in full(batch).tolist():
        assert len(row) == CASES["passkey"][1] + 1
        assert row.count(task.key_token) == 1 and row.count(task.query_token) == 1
        k = row.index(task.key_token)
        hidden = row[k + 1 : k + 1 + D]
        assert row[-D - 1] == task.query_token
        assert row[-D:] == hidden
        assert all(0 <= d <= 9 for d in hidden)
        filler = row[:k] + row[k + 1 + D : -D - 1]
        assert filler == [10 + i % task.filler_period for i in range(len(filler))]
        depths.append(k)
    assert len(set(depths)) > 1, "the needle depth is random"


def test_passkey_depth_reaches_both_ends():
    task = build_task("passkey", digits=2)
    batch = task.sample(400, 10, gen(0))  # filler of 10 - 2*2 - 1 = 5 tokens: depths 0..5
    depths = {row.index(task.key_token) for row in full(batch).tolist()}
    assert depths == set(range(6))


def test_passkey_minimum_length_has_no_filler():
    task = build_task("passkey", digits=3)
    s = full(task.sample(4, 7, gen(0)))
    assert (s[:, 0] == task.key_token).all() and (s[:, 4] == task.query_token).all()


def digits_to_int(ds):
    return int("".join(str(d) for d in reversed(ds)))


@pytest.mark.parametrize("length", [1, 7, 30])
def test_addition_answer(length):
    task, batch = draw("addition", length=length)
    n = length
    for row in full(batch).tolist():
        assert row[n] == addition.PLUS and row[2 * n + 1] == addition.EQUALS
        a, b, s = row[:n], row[n + 1 : 2 * n + 1], row[2 * n + 2 :]
        assert len(s) == n + 1 and all(0 <= d <= 9 for d in a + b + s)
        assert digits_to_int(a) + digits_to_int(b) == digits_to_int(s)


def test_addition_carries_occur():
    _, batch = draw("addition", length=7)
    tops = full(batch)[:, -1]
    assert set(tops.tolist()) == {0, 1}


@pytest.mark.parametrize("length", [1, 3, 20])
def test_addition_index_hints_layout(length):
    """With index hints every digit of a, b and the sum follows hint o+i (Zhou et al. 2024): the sum is
    right, the hints of the three numbers are the same consecutive run, only sum digits are scored."""
    H, n = 24, length
    task, batch = draw("addition", length=length, index_hints=H)
    S = full(batch).tolist()
    assert task.vocab_size == 12 + H and len(S[0]) - 1 == task.seq_len(n) == 6 * n + 3
    offsets = set()
    for row, mask in zip(S, batch.loss_mask.tolist(), strict=True):
        a, b, s = row[: 2 * n], row[2 * n + 1 : 4 * n + 1], row[4 * n + 2 :]
        assert row[2 * n] == addition.PLUS and row[4 * n + 1] == addition.EQUALS and len(s) == 2 * (n + 1)
        o = row[0] - addition.HINT0
        offsets.add(o)
        assert 0 <= o <= H - n - 1
        assert a[::2] == b[::2] == s[::2][:n] and s[::2] == [addition.HINT0 + o + i for i in range(n + 1)]
        assert digits_to_int(a[1::2]) + digits_to_int(b[1::2]) == digits_to_int(s[1::2])
        assert task.sequence(digits_to_int(a[1::2]), digits_to_int(b[1::2]), n, offset=o) == row
        scored = [t for t, m in zip(row[1:], mask, strict=True) if m]
        assert scored == s[1::2]  # the n+1 sum digits, never a hint
    assert len(offsets) > 1  # the offset is drawn per sample


def test_addition_without_hints_is_unchanged_by_the_option():
    plain = build_task("addition").sample(B, 5, gen(3))
    zero = build_task("addition", index_hints=0).sample(B, 5, gen(3))
    assert torch.equal(plain.inputs, zero.inputs) and torch.equal(plain.targets, zero.targets)


def test_addition_index_hints_too_few_is_one_line():
    task = build_task("addition", index_hints=8)
    with pytest.raises(ValueError, match=r"length 8 needs 9 index hints .* pass index_hints >= 9") as err:
        task.seq_len(8)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="index_hints must be an int >= 0"):
        build_task("addition", index_hints=-1)


def test_parity_answer():
    task, batch = draw("parity")
    s = full(batch)
    n = CASES["parity"][1]
    assert (s[:, n] == parity.MARK).all()
    assert torch.equal(s[:, -1], s[:, :n].sum(1) % 2)
    assert set(s[:, -1].tolist()) == {0, 1}


# ---- sample() agrees with the scalar `sequence()` used in the docstrings ----


def test_sample_agrees_with_sequence():
    for name in ("copy", "reverse", "sort"):
        task, batch = draw(name)
        n = CASES[name][1]
        for row in full(batch).tolist():
            assert task.sequence(row[:n]) == row
    task, batch = draw("recall")
    n = CASES["recall"][1]
    for row in full(batch).tolist():
        keys, vals = row[0 : 2 * n : 2], [v - task.num_keys for v in row[1 : 2 * n : 2]]
        assert task.sequence(keys, vals, row[2 * n + 1]) == row
    task, batch = draw("passkey")
    for row in full(batch).tolist():
        k = row.index(task.key_token)
        assert task.sequence(40, row[-task.digits :], depth=k) == row
    task, batch = draw("addition")
    for row in full(batch).tolist():
        assert task.sequence(digits_to_int(row[:7]), digits_to_int(row[8:15]), 7) == row
    task, batch = draw("parity")
    for row in full(batch).tolist():
        assert task.sequence(row[:7]) == row
    task, batch = draw("count")
    for row in full(batch).tolist():
        assert task.sequence([None if x == task.filler else x for x in row[:7]]) == row
    task, batch = draw("recall", queries="all", distinct_values=True, num_values=16)
    n = CASES["recall"][1]
    for row in full(batch).tolist():
        keys, vals = row[0 : 2 * n : 2], [v - task.num_keys for v in row[1 : 2 * n : 2]]
        assert task.sequence(keys, vals, row[2 * n + 1 :: 2]) == row


def test_count_answer_is_the_number_of_items_and_never_seen_past_training():
    task = build_task("count")
    for ell in (1, 5, 8):
        s = full(task.sample(64, ell, gen(ell)))
        n = (s[:, :ell] != task.filler).sum(1)  # (B,) items among the slots
        assert (s[:, ell] == task.mark).all() and torch.equal(s[:, -1], task.count_token(0) + n)
        assert set(n.tolist()) == set(range(max(1, ell - task.spread + 1), ell + 1))  # the last `spread` counts
    # training at lengths 1 … 8 never shows a count symbol above 8; from 8 + spread on every answer is one
    seen = {t for ell in range(1, 9) for t in full(task.sample(B, ell, gen(ell))).flatten().tolist()}
    assert task.count_token(8) in seen and not any(task.count_token(c) in seen for c in range(9, task.max_count + 1))
    past = full(task.sample(B, 8 + task.spread, gen(0)))[:, -1]
    assert (past > task.count_token(8)).all()
    assert task.solvable_past_training is False and build_task("parity").solvable_past_training is True
    with pytest.raises(ValueError, match=r"length 300 exceeds max_count=256 .* pass max_count >= 300"):
        task.seq_len(300)


def test_mqar_queries_every_key_once_with_distinct_values():
    n = 12
    task, batch = draw("recall", length=n, queries="all", distinct_values=True, num_values=32)
    s = full(batch)
    assert s.shape[1] == 4 * n + 1 and task.seq_len(n) == 4 * n
    assert batch.loss_mask.sum(1).eq(n).all()  # every query's answer is scored
    for row in s.tolist():
        keys, vals = row[0 : 2 * n : 2], row[1 : 2 * n : 2]
        asked, answers = row[2 * n + 1 :: 2], row[2 * n + 2 :: 2]
        assert len(set(vals)) == n and sorted(asked) == sorted(keys)  # distinct values; every key queried
        assert answers == [dict(zip(keys, vals, strict=True))[k] for k in asked]
    # distinct values: the most frequent value of a sample occurs once, so naming it is chance
    assert all(max(row[1 : 2 * n : 2].count(v) for v in row[1 : 2 * n : 2]) == 1 for row in s.tolist())
    with pytest.raises(ValueError, match=r"length 40 exceeds num_values=32 \(distinct_values"):
        task.seq_len(40)
    # Zoology's layout: each answer predicted at its query, never an input
    zoo = build_task("recall", queries="all", distinct_values=True, feed_answers=False, num_values=32)
    batch = zoo.sample(B, n, gen(1))
    assert batch.inputs.shape == (B, 3 * n + 1) and zoo.seq_len(n) == 3 * n + 1
    assert batch.loss_mask[:, 2 * n + 1 :].all() and not batch.loss_mask[:, : 2 * n + 1].any()
    values = set(range(zoo.num_keys, zoo.num_keys + zoo.num_values))
    assert not any(t in values for t in batch.inputs[:, 2 * n + 1 :].flatten().tolist())  # no answer fed back
    for inputs, targets in zip(batch.inputs.tolist(), batch.targets.tolist(), strict=True):
        pairs = dict(zip(inputs[0 : 2 * n : 2], inputs[1 : 2 * n : 2], strict=True))
        asked = inputs[2 * n + 1 :]
        assert sorted(asked) == sorted(pairs) and targets[2 * n + 1 :] == [pairs[k] for k in asked]
        assert targets[: 2 * n + 1] == inputs[1 : 2 * n + 2]  # the unscored prefix is the usual shift
    with pytest.raises(ValueError, match="distinct_values must be true or false"):
        build_task("recall", distinct_values="yes")
    with pytest.raises(ValueError, match="queries must be an int >= 1"):
        build_task("recall", queries="some")
    with pytest.raises(ValueError, match="feed_answers must be true or false"):
        build_task("recall", feed_answers=1)


@pytest.mark.parametrize("module", [addition, copying, count, lm, mqar, parity, passkey, recall, reversal, sorting])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_tasks_documented(name):
    cls = TASKS.get(name)
    assert cls.name == name and cls.description and "Worked example" in cls.__doc__


# ---- errors ----


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("length", [0, -3, 2.5, True])
def test_bad_lengths_raise(name, length):
    task = build_task(name)
    with pytest.raises(ValueError, match=f"task '{name}'") as err:
        task.sample(2, length, gen(0))
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=f"task '{name}'"):
        task.seq_len(length)


def test_recall_length_over_num_keys():
    task = build_task("recall", num_keys=10)
    assert task.seq_len(10) == 22
    task.sample(2, 10, gen(0))
    with pytest.raises(ValueError, match=r"length 11 exceeds num_keys=10.*num_keys >= 11"):
        task.sample(2, 11, gen(0))
    with pytest.raises(ValueError, match="num_keys"):
        task.seq_len(11)


@pytest.mark.parametrize("length", [1, 3, 5, 9])
def test_recall_multi_query_answers_every_query(length):
    """MQAR (queries > 1): min(queries, n) distinct keys of the sample, each followed by its value;
    the answers are scored, the queried keys never (decoded here without the task's code)."""
    task = build_task("recall", num_keys=32, num_values=4, queries=5)
    batch = task.sample(B, length, gen(3))
    n, m = length, min(5, length)
    assert batch.inputs.shape[1] == task.seq_len(n) == 2 * n + 2 * m
    s = full(batch).tolist()
    for row, mask in zip(s, batch.loss_mask.tolist(), strict=True):
        keys, values = row[0 : 2 * n : 2], row[1 : 2 * n : 2]
        assert len(set(keys)) == n and row[2 * n] == task.query_token
        asked, answers = row[2 * n + 1 :: 2], row[2 * n + 2 :: 2]
        assert len(asked) == len(set(asked)) == m and set(asked) <= set(keys)
        lookup = dict(zip(keys, values, strict=True))
        assert answers == [lookup[q] for q in asked]
        # targets are S[1:]: the answer a_j sits at S[2n + 2 + 2j], so at target 2n + 1 + 2j
        assert [i for i, x in enumerate(mask) if x] == [2 * n + 1 + 2 * j for j in range(m)]
    orders = {tuple(row[2 * n + 1 :: 2]) for row in s}
    assert m == 1 or len(orders) > 1, "the queried keys come in random order"


def test_recall_one_query_is_the_single_query_task():
    """queries=1 keeps single-query recall's samples exactly (its published study rows stay valid)."""
    a = build_task("recall", num_keys=64).sample(B, 8, gen(4))
    b = build_task("recall", num_keys=64, queries=1).sample(B, 8, gen(4))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.loss_mask, b.loss_mask)
    assert int(a.loss_mask.sum(1).max()) == 1


def test_multi_query_samples_agree_with_sequence():
    task = build_task("recall", num_keys=16, queries=3)
    for row in full(task.sample(B, 5, gen(6))).tolist():
        keys, vals = row[0:10:2], [v - task.num_keys for v in row[1:10:2]]
        assert task.sequence(keys, vals, row[11::2]) == row
    with pytest.raises(ValueError, match="3 distinct queries"):
        task.sequence([1, 2, 3], [0, 0, 0], [1, 2])


def test_passkey_too_short():
    task = build_task("passkey", digits=5)
    assert task.seq_len(11) == 11
    with pytest.raises(ValueError, match=r"task 'passkey': length 10 .*minimum 11"):
        task.sample(2, 10, gen(0))


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_split_and_batch_size(name):
    task = build_task(name)
    length = CASES[name][1]
    with pytest.raises(ValueError, match="split"):
        task.sample(2, length, gen(0), split="test")
    with pytest.raises(ValueError, match="batch_size"):
        task.sample(0, length, gen(0))


@pytest.mark.parametrize(
    "name, params",
    [
        ("copy", {"vocab": 1}),
        ("recall", {"num_values": 1}),
        ("passkey", {"digits": 0}),
        ("lm", {"eval_tokens": 0}),
    ],
)
def test_bad_params(name, params):
    with pytest.raises(ValueError, match=f"task '{name}'"):
        build_task(name, **params)


def test_unknown_param_is_one_line_error():
    with pytest.raises(ValueError, match="did you mean 'vocab'"):
        build_task("copy", vocb=4)


def test_vocab_param_changes_layout_and_chance():
    task = build_task("sort", vocab=3)
    assert task.vocab_size == 4 and task.chance == pytest.approx(1 / 3)
    s = full(task.sample(B, 5, gen(0)))
    assert (s[:, 5] == 3).all() and int(s[:, :5].max()) <= 2


# ---- lm ----


def stdlib_bytes() -> bytes:
    root = Path(sysconfig.get_paths()["stdlib"])
    chunks = []
    for m in STDLIB_MODULES:
        p = root / (m.replace(".", "/") + ".py")
        if not p.exists():
            p = root / m.replace(".", "/") / "__init__.py"
        chunks.append(p.read_bytes())
    return b"".join(chunks)


@pytest.fixture
def text_file(tmp_path):
    rng = random.Random(0)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz äö\n") for _ in range(3000))
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    return path


def test_lm_fingerprint_is_sha256_of_listed_files():
    fp = ByteLMTask().fingerprint()
    assert fp["corpus_sha256"] == hashlib.sha256(stdlib_bytes()).hexdigest()
    assert fp == build_task("lm").fingerprint()  # stable
    for m in STDLIB_MODULES:
        assert m in fp["corpus"]


def test_lm_corpus_read_once():
    assert ByteLMTask().corpus is ByteLMTask(eval_tokens=3).corpus


def test_lm_path(text_file):
    task = build_task("lm", path=str(text_file))
    assert task.fingerprint()["corpus_sha256"] == hashlib.sha256(text_file.read_bytes()).hexdigest()
    assert str(text_file) in task.fingerprint()["corpus"]
    batch = task.sample(4, 20, gen(0))
    data = text_file.read_bytes()
    for row in full(batch).tolist():
        assert bytes(row) in data


@pytest.mark.parametrize("use_path", [False, True])
def test_lm_splits_read_their_part(text_file, use_path):
    task = ByteLMTask(path=text_file) if use_path else ByteLMTask()
    data = text_file.read_bytes() if use_path else stdlib_bytes()
    cut = int(len(data) * 0.9)
    length = 24
    for split, part, other in (("train", data[:cut], data[cut:]), ("eval", data[cut:], data[:cut])):
        batch = task.sample(32, length, gen(3), split=split)
        rows = [bytes(r) for r in full(batch).tolist()]
        assert all(r in part for r in rows), split
        if use_path:  # random text: a 25-byte window occurs once
            assert not any(r in other for r in rows), split


def test_lm_eval_windows_end_in_the_last_half_of_the_held_out_text(text_file):
    task = ByteLMTask(path=text_file)
    data = text_file.read_bytes()
    train = int(len(data) * 0.9)
    held_out = len(data) - train
    longest = held_out - held_out // 2 - 1  # the context the held-out split allows
    s = full(task.sample(64, longest, gen(0), split="eval"))  # (64, longest + 1)
    for row in s.tolist():
        start = data.index(bytes(row), train)  # the window lies inside the held-out text …
        assert start >= train and start + longest + 1 - 1 >= len(data) - held_out // 2  # … and ends in its last half
    with pytest.raises(ValueError, match=rf"task 'lm': eval length {longest + 1} exceeds the {longest} bytes"):
        task.sample(2, longest + 1, gen(0), split="eval")
    with pytest.raises(ValueError, match=rf"task 'lm': length {held_out} needs.*{held_out} bytes.*corpus {len(data)} bytes"):
        task.sample(2, held_out, gen(0), split="eval")


def test_lm_loss_masks():
    task = ByteLMTask(eval_tokens=8)
    train = task.sample(4, 50, gen(0), split="train")
    assert train.loss_mask.all()
    ev = task.sample(4, 50, gen(0), split="eval")
    assert torch.equal(ev.loss_mask, (torch.arange(50) >= 42).expand(4, 50))
    short = task.sample(4, 5, gen(0), split="eval")  # window shorter than eval_tokens: all scored
    assert short.loss_mask.all()


def test_lm_bad_path(tmp_path):
    with pytest.raises(ValueError, match="is not a file"):
        build_task("lm", path=str(tmp_path / "missing.txt"))


def test_package_exports():
    for name in tasks_pkg.__all__:
        assert hasattr(tasks_pkg, name)


def test_lm_eval_scores_the_same_tokens_at_every_length():
    """Only the context grows with the evaluation length: the scored held-out bytes are the same,
    however the samples are split into batches."""
    from lenbench.evaluate import eval_generator

    task = build_task("lm", eval_tokens=16)
    scored = {}
    for length, batches in [(64, [8]), (512, [3, 5]), (2048, [1] * 8)]:
        gen = eval_generator(task, length, seed=0)
        parts = [task.sample(b, length, gen, split="eval") for b in batches]
        targets = torch.cat([p.targets[:, -16:] for p in parts])  # (8, 16)
        assert all(p.loss_mask[:, -16:].all() and not p.loss_mask[:, :-16].any() for p in parts)
        scored[length] = targets
    torch.testing.assert_close(scored[64], scored[512])
    torch.testing.assert_close(scored[64], scored[2048])
    other_seed = task.sample(8, 64, eval_generator(task, 64, seed=1), split="eval").targets[:, -16:]
    assert not torch.equal(other_seed, scored[64])
