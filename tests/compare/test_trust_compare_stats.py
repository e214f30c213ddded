"""Issue 19: `lenbench compare` across machines: the machine warning and `--statistical`.

Synthetic results directories (copy: exact match and token accuracy per sample; lm: nll sums per
sample, perplexity their exp) with three seeds; head is base plus cross-machine float noise, a
genuine shift, or a shift that is significant but within the practical margin.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from lenbench_testing import write_cells

from lenbench.cli import main
from lenbench.compare import compare, cpu_capability_from_flags
from lenbench.compare.stats import (
    IMPROVED,
    NO_INTERVAL,
    NOT_SIGNIFICANT,
    REGRESSION,
    WITHIN_MARGIN,
    Margin,
    classify,
    parse_margins,
)
from lenbench.metrics import encode_samples
from lenbench.results.schema import ResultsError

N = 64  # evaluation samples per length
SEEDS = (0, 1, 2)
AVX512 = {"cpu_model": "AMD EPYC 9B14", "cpu_capability": "AVX512", "blas": "mkl", "numpy_version": "2.1.0",
          "pandas_version": "2.2.3", "numerics": "native"}
AVX2 = {**AVX512, "cpu_model": "Intel Xeon E5-2680 v4", "cpu_capability": "AVX2", "numerics": "pinned:avx2"}


def row(encoding, seed, ratio, metric, num, den, facts, value=None) -> dict:
    """One measurement with its per-sample scores; value = the metric of Σnum / Σden."""
    ratio_value = float(np.sum(num) / np.sum(den))
    value = value if value is not None else (math.exp(ratio_value) if metric == "perplexity" else ratio_value)
    task, train_len = ("lm", 16) if metric == "perplexity" else ("copy", 8)
    return {"schema_version": 3, "cell_id": f"{task}-{encoding}-{seed}", "suite": "tiny", "task": task,
            "encoding": encoding, "variant": "none", "train_len": train_len, "eval_len": int(ratio * train_len),
            "ratio": float(ratio), "bucket": "", "metric": metric, "value": value, "n_samples": N, "seed": seed,
            "higher_is_better": metric != "perplexity", "status": "ok", "error": "", "device": "cpu",
            "torch_version": "2.13.0+cpu", "sample_scores": encode_samples(list(num), list(den)), **facts}


def samples(encoding, seed, ratio):
    """Base per-sample scores: exact-match hits, correct tokens of 10, nll sums over 20 tokens."""
    rng = np.random.default_rng([seed, int(ratio), len(encoding)])
    p = 0.8 / ratio
    hits = (rng.random(N) < p).astype(float)
    tokens = np.minimum(10, rng.binomial(10, min(1.0, p + 0.1), N)).astype(float)
    nll = np.round(rng.gamma(20 * ratio, 0.1, N), 4)  # ~2 nats per token at 1x
    return hits, tokens, nll


def make_rows(facts, *, hit_shift=0, nll_shift=0.0, noise=0.0) -> list[dict]:
    """Rows of both tasks. hit_shift: samples turned from hit to miss (negative: miss to hit) per
    seed and length; nll_shift: nats added per token; noise: relative float noise on nll sums."""
    rows = []
    for encoding in ("rope", "alibi"):
        for seed in SEEDS:
            for ratio in (1, 2):
                hits, tokens, nll = samples(encoding, seed, ratio)
                if hit_shift > 0:
                    hits[np.flatnonzero(hits == 1)[:hit_shift]] = 0
                elif hit_shift < 0:
                    hits[np.flatnonzero(hits == 0)[:-hit_shift]] = 1
                nll = nll + nll_shift * 20
                if noise:
                    nll = nll * (1 + noise * np.random.default_rng(seed).standard_normal(N))
                ones = np.ones(N)
                rows += [row(encoding, seed, ratio, "exact_match", hits, ones, facts),
                         row(encoding, seed, ratio, "token_accuracy", tokens, 10 * ones, facts),
                         row(encoding, seed, ratio, "perplexity", nll, 20 * ones, facts)]
    return rows


def flip_one_sample(rows: list[dict]) -> list[dict]:
    """A cross-machine exact-match flip: one sample of one seed at 1x (1/64, within the 0.02 margin)."""
    out = [dict(r) for r in rows]
    r = next(r for r in out if r["metric"] == "exact_match" and r["seed"] == 0 and r["ratio"] == 1)
    scores = r["sample_scores"].split()
    scores[0] = "0" if scores[0] == "1" else "1"
    r["sample_scores"] = " ".join(scores)
    r["value"] = sum(map(float, scores)) / N
    return out


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(["compare", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def base(tmp_path) -> Path:
    return write_cells(tmp_path / "base", make_rows(AVX512))


def head(tmp_path, name, **kw) -> Path:
    return write_cells(tmp_path / name, make_rows(AVX2, **kw))


MACHINES = ("cpu_model AMD EPYC 9B14 → Intel Xeon E5-2680 v4; cpu_capability AVX512 → AVX2; "
            "numerics native@amd → pinned:avx2@intel")


def test_cross_machine_noise_fails_exactly_and_passes_statistically(tmp_path, base, capsys):
    noisy = write_cells(tmp_path / "noisy", flip_one_sample(make_rows(AVX2, noise=1e-6)))
    code, out, err = run_cli(capsys, base, noisy)  # two numeric kinds: auto compares them unpaired
    assert code == 0 and "OK: no regression." in out, out
    assert "Quality was compared across numeric kinds (native@amd → pinned:avx2@intel): seeds unpaired" in out
    code, out, err = run_cli(capsys, base, noisy, "--method", "exact")  # forced exact: every rounding difference counts
    assert code == 1 and "FAIL" in out
    assert f"WARNING: base and head ran on different machines: {MACHINES}" in out
    assert "the exact comparison is expected to differ across machines" in out and "--method unpaired" in out
    assert f"lenbench: warning: base and head ran on different machines: {MACHINES}" in err
    code, out, err = run_cli(capsys, base, noisy, "--statistical")
    assert code == 0 and "OK: no regression." in out, out
    assert f"across machines ({MACHINES})" in out  # the summary names the machine difference
    assert "0 regression(s), 0 improved" in out
    assert "the exact comparison is expected to differ" not in out  # the advice is taken


def test_a_genuine_shift_is_a_regression_and_its_reverse_an_improvement(tmp_path, base, capsys):
    worse = head(tmp_path, "worse", hit_shift=8)  # 8 of 64 samples (0.125 > 0.02) in every seed and length
    code, out, _ = run_cli(capsys, base, worse, "--statistical")
    assert code == 1
    line = next(x for x in out.splitlines() if x.startswith("| REGRESSION"))
    assert "| copy " in line and "exact_match ↑" in line and "| 3 " in line  # over 3 seeds
    result = compare(base, worse, statistical=True)
    regs = result.quality[result.quality["status"] == REGRESSION]
    assert len(regs) == 4 and set(regs["metric"]) == {"exact_match"}  # 2 encodings × 2 lengths
    assert np.allclose(regs["diff"], -8 / N) and (regs["ci_high"] < 0).all()
    assert result.failures()[0].startswith("4 measurement(s) worse than base beyond the margin")
    # the same shift the other way round: improved, the gate passes
    better = compare(worse, base, statistical=True)
    assert better.exit_code == 0 and (better.quality["status"] == IMPROVED).sum() == 4
    # lower is better: perplexity 5 % up is a regression, 5 % down an improvement
    ppl = head(tmp_path, "ppl", nll_shift=0.05)
    result = compare(base, ppl, statistical=True)
    assert set(result.quality.loc[result.quality["status"] == REGRESSION, "metric"]) == {"perplexity"}
    assert (compare(ppl, base, statistical=True).quality["status"] == IMPROVED).sum() == 4


def test_a_significant_shift_within_the_margin_is_not_a_regression(tmp_path, base, capsys):
    small = head(tmp_path, "small", nll_shift=0.004)  # perplexity +0.4 % on every sample: significant, < 1 %
    result = compare(base, small, statistical=True)
    ppl = result.quality[result.quality["metric"] == "perplexity"]
    assert (ppl["status"] == WITHIN_MARGIN).all() and len(ppl) == 4
    assert (ppl["ci_low"] > 0).all() and ((ppl["head"] / ppl["base"] - 1).between(0.003, 0.005)).all()
    assert result.exit_code == 0
    code, out, _ = run_cli(capsys, base, small, "--statistical")
    assert code == 0 and "4 changed within margin" in out
    # a margin of 0 makes the same shift a regression; a wide one makes the genuine shift acceptable
    assert compare(base, small, statistical=True, margins=["perplexity=0"]).quality_regressions == 4
    worse = head(tmp_path, "worse", hit_shift=8)
    assert compare(base, worse, statistical=True, margins=["exact_match=0.2"]).exit_code == 0
    assert compare(base, worse, statistical=True, margins=["0.2"]).exit_code == 0


def test_old_base_results_infer_the_machine_from_the_benchmark_json(tmp_path, capsys):
    """Published results from before the machine facts: cpu_model and cpu_capability from the base's
    bench.json machine_info (brand_raw, flags), numerics native; each marked inferred."""
    old = write_cells(tmp_path / "old", make_rows({}))
    flags = ["avx", "avx2", "avx512f", "avx512bw", "avx512dq", "avx512vl", "fma"]
    (old / "bench.json").write_text(json.dumps({"machine_info": {"cpu": {"brand_raw": "AMD EPYC", "flags": flags}},
                                                "benchmarks": []}))
    noisy = write_cells(tmp_path / "noisy", make_rows(AVX2, noise=1e-6))
    code, out, _ = run_cli(capsys, old, noisy)  # the inferred machine differs: compared unpaired
    assert code == 0 and "Quality was compared across numeric kinds (unknown → pinned:avx2@intel)" in out
    code, out, _ = run_cli(capsys, old, noisy, "--method", "exact")
    assert code == 1
    assert ("WARNING: base and head ran on different machines: cpu_model AMD EPYC (inferred) → Intel Xeon E5-2680 v4; "
            "cpu_capability AVX512 (inferred) → AVX2; numerics native (inferred) → pinned:avx2@intel (inferred: read "
            "from a "
            "benchmark JSON's machine_info where rows record no machine facts") in out
    assert "--method unpaired" in out
    code, out, _ = run_cli(capsys, old, noisy, "--statistical")
    assert code == 0 and "across machines (cpu_model AMD EPYC (inferred) → Intel Xeon" in out


def test_same_machine_and_same_pinned_numerics_suggest_nothing(tmp_path, base, capsys):
    same = write_cells(tmp_path / "same", make_rows(AVX512))
    code, out, err = run_cli(capsys, base, same)
    assert code == 0 and "WARNING" not in out and err == ""
    assert "no machine difference recorded" in run_cli(capsys, base, same, "--statistical")[1]
    # two ISAs of one vendor both pinned to avx2: the machine difference is named, exact values should still match
    xeon = {**AVX512, "cpu_model": "Intel Xeon Platinum 8481C", "numerics": "pinned:avx2"}
    pinned = write_cells(tmp_path / "pinned", make_rows(xeon))
    code, out, _ = run_cli(capsys, pinned, head(tmp_path, "h"))
    assert code == 0
    assert ("WARNING: base and head ran on different machines: cpu_model Intel Xeon Platinum 8481C → Intel Xeon "
            "E5-2680 v4; cpu_capability AVX512 → AVX2\n") in out
    assert "note: both sides pinned the same numerics on one CPU vendor: exact values should match" in out and "--statistical" not in out
    # an AMD and an Intel CPU both pinned: another numeric kind, so no exact match is promised (issue 38)
    amd = write_cells(tmp_path / "amd", make_rows({**AVX512, "numerics": "pinned:avx2"}))
    code, out, _ = run_cli(capsys, amd, head(tmp_path, "h2"))
    assert "numerics pinned:avx2@amd → pinned:avx2@intel" in out
    assert "exact values should match" not in out and "Quality was compared across numeric kinds" in out


def test_a_measurement_failed_in_head_stays_a_regression(tmp_path, base):
    rows = make_rows(AVX2)
    r = next(r for r in rows if r["metric"] == "token_accuracy" and r["seed"] == 1 and r["ratio"] == 2)
    r.update(value=None, status="failed", error="RuntimeError: boom", sample_scores="")
    result = compare(base, write_cells(tmp_path / "failed", rows), statistical=True)
    assert result.quality_regressions == 1
    kept = result.quality[result.quality["seed"].astype(str) != "all"]
    assert kept["status"].tolist() == [REGRESSION] and kept["seed"].tolist() == [1]
    unit = result.quality[(result.quality["metric"] == "token_accuracy") & (result.quality["ratio"] == 2)
                          & (result.quality["seed"].astype(str) == "all")]
    assert dict(zip(unit["encoding"], unit["n_seeds"], strict=True)) == {"rope": 2, "alibi": 3}  # the failed seed left out


def test_without_sample_scores_and_with_one_seed_there_is_no_interval(tmp_path):
    one = [{**r, "sample_scores": ""} for r in make_rows(AVX512) if r["seed"] == 0]
    shifted = [{**r, "sample_scores": ""} for r in make_rows(AVX2, hit_shift=8) if r["seed"] == 0]
    result = compare(write_cells(tmp_path / "a", one), write_cells(tmp_path / "b", shifted), statistical=True)
    em = result.quality[result.quality["metric"] == "exact_match"]
    assert (em["status"] == NO_INTERVAL).all() and result.exit_code == 0


def test_classify():
    assert classify(-0.1, -0.15, -0.05, 0.02, True) == REGRESSION
    assert classify(-0.01, -0.015, -0.005, 0.02, True) == WITHIN_MARGIN
    assert classify(-0.1, -0.2, 0.01, 0.02, True) == NOT_SIGNIFICANT  # worse than the margin, but not supported
    assert classify(0.1, 0.05, 0.15, 0.02, True) == IMPROVED
    assert classify(0.1, 0.05, 0.15, 0.02, False) == REGRESSION  # lower is better
    assert classify(0.0, 0.0, 0.0, 0.02, True) == "unchanged"


def test_margins_and_their_errors(tmp_path, base, capsys):
    margins = parse_margins(None)
    assert margins["exact_match"] == Margin(0.02, False) and margins["perplexity"] == Margin(0.01, True)
    assert margins["perplexity"].of(8.0) == pytest.approx(0.08)
    assert parse_margins(["0.05"])["perplexity"] == Margin(0.05, True)
    assert parse_margins(["nll=0.1"])["nll"] == Margin(0.1, False)
    for bad in (["-1"], ["nan"], ["foo=0.1"], ["exact_match=x"]):
        with pytest.raises(ResultsError, match="--margin"):
            parse_margins(bad)
    same = write_cells(tmp_path / "same", make_rows(AVX512))
    for args in (("--margin", "0.1"), ("--statistical", "--margin", "x"), ("--statistical", "--tolerance", "0.1")):
        code, _, err = run_cli(capsys, base, same, *args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_statistical_refuses_a_leaderboard_and_unreadable_sample_scores(tmp_path, base, capsys):
    from lenbench.report.build import write_report

    write_report(base, tmp_path / "report", plots=False)
    code, _, err = run_cli(capsys, tmp_path / "report" / "leaderboard.csv", base, "--statistical")
    assert code == 2 and "--method paired needs measurement rows" in err and len(err.strip().splitlines()) == 1
    rows = make_rows(AVX2)
    rows[0]["sample_scores"] = "1 0 x"
    code, _, err = run_cli(capsys, base, write_cells(tmp_path / "bad", rows), "--statistical")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "row 0: sample_scores is a string ('1 0 x'), expected numbers or numerator/denominator pairs" in err


def test_cpu_capability_from_flags():
    assert cpu_capability_from_flags(["avx2", "avx512f", "avx512bw", "avx512dq", "avx512vl"]) == "AVX512"
    assert cpu_capability_from_flags(["avx2", "avx512f"]) == "AVX2"  # AVX-512 needs all four
    assert cpu_capability_from_flags(["sse4_2", "avx"]) == "DEFAULT"
