"""`lenbench compare`: planted quality regressions and slowdowns fail, identical inputs pass."""

import copy
import json
from pathlib import Path

import pytest
from lenbench_testing import write_cells

from lenbench.cli import main
from lenbench.compare import IMPROVED, MISSING, NEW, REGRESSION, SLOWER, WITHIN, compare
from lenbench.report.build import write_report

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
    """Rows ok in base and absent from head fail the gate unless --allow-missing; new rows never do."""
    rows = base_rows()
    fewer = [r for r in rows if not (r["encoding"] == "alibi" and r["task"] == "lm")]
    more = rows + [row("copy", "t5", 1, "token_accuracy", 0.5)]
    base = write_cells(tmp_path / "base", rows)
    assert run_cli(base, write_cells(tmp_path / "fewer", fewer)) == 1
    out = capsys.readouterr().out
    assert "12 missing in head" in out and MISSING in out
    assert "12 measurement(s) ok in base missing in head (2 whole cell(s); --allow-missing accepts)" in out
    assert run_cli(base, write_cells(tmp_path / "fewer2", fewer), "--allow-missing") == 0
    assert run_cli(base, write_cells(tmp_path / "more", more)) == 0
    assert NEW in capsys.readouterr().out


def test_leaderboard_csv_comparison(tmp_path):
    rows = base_rows()
    write_report(rows, tmp_path / "a", plots=False)
    write_report(planted(rows, "copy", "alibi", 4, "exact_match", delta=-0.05), tmp_path / "b", plots=False)
    result = compare(tmp_path / "a" / "leaderboard.csv", tmp_path / "b" / "leaderboard.csv")
    assert result.level == "leaderboard" and result.exit_code == 1
    reg = result.quality[result.quality["status"] == REGRESSION]
    assert set(reg["statistic"]) == {"past_train_mean", "past_train_area", "retention"} and set(reg["encoding"]) == {"alibi"}
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
    head = write_bench(tmp_path / "head.json", rows, fast)
    assert run_cli(base, head) == 1  # a kernel that disappeared fails ...
    out = capsys.readouterr().out
    assert "1 faster" in out and "1 missing in head" in out and "-50.0%" in out
    assert "1 kernel(s) missing in head (--allow-missing accepts)" in out
    assert run_cli(base, head, "--allow-missing") == 0  # ... unless accepted explicitly


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


# --- the gate (issue 9, item 3) -----------------------------------------------------------------


def cell_file(directory: Path, task, encoding, seed, *, train_len=8, status="ok", error="", rows=(), sha="") -> Path:
    """A cell JSON as the engine writes it (config, status, rows, task fingerprint)."""
    from lenbench.atomic import atomic_write_json

    cell_id = f"{task}-{encoding}-{seed}"
    atomic_write_json(directory / "cells" / f"{cell_id}.json", {
        "schema_version": 1, "cell_id": cell_id, "title": f"{task}-{encoding}-L{train_len}-s{seed}",
        "config": {"task": task, "label": encoding, "encoding": encoding, "train_len": train_len, "seed": seed},
        "status": status, "error": error, "rows": list(rows), "timestamp": "2026-01-01T00:00:00+00:00",
        "task_fingerprint": {"corpus_sha256": sha} if sha else {}})
    return directory


def engine_dir(directory: Path, rows: list[dict], **sha) -> Path:
    """`rows` as a results directory of engine-style cell files (sha: task → corpus sha256)."""
    by_cell: dict[tuple, list[dict]] = {}
    for r in rows:
        by_cell.setdefault((r["task"], r["encoding"], r["seed"], r["train_len"]), []).append(r)
    for (task, encoding, seed, train_len), cell_rows in by_cell.items():
        cell_file(directory, task, encoding, seed, train_len=train_len, rows=cell_rows, sha=sha.get(task, ""))
    return directory


def test_a_diverged_head_cell_fails_the_gate(tmp_path, capsys):
    """A cell that diverged stores no rows: before, its rows were only 'missing' and the gate said OK."""
    rows = base_rows()
    base = engine_dir(tmp_path / "base", rows)
    kept = [r for r in rows if not (r["task"], r["encoding"], r["seed"]) == ("copy", "rope", 0)]
    head = engine_dir(tmp_path / "head", kept)
    cell_file(head, "copy", "rope", 0, status="failed", error="TrainingDiverged: loss nan at step 3")
    assert run_cli(base, head) == 1
    out = capsys.readouterr().out
    assert "1 failed in head" in out
    assert "FAILED in head: copy rope train_len 8 seed 0: TrainingDiverged: loss nan at step 3" in out
    assert "1 cell(s) ok in base failed in head" in out and "OK" not in out.splitlines()[-1]
    assert run_cli(base, head, "--allow-missing") == 1  # a failure is not a missing cell
    fixed = compare(head, base)  # the other way round: a failed cell that now works
    assert fixed.exit_code == 0 and (fixed.cells["status"] == IMPROVED).sum() == 1
    only = cell_file(tmp_path / "only", "copy", "rope", 0, status="failed", error="TrainingDiverged: nan")
    assert compare(only, engine_dir(tmp_path / "fixed", [r for r in rows if r["cell_id"] == "copy-rope-0"])).exit_code == 0
    # the same in benchmark JSONs: the diverged benchmark carries its cell status and no rows
    base_json = write_bench(tmp_path / "base.json", rows, [])
    head_json = write_bench(tmp_path / "head.json", kept, [])
    data = json.loads(head_json.read_text())
    data["benchmarks"].append({"name": "test_cell[copy-rope-L8-s0]", "stats": {"median": 1.0}, "extra_info": {
        "lenbench_rows": [], "lenbench_cell": {"cell_id": "x", "title": "copy-rope-L8-s0", "status": "failed",
                                               "error": "TrainingDiverged: loss inf"}}})
    head_json.write_text(json.dumps(data))
    result = compare(base_json, head_json)
    assert result.exit_code == 1 and result.failed_cells == 1
    assert (result.quality["status"] == "FAILED in head").sum() == 6  # the cell's 6 measurements


def test_a_cell_missing_in_head_fails_unless_allowed(tmp_path, capsys):
    rows = base_rows()
    base = engine_dir(tmp_path / "base", rows)
    head = engine_dir(tmp_path / "head", [r for r in rows if (r["task"], r["encoding"], r["seed"]) != ("lm", "alibi", 1)])
    assert run_cli(base, head) == 1
    out = capsys.readouterr().out
    assert "1 missing in head" in out and "missing in head: lm alibi train_len 16 seed 1" in out
    assert "6 measurement(s) ok in base missing in head (1 whole cell(s); --allow-missing accepts)" in out
    assert run_cli(base, head, "--allow-missing") == 0
    # a cell failed in base and missing in head is no regression
    cell_file(base, "copy", "t5", 0, status="failed", error="TrainingDiverged: nan")
    assert compare(base, head, allow_missing=True).exit_code == 0


def test_no_overlap_fails_unless_allowed(tmp_path, capsys):
    rows = base_rows()
    copy_only = write_cells(tmp_path / "copy", [r for r in rows if r["task"] == "copy"])
    lm_only = write_cells(tmp_path / "lm", [r for r in rows if r["task"] == "lm"])
    assert run_cli(copy_only, lm_only, "--allow-missing") == 1
    assert "no measurement or kernel in common" in capsys.readouterr().out
    assert run_cli(copy_only, lm_only, "--allow-missing", "--allow-no-overlap") == 0
    # an empty head against a base that holds rows: everything is missing and nothing overlaps
    empty = tmp_path / "empty"
    (empty / "cells").mkdir(parents=True)
    result = compare(copy_only, empty)
    assert result.exit_code == 1 and result.overlap == 0 and len(result.failures()) == 2
    # kernels only, none in common
    a = write_bench(tmp_path / "a.json", [], base_kernels()[:2])
    b = write_bench(tmp_path / "b.json", [], base_kernels()[2:])
    assert compare(a, b, allow_missing=True).exit_code == 1
    assert compare(a, b, allow_missing=True, allow_no_overlap=True).exit_code == 0


def test_different_setups_warn(tmp_path, capsys):
    rows = base_rows()
    other = [{**r, "torch_version": "2.12.0+cpu"} for r in rows]
    assert run_cli(write_cells(tmp_path / "a", rows), write_cells(tmp_path / "b", other)) == 0
    captured = capsys.readouterr()
    assert "WARNING: base and head come from different setups (torch_version 2.13.0+cpu vs 2.12.0+cpu)" in captured.out
    assert "lenbench: warning: base and head come from different setups" in captured.err
    assert run_cli(write_cells(tmp_path / "c", rows), write_cells(tmp_path / "d", rows)) == 0
    assert "WARNING" not in capsys.readouterr().out


def with_machine(path: Path, cpu: str, python: str = "3.11.7", torch_version: str = "2.13.0+cpu") -> Path:
    data = json.loads(path.read_text())
    data["machine_info"] = {"python_version": python, "cpu": {"brand_raw": cpu, "count": 2},
                            "lenbench": {"device": "cpu", "device_name": "cpu", "cpu_count": 2, "cpu_threads": 2,
                                         "torch_version": torch_version}}
    path.write_text(json.dumps(data))
    return path


def test_speed_across_machines_is_refused_without_force(tmp_path, capsys):
    base = with_machine(write_bench(tmp_path / "base.json", [], base_kernels()), "AMD EPYC")
    head = with_machine(write_bench(tmp_path / "head.json", [], base_kernels()), "Intel Xeon", python="3.12.1")
    assert run_cli(base, head) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "speed: base and head timings come from different machines (cpu AMD EPYC vs Intel Xeon)" in err
    assert "--force-speed" in err
    assert run_cli(base, head, "--force-speed") == 0
    out = capsys.readouterr().out
    assert "WARNING: speed compared across machines (cpu AMD EPYC vs Intel Xeon) with --force-speed" in out
    assert "python_version 3.11.7 vs 3.12.1" in out
    assert "WARNING: base and head ran on different machines (cpu AMD EPYC vs Intel Xeon)" in out
    # rows alone from two machines: compared, with the warning
    rows = base_rows()
    a = with_machine(write_bench(tmp_path / "ra.json", rows, []), "AMD EPYC")
    b = with_machine(write_bench(tmp_path / "rb.json", rows, []), "Intel Xeon")
    assert run_cli(a, b) == 0
    assert "WARNING: base and head ran on different machines (cpu AMD EPYC vs Intel Xeon)" in capsys.readouterr().out
    same = with_machine(write_bench(tmp_path / "same.json", [], base_kernels()), "AMD EPYC")
    assert run_cli(base, same) == 0 and "WARNING" not in capsys.readouterr().out


def test_lm_rows_of_different_corpora_are_refused(tmp_path, capsys):
    rows = base_rows()
    a = engine_dir(tmp_path / "a", [{**r, "data_fingerprint": "aa" * 32 if r["task"] == "lm" else ""} for r in rows],
                   lm="aa" * 32)
    b = engine_dir(tmp_path / "b", [{**r, "data_fingerprint": "bb" * 32 if r["task"] == "lm" else ""} for r in rows],
                   lm="bb" * 32)
    assert run_cli(a, b) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "task 'lm': base and head measured different data" in err
    assert "aa" * 32 in err and "bb" * 32 in err
    c = engine_dir(tmp_path / "c", rows, lm="aa" * 32)
    assert run_cli(a, c) == 0  # same corpus
    unknown = write_cells(tmp_path / "unknown", rows)  # no fingerprint: allowed, with a note
    assert run_cli(a, unknown) == 0
    assert "note: quality: the lm corpus of head is unknown" in capsys.readouterr().out


def test_the_summary_is_compact(tmp_path, capsys):
    rows = base_rows()
    worse = copy.deepcopy(rows)
    for i, r in enumerate(worse):
        r["value"] = r["value"] * (0.5 if r["higher_is_better"] else 2.0) + i * 1e-3  # every row worse, by different amounts
    base, head = write_cells(tmp_path / "a", rows), write_cells(tmp_path / "b", worse)
    assert run_cli(base, head) == 1
    out = capsys.readouterr().out
    table = [x for x in out.splitlines() if x.startswith("| REGRESSION")]
    assert len(table) == 10 and f"… {len(rows) - 10} more changed measurement(s) not shown" in out
    assert len(out.splitlines()) < 30
    # the largest changes come first
    result = compare(base, head)
    shown = [float(x.split("(")[-1].split("%")[0]) for x in table]
    q = result.quality
    rel = ((q["head"] - q["base"]).abs() / q["base"].abs() * 100).sort_values(ascending=False)
    assert abs(shown[0]) == pytest.approx(rel.iloc[0], abs=0.1) and abs(shown[0]) >= abs(shown[-1])
    assert run_cli(base, head, "--top", "3") == 1
    assert len([x for x in capsys.readouterr().out.splitlines() if x.startswith("| REGRESSION")]) == 3
    assert run_cli(base, head, "--all") == 1
    assert len([x for x in capsys.readouterr().out.splitlines() if x.startswith("| REGRESSION")]) == len(rows)


def training_step(encoding, ratio, median):
    return {"group": "training-step", "name": f"test_training_step[{encoding}]",
            "fullname": f"bench/test_kernels.py::test_training_step[{encoding}]",
            "extra_info": {"encoding": encoding, "kind": "training-step", "seconds": median, "ratio_to_nope": ratio},
            "stats": {"median": median, "mean": median, "min": median, "max": median, "stddev": 0.0, "rounds": 20}}


def test_training_steps_are_compared_by_their_ratio_to_nope(tmp_path):
    steps = [training_step("nope", 1.0, 0.02), training_step("rope", 1.3, 0.026)]
    base = write_bench(tmp_path / "base.json", [], steps)
    slower_machine = write_bench(tmp_path / "h1.json", [], [training_step("nope", 1.0, 0.04), training_step("rope", 1.3, 0.052)])
    result = compare(base, slower_machine)
    assert result.exit_code == 0 and set(result.speed["measure"]) == {"ratio_to_nope"}
    slower_rope = write_bench(tmp_path / "h2.json", [], [training_step("nope", 1.0, 0.02), training_step("rope", 1.56, 0.0312)])
    result = compare(base, slower_rope)
    assert result.exit_code == 1 and result.speed_regressions == 1
    (slow,) = result.speed[result.speed["status"] == SLOWER].to_dict("records")
    assert slow["encoding"] == "rope" and slow["change"] == pytest.approx(0.2)


def test_a_small_change_never_reads_as_none():
    """Issue 39: 30.2694 → 30.2795 printed "(+0.0%)"; two significant digits of the percentage say it moved."""
    from lenbench.compare.gate import _change, percent

    assert _change(30.2694, 30.2795) == "+0.0101 (+0.033%)"
    assert percent(0.25) == "+25.0%" and percent(-0.0123) == "-1.2%" and percent(0.0) == "0%"
