"""The metric registry (`lenbench.metrics`): the facts of every metric stated once, read by the
evaluation, the report and `lenbench compare`; a new metric is one `register_metric` call."""

import doctest
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from lenbench_testing import write_cells

from lenbench import evaluate, metrics
from lenbench.compare import compare
from lenbench.compare import stats as compare_stats
from lenbench.metrics import Margin, register_metric, unregister_metric
from lenbench.registry import UnknownNameError
from lenbench.report import intervals, stats
from lenbench.report.rows import normalize, primary_metric
from lenbench.report.tables import leaderboard

ROOT = Path(__file__).resolve().parent.parent
TOY = "toy_rate"


# --- the registered metrics: the facts that lived in four places before ------------------------


def test_the_facts_of_the_reported_metrics():
    assert dict(metrics.METRICS) == {"token_accuracy": True, "exact_match": True, "tf_token_accuracy": True,
                                     "nll": False, "perplexity": False, "bits_per_byte": False,
                                     "window_perplexity": False, "context_gain": True}
    assert list(metrics.METRICS) == ["token_accuracy", "exact_match", "tf_token_accuracy", "nll", "perplexity",
                                     "bits_per_byte", "window_perplexity", "context_gain"]  # compare's "known:" order
    assert dict(metrics.PRIMARY_METRIC) == {"sequence": "exact_match", "lm": "perplexity"}
    assert metrics.task_metrics("sequence") == ["exact_match", "token_accuracy", "tf_token_accuracy"]
    assert metrics.task_metrics("lm") == ["perplexity", "nll", "bits_per_byte"]
    assert {m: metrics.worst_value(m, metrics.METRICS[m]) for m in metrics.METRICS} == {
        "token_accuracy": 0.0, "exact_match": 0.0, "tf_token_accuracy": 0.0, "nll": math.inf, "perplexity": math.inf, "bits_per_byte": math.inf,
        "window_perplexity": math.inf, "context_gain": -math.inf}
    assert metrics.worst_value("unregistered", True) == -math.inf and metrics.worst_value("unregistered", False) == math.inf
    assert {m: metrics.learned_min(m) for m in metrics.METRICS if metrics.learned_min(m) is not None} == {
        "exact_match": 0.9, "token_accuracy": 0.9}
    assert dict(compare_stats.DEFAULT_MARGINS) == {
        "exact_match": Margin(0.02, False), "token_accuracy": Margin(0.02, False), "tf_token_accuracy": Margin(0.02, False),
        "perplexity": Margin(0.01, True), "window_perplexity": Margin(0.01, True), "context_gain": Margin(0.01, True),
        "nll": Margin(0.01, False), "bits_per_byte": Margin(0.01 / math.log(2), False)}
    assert compare_stats.Margin is Margin and evaluate.METRICS is metrics.METRICS


def test_the_transforms_are_the_same_float_operations_as_before():
    """Scalar (evaluation) and vectorised (bootstrap) values, bit for bit the formulas they replace."""
    ratios = np.concatenate([np.random.default_rng(0).gamma(2.0, 1.5, 2000), [0.0, 699.9, 700.0, 701.0, 1e6]])
    old_scalar = {"perplexity": lambda r: math.exp(min(r, 700.0)), "bits_per_byte": lambda r: r / math.log(2)}
    old_array = {"perplexity": lambda r: np.exp(np.minimum(r, 700.0)), "bits_per_byte": lambda r: r / math.log(2)}
    for m in metrics.METRICS:
        scalar = [metrics.metric_transform(m, float(r)) for r in ratios]
        assert scalar == [old_scalar.get(m, lambda r: r)(float(r)) for r in ratios], m
        assert np.array_equal(metrics.transform_array(m, ratios), old_array.get(m, lambda r: r)(ratios)), m
    assert intervals.transform is metrics.transform_array and intervals.decode is metrics.decode_arrays


def test_one_decoder_of_the_stored_form():
    text = metrics.encode_samples([1.0, 0.0, 13.0, 2.5, 1 / 3], [1.0, 1.0, 16.0, 3.0, 1.0])
    assert text == "1 0 13/16 2.5/3 0.3333333"
    num, den = metrics.decode_samples(text)
    assert num == [1.0, 0.0, 13.0, 2.5, 0.3333333] and den == [1.0, 1.0, 16.0, 3.0, 1.0]
    assert all(type(x) is float for x in num + den)
    assert metrics.decode_samples("") == ([], []) and metrics.decode_arrays("") is None
    arrays = metrics.get_metric("nll").decode(text)
    assert arrays[0].tolist() == num and arrays[1].tolist() == den
    rng = np.random.default_rng(1)
    values = [f"{x:.7g}" for x in rng.gamma(3.0, 10.0, 500) * 10.0 ** rng.integers(-8, 8, 500)]
    assert metrics.decode_samples(" ".join(values))[0] == [float(v) for v in values]  # numpy parses as float() does


def test_lookups_are_one_line_errors_with_a_suggestion():
    with pytest.raises(UnknownNameError, match=r"unknown metric 'perplexty'; did you mean 'perplexity'\? \(known: "):
        metrics.get_metric("perplexty")
    with pytest.raises(ValueError, match="metric 'nll' is registered twice"):
        register_metric("nll", higher_is_better=False)
    with pytest.raises(ValueError, match=r"sums 'token' is not one of tokens, examples, teacher_forced_tokens, nll; did you mean 'tokens'\?"):
        register_metric(TOY, higher_is_better=True, sums="token")
    with pytest.raises(ValueError, match="task kind 'lm' is already ranked by 'perplexity'"):
        register_metric(TOY, higher_is_better=True, primary_for=("lm",))
    with pytest.raises(ValueError, match=r"no metric is recorded for task kind 'sequense'; did you mean 'sequence'\?"):
        metrics.task_metrics("sequense")
    assert TOY not in metrics.METRICS  # a refused registration leaves nothing behind
    with pytest.raises(UnknownNameError):
        unregister_metric(TOY)


def test_the_module_examples_run():
    result = doctest.testmod(metrics, optionflags=doctest.ELLIPSIS)
    assert result.attempted and not result.failed
    assert TOY not in metrics.METRICS


@pytest.mark.subprocess
def test_the_report_path_reads_the_facts_without_the_model():
    """report.rows reads the registry, not lenbench.evaluate (whose import is torch and the model)."""
    code = ("import sys, lenbench.report.rows, lenbench.metrics; "
            "assert 'lenbench.evaluate' not in sys.modules and 'lenbench.model' not in sys.modules; "
            "assert 'torch' not in sys.modules, 'torch'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_evaluation_sums_follow_the_registry():
    pred_hit = torch.tensor([[True, True, False], [True, True, True]])
    mask = torch.tensor([[False, True, True], [True, True, False]])
    nll = torch.tensor([[9.0, 1.0, 2.0], [0.5, 0.25, 9.0]])
    out = evaluate.sample_sums(pred_hit, nll, mask)
    assert list(out) == ["token_accuracy", "exact_match", "tf_token_accuracy", "nll", "perplexity", "bits_per_byte"]
    assert out["token_accuracy"] == ([1.0, 2.0], [2.0, 2.0]) and out["exact_match"] == ([0.0, 1.0], [1.0, 1.0])
    assert out["tf_token_accuracy"] == out["token_accuracy"]  # no teacher-forced hits given: the same predictions
    assert out["nll"] == out["perplexity"] == out["bits_per_byte"] == ([3.0, 0.75], [2.0, 2.0])
    assert list(evaluate.sample_sums(pred_hit, None, mask)) == ["token_accuracy", "exact_match", "tf_token_accuracy"]
    forced = evaluate.sample_sums(pred_hit, None, mask, teacher_forced_hit=torch.ones_like(mask))
    assert forced["tf_token_accuracy"] == ([2.0, 2.0], [2.0, 2.0]) and forced["token_accuracy"] == out["token_accuracy"]


# --- a new metric is one entry ----------------------------------------------------------------


@pytest.fixture
def toy():
    """A toy higher-is-better metric over token sums with its own worst score, threshold and margin."""
    metric = register_metric(TOY, higher_is_better=True, sums="tokens", worst=0.125, learned_min=0.5,
                             transform=lambda ratio, xp: 1.0 - 0.5 * ratio, margin=Margin(0.05, False), bounds=(0.0, 1.0),
                             description="a test's metric: 1 − half the token accuracy")
    yield metric
    unregister_metric(TOY)
    assert TOY not in metrics.METRICS and TOY not in compare_stats.DEFAULT_MARGINS


def toy_rows(encoding="rope", shift=0, fail_ratio=None) -> list[dict]:
    """Rows of the toy metric: 2 seeds × ratios 1, 2, 4, 64 samples of 4 tokens each."""
    rows = []
    for seed in (0, 1):
        for ratio in (1, 2, 4):
            rng = np.random.default_rng([seed, ratio])
            correct = np.minimum(4, rng.binomial(4, 0.3 * ratio / 4, 64) + shift).astype(float)
            num, den = list(correct), [4.0] * 64
            value = metrics.metric_transform(TOY, math.fsum(num) / math.fsum(den))
            failed = ratio == fail_ratio
            rows.append({"schema_version": 2, "cell_id": f"copy-{encoding}-{seed}", "suite": "tiny", "task": "copy",
                         "encoding": encoding, "variant": "none", "train_len": 8, "eval_len": 8 * ratio,
                         "ratio": float(ratio), "bucket": "", "metric": TOY, "value": None if failed else value,
                         "n_samples": 64, "seed": seed, "status": "failed" if failed else "ok", "error": "",
                         "sample_scores": "" if failed else metrics.encode_samples(num, den)})
    return rows


def test_a_toy_metric_flows_through_the_statistics(toy):
    frame = normalize(pd.DataFrame(toy_rows(fail_ratio=4)))  # no higher_is_better column: from the registry
    assert frame["higher_is_better"].all()
    board = stats.board_statistics(frame, "copy", TOY, True, n_boot=200)
    entries, curves = board.entries, board.curves
    curve = curves.set_index("ratio")
    assert curve.loc[4.0, "mean"] == 0.125 and curve.loc[4.0, "all_failed"]  # the toy's worst, not 0 or -inf
    at1 = frame[frame["ratio"] == 1.0]
    assert curve.loc[1.0, "mean"] == at1["value"].mean()
    # the interval's sampling floor comes from the toy's transform of resampled token sums (1 − ratio / 2):
    # its bootstrap replicates lie in [0.5, 1], and the interval around the mean is clipped to its declared bounds
    seed_boot = board.seed_stats[(entries.loc[0, "encoding"], entries.loc[0, "variant"])]["in_dist"].boot
    assert np.nanmin(seed_boot) >= 0.5 and np.nanmax(seed_boot) <= 1.0
    lo, hi = curve.loc[1.0, "ci_low"], curve.loc[1.0, "ci_high"]
    assert 0.0 <= lo < curve.loc[1.0, "mean"] < hi <= 1.0
    assert stats.learned_threshold("copy", TOY) == 0.5 and not entries.loc[0, "not_learned"]
    assert primary_metric("copy", [TOY]) == TOY  # no primary metric present: the one there is
    board = leaderboard(frame).long()
    board = board[board["task"] == "copy"].set_index("statistic")
    assert set(board["metric"]) == {TOY} and board.loc[["in_dist", "past_train_mean"], "higher_is_better"].all()
    assert board.loc["rank", "value"] == 1.0


def test_a_toy_metric_flows_through_compare_margins(toy, tmp_path, capsys):
    assert compare_stats.parse_margins(None)[TOY] == Margin(0.05, False)
    assert compare_stats.parse_margins([f"{TOY}=0.5"])[TOY] == Margin(0.5, False)
    assert compare_stats.parse_margins(["0.2"])[TOY] == Margin(0.2, False)
    base = write_cells(tmp_path / "base", toy_rows())
    head = write_cells(tmp_path / "head", toy_rows(shift=1))  # one more correct token per sample: worse by 0.125
    result = compare(base, head, statistical=True)
    units = result.quality[result.quality["seed"] == "all"]
    assert len(units) == 3 and (units["margin"] == 0.05).all() and (units["status"] == "REGRESSION").all()
    assert f"margins {TOY} 0.05 absolute" in result.format() and result.exit_code == 1
    assert compare(base, head, statistical=True, margins=[f"{TOY}=0.5"]).exit_code == 0  # within its margin


def test_display_facts_come_from_the_registration():
    """Figures and tables read direction, bounds and scale from `register_metric`, not from names:
    a new metric declares them once and every output follows."""
    from lenbench.report.formatting import fmt_value
    from lenbench.report.plots import extrapolation, heatmap

    with pytest.raises(ValueError, match=r"metric 'toy_rate': bounds \(1, 0\) is not a \(low, high\) pair"):
        register_metric(TOY, higher_is_better=True, bounds=(1, 0))
    bounded = register_metric(TOY, higher_is_better=True, sums="tokens", bounds=(0, 1))
    try:
        assert bounded.bounds == (0.0, 1.0) and not bounded.log_scale
        assert heatmap._cell_text(0.123456, TOY) == "0.12"  # a bounded metric: two decimals
        assert fmt_value(1234.5, TOY) == "1234.500"  # bounded: never shortened
        assert fmt_value(-math.inf, TOY) == "fail" and fmt_value(math.inf, TOY) == "inf"  # −inf is its worst
        assert extrapolation._chance_applies(TOY)  # a per-token rate has the task's chance as floor
    finally:
        unregister_metric(TOY)
    assert register_metric(TOY, higher_is_better=False, sums="nll", log_scale=True).log_scale
    try:
        assert heatmap._cell_text(0.123456, TOY) == "0.1" and heatmap._cell_text(12345.0, TOY) == "1.23e+04"
        assert fmt_value(1234.5, TOY) == "1234" and fmt_value(math.inf, TOY) == "fail"  # +inf is its worst
        assert not extrapolation._chance_applies(TOY)
    finally:
        unregister_metric(TOY)
    assert fmt_value(1234.5, "retention") == "1234.500" and fmt_value(math.inf, "retention") == "inf"  # not a metric: no facts


def test_a_metric_ranks_on_the_area_or_on_degradation_where_it_has_nll_sums():
    assert metrics.get_metric("perplexity").ranks_on == "degradation" and metrics.get_metric("exact_match").ranks_on == "area"
    with pytest.raises(ValueError, match="ranks_on 'median' is not one of area, degradation"):
        metrics.register_metric("toy_ranks", higher_is_better=True, ranks_on="median")
    with pytest.raises(ValueError, match="needs a metric built from nll sums"):
        metrics.register_metric("toy_ranks", higher_is_better=True, sums="tokens", ranks_on="degradation")
    assert "toy_ranks" not in metrics.METRICS
