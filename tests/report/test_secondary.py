"""The secondary metric of a board (lenbench.report.secondary): shown beside the primary; ranking
past the training length when no learned entry is above the floor on the primary."""

import math

import numpy as np
import pandas as pd
import pytest

from lenbench import metrics
from lenbench.evaluate import encode_samples
from lenbench.report import secondary
from lenbench.report.build import write_report
from lenbench.report.markdown import leaderboard_markdown
from lenbench.report.rows import load_results
from lenbench.report.stats import past_area_weights
from lenbench.report.tables import leaderboard

PROVENANCE = {"lenbench_version": "0.1.0", "git_sha": "0123abcd", "torch_version": "2.13.0+cpu", "device": "cpu",
              "dtype": "float32", "timestamp": "2026-01-01T00:00:00+00:00", "train_seconds": 1.0}
N, TOKENS = 64, 8  # samples per length, scored tokens per sample


def rows_of(encoding: str, exact: dict, tokens: dict, seeds=(0, 1, 2), rng_seed=0) -> list[dict]:
    """exact_match and token_accuracy rows of one encoding; `exact` / `tokens`: {ratio: probability}.
    A sample's tokens are right with the token probability, and all right with the exact one."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for seed in seeds:
        for ratio in exact:
            hits = (rng.random(N) < exact[ratio]).astype(float)
            right = np.where(hits == 1, TOKENS, rng.binomial(TOKENS - 1, tokens[ratio], N)).astype(float)
            for metric, num, den in (("exact_match", hits, np.ones(N)), ("token_accuracy", right, np.full(N, TOKENS))):
                rows.append({"schema_version": 3, "cell_id": f"{encoding}-{seed}", "suite": "synthetic", "task": "copy",
                             "encoding": encoding, "variant": "none", "train_len": 8, "eval_len": int(8 * ratio),
                             "ratio": float(ratio), "metric": metric, "value": float(num.sum() / den.sum()),
                             "n_samples": N, "seed": seed, "higher_is_better": True, "status": "ok", "error": "",
                             **PROVENANCE, "sample_scores": encode_samples(list(num), list(den))})
    return rows


LEARNED_AT_FLOOR = {  # every one learned at 1x, exact match 0 past it; token accuracy apart past it
    "alibi": ({1: 1.0, 2: 0.0, 4: 0.0}, {1: 0.99, 2: 0.80, 4: 0.70}),
    "t5": ({1: 1.0, 2: 0.0, 4: 0.0}, {1: 0.99, 2: 0.50, 4: 0.40}),
    "rope": ({1: 1.0, 2: 0.0, 4: 0.0}, {1: 0.99, 2: 0.20, 4: 0.10}),
    "nope": ({1: 0.30, 2: 0.0, 4: 0.0}, {1: 0.60, 2: 0.90, 4: 0.90}),  # not learned: unranked whatever its tokens
}


def board(spec: dict):
    rows = [r for i, (enc, (ex, tok)) in enumerate(spec.items()) for r in rows_of(enc, ex, tok, rng_seed=i)]
    lb = leaderboard(load_results(rows))
    return lb, lb.per_task[lb.per_task["kind"] == "model"].set_index("encoding")


def test_exact_match_at_its_floor_ranks_by_token_accuracy():
    lb, pt = board(LEARNED_AT_FLOOR)
    assert set(pt["ranked_by"]) == {"token_accuracy"} and set(pt["secondary_metric"]) == {"token_accuracy"}
    assert (pt["past_train_mean"] == 0).all()  # the primary cannot separate them
    assert [pt.at[e, "rank"] for e in ("alibi", "t5", "rope")] == [1.0, 2.0, 3.0]
    assert math.isnan(pt.at["nope", "rank"]) and pt.at["nope", "not_learned"]  # learned is still exact match's verdict
    # the secondary statistics are token accuracy's own: its area past train, within its interval
    tok = load_results([r for i, (e, (x, t)) in enumerate(LEARNED_AT_FLOOR.items()) for r in rows_of(e, x, t, rng_seed=i)])
    alibi = tok[(tok["encoding"] == "alibi") & (tok["metric"] == "token_accuracy")].groupby("ratio")["value"].mean()
    weights = past_area_weights(alibi.index.to_numpy(dtype=float))
    assert pt.at["alibi", "secondary_past_train_area"] == pytest.approx(float((alibi.to_numpy() * weights).sum()))
    assert pt.at["alibi", "secondary_past_train_area_ci_low"] < pt.at["alibi", "secondary_past_train_area"] \
        < pt.at["alibi", "secondary_past_train_area_ci_high"]
    md = leaderboard_markdown(lb)
    assert "**Ranked by token_accuracy past the training length: on exact_match no learned entry is above the floor" in md
    assert (pt.loc[["alibi", "t5", "rope"], "floor_baseline"] == "worst score").all()  # no baselines: the worst score
    assert metrics.get_metric("token_accuracy").why in md
    assert "past train token_accuracy ↑" in md


def test_a_primary_off_its_floor_keeps_its_own_ranks():
    spec = dict(LEARNED_AT_FLOOR)
    spec["rope"] = ({1: 1.0, 2: 0.5, 4: 0.4}, {1: 0.99, 2: 0.2, 4: 0.1})  # exact match past 1x, low token accuracy
    lb, pt = board(spec)
    assert set(pt["ranked_by"]) == {"exact_match"}
    assert pt.at["rope", "rank"] == 1.0  # exact match's order, not token accuracy's
    assert not pt.at["alibi", "above_floor"] and math.isnan(pt.at["alibi", "rank"])  # at exact match's floor
    assert "Ranked by token_accuracy" not in leaderboard_markdown(lb)
    assert "past train token_accuracy ↑" in leaderboard_markdown(lb)  # shown all the same


def entries(verdicts: list[str], complete: list[bool], above: list[bool]) -> pd.DataFrame:
    return pd.DataFrame({"kind": "model", "learnability": verdicts, "complete": complete, "above_floor": above})


@pytest.mark.parametrize(("verdicts", "complete", "above", "n"), [
    (["learned", "learned"], [True, True], [True, True], 2),
    (["learned", "not learned"], [True, True], [True, True], 1),   # a not-learned entry is never ranked
    (["learned", "uncertain"], [True, True], [True, True], 1),     # nor an uncertain one
    (["learned", "learned"], [True, False], [True, True], 1),      # nor an incomplete one
    (["learned", "learned"], [True, True], [False, True], 1),      # nor one at the floor
])
def test_only_learned_complete_entries_above_the_floor_are_ranked(verdicts, complete, above, n):
    assert secondary.n_above_floor(entries(verdicts, complete, above)) == n


def test_the_csv_holds_the_secondary_rows_and_ranked_by(tmp_path):
    rows = [r for i, (e, (x, t)) in enumerate(LEARNED_AT_FLOOR.items()) for r in rows_of(e, x, t, rng_seed=i)]
    write_report(load_results(rows), tmp_path, plots=False)
    long = pd.read_csv(tmp_path / "leaderboard.csv", keep_default_na=False)
    board_rows = long[long["task"] == "copy"]
    assert set(board_rows["ranked_by"]) == {"token_accuracy"}
    sec = board_rows[(board_rows["metric"] == "token_accuracy") & (board_rows["encoding"] == "alibi")]
    assert sorted(sec["statistic"]) == ["in_dist", "margin over worst score", "past_train_area"]
    html = (tmp_path / "index.html").read_text()
    assert "Ranked by token_accuracy past the training length" in html


def test_each_kind_declares_its_secondary_with_a_reason():
    assert dict(metrics.SECONDARY_METRIC) == {"sequence": "token_accuracy", "lm": "bits_per_byte"}
    assert metrics.secondary_metric("exact_match") == "token_accuracy"
    assert metrics.secondary_metric("perplexity") == "bits_per_byte"
    with pytest.raises(ValueError, match="states why"):
        metrics.register_metric("toy_secondary", higher_is_better=True, secondary_for=("toy",))
    with pytest.raises(ValueError, match="already has the secondary metric 'token_accuracy'"):
        metrics.register_metric("toy_secondary", higher_is_better=True, secondary_for=("sequence",), why="x")
    assert "toy_secondary" not in metrics.METRICS
