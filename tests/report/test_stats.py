"""The leaderboard's statistics (lenbench.report.stats) on synthetic result tables with per-sample scores,
the baselines, and the round trip of per-sample scores."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from lenbench.baselines import baseline_rows
from lenbench.evaluate import decode_samples, encode_samples, eval_batches, evaluate_length, metric_transform
from lenbench.model import ModelConfig, Transformer
from lenbench.report import intervals, ranks, stats
from lenbench.report.build import write_report
from lenbench.report.markdown import leaderboard_markdown, summary_markdown
from lenbench.report.rows import load_results
from lenbench.report.tables import leaderboard
from lenbench.tasks import build_task

PROVENANCE = {"lenbench_version": "0.1.0", "git_sha": "0123abcd", "torch_version": "2.13.0+cpu", "device": "cpu",
              "dtype": "float32", "timestamp": "2026-01-01T00:00:00+00:00", "train_seconds": 1.0}


def rows_of(encoding, hits_by_seed, variant="none", task="copy", train_len=10, ratios=(1, 2, 4)):
    """Tidy exact_match rows from per-sample hits: {seed: {ratio: array of 0/1}}."""
    rows = []
    for seed, by_ratio in hits_by_seed.items():
        for ratio in ratios:
            hits = np.asarray(by_ratio[ratio], dtype=float)
            rows.append({"schema_version": 2, "cell_id": f"{encoding}-{seed}", "suite": "synthetic", "task": task,
                         "encoding": encoding, "variant": variant, "train_len": train_len,
                         "eval_len": int(ratio * train_len), "ratio": float(ratio), "metric": "exact_match",
                         "value": float(hits.mean()), "n_samples": len(hits), "seed": seed, "higher_is_better": True,
                         "status": "ok", "error": "", **PROVENANCE,
                         "sample_scores": encode_samples(list(hits), [1.0] * len(hits))})
    return rows


def bernoulli(p_by_ratio, seeds=(0, 1, 2), n=64, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    return {s: {r: (rng.random(n) < p).astype(float) for r, p in p_by_ratio.items()} for s in seeds}


def board_of(rows):
    board = leaderboard(load_results(rows))
    return board, board.per_task.set_index("series")


def test_difference_inside_the_noise_shares_a_rank():
    a = rows_of("alibi", bernoulli({1: 0.97, 2: 0.50, 4: 0.40}, rng_seed=1))
    b = rows_of("kerple", bernoulli({1: 0.97, 2: 0.51, 4: 0.41}, rng_seed=2))
    _, pt = board_of(a + b)
    assert pt.loc["alibi", "rank"] == pt.loc["kerple", "rank"] == 1
    assert "=1" in leaderboard_markdown(board_of(a + b)[0])


def test_clear_separation_gives_distinct_ranks():
    a = rows_of("alibi", bernoulli({1: 0.97, 2: 0.9, 4: 0.8}, rng_seed=1))
    b = rows_of("rope", bernoulli({1: 0.97, 2: 0.2, 4: 0.1}, rng_seed=2))
    c = rows_of("t5", bernoulli({1: 0.97, 2: 0.55, 4: 0.45}, rng_seed=3))
    _, pt = board_of(a + b + c)
    assert (pt.loc["alibi", "rank"], pt.loc["t5", "rank"], pt.loc["rope", "rank"]) == (1, 2, 3)


def test_an_entry_missing_a_seed_or_a_length_is_incomplete_and_never_ranked():
    """A partial run (one seed of rope's three missing, or its 4× rows absent) is shown as incomplete
    and never ranked: a missing length must not make an entry's mean NaN and so rank 1."""
    a = rows_of("alibi", bernoulli({1: 0.97, 2: 0.3, 4: 0.2}, rng_seed=1))
    full = rows_of("rope", bernoulli({1: 0.97, 2: 0.9, 4: 0.8}, rng_seed=2))
    _, pt = board_of(a + full)
    assert (pt.loc["rope", "rank"], pt.loc["alibi", "rank"]) == (1, 2)
    for partial in ([r for r in full if r["seed"] != 2], [r for r in full if r["ratio"] != 4]):
        board, pt = board_of(a + partial)
        assert not pt.loc["rope", "complete"] and math.isnan(pt.loc["rope", "rank"])
        assert pt.loc["alibi", "rank"] == 1 and pt.loc["alibi", "complete"]
        line = next(x for x in leaderboard_markdown(board).splitlines() if "| rope (incomplete)" in x)
        assert line.split("|")[1].strip() == "inc"


def seed_values(theta, boot=None):
    theta = np.asarray(theta, dtype=float)
    return intervals.SeedValues(theta, np.zeros((10, len(theta))) + theta if boot is None else boot)


def test_support_ranks_test_the_seed_differences_with_holm():
    # x beats y on every seed by 0.5 ± 0.01: separated; z is y plus noise of the size of the gap: tied with both
    x, y = seed_values([0.9, 0.8, 0.85]), seed_values([0.4, 0.31, 0.34])
    z = seed_values([0.9, 0.1, 0.5])
    assert ranks.support_ranks({"x": x, "y": y}, ["x", "y"]) == {"x": 1, "y": 2}
    assert ranks.support_ranks({"x": x, "y": y, "z": z}, ["x", "y", "z"]) == {"x": 1, "y": 2, "z": 1}
    # Holm: p-values of a family of three, one at 0.02 (≤ 0.05/3 fails, so nothing is rejected)
    assert ranks.holm([0.02, 0.5, 0.9]) == [False, False, False]
    assert ranks.holm([0.01, 0.02, 0.9]) == [True, True, False]  # 0.01 ≤ 0.05/3, then 0.02 ≤ 0.05/2
    assert ranks.holm([0.04, 0.001]) == [True, True]


def test_entries_failed_everywhere_tie_with_each_other():
    worst = seed_values([-np.inf] * 3)  # goodness of two entries whose every length failed (perplexity inf)
    got = ranks.support_ranks({"x": worst, "y": seed_values([-np.inf] * 3), "z": seed_values([0.0, 0.1, 0.05])},
                          ["x", "y", "z"])
    assert got == {"x": 2, "y": 2, "z": 1}


def test_comparisons_are_paired_on_the_same_samples():
    # kerple = alibi plus 8 more right answers out of 128 per length: the unpaired intervals overlap,
    # but on the same samples kerple is never worse, so the paired difference supports it
    base = bernoulli({1: 0.97, 2: 0.5, 4: 0.5}, n=128, rng_seed=4)
    better = {s: {r: v.copy() for r, v in by_r.items()} for s, by_r in base.items()}
    for by_r in better.values():
        for r in (2, 4):
            wrong = np.flatnonzero(by_r[r] == 0)[:8]
            by_r[r][wrong] = 1.0
    _, pt = board_of(rows_of("alibi", base) + rows_of("kerple", better))
    assert pt.loc["kerple", "past_train_mean_ci_low"] < pt.loc["alibi", "past_train_mean_ci_high"]  # overlap
    assert (pt.loc["kerple", "rank"], pt.loc["alibi", "rank"]) == (1, 2)


def test_samples_scored_at_every_ratio_are_resampled_as_one_draw():
    """lm scores the same windows at every ratio: with per-window losses identical at every ratio, the
    bootstrap of each seed's retention and degradation has no spread (one draw of windows serves every
    ratio), and the paired difference of two encodings is exact."""
    rng = np.random.default_rng(3)
    nll = {s: rng.uniform(1.0, 3.0, 16) for s in (0, 1, 2)}  # per-window mean nll of each seed

    def lm(encoding, shift):
        return [{"task": "lm", "encoding": encoding, "variant": "none", "train_len": 32, "eval_len": 32 * r,
                 "ratio": float(r), "metric": "perplexity", "value": float(np.exp((nll[s] + shift).mean())),
                 "seed": s, "n_samples": 16, "sample_scores": encode_samples(list((nll[s] + shift) * 8), [8.0] * 16)}
                for s in (0, 1, 2) for r in (1, 2, 4)]

    board = stats.board_statistics(load_results(lm("alibi", 0.0) + lm("rope", 0.25)), "lm", "perplexity", False)
    for key in (("alibi", "none"), ("rope", "none")):
        for stat in ("retention", "degradation"):
            assert np.nanstd(board.seed_stats[key][stat].boot, axis=0).max() == 0.0
        e = board.entries.set_index("encoding").loc[key[0]]
        assert (e.retention, e.retention_ci_low, e.retention_ci_high) == (1.0, 1.0, 1.0)
        assert (e.degradation, e.degradation_ci_low, e.degradation_ci_high) == (0.0, 0.0, 0.0)
    diff = intervals.estimate(board.seed_stats[("rope", "none")]["in_dist"] - board.seed_stats[("alibi", "none")]["in_dist"])
    ppl = {s: (np.exp(nll[s].mean() + 0.25) - np.exp(nll[s].mean())) for s in (0, 1, 2)}
    assert diff.mean == pytest.approx(np.mean(list(ppl.values())))


def test_one_seed_gives_intervals_from_sampling_alone_matching_the_binomial():
    n, k = 400, 120  # exact match 0.3 at 1x on 400 samples, one seed
    hits = np.zeros(n)
    hits[:k] = 1.0
    np.random.default_rng(0).shuffle(hits)
    rows = rows_of("alibi", {0: {1: hits, 2: hits, 4: hits}})
    _, pt = board_of(rows)
    e = pt.loc["alibi"]
    assert e.n_seeds == 1 and e.ci_method == "sampling only (1 seed)"
    p = k / n
    z = 1.959963984540054
    center = (p + z * z / (2 * n)) / (1 + z * z / n)  # Wilson score interval
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert e.in_dist == pytest.approx(0.3)
    assert e.in_dist_ci_low == pytest.approx(center - half, abs=0.01)
    assert e.in_dist_ci_high == pytest.approx(center + half, abs=0.01)


def test_not_learned_is_flagged_excluded_from_ranks_and_still_printed():
    good = rows_of("alibi", bernoulli({1: 0.97, 2: 0.3, 4: 0.2}, rng_seed=1))
    bad = rows_of("fire", bernoulli({1: 0.5, 2: 0.9, 4: 0.9}, rng_seed=2))  # "extrapolates" but never learned
    board, pt = board_of(good + bad)
    assert bool(pt.loc["fire", "not_learned"]) and math.isnan(pt.loc["fire", "rank"])
    assert pt.loc["alibi", "rank"] == 1 and not pt.loc["alibi", "not_learned"]
    md = leaderboard_markdown(board)
    line = next(x for x in md.splitlines() if "fire (not learned)" in x)
    assert line.split("|")[1].strip() == "n/l"
    assert "fire (not learned)" in summary_markdown(board)
    overall = board.overall.set_index("encoding")
    assert overall.loc["fire", "n_tasks"] == 0 and math.isnan(overall.loc["fire", "rank"])


def test_adding_a_rope_variant_never_moves_another_encodings_rank():
    a = rows_of("alibi", bernoulli({1: 0.97, 2: 0.6, 4: 0.5}, rng_seed=1))
    r = rows_of("rope", bernoulli({1: 0.97, 2: 0.2, 4: 0.1}, rng_seed=2))
    y = rows_of("rope", bernoulli({1: 0.97, 2: 0.95, 4: 0.9}, rng_seed=3), variant="yarn")
    _, without = board_of(a + r)
    board, with_variant = board_of(a + r + y)
    assert with_variant.loc[["alibi", "rope"], "rank"].tolist() == without.loc[["alibi", "rope"], "rank"].tolist() == [1, 2]
    assert math.isnan(with_variant.loc["rope+yarn", "rank"])  # not in the main table
    assert (with_variant.loc["rope+yarn", "variant_rank"], with_variant.loc["rope", "variant_rank"]) == (1, 2)
    assert math.isnan(with_variant.loc["alibi", "variant_rank"])
    assert board.overall["encoding"].tolist() == ["alibi", "rope"]  # one row per trained model


def test_retention_uses_the_chance_baseline_and_has_an_interval():
    model = rows_of("alibi", bernoulli({1: 1.0, 2: 0.55, 4: 0.55}, rng_seed=1))
    chance = rows_of("baseline:chance", {s: {r: np.full(64, 0.1) for r in (1, 2, 4)} for s in (0, 1, 2)})
    _, pt = board_of(model + chance)
    e = pt.loc["alibi"]
    assert e.retention == pytest.approx((e.past_train_mean - 0.1) / (1.0 - 0.1))
    assert e.retention_ci_low < e.retention < e.retention_ci_high
    assert pt.loc["baseline:chance", "kind"] == "baseline" and math.isnan(pt.loc["baseline:chance", "rank"])


def test_perplexity_not_learned_against_the_unigram_baseline():
    def lm_rows(encoding, ppl):
        nll = math.log(ppl)
        return [{"task": "lm", "encoding": encoding, "variant": "none", "train_len": 32, "eval_len": 32 * r,
                 "ratio": float(r), "metric": "perplexity", "value": ppl, "seed": 0, "n_samples": 4,
                 "sample_scores": encode_samples([nll * 8] * 4, [8.0] * 4)} for r in (1, 2)]

    _, pt = board_of(lm_rows("alibi", 5.0) + lm_rows("nope", 30.0) + lm_rows("baseline:unigram", 20.0))
    assert not pt.loc["alibi", "not_learned"] and bool(pt.loc["nope", "not_learned"])
    assert pt.loc["alibi", "retention"] == pytest.approx(1.0)


def test_intervals_are_reproducible():
    rows = rows_of("alibi", bernoulli({1: 0.97, 2: 0.5, 4: 0.4}))
    first = leaderboard(load_results(rows)).per_task
    pd.testing.assert_frame_equal(first, leaderboard(load_results(rows)).per_task)


# --- per-sample scores: stored form, evaluation, baselines ----------------------------------------


def test_sample_scores_encode_and_decode():
    text = encode_samples([1.0, 0.0, 13.0, 2.5], [1.0, 1.0, 16.0, 3.0])
    assert text == "1 0 13/16 2.5/3"
    assert decode_samples(text) == ([1.0, 0.0, 13.0, 2.5], [1.0, 1.0, 16.0, 3.0])
    num, den = intervals.decode(text)
    assert num.tolist() == [1.0, 0.0, 13.0, 2.5] and den.tolist() == [1.0, 1.0, 16.0, 3.0]
    assert intervals.decode("") is None
    # a row may carry a list: it is stored as the compact string
    df = load_results([{"task": "copy", "encoding": "rope", "variant": "none", "train_len": 4, "eval_len": 4,
                        "metric": "exact_match", "value": 0.5, "sample_scores": [1, 0, [3, 4]]}])
    assert df["sample_scores"].tolist() == ["1 0 3/4"]


def test_sample_scores_round_trip_through_results_csv(tmp_path):
    rows = rows_of("alibi", bernoulli({1: 0.97, 2: 0.5, 4: 0.4})) + rows_of("rope", bernoulli({1: 0.9, 2: 0.1, 4: 0.1}))
    write_report(rows, tmp_path / "a", plots=False)
    pd.testing.assert_frame_equal(load_results(tmp_path / "a" / "results.csv"), load_results(rows), check_exact=True)
    write_report(tmp_path / "a" / "results.csv", tmp_path / "b", plots=False)
    for name in ("leaderboard.csv", "leaderboard_wide.csv", "leaderboard.md", "summary.md"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text(), name


@pytest.mark.parametrize("task_name", ["copy", "lm"])
def test_evaluate_length_sample_scores_rebuild_every_metric(task_name):
    task = build_task(task_name)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2, ff_mult=2,
                                    encoding="rope", max_len=task.seq_len(16)))
    values, n, scores = evaluate_length(model, task, 8 if task_name == "copy" else 16, samples=10,
                                        tokens_per_batch=64, seed=3, device=torch.device("cpu"))
    assert n == 10
    for metric, value in values.items():
        num, den = decode_samples(scores[metric])
        assert len(num) == 10
        assert metric_transform(metric, sum(num) / sum(den)) == pytest.approx(value, rel=1e-6)
    if task_name == "lm":
        assert values["bits_per_byte"] == pytest.approx(values["nll"] / math.log(2))


def test_baselines_are_scored_on_the_evaluation_samples():
    task = build_task("copy")
    rows = baseline_rows(task, 8, [1, 2], samples=12, tokens_per_batch=64, seed=5, base={"task": "copy", "seed": 5})
    by = {(r["encoding"], r["ratio"], r["metric"]): r for r in rows}
    assert by[("baseline:chance", 1.0, "token_accuracy")]["value"] == pytest.approx(1 / 8)
    assert by[("baseline:chance", 2.0, "exact_match")]["value"] == pytest.approx((1 / 8) ** 16)
    # repeat-previous by hand on the same batches
    hits = [((b.inputs == b.targets) | ~b.loss_mask).all(1) for b in eval_batches(task, 8, samples=12, tokens_per_batch=64, seed=5)]
    expected = torch.cat(hits).double().mean().item()
    assert by[("baseline:repeat-previous", 1.0, "exact_match")]["value"] == pytest.approx(expected)
    assert all(r["variant"] == "none" and r["n_samples"] == 12 for r in rows)
    lm = build_task("lm")
    lm_rows = baseline_rows(lm, 32, [1], samples=4, tokens_per_batch=256, seed=0, base={"task": "lm", "seed": 0})
    ppl = {r["encoding"]: r["value"] for r in lm_rows if r["metric"] == "perplexity"}
    assert ppl["baseline:chance"] == pytest.approx(256.0) and 1.0 < ppl["baseline:unigram"] < 256.0


def test_a_new_baseline_is_one_registration(monkeypatch):
    """A baseline is a `register_baseline` call naming its task kinds: its rows follow on every task
    of those kinds, after the kind's earlier baselines, and on no other kind."""
    from lenbench import baselines

    monkeypatch.setattr(baselines, "_REGISTRY", list(baselines._REGISTRY))

    @baselines.register_baseline("always-first", kinds=("sequence",))
    def _first(task, batch):
        return baselines.sample_sums(batch.targets == batch.targets[:, :1], None, batch.loss_mask)

    with pytest.raises(ValueError, match="baseline 'always-first' is registered twice for task kind 'sequence'"):
        baselines.register_baseline("always-first", kinds=("sequence",))(_first)
    assert baselines.baseline_names("sequence") == ("chance", "repeat-previous", "always-first")
    assert baselines.baseline_names("lm") == ("chance", "unigram")
    rows = baseline_rows(build_task("copy"), 4, [1], samples=4, tokens_per_batch=64, seed=0, base={"task": "copy"})
    assert [r["encoding"] for r in rows if r["metric"] == "exact_match"] == [
        "baseline:chance", "baseline:repeat-previous", "baseline:always-first", "baseline:most-frequent"]  # the task's own last


def test_leaderboard_suites_run_at_least_three_seeds():
    from lenbench.config import load_suite

    assert list(load_suite("quick").seeds) == [0, 1, 2]
    for name in ("standard", "paper"):
        assert len(set(load_suite(name).seeds)) >= 3, name


def test_baseline_rows_shared_by_cells_keep_one_copy_whatever_the_order():
    def cell(cell_id, encoding):
        base = {"schema_version": 3, "cell_id": cell_id, "suite": "s", "task": "copy", "train_len": 4, "seed": 0,
                "timestamp": cell_id}
        model = {**base, "encoding": encoding, "variant": "none", "eval_len": 4, "ratio": 1.0, "metric": "exact_match",
                 "value": 1.0, "sample_scores": "1 1"}
        return [model, *baseline_rows(build_task("copy"), 4, [1], samples=2, tokens_per_batch=64, seed=0, base=base)]

    a, b = cell("aaa", "rope"), cell("bbb", "alibi")
    forward, backward = load_results(a + b), load_results(b + a)
    pd.testing.assert_frame_equal(forward, backward)
    assert (forward.loc[forward["encoding"].str.startswith("baseline:"), "cell_id"] == "bbb").all()
    assert len(forward) == 2 + 9  # two models, three baselines × three metrics


def test_seed_to_seed_variation_widens_the_interval():
    # three seeds that disagree (0.5, 0.7, 0.9 at 1x) versus three that agree (0.7 each), same sample count
    rng = np.random.default_rng(7)

    def hits(p, n=200):
        h = np.zeros(n)
        h[: round(p * n)] = 1.0
        return rng.permutation(h)

    disagree = {s: {r: hits(p) for r in (1, 2, 4)} for s, p in zip((0, 1, 2), (0.5, 0.7, 0.9), strict=True)}
    agree = {s: {r: hits(0.7) for r in (1, 2, 4)} for s in (0, 1, 2)}
    _, pt = board_of(rows_of("alibi", disagree) + rows_of("rope", agree))
    width = {e: pt.loc[e, "in_dist_ci_high"] - pt.loc[e, "in_dist_ci_low"] for e in ("alibi", "rope")}
    assert pt.loc["alibi", "in_dist"] == pytest.approx(0.7) == pt.loc["rope", "in_dist"]
    assert pt.loc["alibi", "ci_method"] == "t over seeds, sampling-variance floor"
    assert width["alibi"] > 2 * width["rope"] > 0


def test_the_summary_shows_the_boards_own_ratios():
    """summary.md shows the board's own ratios: every one when they are few (an 8× suite keeps its 8×, a
    1-16× one its 8×), else five spread over them, the shortest and the longest always in."""
    for ratios, want in (((1, 2, 4, 8), ["1×", "2×", "4×", "8×"]), ((1, 2, 4, 8, 32), ["1×", "2×", "4×", "8×", "32×"]),
                         ((1, 3), ["1×", "3×"]), ((1, 1.5, 2, 3, 4, 6, 8, 16), ["1×", "2×", "4×", "6×", "16×"]),
                         ((1, 2, 4, 8, 16, 32), ["1×", "2×", "4×", "16×", "32×"])):
        p = {r: 0.97 if r == 1 else 0.5 for r in ratios}
        board, _ = board_of(rows_of("alibi", bernoulli(p), ratios=ratios))
        header = next(line for line in summary_markdown(board).splitlines() if line.startswith("| rank"))
        assert [c.split()[-1] for c in header.split("|")[3:-3]] == want


@pytest.mark.parametrize("ratios", [(1, 2, 4, 8, 16), (1, 1.125, 1.25, 1.5, 1.75, 2, 3, 4, 8), (1, 7 / 6, 4 / 3, 2, 8)])
def test_the_area_past_train_is_the_log_length_integral_of_the_linear_interpolant(ratios):
    """past_area_weights against an independent float64 integral: the piecewise-linear curve through the
    scores past 1× (flat from 1× to the first ratio past it), integrated over log2(ratio) on a fine
    grid, divided by log2 of the longest ratio; the weights sum to 1 and leave 1× out."""
    r = np.array(ratios, dtype=float)
    w = stats.past_area_weights(r)
    assert w[0] == 0 and w.sum() == pytest.approx(1.0) and (w[1:] > 0).all()
    rng = np.random.default_rng(0)
    for _ in range(5):
        score = rng.random(len(r))
        x = np.log2(r)
        y = np.concatenate([[score[1]], score[1:]])  # the 1x end valued at the first past ratio
        fine = np.linspace(0.0, x[-1], 200_001)
        integral = np.sum(np.diff(fine) * (np.interp(fine[1:], x, y) + np.interp(fine[:-1], x, y)) / 2) / x[-1]
        assert float((w * score).sum()) == pytest.approx(integral, abs=1e-9)


def test_the_effective_length_stops_where_the_entry_falls_to_its_floor_or_below_90_percent():
    """RULER's effective length: the longest ratio up to which every score keeps 90 % of the entry's own
    1× score and stays above the best trivial baseline at that ratio."""
    ratios = (1, 1.25, 1.5, 2, 4)
    flat = {s: {r: np.full(64, p) for r, p in zip(ratios, (1.0, 0.95, 0.92, 0.91, 0.5), strict=True)} for s in (0, 1, 2)}
    model = rows_of("alibi", flat, ratios=ratios)
    high = rows_of("baseline:most-frequent", {s: {r: np.full(64, p) for r, p in zip(ratios, (0.2, 0.2, 0.93, 0.2, 0.2),
                                                                                       strict=True)} for s in (0, 1, 2)},
                   ratios=ratios)
    _, alone = board_of(model)
    assert alone.loc["alibi", "effective_length"] == 2.0  # 0.91 >= 0.9, 0.5 < 0.9
    _, pt = board_of(model + high)
    assert pt.loc["alibi", "effective_length"] == 1.25  # at 1.5x the baseline (0.93) is above the model (0.92)
    assert math.isnan(pt.loc["alibi", "effective_length_ci_low"])  # discrete: no interval
    over = rows_of("baseline:most-frequent", {s: {r: np.full(64, 1.0) for r in ratios} for s in (0, 1, 2)}, ratios=ratios)
    _, floor = board_of(model + over)
    assert math.isnan(floor.loc["alibi", "effective_length"])  # not above the baseline even at 1x


def test_the_floor_margin_and_the_ranks_are_on_the_area_past_train():
    """A baseline whose plain mean past train beats the model's but whose area does not is not its floor
    margin's better: the margin, like the rank, is taken on the area (each doubling weighs the same)."""
    ratios = (1, 1.25, 1.5, 1.75, 2, 4)
    model = rows_of("alibi", bernoulli({1: 1.0, 1.25: 0.1, 1.5: 0.1, 1.75: 0.1, 2: 1.0, 4: 1.0}, rng_seed=3), ratios=ratios)
    base = rows_of("baseline:most-frequent", {s: {r: np.full(64, 0.5) for r in ratios} for s in (0, 1, 2)},
                   ratios=ratios)
    _, pt = board_of(model + base)
    e = pt.loc["alibi"]
    assert e.past_train_mean < 0.5 < e.past_train_area  # the four dense points pull the mean down
    w = stats.past_area_weights(np.array(ratios, dtype=float))
    assert e.margin == pytest.approx(e.past_train_area - float((w * 0.5).sum()))
    assert e.above_floor and e["rank"] == 1


def test_an_lm_board_ranks_by_degradation_and_gates_on_the_level():
    """Perplexity declares ranks_on="degradation": an entry that fits better at 1× but degrades past
    training ranks below one that holds its level, though its perplexity past training is lower; an
    entry whose level past training does not beat the unigram baseline is at the floor, whatever its
    degradation (a context-free model degrades by exactly 0)."""
    rng = np.random.default_rng(5)
    base = {s: rng.uniform(1.5, 2.5, 64) for s in (0, 1, 2)}  # per-window nll of each seed at 1x

    def lm(encoding, level, growth):
        """nll = base + level + growth · log2(ratio) on the same windows at every ratio."""
        out = []
        for s in (0, 1, 2):
            for r in (1, 2, 4, 8):
                w = base[s] + level + growth * np.log2(r) + rng.normal(0, 0.01, 64)
                out.append({"task": "lm", "encoding": encoding, "variant": "none", "train_len": 32, "eval_len": 32 * r,
                            "ratio": float(r), "metric": "perplexity", "value": float(np.exp(w.mean())), "seed": s,
                            "n_samples": 64, "sample_scores": encode_samples(list(w * 8), [8.0] * 64)})
        return out

    rows = lm("alibi", 0.0, 0.0) + lm("rope", -0.3, 0.1) + lm("nope", 0.6, 0.0) + lm("baseline:unigram", 0.6, 0.0)
    _, pt = board_of(rows)
    rope, alibi, nope = pt.loc["rope"], pt.loc["alibi"], pt.loc["nope"]
    assert stats.rank_statistic("perplexity") == "degradation" and stats.rank_statistic("exact_match") == stats.AREA
    assert rope.past_train_area < alibi.past_train_area  # rope's level stays lower past training ...
    w = stats.past_area_weights(np.array([1, 2, 4, 8.0]))
    assert rope.degradation == pytest.approx(0.1 * float((w * np.log2([1, 2, 4, 8.0])).sum()), abs=0.01)
    assert abs(alibi.degradation) < 0.01
    assert (alibi["rank"], rope["rank"]) == (1, 2)  # ... but it degrades, so it ranks below alibi
    assert not nope.above_floor and math.isnan(nope["rank"])  # degrades by 0, yet no better than the unigram
    md = leaderboard_markdown(leaderboard(load_results(rows)))
    assert "Ranked by the degradation" in md


def test_an_lm_board_shows_the_context_gain_per_ratio():
    rows = []
    for s in (0, 1, 2):
        for r in (1, 2, 4):
            for metric, value in (("perplexity", 5.0 + s * 0.1), ("context_gain", 1.0 + 0.1 * r + 0.01 * s)):
                if metric == "context_gain" and r == 1:
                    continue
                rows.append({"task": "lm", "encoding": "rope", "variant": "none", "train_len": 32, "eval_len": 32 * r,
                             "ratio": float(r), "metric": metric, "value": value, "seed": s, "n_samples": 16})
    board = leaderboard(load_results(rows))
    cg = board.context.set_index("ratio")
    assert list(cg.index) == [2.0, 4.0] and cg.at[2.0, "mean"] == pytest.approx(1.21)
    assert cg.at[2.0, "ci_low"] < 1.21 < cg.at[2.0, "ci_high"]  # a t interval over the three seeds
    md = leaderboard_markdown(board)
    assert "context_gain ↑ by length ratio" in md and "| rope | 1.210 ±" in " ".join(md.split())
