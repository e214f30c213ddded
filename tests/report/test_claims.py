"""The papers' claims (lenbench.report.claims): judged by the board's paired test over seeds with one
Holm family, on the level and (lm) the degradation; the regime each claim states matches the
catalog's geometry and the encodings' defaults."""

import math
import re

import numpy as np
import pytest
from lenbench_testing import CATALOG_DRAFT

from lenbench.config import load_suite
from lenbench.evaluate import encode_samples
from lenbench.report import claims
from lenbench.report.rows import load_results
from lenbench.report.tables import leaderboard

SEEDS = (0, 1, 2)


def lm_rows(encoding: str, slope: float, level: float, noise: float, rng_seed: int) -> list[dict]:
    """Perplexity rows of one encoding: window nll = base + level + (slope + ε_s) · log2(ratio) + δ_s, with
    per-seed ε_s, δ_s ~ N(0, noise): training noise in the level and in the degradation."""
    rng = np.random.default_rng(rng_seed)
    base = np.random.default_rng(99).uniform(1.5, 2.5, 16)  # the windows, shared by every encoding and ratio
    rows = []
    for seed in SEEDS:
        shift, tilt = rng.normal(0, noise, 2)
        for ratio in (1, 2, 4):
            nll = base + level + (slope + tilt) * math.log2(ratio) + shift
            rows.append({"task": "lm", "encoding": encoding, "variant": "none", "train_len": 64,
                         "eval_len": 64 * ratio, "ratio": float(ratio), "metric": "perplexity",
                         "value": float(np.exp(nll.mean())), "seed": seed, "n_samples": 16,
                         "sample_scores": encode_samples(list(nll * 64), [64.0] * 16)})
    return rows


def unigram() -> list[dict]:
    return lm_rows("baseline:unigram", 0.0, 1.5, 0.0, 0)


CLAIM = claims.Claim("X", "Someone 2026", "x holds up", ("lm",), "alibi", ("rope",))


def verdicts(rows) -> str:
    (_, [sentence]), = claims.judge(leaderboard(load_results(rows + unigram())), [CLAIM])
    return sentence


def test_a_claim_the_data_support_agrees_on_level_and_degradation():
    text = verdicts(lm_rows("alibi", 0.0, 0.0, 0.01, 1) + lm_rows("rope", 0.5, 0.0, 0.01, 2))
    assert text.count("**agrees**") == 2 and "degradation" in text


def test_the_reverse_claim_disagrees():
    text = verdicts(lm_rows("alibi", 0.5, 0.0, 0.01, 1) + lm_rows("rope", 0.0, 0.0, 0.01, 2))
    assert text.count("**disagrees**") == 2


def test_a_difference_inside_the_seed_noise_is_not_separated():
    text = verdicts(lm_rows("alibi", 0.0, 0.0, 0.3, 1) + lm_rows("rope", 0.05, 0.05, 0.3, 2))
    assert text.count("**not separated**") == 2


def test_a_rank_is_quoted_beside_the_statistic_its_table_ranks_on():
    """lm ranks on the degradation: the ranks sit in the degradation phrase, as the table's, and the
    area phrase carries none (a rank beside the area would read as the area's)."""
    board = leaderboard(load_results(lm_rows("alibi", 0.0, 0.0, 0.01, 1) + lm_rows("rope", 0.5, 0.0, 0.01, 2)
                                     + unigram()))
    t = board.per_task[board.per_task["task"] == "lm"].set_index("encoding")
    assert set(t["ranked_on"]) == {"degradation"}
    (_, [sentence]), = claims.judge(board, [CLAIM])
    area, degradation = sentence.split("; degradation")
    assert "(rank" not in area, area
    assert re.search(rf"alibi [0-9.]+ ± [0-9.]+ \(rank {int(t.at['alibi', 'rank'])}\), A − B", degradation), degradation
    assert f"rope (rank {int(t.at['rope', 'rank'])}) " in degradation, degradation
    assert t.at["alibi", "rank"] < t.at["rope", "rank"]


def test_a_claim_on_an_entry_that_did_not_learn_cannot_tell():
    text = verdicts(lm_rows("alibi", 0.0, 2.0, 0.01, 1) + lm_rows("rope", 0.5, 0.0, 0.01, 2))  # alibi worse than unigram
    assert "**cannot tell**" in text and "not learned" in text


def test_every_comparison_of_every_claim_is_one_holm_family():
    """A degradation supported at p ≈ 0.02 agrees in a family of two (its claim's level and degradation:
    Holm's first step is 0.05 / 2), and is not separated once four more claims share the family (0.05 / 10)."""
    rows = lm_rows("alibi", 0.0, 0.0, 0.05, 4) + lm_rows("rope", 0.15, 0.0, 0.05, 5)
    board = leaderboard(load_results(rows + unigram()))
    diff = board.boards[("lm", 64)].seed_stats[("rope", "none")]["degradation"] - \
        board.boards[("lm", 64)].seed_stats[("alibi", "none")]["degradation"]
    p = claims.stats.estimate(diff).p_two_sided()
    assert 0.05 / 10 < p < 0.05 / 2
    alone = claims.judge(board, [claims.Claim("X", "", "", ("lm",), "alibi", ("rope",))])
    many = claims.judge(board, [claims.Claim("X", "", "", ("lm",), "alibi", ("rope",))] * 5)
    assert "degradation" in alone[0][1][0] and alone[0][1][0].endswith("**agrees**.")
    assert all(s[1][0].endswith("**not separated**.") for s in many)


@pytest.mark.parametrize("claim", claims.CLAIMS, ids=lambda c: c.label)
def test_every_claim_names_entries_of_the_catalog(claim):
    """Each entry a claim names is a series of the catalog: an encoding's label, or label+variant for
    RoPE's variants (a claim may set a main-table entry against a variant, e.g. PoPE against YaRN)."""
    suite = load_suite(CATALOG_DRAFT)
    labels = {e.label or e.name for e in suite.encodings}
    series = labels | {f"{label}+{v.key}" for label in labels for v in suite.variants}
    tasks = {t.key for t in suite.tasks}
    assert set(claim.tasks) <= tasks
    assert {claim.a, *claim.bs} <= series
    if claim.table == "variant_rank":
        assert "+" in claim.a, "a variant-table claim's A is a variant"
