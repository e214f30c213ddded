"""Training until convergence (`train.patience`): the stopping rule in closed form, the best weights
kept, what every row records, cell ids unchanged while it is off, and `lm`'s validation bytes
disjoint from every byte an evaluation scores."""

from __future__ import annotations

import json
import math

import pytest
import torch
from lenbench_testing import TINY_SUITE

from lenbench.config import TrainSpec, parse_suite
from lenbench.model import ModelConfig, Transformer
from lenbench.results.cell import CellResult
from lenbench.run.driver import run_suite
from lenbench.tasks import build_task
from lenbench.train import STOP_BUDGET, STOP_CONVERGED, EarlyStopping, TrainingDiverged, train_model


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread, as every cell trains (`lenbench.run.cell.default_threads`): the default
    thread pool spins against whatever else the machine runs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_model(vocab: int) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig(vocab_size=vocab, d_model=16, n_layers=1, n_heads=2, ff_mult=2, causal=True,
                                   encoding="nope", max_len=64, train_len=16))


@pytest.mark.parametrize(("losses", "patience", "min_delta", "stops_after", "best"), [
    ([3.0, 2.0, 1.9995, 1.9999, 2.5], 3, 1e-3, 5, 2.0),  # 1.9995 is no improvement by more than 1e-3
    ([3.0, 2.0, 1.9995, 1.5, 1.6, 1.7], 2, 1e-3, 6, 1.5),
    ([3.0, 2.0, 1.0, 0.5], 1, 0.0, None, 0.5),  # improving every time: never stops
])
def test_early_stopping_stops_after_patience_validations_without_improvement(losses, patience, min_delta, stops_after, best):
    stopper = EarlyStopping(torch.nn.Linear(2, 2), patience, min_delta)
    stopped = next((i + 1 for i, loss in enumerate(losses) if stopper.update(loss, (i + 1) * 10)), None)
    assert stopped == stops_after and stopper.best == best
    assert stopper.best_step == 10 * (losses.index(best) + 1)


def test_early_stopping_keeps_the_best_validations_weights():
    net = torch.nn.Linear(2, 2)
    stopper = EarlyStopping(net, 1, 0.0)
    with torch.no_grad():
        net.weight.fill_(1.0)
    stopper.update(1.0, 10)
    with torch.no_grad():
        net.weight.fill_(2.0)  # worse
    assert stopper.update(1.5, 20)
    stopper.restore()
    assert torch.equal(net.weight, torch.ones(2, 2))


def test_a_non_finite_validation_loss_fails_the_training():
    with pytest.raises(TrainingDiverged, match="validation loss became nan after 30 steps"):
        EarlyStopping(torch.nn.Linear(2, 2), 2, 0.0).update(math.nan, 30)


def test_no_improvement_stops_at_validate_every_times_patience_plus_one():
    """A learning rate too small to move the loss by min_delta: the first validation is the best,
    then `patience` more fail, so training stops at validate_every × (patience + 1) steps."""
    task = build_task("copy")
    model = tiny_model(task.vocab_size)
    spec = TrainSpec(steps=1000, batch_size=4, lr=1e-12, warmup=1, patience=3, validate_every=20, val_samples=8,
                     min_delta=0.1)
    stats = train_model(model, task, 4, spec, seed=0, device=torch.device("cpu"), progress=False)
    assert (stats.steps, stats.stop_reason, stats.best_step) == (80, STOP_CONVERGED, 20)
    assert math.isfinite(stats.val_loss) and not model.training


def test_without_patience_the_budget_is_trained_and_a_finetune_ignores_patience():
    task = build_task("copy")
    plain = train_model(tiny_model(task.vocab_size), task, 4, TrainSpec(steps=30, batch_size=4), seed=0,
                        device=torch.device("cpu"), progress=False)
    assert (plain.steps, plain.stop_reason, plain.best_step) == (30, STOP_BUDGET, 30) and math.isnan(plain.val_loss)
    assert plain.val_history == []
    spec = TrainSpec(steps=1000, batch_size=4, lr=1e-12, patience=1, validate_every=5, min_delta=0.1)
    tuned = train_model(tiny_model(task.vocab_size), task, 4, spec, seed=0, device=torch.device("cpu"), steps=25,
                        progress=False)
    assert (tuned.steps, tuned.stop_reason) == (25, STOP_BUDGET)


def test_the_same_seed_stops_at_the_same_step_with_the_same_weights():
    task = build_task("copy")
    spec = TrainSpec(steps=400, batch_size=8, lr=3e-3, warmup=10, patience=2, validate_every=25, val_samples=16)
    a, b = tiny_model(task.vocab_size), tiny_model(task.vocab_size)
    sa = train_model(a, task, 4, spec, seed=3, device=torch.device("cpu"), progress=False)
    sb = train_model(b, task, 4, spec, seed=3, device=torch.device("cpu"), progress=False)
    assert (sa.steps, sa.best_step, sa.val_loss) == (sb.steps, sb.best_step, sb.val_loss)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def test_rows_record_the_steps_and_why_and_cell_ids_keep_while_patience_is_off(tmp_path):
    plain, converging = parse_suite(TINY_SUITE), parse_suite(
        {**TINY_SUITE, "train": {**TINY_SUITE["train"], "steps": 400, "patience": 1, "validate_every": 10,
                                 "min_delta": 10.0}})
    off = parse_suite({**TINY_SUITE, "train": {**TINY_SUITE["train"], "patience": 0, "validate_every": 7}})
    assert [c.cell_id for c in off.cells()] == [c.cell_id for c in plain.cells()]  # the later fields are left out
    assert "patience" not in plain.cells()[0].settings
    assert not {c.cell_id for c in converging.cells()} & {c.cell_id for c in plain.cells()}

    computed = run_suite(converging, tmp_path / "a", device="cpu", progress=False).computed
    rows = [r for res in computed for r in res.rows]
    assert {(r["train_steps"], r["stop_reason"]) for r in rows} == {(20, "converged")}  # nothing beats 10 nats
    assert all("patience=1 validate_every=10 val_samples=64 min_delta=10" in r["settings"] for r in rows)
    for res in computed:  # the validation curve, read back from the cell file as any reader gets it
        path = tmp_path / "a" / "cells" / f"{res.cell_id}.json"
        stored = CellResult.from_json(json.loads(path.read_text()), path).training
        assert stored["best_step"] == 10 and [s for s, _, _ in stored["val_history"]] == [10, 20]
        assert stored["val_loss"] == stored["val_history"][0][1] and all(len(v) == 3 for v in stored["val_history"])
    computed = run_suite(plain, tmp_path / "b", device="cpu", progress=False).computed
    assert {(r["train_steps"], r["stop_reason"]) for res in computed for r in res.rows} == {(6, "budget")}
    for res in computed:  # a run that never validated writes no training record: its file is as before
        assert "training" not in json.loads((tmp_path / "b" / "cells" / f"{res.cell_id}.json").read_text())


def _scored(batch_mask: torch.Tensor, ends: torch.Tensor) -> set[int]:
    """Corpus positions of the scored targets of windows ending at `ends` (B, 1) with mask (B, n)."""
    n = batch_mask.shape[1]
    positions = ends - n + 1 + torch.arange(n)  # (B, n): the position of each target
    return set(positions[batch_mask].tolist())


@pytest.mark.parametrize("source", ["stdlib", "long-range"])
def test_lm_validation_bytes_are_held_out_and_never_scored_by_an_evaluation(source):
    task = build_task("lm", source=source, **({"context": 256} if source == "long-range" else {}))
    corpus, n = task.corpus, 64
    gen = torch.Generator().manual_seed(0)
    lo, hi = corpus.train_size, corpus.size
    val_ends = task._val_ends(4096, n, lo, hi, gen)  # (B, 1)
    val = _scored(torch.ones(4096, n, dtype=torch.bool), val_ends)
    assert min(val) - 1 >= lo and max(val) < hi  # held out: every window [end - n, end] lies past the training text
    evaluated: set[int] = set()
    for length in (n, 2 * n, 4 * n):  # the evaluation lengths' scored bytes (the same draws at every length)
        ends = (task._held_out_ends(4096, length, gen) if source == "long-range" else
                task._eval_ends(4096, length, lo, hi, gen))
        mask = torch.zeros(4096, length, dtype=torch.bool)
        mask[:, -task.eval_tokens:] = True
        evaluated |= _scored(mask, ends)
    assert val and evaluated and not val & evaluated
    batch = task.sample(8, n, torch.Generator().manual_seed(1), split="val")
    assert batch.inputs.shape == (8, n) and bool(batch.loss_mask.all())


def test_the_plateau_schedule_anneals_twice_then_stops():
    """No improvement ever (a rate too small to move the loss by min_delta): best at the first
    validation, then three stalls of `patience` validations each: two anneals, then the stop."""
    task = build_task("copy")
    spec = TrainSpec(steps=1000, batch_size=4, lr=1e-12, warmup=1, patience=2, validate_every=10, val_samples=8,
                     min_delta=0.1, schedule="plateau")
    stats = train_model(tiny_model(task.vocab_size), task, 4, spec, seed=0, device=torch.device("cpu"), progress=False)
    assert (stats.steps, stats.stop_reason, stats.best_step) == (10 * (1 + 3 * 2), STOP_CONVERGED, 10)
    # The recorded curve: one entry per validation, the two anneals read off its rates (the
    # anneal after validation k takes effect from the next step, so validation k + 1 shows it).
    assert [s for s, _, _ in stats.val_history] == list(range(10, 71, 10))
    assert [r for _, _, r in stats.val_history] == pytest.approx([1e-12] * 3 + [1e-13] * 2 + [1e-14] * 2)
    assert stats.val_loss == min(v for _, v, _ in stats.val_history) == stats.val_history[0][1]


def test_the_plateau_rate_holds_its_peak_after_warm_up_and_anneals_by_ten():
    from lenbench.train import TrainStep

    task = build_task("copy")
    step = TrainStep(tiny_model(task.vocab_size), TrainSpec(warmup=4), 1e-3, 1000, plateau=True)
    rates = []
    batch = task.sample(2, 4, torch.Generator().manual_seed(0))
    for i in range(8):
        rates.append(step.opt.param_groups[0]["lr"])
        step(batch)
        if i == 5:
            step.anneal()
    assert rates == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3, 1e-4, 1e-4])


def test_a_plateau_schedule_without_patience_is_one_line(tmp_path):
    from lenbench_testing import suite_load_error, write_suite

    path = write_suite(tmp_path, {**TINY_SUITE, "train": {**TINY_SUITE["train"], "schedule": "plateau"}})
    assert suite_load_error(path).endswith("train.schedule 'plateau' anneals when the validation loss stalls: give "
                                           "train.patience > 0 too")
