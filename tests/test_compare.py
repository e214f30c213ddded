"""`lenbench compare`: planted quality regressions and slowdowns fail, identical inputs pass."""

import copy
import json
from pathlib import Path

import pytest
from lenbench_testing import write_cells

from lenbench.cli import main
from lenbench.compare import IMPROVED, MISSING, NEW, REGRESSION, SLOWER, WITHIN, compare
from lenbench.results import write_report

PROVENANCE = {"lenbench_version": "0.1.0", "git_sha": "0123abcd", "torch_version": "2.13.0+cpu", "device": "cpu",
              "dtype": "float32", "timestamp": "2026-01-01T00:00:00+00:00", "train_seconds": 2.0}


def row(task, encoding, ratio, metric, value, seed=0, train_len=8, variant="none"):
    return {"schema_version": 1, "cell_id": f"{task}-{encoding}-{seed}", "suite": "tiny", "task": task,
            "encoding": encoding, "variant": variant, "train_len": train_len, "eval_len": int(ratio * train_len),
            "ratio": float(ratio), "metric": metric, "value": value, "n_samples": 8, "seed": seed,
            "higher_is_better": metric in ("token_accuracy", "exact_match"), "status": "ok" if value is not None else "failed",
            "error": "" if value is not None else "ValueError: too long", **PROVENANCE}


def base_rows() -> list[dict]:
    rows = []
    for seed in (0, 1):
        for i, enc in enumerate(("nope", "rope", "alibi")):
            for ratio in (1, 2, 4):
                acc = 0.9 - 0.1 * ratio / (i + 1) + 0.01 * seed
                rows += [row("copy", enc, ratio, "token_accuracy", acc, seed), row("copy", enc, ratio, "exact_match", acc / 2, seed),
                         row("lm", enc, ratio, "perplexity", 10.0 + ratio * (i + 1) + seed, seed, train_len=16),
                         row("lm", enc, ratio, "nll", 2.0 + ratio * 0.1, seed, train_len=16)]
    return rows


def kernel(encoding, impl, T, copy_ratio, median=1e-3):
    return {"group": "kernels", "name": f"test_kernel[{encoding}-{impl}-{T}]",
            "fullname": f"bench/test_kernels.py::test_kernel[{encoding}-{impl}-{T}]",
            "extra_info": {"encoding": encoding, "kind": "forward", "impl": impl, "T": T, "dtype": "float32",
                           "bytes": 1024 * T, "gbps": 1.0, "copy_ratio": copy_ratio},
            "stats": {"median": median, "mean": median, "min": median, "max": median, "stddev": 0.0, "rounds": 10}}


def base_kernels() -> list[dict]:
    return [kernel(enc, impl, T, 2.0 + T / 1024) for enc in ("rope", "alibi") for impl in ("eager", "fused")
            for T in (256, 1024)]


def write_bench(path: Path, rows: list[dict], kernels: list[dict]) -> Path:
    cells: dict[str, list[dict]] = {}
    for r in rows:
        cells.setdefault(r["cell_id"], []).append(r)
    benchmarks = [{"name": f"test_cell[{c}]", "fullname": f"bench/test_extrapolation.py::test_cell[{c}]",
                   "extra_info": {"lenbench_rows": rs}, "stats": {"median": 1.0}} for c, rs in cells.items()]
    path.write_text(json.dumps({"machine_info": {"lenbench": {"device": "cpu"}}, "benchmarks": benchmarks + kernels}))
    return path


def planted(rows, task, encoding, ratio, metric, seed=0, *, value=None, delta=0.0, fail=False):
    rows = copy.deepcopy(rows)
    hits = [r for r in rows if (r["task"], r["encoding"], r["ratio"], r["metric"], r["seed"]) == (task, encoding, ratio, metric, seed)]
    assert len(hits) == 1
    r = hits[0]
    if fail:
        r.update(value=None, status="failed", error="RuntimeError: boom")
    else:
        r["value"] = value if value is not None else r["value"] + delta
    return rows


def run_cli(*args) -> int:
    return main(["compare", *map(str, args)])


# --- quality ------------------------------------------------------------------------------------


def test_identical_inputs_pass(tmp_path, capsys):
    rows = base_rows()
    a = write_bench(tmp_path / "a.json", rows, base_kernels())
    b = write_bench(tmp_path / "b.json", rows, base_kernels())
    assert run_cli(a, b) == 0
    out = capsys.readouterr().out
    assert "0 regression(s)" in out and "0 slower" in out and "OK: no regression" in out
    # a results directory against the same rows in a benchmark JSON and in a report directory
    d = write_cells(tmp_path / "run", rows)
    write_report(d, tmp_path / "report", plots=False)
    assert run_cli(d, a) == 0
    assert run_cli(tmp_path / "report", d) == 0
    assert run_cli(tmp_path / "report" / "results.csv", a) == 0
    assert run_cli(tmp_path / "report" / "leaderboard.csv", a) == 0


def test_planted_quality_regression_fails(tmp_path, capsys):
    rows = base_rows()
    base = write_bench(tmp_path / "base.json", rows, base_kernels())
    worse_acc = write_bench(tmp_path / "h1.json", planted(rows, "copy", "rope", 2, "token_accuracy", delta=-1e-6), base_kernels())
    assert run_cli(base, worse_acc) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("| REGRESSION"))
    assert "copy" in line and "rope" in line and "token_accuracy ↑" in line and "2x" in line
    assert "FAIL: 1 quality regression(s)" in out
    # lower is better: a higher perplexity is worse, a lower one an improvement
    worse_ppl = write_bench(tmp_path / "h2.json", planted(rows, "lm", "alibi", 4, "perplexity", seed=1, delta=0.5), [])
    assert compare(base, worse_ppl).quality_regressions == 1
    better_ppl = write_bench(tmp_path / "h3.json", planted(rows, "lm", "alibi", 4, "perplexity", delta=-0.5), base_kernels())
    assert run_cli(base, better_ppl) == 0
    assert "| improved" in capsys.readouterr().out


def test_ok_to_failed_is_a_regression_and_back_an_improvement(tmp_path):
    rows = base_rows()
    broken = planted(rows, "copy", "nope", 4, "exact_match", fail=True)
    a, b = write_cells(tmp_path / "a", rows), write_cells(tmp_path / "b", broken)
    result = compare(a, b)
    assert result.exit_code == 1 and result.quality_regressions == 1
    assert compare(b, a).exit_code == 0
    assert (compare(b, a).quality["status"] == IMPROVED).sum() == 1


def test_tolerance(tmp_path, capsys):
    rows = base_rows()
    base = write_cells(tmp_path / "base", rows)
    value = next(r["value"] for r in rows if (r["task"], r["encoding"], r["ratio"], r["metric"], r["seed"]) ==
                 ("copy", "alibi", 1, "token_accuracy", 0))
    head = write_cells(tmp_path / "head", planted(rows, "copy", "alibi", 1, "token_accuracy", value=value * 0.99))  # 1 % worse
    assert run_cli(base, head) == 1
    assert run_cli(base, head, "--tolerance", "0.02") == 0
    assert WITHIN in capsys.readouterr().out
    assert run_cli(base, head, "--tolerance", "0.005") == 1
    assert compare(base, head, tolerance=0.02).quality["status"].tolist().count(WITHIN) == 1


def test_missing_and_new_rows_are_reported(tmp_path, capsys):
    rows = base_rows()
    fewer = [r for r in rows if not (r["encoding"] == "alibi" and r["task"] == "lm")]
    more = rows + [row("copy", "t5", 1, "token_accuracy", 0.5)]
    base = write_cells(tmp_path / "base", rows)
    assert run_cli(base, write_cells(tmp_path / "fewer", fewer)) == 0
    out = capsys.readouterr().out
    assert "12 missing in head" in out and MISSING in out
    assert run_cli(base, write_cells(tmp_path / "fewer2", fewer), "--fail-missing") == 1
    assert run_cli(base, write_cells(tmp_path / "more", more)) == 0
    assert NEW in capsys.readouterr().out


def test_leaderboard_csv_comparison(tmp_path):
    rows = base_rows()
    write_report(rows, tmp_path / "a", plots=False)
    write_report(planted(rows, "copy", "alibi", 4, "exact_match", delta=-0.05), tmp_path / "b", plots=False)
    result = compare(tmp_path / "a" / "leaderboard.csv", tmp_path / "b" / "leaderboard.csv")
    assert result.level == "leaderboard" and result.exit_code == 1
    reg = result.quality[result.quality["status"] == REGRESSION]
    assert set(reg["statistic"]) == {"past_train_mean", "retention"} and set(reg["encoding"]) == {"alibi"}
    # a leaderboard CSV against raw rows: the rows are aggregated first
    assert compare(tmp_path / "a" / "leaderboard.csv", write_cells(tmp_path / "run", rows)).exit_code == 0


# --- speed --------------------------------------------------------------------------------------


def test_planted_slowdown_fails(tmp_path, capsys):
    rows = base_rows()
    base = write_bench(tmp_path / "base.json", rows, base_kernels())
    slow = base_kernels()
    slow[3]["extra_info"]["copy_ratio"] *= 1.2  # 20 % slower relative to a copy
    head = write_bench(tmp_path / "head.json", rows, slow)
    assert run_cli(base, head) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith(f"| {SLOWER}"))
    assert "+20.0%" in line and "rope forward fused 1024 float32" in line
    assert "0 quality regression(s), 1 speed regression(s)" in out
    assert run_cli(base, head, "--speed-threshold", "0.3") == 0
    # within the threshold
    noise = base_kernels()
    noise[0]["extra_info"]["copy_ratio"] *= 1.05
    assert run_cli(base, write_bench(tmp_path / "noise.json", rows, noise)) == 0


def test_slower_machine_is_not_a_slowdown(tmp_path):
    """Twice the time on a machine whose copy is twice as slow: same copy ratio, no regression."""
    rows = base_rows()
    base = write_bench(tmp_path / "base.json", rows, base_kernels())
    slow_machine = base_kernels()
    for k in slow_machine:
        for stat in k["stats"]:
            k["stats"][stat] *= 2
    result = compare(base, write_bench(tmp_path / "head.json", rows, slow_machine))
    assert result.exit_code == 0 and (result.speed["change"] == 0).all()


def test_faster_kernel_and_missing_kernel_reported(tmp_path, capsys):
    rows = base_rows()
    base = write_bench(tmp_path / "base.json", rows, base_kernels())
    fast = base_kernels()[:-1]
    fast[0]["extra_info"]["copy_ratio"] *= 0.5
    assert run_cli(base, write_bench(tmp_path / "head.json", rows, fast)) == 0
    out = capsys.readouterr().out
    assert "1 faster" in out and "1 missing in head" in out and "-50.0%" in out


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["{broken", '{"no": "benchmarks"}'])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, content):
    good = write_bench(tmp_path / "good.json", base_rows(), base_kernels())
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert run_cli(good, bad) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.json" in err
    assert run_cli(good, tmp_path / "absent") == 2
    assert "absent" in capsys.readouterr().err
    assert run_cli(good, good, "--tolerance", "-1") == 2


def test_speed_prefers_the_fastest_round_over_the_copy_floor(tmp_path):
    """With copy_seconds recorded, a median inflated by outside load is not a slowdown; a slower
    minimum is."""
    rows = base_rows()

    def with_copy(kernels, median_factor=1.0, min_factor=1.0):
        for k in kernels:
            k["extra_info"]["copy_seconds"] = 5e-4
            k["stats"]["median"] *= median_factor
            k["stats"]["min"] *= min_factor
            k["extra_info"]["copy_ratio"] = k["stats"]["median"] / 5e-4
        return kernels

    base = write_bench(tmp_path / "base.json", rows, with_copy(base_kernels()))
    noisy = write_bench(tmp_path / "noisy.json", rows, with_copy(base_kernels(), median_factor=1.5))
    result = compare(base, noisy)
    assert result.exit_code == 0 and set(result.speed["measure"]) == {"copy_ratio_min"}
    slower = write_bench(tmp_path / "slower.json", rows, with_copy(base_kernels(), min_factor=1.2))
    assert compare(base, slower).speed_regressions == len(base_kernels())
