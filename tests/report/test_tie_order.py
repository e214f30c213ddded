"""Entries that share a rank are listed by the score the rank came from, best first, then by name
(`lenbench.report.tables.in_table_order`, `ranked_score`): on an lm board by the degradation (what
perplexity ranks on), not by the perplexity level nor by name; on an exact-match board by the area
past train, higher first; in an encoding's variant table likewise. Boards constructed to tie."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from lenbench.evaluate import encode_samples
from lenbench.report import stats
from lenbench.report.markdown import leaderboard_markdown, variant_table
from lenbench.report.rows import encoding_sort_key, load_results, variant_sort_key
from lenbench.report.tables import leaderboard, ranked_score

SEEDS = (0, 1, 2)
RATIOS = (1, 2, 4, 8)


def lm_rows(encoding, level, growth, spread, variant="none"):
    """Per-window nll = base + level + (growth + the seed's offset) · log2(ratio). The offsets,
    ``spread`` = (a, b) → a·(-1, 0, 1) + b·(1, -2, 1), average to 0 over the seeds, so the mean
    growth is `growth` exactly, and differ between entries far more than their growths do: no pair
    separates, every rank is shared."""
    offsets = spread[0] * np.array([-1.0, 0.0, 1.0]) + spread[1] * np.array([1.0, -2.0, 1.0])
    noise = np.random.default_rng(len(encoding) + 7 * len(variant))
    out = []
    for s in SEEDS:
        base = np.random.default_rng(s).uniform(1.5, 2.5, 32)
        for r in RATIOS:
            w = base + level + (growth + offsets[s]) * np.log2(r) + noise.normal(0, 0.01, 32)
            out.append({"task": "lm", "encoding": encoding, "variant": variant, "train_len": 32, "eval_len": 32 * r,
                        "ratio": float(r), "metric": "perplexity", "value": float(np.exp(w.mean())), "seed": s,
                        "n_samples": 32, "sample_scores": encode_samples(list(w * 8), [8.0] * 32)})
    return out


@pytest.fixture(scope="module")
def lm_board():
    # level (the fit at 1x) and growth past training: the level order (nope, alibi, kerple, rope) and
    # the name order differ from the degradation order (kerple, alibi, rope, nope); among rope's
    # variants the level order (ntk, none, yarn) is the degradation order reversed
    rows = (lm_rows("alibi", 0.1, 0.04, (0.3, 0.0)) + lm_rows("rope", 0.3, 0.07, (0.0, 0.15))
            + lm_rows("nope", 0.0, 0.10, (-0.3, 0.0)) + lm_rows("kerple", 0.2, 0.01, (0.0, -0.15))
            + lm_rows("rope", 0.0, 0.12, (0.2, 0.1), "ntk") + lm_rows("rope", 0.6, 0.02, (-0.2, 0.1), "yarn")
            + lm_rows("baseline:unigram", 6.0, 0.0, (0.0, 0.0)) + lm_rows("baseline:chance", 8.0, 0.0, (0.0, 0.0)))
    return leaderboard(load_results(rows))


def models(board) -> pd.DataFrame:
    pt = board.per_task
    return pt[pt["kind"] == "model"]


def test_a_shared_rank_on_an_lm_board_lists_by_degradation(lm_board):
    table = models(lm_board)
    assert set(table["ranked_on"]) == {"degradation"} and table["rank"].nunique() == 1  # one tie, all ranked
    shown = list(table["encoding"])
    by_degradation = list(table.sort_values("degradation")["encoding"])
    assert shown == by_degradation
    # the board is built so that neither the level nor the name gives that order
    assert shown != list(table.sort_values(stats.AREA)["encoding"])
    assert shown != sorted(shown, key=encoding_sort_key)


def test_baselines_list_by_their_level_the_floor_they_set(lm_board):
    """Both baselines degrade by 0 (context-free): they read by the area of their perplexity, the
    floor's statistic, the best (lowest) first, not by name."""
    pt = lm_board.per_task
    shown = list(pt.loc[pt["kind"] == "baseline", "encoding"])
    assert shown == ["baseline:unigram", "baseline:chance"] != sorted(shown)


def test_the_markdown_shows_the_tie_in_that_order(lm_board):
    md = leaderboard_markdown(lm_board)
    main = md.split("## lm", 1)[1].split("\n\n| rank")[1].split("\n\n")[0]
    names = [line.split("|")[2].strip() for line in main.splitlines()[2:]]  # after header and rule
    assert names[:4] == list(models(lm_board)["encoding"])
    assert all(re.fullmatch(r"=1", line.split("|")[1].strip()) for line in main.splitlines()[2:6])


def test_a_variant_table_tie_lists_by_degradation(lm_board):
    pt = lm_board.per_task
    table = variant_table(pt[pt["task"] == "lm"], "rope")
    assert table["variant_rank"].nunique() == 1 and len(table) == 3
    assert list(table["variant"]) == list(table.sort_values("degradation")["variant"])
    assert list(table["variant"]) != sorted(table["variant"], key=variant_sort_key)
    assert list(table["variant"]) != list(table.sort_values(stats.AREA)["variant"])


def test_a_shared_rank_on_an_exact_match_board_lists_higher_area_first():
    from test_results import row

    # seeds that disagree (zero-mean offsets, different per entry): nothing separates; the area order
    # (alibi, rope, nope) is not the name order
    curves = {"nope": ((1.0, 0.50, 0.30), (0.1, 0.0)), "rope": ((1.0, 0.60, 0.40), (0.0, 0.06)),
              "alibi": ((1.0, 0.70, 0.45), (-0.1, 0.0))}
    rows = []
    for e, (values, (a, b)) in curves.items():
        offsets = a * np.array([-1.0, 0.0, 1.0]) + b * np.array([1.0, -2.0, 1.0])
        rows += [row("copy", e, "none", 10, r, "exact_match", v + offsets[s] * (r > 1), s)
                 for s in SEEDS for r, v in zip((1, 2, 4), values, strict=True)]
    table = models(leaderboard(pd.DataFrame(rows)))
    assert table["rank"].nunique() == 1 and not table["rank"].isna().any()
    assert list(table["encoding"]) == list(table.sort_values(stats.AREA, ascending=False)["encoding"])
    assert list(table["encoding"]) == ["alibi", "rope", "nope"]


def test_ranked_score_reads_the_statistic_and_direction_the_rank_used():
    base = {"metric": "exact_match", "higher_is_better": True, "ranked_by": "exact_match", "ranked_on": stats.AREA,
            stats.AREA: 0.4, "secondary_" + stats.AREA: 0.9, "degradation": math.nan}
    assert ranked_score(base) == -0.4  # higher is better: negated, so lower sorts first
    secondary = {**base, "ranked_by": "token_accuracy"}  # the primary at its floor: the secondary ranks
    assert ranked_score(secondary) == -0.9
    lm = {"metric": "perplexity", "higher_is_better": False, "ranked_by": "perplexity", "ranked_on": "degradation",
          stats.AREA: 12.0, "secondary_" + stats.AREA: 3.5, "degradation": 0.25}
    assert ranked_score(lm) == 0.25  # lower is better: as is
    assert ranked_score({**lm, "degradation": math.nan}) == math.inf  # no score: after every scored entry
    assert ranked_score({**base, "ranked_on": math.nan}) == -0.4  # a row the secondary left out: the area
    assert ranked_score({**lm, "kind": "baseline"}) == 12.0  # a baseline: the floor's statistic, the area
