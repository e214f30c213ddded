"""findings.md: what each board shows, read off the long leaderboard (`lenbench.report.findings`).

Synthetic boards whose ranks and means are known check each sentence; the published board checks
that every mean ± interval it quotes is a cell of the same publication's leaderboard.md.
"""

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from lenbench.report.findings import findings_markdown

ROOT = Path(__file__).resolve().parent.parent.parent


def entry(series, *, past, lo, hi, rank=math.nan, variant_rank=math.nan, not_learned=False, kind="model",
          metric="perplexity", hib=False, ranked_by="", n_failed=0.0, task="lm", secondary=None):
    """The long rows of one series (the statistics findings reads), as `Leaderboard.long` writes them."""
    encoding, _, variant = series.partition("+")
    base = {"task": task, "train_len": 64, "metric": metric, "encoding": encoding, "variant": variant or "none",
            "series": series, "kind": kind, "not_learned": not_learned, "ranked_by": ranked_by or metric,
            "higher_is_better": hib}
    rows = [{**base, "statistic": "past_train_mean", "value": past, "ci_low": lo, "ci_high": hi},
            {**base, "statistic": "rank", "value": rank, "ci_low": math.nan, "ci_high": math.nan},
            {**base, "statistic": "variant_rank", "value": variant_rank, "ci_low": math.nan, "ci_high": math.nan},
            {**base, "statistic": "n_failed", "value": n_failed, "ci_low": math.nan, "ci_high": math.nan}]
    if secondary is not None:
        name, value, s_lo, s_hi = secondary
        rows.append({**base, "metric": name, "statistic": "past_train_mean", "value": value, "ci_low": s_lo,
                     "ci_high": s_hi, "higher_is_better": True})
    return rows


def board(*entries) -> pd.DataFrame:
    return pd.DataFrame([row for rows in entries for row in rows])


def section(text: str, task: str) -> str:
    return text.split(f"## {task} ", 1)[1].split("\n## ", 1)[0]


def test_rank_one_shared_the_best_outside_it_and_the_gap():
    text = findings_markdown(board(
        entry("kerple", past=6.99, lo=6.5, hi=7.5, rank=1),
        entry("alibi", past=7.10, lo=6.9, hi=7.3, rank=1),
        entry("fire", past=9.25, lo=9.0, hi=9.4, rank=3),
        entry("nope", past=14.0, lo=13.0, hi=15.0, rank=4),
        entry("learned", past=30.0, lo=29.0, hi=31.0, not_learned=True)))
    lm = section(text, "lm")
    assert lm.startswith("(train length 64, perplexity ↓)")
    assert "- learned at 1×: 4 of 5 trained encodings; not learned, not ranked: learned" in lm
    assert "- rank 1: kerple 6.990 ± 0.500, alibi 7.100 ± 0.200" in lm  # the better mean first
    # the best of rank 1 (6.99, lower is better) against the best outside it (fire, 9.25): 2.26
    assert "- best outside rank 1: fire (rank 3, 9.250 ± 0.200); rank 1's best is ahead by 2.260" in " ".join(lm.split())


def test_higher_is_better_orders_and_measures_the_other_way():
    text = findings_markdown(board(
        entry("alibi", past=0.35, lo=0.32, hi=0.38, rank=1, metric="exact_match", hib=True, task="passkey"),
        entry("rope", past=0.10, lo=0.05, hi=0.15, rank=2, metric="exact_match", hib=True, task="passkey"),
        entry("t5", past=0.20, lo=0.18, hi=0.22, rank=2, metric="exact_match", hib=True, task="passkey")))
    passkey = " ".join(section(text, "passkey").split())
    assert "- rank 1: alibi 0.350 ± 0.030" in passkey
    assert "best outside rank 1: t5 (rank 2, 0.200 ± 0.020); rank 1's best is ahead by 0.150" in passkey


def test_a_board_ranked_by_its_secondary_quotes_the_secondary():
    kw = {"metric": "exact_match", "hib": True, "ranked_by": "token_accuracy", "task": "copy"}
    text = findings_markdown(board(
        entry("alibi", past=0.0, lo=0.0, hi=0.0, rank=1, secondary=("token_accuracy", 0.66, 0.64, 0.68), **kw),
        entry("nope", past=0.0, lo=0.0, hi=0.0, rank=2, secondary=("token_accuracy", 0.43, 0.40, 0.46), **kw)))
    copy = " ".join(section(text, "copy").split())
    assert "ranked past the training length by token_accuracy ↑: on exact_match no learned entry is above the floor" in copy
    assert "- rank 1: alibi 0.660 ± 0.020" in copy and "nope (rank 2, 0.430 ± 0.030)" in copy
    assert "ahead by 0.230" in copy


def test_nothing_learned_and_a_single_learned_entry_rank_nothing():
    kw = {"metric": "exact_match", "hib": True, "task": "copy"}
    text = findings_markdown(board(
        entry("alibi", past=0.2, lo=0.1, hi=0.3, rank=1, **kw),
        entry("nope", past=0.0, lo=0.0, hi=0.0, not_learned=True, **kw)))
    copy = " ".join(section(text, "copy").split())
    assert "only alibi is ranked: nothing to rank it against (mean past train 0.200 ± 0.100)" in copy
    assert "- rank 1" not in copy
    none = findings_markdown(board(entry("nope", past=0.0, lo=0.0, hi=0.0, not_learned=True, **kw)))
    assert "learned at 1×: 0 of 1 trained encodings; not learned, not ranked: nope" in none
    assert "- rank 1" not in none


def test_the_variant_table_and_where_the_plain_encoding_ranks():
    text = findings_markdown(board(
        entry("rope", past=23.4, lo=21.0, hi=26.0, rank=1, variant_rank=3),
        entry("alibi", past=7.8, lo=7.3, hi=8.3, rank=1),
        entry("rope+yarn", past=12.3, lo=11.0, hi=13.6, variant_rank=1, kind="variant"),
        entry("rope+ntk", past=19.8, lo=18.2, hi=21.6, variant_rank=2, kind="variant"),
        entry("rope+linear", past=19.2, lo=16.9, hi=22.4, variant_rank=math.nan, kind="variant"),
        entry("baseline:unigram", past=25.0, lo=23.0, hi=27.0, kind="baseline", n_failed=0.0)))
    lm = " ".join(section(text, "lm").split())
    assert ("- rope's variants (3 ranked entries), rank 1: rope+yarn 12.300 ± 1.300; rope without a variant: "
            "rank 3, 23.400 ± 2.500") in lm
    assert "no entry is separated from the others" in lm  # rope and alibi share rank 1
    assert "failed" not in lm


def test_a_plain_encoding_at_rank_one_of_its_variant_table_is_named_once():
    text = findings_markdown(board(
        entry("rope", past=7.0, lo=6.0, hi=8.0, rank=1, variant_rank=1),
        entry("rope+ntk", past=7.2, lo=6.1, hi=8.3, variant_rank=1, kind="variant")))
    lm = " ".join(section(text, "lm").split())
    assert "- rope's variants (2 ranked entries), rank 1: rope 7.000 ± 1.000, rope+ntk 7.200 ± 1.100" in lm
    assert "without a variant" not in lm


@pytest.mark.parametrize("leaks", [False, True])
def test_a_negative_control_flags_an_entry_above_its_floor_as_a_leak(leaks):
    rows = board(entry("alibi", past=0.49, lo=0.45, hi=0.53, task="count", metric="exact_match", hib=True),
                 entry("rope", past=0.90, lo=0.85, hi=0.95, rank=1, task="count", metric="exact_match", hib=True))
    rows["above_floor"] = rows["series"].eq("rope") & leaks
    rows["learnability"] = "learned"
    rows["complete"] = True
    floor = rows[rows["statistic"] == "past_train_mean"].assign(statistic="margin over baseline:the-length")
    count = section(findings_markdown(pd.concat([rows, floor], ignore_index=True)), "count")
    flat = " ".join(count.split())
    if leaks:
        assert ("- **leak**: count cannot be solved past the training length (a negative control), yet above its "
                "floor there: rope; the evaluation hands these entries the answer") in flat
    else:
        assert "- negative control: no learned entry is above its floor past the training length, as none can be" in flat
        assert "leak" not in flat


def test_failed_lengths_are_counted():
    text = findings_markdown(board(entry("rope", past=7.0, lo=6.0, hi=8.0, rank=1, n_failed=2.0),
                                   entry("alibi", past=7.5, lo=7.0, hi=8.0, rank=1, n_failed=1.0)))
    assert "- failed lengths: 3" in text


def test_every_line_is_wrapped_at_110_characters():
    names = [f"encoding-number-{i}" for i in range(12)]
    text = findings_markdown(board(*(entry(n, past=1.0, lo=1.0, hi=1.0, not_learned=True) for n in names)))
    assert all(len(line) <= 110 for line in text.splitlines()), text
    assert all(n in " ".join(text.split()) for n in names)


PUBLICATIONS = [ROOT / "results", ROOT / "results" / "catalog"]


@pytest.mark.parametrize("publication", PUBLICATIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_mean_it_quotes_is_a_cell_of_the_published_leaderboard(publication):
    if not (publication / "leaderboard.csv").is_file():
        pytest.skip(f"{publication.relative_to(ROOT)} is not published")
    long = pd.read_csv(publication / "leaderboard.csv", keep_default_na=False, na_values=[""])
    text = findings_markdown(long)
    board = (publication / "leaderboard.md").read_text()
    quoted = re.findall(r"\d+\.\d+ ± \d+\.\d+", " ".join(text.split()))
    assert quoted
    missing = [q for q in quoted if q not in board]
    assert not missing, f"findings quote numbers leaderboard.md does not hold: {missing[:5]}"


def test_entries_whose_runs_reached_their_maximum_are_named_as_budget_dependent():
    """A board trained until convergence carries runs_at_max per trained entry (`Leaderboard.budget`);
    findings names those with a run at the maximum, and says nothing on a fixed-budget board."""
    def bound(series, at_max, n_runs=3, **kw):
        rows = entry(series, **kw)
        return rows + [{**rows[0], "statistic": "runs_at_max", "value": float(at_max), "n": n_runs,
                        "ci_low": math.nan, "ci_high": math.nan}]

    text = findings_markdown(board(bound("alibi", 0, past=7.0, lo=6.9, hi=7.1, rank=1),
                                   bound("rope", 2, past=9.0, lo=8.9, hi=9.1, rank=2),
                                   bound("nope", 3, past=30.0, lo=29.0, hi=31.0, not_learned=True)))
    lm = " ".join(section(text, "lm").split())
    assert ("- depends on the budget: rope (2 of 3 runs), nope (3 of 3 runs) stopped at the maximum budget instead "
            "of converging; their verdicts and ranks may move with a larger maximum") in lm
    everything = findings_markdown(board(bound("alibi", 3, past=7.0, lo=6.9, hi=7.1, rank=1),
                                         bound("rope", 3, past=9.0, lo=8.9, hi=9.1, rank=2)))
    assert ("- depends on the budget: every run of all 2 trained entries stopped at the maximum budget instead "
            "of converging") in " ".join(section(everything, "lm").split())
    fixed = findings_markdown(board(entry("alibi", past=7.0, lo=6.9, hi=7.1, rank=1),
                                    entry("rope", past=9.0, lo=8.9, hi=9.1, rank=2)))
    assert "budget" not in fixed


def test_the_budget_frame_counts_each_trained_entrys_runs_at_their_maximum():
    """`Leaderboard.budget` read off the rows' own stop_reason and settings, against a count by hand;
    rows trained for a fixed budget (no patience in their settings) give no frame and no long rows."""
    from lenbench.report.rows import load_results
    from lenbench.report.tables import RUNS_AT_MAX, leaderboard

    rows = load_results(ROOT / "studies" / "protocol" / "pilot-plateau-12k" / "results.csv")
    board_ = leaderboard(rows, n_boot=50)
    trained = rows[(rows["variant"] == "none") & ~rows["encoding"].str.startswith("baseline:")]
    by_hand = trained.groupby(["task", "encoding", "seed"])["stop_reason"].first().eq("budget") \
        .groupby(level=[0, 1]).sum()
    got = board_.budget.set_index(["task", "encoding"])["runs_at_max"]
    assert got.sort_index().to_dict() == by_hand.sort_index().astype(int).to_dict()
    assert set(board_.budget["n_runs"]) == {3} and by_hand.sum() > 0  # the 6000-step maximum was reached
    long = board_.long()
    at_max = long[(long["statistic"] == RUNS_AT_MAX) & (long["kind"] == "model") & (long["metric"] == "exact_match")]
    assert at_max.set_index(["task", "encoding"])["value"].astype(int).sort_index().to_dict() == \
        by_hand.sort_index().astype(int).to_dict()
    fixed = rows.assign(settings=rows["settings"].str.replace(r" patience=\S+", "", regex=True))
    fixed_board = leaderboard(fixed, n_boot=50)
    assert fixed_board.budget.empty and RUNS_AT_MAX not in set(fixed_board.long()["statistic"])
