"""The measurement protocol (issue 11): variable-length training, length-relative encoding defaults,
realistic RoPE factors, context gain, needle depth and Hugging Face rope dicts."""

from __future__ import annotations

import math

import pytest
import torch

from lenbench.model import ModelConfig, Transformer
from lenbench.suite import TrainSpec, load_suite
from lenbench.tasks import TASKS, build_task
from lenbench.train import train_model

# --- 1. variable-length training ---------------------------------------------------------------

#: A training length per task just above its minimum, so the draw's lower end matters.
UNIFORM_LEN = {"passkey": 14, "recall": 4}


def test_every_task_declares_a_minimum_that_sample_accepts_and_one_below_it_fails():
    for name in TASKS.names():
        task = build_task(name)
        low = task.min_length
        batch = task.sample(2, low, torch.Generator().manual_seed(0))
        assert batch.inputs.shape == (2, task.seq_len(low)), name
        if low > 1:
            with pytest.raises(ValueError, match="too short"):
                task.sample(2, low - 1, torch.Generator().manual_seed(0))
    assert build_task("passkey").min_length == 11 and build_task("passkey", digits=2).min_length == 5


@pytest.mark.parametrize("name", sorted(TASKS.names()))
def test_uniform_sampling_trains_every_task_within_its_minimum_and_train_len(name, monkeypatch):
    task = build_task(name)
    train_len = UNIFORM_LEN.get(name, 5)
    drawn: list[int] = []
    original = type(task).sample

    def spy(self, batch_size, length, generator, split="train"):
        drawn.append(length)
        return original(self, batch_size, length, generator, split)

    monkeypatch.setattr(type(task), "sample", spy)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2, ff_mult=2,
                                    encoding="rope", max_len=task.seq_len(train_len)))
    spec = TrainSpec(steps=40, batch_size=2, lr=1e-3, warmup=2, length_sampling="uniform")
    stats = train_model(model, task, train_len, spec, seed=0, device=torch.device("cpu"), progress=False)
    assert math.isfinite(stats.final_loss)
    assert len(drawn) == 40
    assert min(drawn) >= task.min_length and max(drawn) <= train_len
    assert min(drawn) == task.min_length and max(drawn) == train_len  # both ends reached in 40 draws
    assert len(set(drawn)) > 2


def test_uniform_sampling_below_the_task_minimum_is_a_one_line_error():
    task = build_task("passkey")
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2, encoding="nope"))
    spec = TrainSpec(steps=2, batch_size=2, length_sampling="uniform")
    with pytest.raises(ValueError, match=r"train_len 8 is below the task's minimum length 11 tokens; raise train_len"):
        train_model(model, task, 8, spec, seed=0, device=torch.device("cpu"), progress=False)


def test_quick_and_standard_train_with_uniform_lengths():
    for name in ("quick", "standard"):
        assert load_suite(name).train.length_sampling == "uniform", name


# --- 2. length-relative defaults ---------------------------------------------------------------


def test_fire_threshold_and_t5_max_distance_follow_the_training_length():
    from lenbench.encodings import EncodingDims, build_encoding

    for train_len, threshold, max_distance in ((32, 8.0, 32), (64, 16.0, 64), (2048, 512.0, 2048), (8, 2.0, 17)):
        dims = EncodingDims(d_model=32, n_heads=4, train_len=train_len)
        assert float(build_encoding("fire", dims).threshold) == threshold
        assert build_encoding("t5", dims).max_distance == max_distance  # 17: one past the 16 exact buckets
    bidi = EncodingDims(d_model=32, n_heads=4, train_len=4, causal=False)
    assert build_encoding("t5", bidi).max_distance == 9  # one past 8 exact buckets per direction
    # the paper constants: by parameter, and when the training length is unknown
    dims = EncodingDims(d_model=32, n_heads=4, train_len=32)
    assert float(build_encoding("fire", dims, threshold=512).threshold) == 512.0
    assert build_encoding("t5", dims, max_distance=128).max_distance == 128
    unknown = EncodingDims(d_model=32, n_heads=4)
    assert float(build_encoding("fire", unknown).threshold) == 512.0
    assert build_encoding("t5", unknown).max_distance == 128


def test_engine_builds_each_cell_model_with_its_training_length_in_tokens():
    from lenbench.engine import model_config
    from lenbench.suite import parse_suite

    suite = parse_suite({"tasks": [{"name": "copy", "train_len": 16}, {"name": "addition", "train_len": 8}],
                         "encodings": ["fire", "t5"], "eval": {"ratios": [1, 2]}})
    for cell in suite.cells():
        task = build_task(cell.task.name)
        cfg = model_config(cell, task)
        assert cfg.train_len == task.seq_len(cell.train_len) == {"copy": 32, "addition": 26}[cell.task.name]
        model = Transformer(cfg)
        if cell.encoding.name == "t5":
            assert model.pos_enc.max_distance == cfg.train_len
        else:
            assert float(model.pos_enc.threshold) == cfg.train_len / 4
