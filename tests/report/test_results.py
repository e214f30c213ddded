"""Results loading, the leaderboard statistics (checked by hand) and the report files."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from lenbench_testing import write_cells

from lenbench.cli import main
from lenbench.report.build import write_report
from lenbench.report.formatting import to_csv_text
from lenbench.report.markdown import leaderboard_markdown
from lenbench.report.rows import board_rows, load_results
from lenbench.report.tables import LEADERBOARD_SCHEMA_VERSION, leaderboard, read_leaderboard_csv
from lenbench.report.timings import load_kernel_timings
from lenbench.results.schema import COLUMNS, ResultsError

PROVENANCE = {"lenbench_version": "0.1.0", "git_sha": "0123abcd", "torch_version": "2.13.0+cpu", "device": "cpu",
              "dtype": "float32", "timestamp": "2026-01-01T00:00:00+00:00"}


def row(task, encoding, variant, train_len, ratio, metric, value, seed=0, **extra):
    failed = value is None
    return {"schema_version": 3, "cell_id": f"{task}-{encoding}-{train_len}-{seed}", "suite": "tiny", "task": task,
            "encoding": encoding, "variant": variant, "train_len": train_len, "eval_len": int(ratio * train_len),
            "ratio": float(ratio), "metric": metric, "value": value, "n_samples": 0 if failed else 8, "seed": seed,
            "higher_is_better": metric in ("token_accuracy", "exact_match"), "status": "failed" if failed else "ok",
            "error": "ValueError: learned: length 80 past max_len=40, \"quoted\"" if failed else "",
            **PROVENANCE, "train_seconds": 1.25, **extra}


# Hand-made curves: copy (exact_match ↑, train 10; nope misses the 0.9 learned threshold at 1x) and lm (perplexity ↓, train 20).
COPY = {
    ("rope", "none"): [1.0, 0.95, 0.85, 0.5],
    ("alibi", "none"): [0.9, 0.9, 0.89, 0.85],
    ("learned", "none"): [1.0, 0.99, 0.95, None],
    ("nope", "none"): [0.8, 0.5, 0.75, 0.78],  # back within 10 % at 4x and 8x: the effective length stays 1
}
LM = {
    ("rope", "none"): [10.0, 10.5, 12.0],
    ("alibi", "none"): [10.0, 10.9, 11.0],  # 11.0 = 1.1 × 10: within (inclusive)
    ("learned", "none"): [9.0, None, None],
    ("nope", "none"): [10.0, 10.2, 10.4],
}


def tiny_rows(seeds=(0,)) -> list[dict]:
    rows = []
    for seed in seeds:
        for (enc, var), values in COPY.items():
            for ratio, v in zip((1, 2, 4, 8), values, strict=True):
                rows.append(row("copy", enc, var, 10, ratio, "exact_match", v, seed))
                # token_accuracy (secondary) ranks the other way round: the leaderboard must not use it
                rows.append(row("copy", enc, var, 10, ratio, "token_accuracy", None if v is None else 1 - v, seed))
        for (enc, var), values in LM.items():
            for ratio, v in zip((1, 2, 4), values, strict=True):
                rows.append(row("lm", enc, var, 20, ratio, "perplexity", v, seed))
                rows.append(row("lm", enc, var, 20, ratio, "nll", None if v is None else 100 - v, seed))
    return rows




def bench_json(path: Path, rows: list[dict], kernels: list[dict] = ()) -> Path:
    by_cell: dict[str, list[dict]] = {}
    for r in rows:
        by_cell.setdefault(r["cell_id"], []).append(r)
    benchmarks = [{"group": "extrapolation", "name": f"test_cell[{cid}]", "fullname": f"bench/test_extrapolation.py::test_cell[{cid}]",
                   "extra_info": {"lenbench_rows": cell_rows}, "stats": {"median": 1.0, "mean": 1.0, "min": 1.0}}
                  for cid, cell_rows in by_cell.items()]
    benchmarks += list(kernels)
    data = {"machine_info": {"lenbench": {"device": "cpu", "device_name": "test cpu"}}, "commit_info": {},
            "benchmarks": benchmarks, "datetime": "2026-01-01T00:00:00", "version": "5.2.3"}
    path.write_text(json.dumps(data))
    return path


def kernel(encoding="rope", impl="fused", T=256, median=1e-3, copy_ratio=2.0) -> dict:
    return {"group": "kernels", "name": f"test_kernel[{encoding}-{impl}-{T}]",
            "fullname": f"bench/test_kernels.py::test_kernel[{encoding}-{impl}-{T}]",
            "extra_info": {"encoding": encoding, "kind": "rotate", "impl": impl, "T": T, "dtype": "float32",
                           "bytes": 4 * T * 64, "gbps": 1.5, "copy_ratio": copy_ratio},
            "stats": {"median": median, "mean": median * 1.1, "min": median * 0.9, "max": median * 2, "stddev": 1e-5,
                      "rounds": 20}}


# --- loading and the round trip -----------------------------------------------------------------


def test_frame_has_schema_columns_dtypes_and_nan_for_failed():
    df = load_results(tiny_rows())
    assert list(df.columns) == list(COLUMNS)
    assert df["value"].dtype == np.float64 and df["train_len"].dtype == np.int64 and df["higher_is_better"].dtype == bool
    failed = df[df["status"] == "failed"]
    assert len(failed) == 2 * (1 + 2) and failed["value"].isna().all()
    assert (failed["error"].str.contains("past max_len")).all()
    assert df.index.tolist() == list(range(len(df)))
    # stable order whatever the input order
    shuffled = load_results(list(reversed(tiny_rows())))
    pd.testing.assert_frame_equal(df, shuffled)


def _same(a, b) -> bool:
    missing = lambda v: v is None or (isinstance(v, float) and math.isnan(v))  # noqa: E731
    return (missing(a) and missing(b)) or a == b


def test_rows_csv_rows_round_trip_unchanged(tmp_path):
    rows = tiny_rows(seeds=(0, 1))
    rows[0]["error"] = "odd, \"quoted\"\nmultiline – ünïcode"
    rows[0]["train_seconds"] = float("nan")
    rows[1]["value"] = 0.1 + 0.2  # needs all 17 digits to round-trip
    df = load_results(rows)
    path = tmp_path / "results.csv"
    path.write_text(to_csv_text(df))
    back = load_results(path)
    pd.testing.assert_frame_equal(df, back, check_exact=True)
    assert (df.dtypes == back.dtypes).all()
    # and the dicts themselves come back unchanged (None ↔ NaN for failed values)
    by_key = {(r["cell_id"], r["variant"], r["ratio"], r["metric"]): r for r in back.to_dict("records")}
    for original in rows:
        again = by_key[(original["cell_id"], original["variant"], original["ratio"], original["metric"])]
        for key, value in original.items():
            assert _same(value, again[key]), (key, value, again[key])
    # twice through is a fixed point, byte for byte
    assert to_csv_text(back) == path.read_text()


def test_load_from_benchmark_json_equals_load_from_directory(tmp_path):
    rows = tiny_rows(seeds=(0, 1))
    from_dir = load_results(write_cells(tmp_path / "run", rows))
    from_json = load_results(bench_json(tmp_path / "bench.json", rows, [kernel()]))
    pd.testing.assert_frame_equal(from_dir, from_json, check_exact=True)
    assert len(from_dir) == len(rows)


def test_cells_of_two_configurations_are_refused_not_mixed(tmp_path):
    """A directory where a changed suite (another budget: another cell id) left its older cells: the
    two measure the same rows, and `normalize` would keep either by cell id, so the load refuses."""
    rows = tiny_rows()
    run = write_cells(tmp_path / "run", rows)
    assert len(load_results(run)) == len(rows)
    older = [{**r, "cell_id": "0-older-budget", "value": 0.0} for r in rows if r["cell_id"] == "copy-rope-10-0"]
    write_cells(run, older)
    with pytest.raises(ResultsError) as err:
        load_results(run)
    message = str(err.value)
    assert "\n" not in message
    assert "0-older-budget.json and copy-rope-10-0.json both measure copy / rope (none) seed 0" in message
    assert "1 cell(s) in all" in message and "move the outdated cell files aside" in message
    (run / "cells" / "0-older-budget.json").rename(tmp_path / "0-older-budget.json")
    assert load_results(run).equals(load_results(write_cells(tmp_path / "fresh", rows)))


def test_run_summary_shows_the_suites_cells_beside_an_older_configurations(tmp_path):
    from lenbench.cli import summary_table

    rows = tiny_rows()
    run = write_cells(tmp_path / "run", rows)
    ids = sorted({r["cell_id"] for r in rows})
    expected = summary_table(run)
    write_cells(run, [{**r, "cell_id": "0-older-budget", "value": 0.0} for r in rows if r["cell_id"] == ids[0]])
    with pytest.raises(ResultsError, match="both measure"):
        summary_table(run)
    assert summary_table(run, ids) == expected
    assert summary_table(run, ["not-run-yet"]) == "(no rows)"
    assert load_results(run, cell_ids=ids).equals(load_results(write_cells(tmp_path / "fresh", rows)))


def test_cells_sharing_only_baseline_rows_load(tmp_path):
    """Every cell of a task and seed carries the same baseline rows under its own id: not a clash."""
    rows = tiny_rows()
    base = [{**r, "encoding": "baseline:chance", "cell_id": cid, "value": 0.1}
            for cid in ("copy-rope-10-0", "copy-alibi-10-0") for r in rows[:1]]
    frame = load_results(write_cells(tmp_path / "run", rows + base))
    assert (frame["encoding"] == "baseline:chance").sum() == 1


def test_board_rows_select_one_board_of_any_frame():
    frame = pd.DataFrame({"task": ["copy", "copy", "copy", "sort"], "train_len": [16, 32, 16, 16],
                          "value": [1.0, 2.0, 3.0, 4.0]})
    assert board_rows(frame, "copy", 16)["value"].tolist() == [1.0, 3.0]
    assert board_rows(frame, "sort", 32).empty
    empty = pd.DataFrame()  # a board without seeds or context rows: no task column at all
    assert board_rows(empty, "copy", 16) is empty


def test_kernel_timings(tmp_path):
    path = bench_json(tmp_path / "bench.json", tiny_rows(), [kernel(T=512), kernel(impl="eager", copy_ratio=5.0)])
    k = load_kernel_timings(path)
    assert len(k) == 2 and set(k["impl"]) == {"fused", "eager"}
    assert k.loc[k["impl"] == "eager", "copy_ratio"].item() == 5.0
    assert k["device"].tolist() == ["cpu", "cpu"] and k["median"].tolist() == [1e-3, 1e-3]


@pytest.mark.parametrize("content, expected", [
    ("{not json", "invalid JSON"),
    ('{"rows": 3}', "not a cell result"),
])
def test_corrupt_cell_file_is_a_one_line_error(tmp_path, content, expected):
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "abc.json").write_text(content)
    with pytest.raises(ResultsError) as err:
        load_results(tmp_path)
    assert "abc.json" in str(err.value) and expected in str(err.value) and "\n" not in str(err.value)


def test_unknown_sources_are_one_line_errors(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    (tmp_path / "x.json").write_text('{"hello": 1}')
    (tmp_path / "x.txt").write_text("hi")
    (tmp_path / "empty").mkdir()
    for name, expected in (("x.csv", "tidy columns"), ("x.json", "benchmarks"), ("x.txt", "unknown file type"),
                           ("empty", "without cells"), ("nope", "no such file")):
        with pytest.raises(ResultsError) as err:
            load_results(tmp_path / name)
        message = str(err.value)
        assert name in message and expected in message and "expected" in message and "\n" not in message


def test_leaderboard_csv_is_refused_by_load_results(tmp_path):
    write_report(tiny_rows(), tmp_path, plots=False)
    with pytest.raises(ResultsError, match="leaderboard CSV"):
        load_results(tmp_path / "leaderboard.csv")


# --- the leaderboard by hand --------------------------------------------------------------------


def entry(board, task, encoding, variant="none"):
    pt = board.per_task
    sel = pt[(pt["task"] == task) & (pt["encoding"] == encoding) & (pt["variant"] == variant)]
    assert len(sel) == 1
    return sel.iloc[0]


def test_leaderboard_higher_is_better():
    board = leaderboard(load_results(tiny_rows()))
    rope, alibi, learned, nope = (entry(board, "copy", e) for e in ("rope", "alibi", "learned", "nope"))
    assert rope.metric == "exact_match" and bool(rope.higher_is_better)
    assert rope.in_dist == 1.0 and alibi.in_dist == 0.9
    assert rope.past_train_mean == pytest.approx((0.95 + 0.85 + 0.5) / 3)
    assert alibi.past_train_mean == pytest.approx((0.9 + 0.89 + 0.85) / 3)
    assert learned.past_train_mean == pytest.approx((0.99 + 0.95 + 0.0) / 3)  # the failed length scores 0
    assert nope.past_train_mean == pytest.approx((0.5 + 0.75 + 0.78) / 3)
    # the area past train on 1, 2, 4, 8: trapezoids over log2(ratio), the 1x end valued at 2x, per
    # doubling: weights (1/2 + 1/2 + 1/2, 1/2 + 1/2, 1/2) / 3 for 2x, 4x, 8x
    area = lambda s2, s4, s8: (1.5 * s2 + 1.0 * s4 + 0.5 * s8) / 3  # noqa: E731
    assert rope.past_train_area == pytest.approx(area(0.95, 0.85, 0.5))
    assert alibi.past_train_area == pytest.approx(area(0.9, 0.89, 0.85))
    assert learned.past_train_area == pytest.approx(area(0.99, 0.95, 0.0))
    # effective length (no baseline rows: no floor condition): ≥ 0.9 × in-dist at every ratio up to it
    assert rope.effective_length == 2.0  # 0.85 < 0.9
    assert alibi.effective_length == 8.0  # 0.85 ≥ 0.81
    assert learned.effective_length == 4.0  # failed at 8 = not within
    assert nope.effective_length == 1.0  # 0.5 < 0.72 at 2x, though 4x and 8x are back within
    assert (learned.n_failed, rope.n_failed) == (1.0, 0.0)
    # one seed without sample scores: no interval, so ranks follow the point values; nope (0.8 at
    # 1x) did not learn the task: flagged, kept, not ranked
    assert [alibi["rank"], rope["rank"], learned["rank"]] == [1, 2, 3]
    assert bool(nope.not_learned) and math.isnan(nope["rank"]) and not alibi.not_learned
    assert rope.ci_method == "none (1 seed, no sample scores)" and math.isnan(rope.in_dist_ci_low)
    # retention: (score - chance) / (in-dist - chance), chance 0 without baseline rows
    assert rope.retention == pytest.approx((0.95 + 0.85 + 0.5) / 3)
    assert alibi.retention == pytest.approx((0.9 + 0.89 + 0.85) / 3 / 0.9)


def test_leaderboard_lower_is_better_and_overall():
    board = leaderboard(load_results(tiny_rows()))
    rope, alibi, learned, nope = (entry(board, "lm", e) for e in ("rope", "alibi", "learned", "nope"))
    assert rope.metric == "perplexity" and not bool(rope.higher_is_better)
    assert rope.past_train_mean == pytest.approx(11.25) and alibi.past_train_mean == pytest.approx(10.95)
    assert nope.past_train_mean == pytest.approx(10.3) and learned.past_train_mean == math.inf
    # effective length (no baselines): ≤ 1.1 × in-dist
    assert rope.effective_length == 2.0  # 12 > 11
    assert alibi.effective_length == 4.0  # 11.0 ≤ 11 (inclusive)
    assert nope.effective_length == 4.0
    assert learned.effective_length == 1.0 and learned.in_dist == 9.0 and learned.n_failed == 2.0
    assert learned.past_train_area == math.inf
    # ranked by the area past train, (3/4 · ppl at 2x + 1/4 · ppl at 4x) on 1, 2, 4: rope 10.875 beats
    # alibi 10.925, though its plain mean (11.25) is worse than alibi's (10.95)
    assert rope.past_train_area == pytest.approx(0.75 * 10.5 + 0.25 * 12) and alibi.past_train_area == pytest.approx(10.925)
    assert [nope["rank"], rope["rank"], alibi["rank"], learned["rank"]] == [1, 2, 3, 4]
    assert rope.retention == pytest.approx((10 / 10.5 + 10 / 12) / 2) and learned.retention == 0.0
    overall = board.overall.set_index("series")
    # copy ranks: alibi 1, rope 2, learned 3, nope not learned; lm: nope 1, rope 2, alibi 3, learned 4.
    # the overall rank is the mean rank over the boards each learned, with no "tasks learned first" key:
    # nope learned one task and ranks first there; the table says it counted one board
    assert overall["mean_rank"].to_dict() == {"alibi": 2.0, "nope": 1.0, "rope": 2.0, "learned": 3.5}
    assert overall["rank"].to_dict() == {"alibi": 2, "nope": 1, "rope": 2, "learned": 4}
    assert board.overall["series"].tolist() == ["nope", "alibi", "rope", "learned"]  # a tie in registry order
    assert overall["n_tasks"].to_dict() == {"alibi": 2, "nope": 1, "rope": 2, "learned": 2}
    assert overall["n_not_learned"].to_dict() == {"alibi": 0, "nope": 1, "rope": 0, "learned": 0}


def test_ties_share_a_rank():
    rows = [r for r in tiny_rows() if r["task"] == "copy" and r["encoding"] in ("rope", "alibi")]
    rows += [{**r, "encoding": "t5", "cell_id": "copy-t5"} for r in rows if r["encoding"] == "alibi"]
    board = leaderboard(load_results(rows))
    ranks = board.per_task.set_index("encoding")["rank"].to_dict()
    assert ranks == {"alibi": 1, "t5": 1, "rope": 3}
    # the tie lists in registry order
    assert board.per_task["encoding"].tolist() == ["alibi", "t5", "rope"]


def test_interval_over_seeds_without_sample_scores():
    # three seeds of one curve, no per-sample scores (old results): a t interval on the seed values
    curves = {0: [0.9, 0.85, 0.35], 1: [0.8, 0.5, 0.5], 2: [1.0, 0.95, 0.45]}
    rows = [row("copy", "rope", "none", 10, ratio, "exact_match", v, seed)
            for seed, values in curves.items() for ratio, v in zip((1, 2, 4), values, strict=True)]
    e = entry(leaderboard(load_results(rows)), "copy", "rope")
    assert e.n_seeds == 3 and e.ci_method == "t over seeds"
    assert e.in_dist == pytest.approx(0.9)
    half = 4.302652729749464 * 0.1 / math.sqrt(3)  # t(2) · sd / √3 of 0.9, 0.8, 1.0
    assert e.in_dist_ci_low == pytest.approx(0.9 - half) and e.in_dist_ci_high == 1.0  # clipped at 1
    assert e.past_train_mean == pytest.approx(0.6)  # seed means 0.6, 0.5, 0.7
    half = 4.302652729749464 * 0.1 / math.sqrt(3)
    assert (e.past_train_mean_ci_low, e.past_train_mean_ci_high) == pytest.approx((0.6 - half, 0.6 + half))
    # the effective length is discrete: no interval
    assert math.isnan(e.effective_length_ci_low) and math.isnan(e.effective_length_ci_high)
    # one seed: no interval
    single = entry(leaderboard(load_results(tiny_rows())), "copy", "rope")
    assert math.isnan(single.in_dist_ci_low) and math.isnan(single.in_dist_ci_high)


def test_leaderboard_long_form_and_markdown(tmp_path):
    df = load_results(tiny_rows())
    board = leaderboard(df)
    long = board.long()
    assert {"task", "encoding", "variant", "statistic", "value", "ci_low", "ci_high", "higher_is_better"} <= set(long.columns)
    stats = long[(long["task"] == "lm") & (long["encoding"] == "rope")].set_index("statistic")
    assert stats.loc["past_train_mean", "value"] == pytest.approx(11.25)
    assert not stats.loc["past_train_mean", "higher_is_better"] and stats.loc["effective_length", "higher_is_better"]
    assert not stats.loc["rank", "higher_is_better"]
    overall = long[long["task"] == "overall"]
    assert set(overall["statistic"]) == {"mean_rank", "n_at_floor", "rank"} and len(overall) == 3 * 4
    assert (long["schema_version"] == LEADERBOARD_SCHEMA_VERSION).all() and set(long["git_sha"]) == {"0123abcd"}
    assert {"not_learned", "n", "kind", "ci_method", "suite", "torch_version", "code_fingerprint"} <= set(long.columns)
    md = leaderboard_markdown(board, df)
    assert "## copy (train length 10, exact_match ↑)" in md and "## lm (train length 20, perplexity ↓)" in md
    assert "area past train ↓" in md and "effective length ↑" in md and "## Overall ranking" in md
    lm_table = md.split("## lm")[1]
    learned_line = next(line for line in lm_table.splitlines() if "| learned" in line)
    assert learned_line.split("|")[4].strip() == "fail"  # area past train: every length past it failed
    # the long CSV reads back
    (tmp_path / "leaderboard.csv").write_text(to_csv_text(long))
    back = read_leaderboard_csv(tmp_path / "leaderboard.csv")
    assert back["value"].tolist() == pytest.approx(long["value"].tolist(), nan_ok=True)


def test_wide_table():
    wide = leaderboard(load_results(tiny_rows())).wide
    copy = wide[wide["task"] == "copy"].set_index("series")
    assert list(copy.loc["learned", ["1x", "2x", "4x", "8x"]].fillna(-1)) == [1.0, 0.99, 0.95, -1]
    assert copy.index.tolist() == ["alibi", "learned", "nope", "rope"]  # registry order, not rank
    assert wide[wide["task"] == "lm"]["8x"].isna().all()


# --- the report ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_write_report_files_are_idempotent_and_round_trip(tmp_path):
    rows = tiny_rows(seeds=(0, 1))
    first = write_report(rows, tmp_path / "a")
    names = [p.relative_to(tmp_path / "a").as_posix() for p in first]
    for required in ("results.csv", "leaderboard.csv", "leaderboard_wide.csv", "leaderboard.md", "extrapolation.png",
                     "extrapolation.svg", "leaderboard_heatmap.png", "leaderboard_heatmap.svg"):
        assert required in names
    before = {n: (tmp_path / "a" / n).read_bytes() for n in names}
    # a rerun into the same directory, and a report of the published results.csv elsewhere
    write_report(rows, tmp_path / "a")
    again = write_report(tmp_path / "a" / "results.csv", tmp_path / "b")
    assert [p.relative_to(tmp_path / "b").as_posix() for p in again] == names
    for n in names:
        assert (tmp_path / "a" / n).read_bytes() == before[n], n
        if not n.endswith(".png"):  # PNG bytes may depend on the renderer build; the text files may not
            assert (tmp_path / "b" / n).read_bytes() == before[n], n
    pd.testing.assert_frame_equal(load_results(tmp_path / "a"), load_results(rows), check_exact=True)
    assert not list((tmp_path / "a").glob(".*.tmp"))


@pytest.mark.slow
def test_report_cli(tmp_path, monkeypatch, capsys):
    run = write_cells(tmp_path / "run", tiny_rows())
    assert main(["report", str(run), "--no-plots"]) == 0
    assert (run / "leaderboard.md").is_file() and (run / "results.csv").is_file()
    monkeypatch.chdir(tmp_path)
    bench = bench_json(tmp_path / "bench.json", tiny_rows())
    assert main(["report", str(bench), "--no-plots"]) == 0
    assert (tmp_path / "leaderboard.csv").read_text() == (run / "leaderboard.csv").read_text()  # beside the JSON
    assert not (tmp_path / "results").exists()  # never the published directory unless named
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "missing: no such file" in capsys.readouterr().err
    (tmp_path / "kernels.json").write_text(json.dumps({"benchmarks": [kernel()]}))
    assert main(["report", str(tmp_path / "kernels.json"), "--no-plots"]) == 0  # kernel-only: the cost view
    assert (tmp_path / "cost.csv").is_file()
    (tmp_path / "empty.json").write_text(json.dumps({"benchmarks": []}))
    assert main(["report", str(tmp_path / "empty.json")]) == 2
    assert "no extrapolation rows to report and no kernel timings" in capsys.readouterr().err


def test_each_board_keeps_its_own_lengths_and_the_summary_prints_only_those(tmp_path):
    """`wide` holds the union of the boards' ratios (copy 1-8x, lm 1-4x); a board's own columns are
    its lengths, so the terminal summary prints lm without an 8x column rather than "fail" there."""
    from lenbench.cli import summary_table

    rows = tiny_rows()
    board = leaderboard(pd.DataFrame(rows), n_boot=200)
    assert [c for c in board.wide.columns if c.endswith("x")] == ["1x", "2x", "4x", "8x"]
    assert board.ratio_columns("copy", 10) == ["1x", "2x", "4x", "8x"]
    assert board.ratio_columns("lm", 20) == ["1x", "2x", "4x"]
    assert board.ratio_columns("lm", 10) == []
    copy_block, lm_block = summary_table(write_cells(tmp_path / "run", rows)).split("\n\n")
    assert "8x" in copy_block.splitlines()[0] and "8x" not in lm_block.splitlines()[0]
    # the learned model's failed lm lengths (2x, 4x) are the block's only "fail"s
    assert [line.split()[-2:] for line in lm_block.splitlines() if "fail" in line] == [["fail", "fail"]]
