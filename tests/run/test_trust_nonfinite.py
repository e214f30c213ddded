"""Non-finite evaluation is a failure: NaN or infinite logits at a length fail that length's rows with
the reason; no row is status ok with a NaN value, and no accuracy is read off an argmax of NaN."""

from __future__ import annotations

import math

import pytest
import torch
import yaml
from lenbench_testing import TINY_SUITE

from lenbench.evaluate import NonFiniteLogits, evaluate_length
from lenbench.model import ModelConfig, Transformer
from lenbench.tasks import build_task


def nan_at_eval(model: Transformer, value: float = math.nan) -> Transformer:
    """`model` with its logits replaced by `value` in eval mode (training is untouched)."""
    forward = model.forward

    def poisoned(*args, **kwargs):
        out = forward(*args, **kwargs)
        return out if model.training else torch.full_like(out, value)

    model.forward = poisoned
    return model


@pytest.mark.parametrize("task_name", ["copy", "lm"])
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_evaluate_length_refuses_non_finite_logits(task_name, value):
    task = build_task(task_name)
    torch.manual_seed(0)
    model = nan_at_eval(Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2,
                                                ff_mult=2, max_len=64)), value)
    # before the check, copy scored 0.156 / 0.094 / 0.117 from argmax of NaN (index 0) and lm stored nan
    with pytest.raises(NonFiniteLogits, match=r"non-finite logits at length 8: \d+ of \d+ values are NaN or infinite"):
        evaluate_length(model, task, 8, samples=4, tokens_per_batch=256, seed=0, device=torch.device("cpu"))


def test_a_cell_whose_model_is_nan_at_evaluation_records_failed_lengths_with_the_reason(tmp_path, monkeypatch, capsys):
    from lenbench.cli import main
    from lenbench.run import cell as cell_module
    from lenbench.run.store import load_cell_results

    trained = cell_module._trained_model

    def poisoned(*args, **kwargs):
        model, recorded, meta = trained(*args, **kwargs)
        return nan_at_eval(model), recorded, meta

    monkeypatch.setattr(cell_module, "_trained_model", poisoned)
    suite = {**TINY_SUITE, "encodings": ["nope"], "variants": [],
             "tasks": [{"name": "copy", "train_len": 4}, {"name": "lm", "train_len": 16}]}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "o"), "--executor", "serial", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "2 failed" in out and "NonFiniteLogits: non-finite logits at length" in out
    for result in load_cell_results(tmp_path / "o"):
        own = [r for r in result.rows if r["encoding"] == "nope"]
        assert own and all(r["status"] == "failed" and "non-finite logits" in r["error"] for r in own)
        assert result.status == "failed"
        assert not any(r["status"] == "ok" and isinstance(r["value"], float) and math.isnan(r["value"])
                       for r in result.rows)
