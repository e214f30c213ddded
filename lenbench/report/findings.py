"""What a board shows, read off its own numbers: ``findings.md``.

Per board (task × training length), in sentences whose every mean and interval is a cell of the
same report's ``leaderboard.md`` (the same formatting, `lenbench.report.formatting.fmt_ci`):

- how many trained encodings learned the task at 1×, which are uncertain and which did not (only
  learned ones are ranked);
- the floor (the best trivial baseline past the training length) and which learned entries are
  above it with support; entries at the floor are never named as winners;
- rank 1 past the training length (no entry better with support: the paired t test over seeds,
  Holm-corrected, `lenbench.report.ranks.support_ranks`), with the statistic the board ranks by
  ± half-width (`lenbench.report.stats.rank_statistic`: the area past train, for lm the
  degradation; the mean past train on a leaderboard of schema 3),
  by the metric the board ranks by (the secondary where the primary cannot rank,
  `lenbench.report.secondary`);
- the best entry outside rank 1, and how far the best rank-1 mean is ahead of it (a difference of
  means; the ranks carry the support);
- each encoding's variant table (RoPE's scalings and fine-tunes): its rank-1 variants and where the
  encoding without a variant ranks among them;
- on a negative control (`lenbench.task_display.NEGATIVE_CONTROLS`), whether any learned entry is
  above the floor past the training length: a leak in the evaluation, flagged in bold;
- the trained entries whose runs reached their maximum budget instead of converging (boards trained
  until convergence: `train.patience`), whose verdicts and ranks may move with a larger maximum;
- failed cells, where any.

It reads the long leaderboard (`Leaderboard.long`, or ``leaderboard.csv`` as written), so a test can
render the published file's findings without rebuilding the board.
"""

from __future__ import annotations

import math

import pandas as pd

from lenbench.escape import md_text
from lenbench.report.formatting import fmt_ci, fmt_value, wrap_prose
from lenbench.report.stats import AREA, LEARNED, NOT_LEARNED, UNCERTAIN, rank_statistic
from lenbench.report.tables import RUNS_AT_MAX
from lenbench.results.values import to_bool
from lenbench.task_display import is_negative_control

ARROW = {True: "↑", False: "↓"}
INTRO = ("Per board: the trained encodings that learned the task at 1× (the interval of the in-dist score clears "
         "the threshold; uncertain and not-learned ones are not ranked), the floor (the best trivial baseline past "
         "the training length) and the learned encodings above it with support (only those are ranked), rank 1 past "
         "the training length (the area past train: the score past 1× per doubling of length; for lm the "
         "degradation: nll past the training length minus nll at 1×; no entry is better with support, by the paired "
         "t test over seeds, Holm-corrected over the table) with each entry's mean ± the half-width of its 95 % "
         "interval, the best "
         "entry outside rank 1 and how far ahead the best of rank 1 is (a difference of means), and the rank-1 "
         "entries of each variant table. Every mean and interval is a cell of leaderboard.md; a gap is the "
         "difference of two of them, before rounding.")


def _entries(board: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per series of a board: encoding, variant, kind, not_learned, rank, variant_rank, n_failed,
    and `metric`'s past-train mean with its interval (NaN where the series has no such row)."""
    primary = board["metric"].iloc[0]
    keys = ["series", "encoding", "variant", "kind"]
    out = board[keys].drop_duplicates("series").reset_index(drop=True)
    first = board.groupby("series", sort=False).first()
    out["not_learned"] = out["series"].map(first["not_learned"]).map(to_bool)
    # a leaderboard of schema 2 has no learnability, completeness or floor: learned is not not_learned
    if "learnability" in first:
        out["learnability"] = out["series"].map(first["learnability"]).astype(object).fillna("").astype(str)
    else:
        out["learnability"] = [NOT_LEARNED if n else LEARNED for n in out["not_learned"]]
    for flag in ("above_floor", "complete"):
        out[flag] = out["series"].map(first[flag]).map(to_bool) if flag in first else True
    floor = board[board["statistic"].str.startswith("margin over ")].groupby("series").first()
    out["floor"] = out["series"].map(floor["statistic"]).astype(object).fillna("").astype(str) \
        .str.removeprefix("margin over ")
    for stat in ("rank", "variant_rank", "n_failed"):
        rows = board[(board["statistic"] == stat) & (board["metric"] == primary)].set_index("series")
        out[stat] = pd.to_numeric(out["series"].map(rows["value"]), errors="coerce")
    at_max = board[(board["statistic"] == RUNS_AT_MAX) & (board["metric"] == primary)].set_index("series")
    out["runs_at_max"] = pd.to_numeric(out["series"].map(at_max["value"]), errors="coerce")  # NaN: fixed budget
    out["n_runs"] = pd.to_numeric(out["series"].map(at_max["n"]), errors="coerce") if "n" in at_max else math.nan
    stat = ranked_statistic(board, metric)
    past = board[(board["statistic"] == stat) & (board["metric"] == metric)].set_index("series")
    out["past_fmt"] = "retention" if stat == "degradation" else metric  # degradation: nats, a plain number
    for col in ("value", "ci_low", "ci_high"):
        out[f"past_{col}"] = pd.to_numeric(out["series"].map(past[col]), errors="coerce")
    return out


def _metrics(board: pd.DataFrame) -> tuple[str, bool, str, bool]:
    """A board's primary metric and whether higher is better, then the metric its ranks use
    (``ranked_by``: the secondary where the primary is at its floor) and the direction of the
    statistic they rank by (`ranked_statistic`)."""
    primary = board["metric"].iloc[0]
    hib = to_bool(board.loc[board["metric"] == primary, "higher_is_better"].iloc[0])
    ranked_by = str(board["ranked_by"].iloc[0]) or primary
    rows = board[(board["metric"] == ranked_by) & (board["statistic"] == ranked_statistic(board, ranked_by))]
    return primary, hib, ranked_by, to_bool(rows["higher_is_better"].iloc[0])


def ranked_statistic(board: pd.DataFrame, metric: str) -> str:
    """The statistic a long leaderboard's ranks of `metric` used (`lenbench.report.stats.rank_statistic`),
    or the mean past train in one of schema 3 and before, which has no area."""
    if "ranked_on" in board and str(board["ranked_on"].iloc[0]) not in ("", "nan"):
        return str(board["ranked_on"].iloc[0])
    stat = rank_statistic(metric)
    return stat if (board["statistic"] == stat).any() else "past_train_mean"


#: How the findings name a ranking statistic.
STAT_NAMES = {AREA: "area past train", "degradation": "degradation (nats)", "past_train_mean": "mean past train"}


def _score(r: dict, metric: str) -> str:
    """An entry's ranked statistic ± half-width, as leaderboard.md prints it (degradation, in nats,
    as a plain number)."""
    return fmt_ci(r["past_value"], r["past_ci_low"], r["past_ci_high"], r["past_fmt"])


def _named(rows: pd.DataFrame, metric: str) -> str:
    return ", ".join(f"{md_text(r['series'])} {_score(r, metric)}" for r in rows.to_dict("records"))


def _ranking(entries: pd.DataFrame, rank_col: str, metric: str, hib: bool) -> list[str]:
    """Rank 1, and the best entry outside it with the margin, of the entries ranked in `rank_col`."""
    ranked = entries[entries[rank_col].notna()]
    ranked = ranked.sort_values([rank_col, "past_value"], ascending=[True, not hib], kind="stable")
    if ranked.empty:
        return []
    first = ranked[ranked[rank_col] == ranked[rank_col].min()]
    rest = ranked[ranked[rank_col] > ranked[rank_col].min()]
    lines = [f"rank 1: {_named(first, metric)}"]
    if len(rest):
        best_rest = rest.iloc[0].to_dict()
        lead = first["past_value"].max() if hib else first["past_value"].min()
        gap = abs(lead - best_rest["past_value"])
        lines.append(f"best outside rank 1: {md_text(best_rest['series'])} (rank {int(best_rest[rank_col])}, "
                     f"{_score(best_rest, metric)}); "
                     f"rank 1's best is ahead by {fmt_value(gap, best_rest['past_fmt'])}")
    else:
        lines.append("no entry is separated from the others")
    return lines


def board_findings(board: pd.DataFrame) -> list[str]:
    """The markdown lines of one board (the long rows of one task × training length)."""
    task, train_len = board["task"].iloc[0], int(board["train_len"].iloc[0])
    primary, hib, ranked_by, by_hib = _metrics(board)
    entries = _entries(board, ranked_by)
    models = entries[entries["kind"] == "model"]
    learned = models[models["learnability"] == LEARNED]
    uncertain = models[models["learnability"] == UNCERTAIN]
    not_learned = models[models["learnability"] == NOT_LEARNED]
    lines = [f"## {md_text(task)} (train length {train_len}, {md_text(primary)} {ARROW[hib]})", ""]
    names = lambda rows: ", ".join(md_text(s) for s in rows["series"])  # noqa: E731
    lines.append(f"- learned at 1×: {len(learned)} of {len(models)} trained encodings"
                 + (f"; uncertain, not ranked: {names(uncertain)}" if len(uncertain) else "")
                 + (f"; not learned, not ranked: {names(not_learned)}" if len(not_learned) else ""))
    incomplete = learned[~learned["complete"]]
    if len(incomplete):
        lines.append(f"- incomplete (a length or seed missing), not ranked: {names(incomplete)}")
    if ranked_by != primary:
        lines.append(f"- ranked past the training length by {md_text(ranked_by)} {ARROW[by_hib]}: on "
                     f"{md_text(primary)} no learned entry is above the floor")
    floor = next((f for f in learned["floor"] if f), "")
    above = learned[learned["above_floor"] & learned["complete"]]
    at_floor = learned[~learned["above_floor"] & learned["complete"]]
    if floor and len(learned):
        lines.append(f"- floor ({md_text(floor)}, by {md_text(ranked_by)} past the training length): "
                     + (f"above it with support: {names(above)}" if len(above) else "no learned entry is above it")
                     + (f"; at the floor, not ranked: {names(at_floor)}" if len(at_floor) else ""))
    if is_negative_control(task) and len(learned):
        lines.append(f"- **leak**: {md_text(task)} cannot be solved past the training length (a negative control), "
                     f"yet above its floor there: {names(above)}; the evaluation hands these entries the answer"
                     if len(above) else
                     "- negative control: no learned entry is above its floor past the training length, as none can be")
    ranked = models[models["rank"].notna()]
    if len(ranked) == 1:
        lines.append(f"- only {md_text(ranked['series'].iloc[0])} is ranked: nothing to rank it against "
                     f"({STAT_NAMES[ranked_statistic(board, ranked_by)]} {_score(ranked.iloc[0].to_dict(), ranked_by)})")
    elif len(ranked) > 1:
        lines += [f"- {line}" for line in _ranking(ranked, "rank", ranked_by, by_hib)]
    for encoding in entries.loc[entries["kind"] == "variant", "encoding"].unique():
        table = entries[(entries["encoding"] == encoding) & (entries["kind"] != "baseline")
                        & entries["variant_rank"].notna()]
        if table.empty:
            continue
        top = table[table["variant_rank"] == table["variant_rank"].min()].sort_values(
            "past_value", ascending=not by_hib, kind="stable")
        plain = table[table["kind"] == "model"]
        where = (f"; {md_text(encoding)} without a variant: rank {int(plain['variant_rank'].iloc[0])}, "
                 f"{_score(plain.iloc[0].to_dict(), ranked_by)}") if len(plain) and not top["kind"].eq("model").any() \
            else ""
        lines.append(f"- {md_text(encoding)}'s variants ({len(table)} ranked entries), rank 1: {_named(top, ranked_by)}{where}")
    bound = models[models["runs_at_max"] > 0]
    if len(bound):  # a board where no run converged (quick's) says so once instead of naming every entry
        every = len(bound) == len(models) and bool((bound["runs_at_max"] == bound["n_runs"]).all())
        what = (f"every run of all {len(models)} trained entries" if every else
                ", ".join(f"{md_text(r['series'])} ({int(r['runs_at_max'])} of {int(r['n_runs'])} runs)"
                          for r in bound.to_dict("records")))
        lines.append(f"- depends on the budget: {what} stopped at the maximum budget instead of converging; "
                     "their verdicts and ranks may move with a larger maximum")
    failed = int(entries["n_failed"].fillna(0).sum())
    if failed:
        lines.append(f"- failed lengths: {failed} (leaderboard.md's *failed lengths* column names the entries)")
    return lines


def rank_one(long: pd.DataFrame) -> dict[str, list[str]]:
    """Per board (named ``task`` when it has one training length, else ``task@L``): the trained
    encodings at rank 1 of its main table, best mean first; empty where fewer than two learned."""
    long = long[long["task"] != "overall"]
    lengths = long.groupby("task")["train_len"].nunique()
    out = {}
    for (task, train_len), board in long.groupby(["task", "train_len"], sort=False):
        _, _, ranked_by, hib = _metrics(board)
        models = _entries(board, ranked_by)
        models = models[(models["kind"] == "model") & (models["learnability"] == LEARNED) & models["rank"].notna()]
        top = models[models["rank"] == models["rank"].min()].sort_values("past_value", ascending=not hib, kind="stable")
        out[task if lengths[task] == 1 else f"{task}@{train_len}"] = list(top["series"]) if len(models) > 1 else []
    return out


def findings_markdown(long: pd.DataFrame) -> str:
    """``findings.md`` of a long leaderboard (`Leaderboard.long`, or its CSV read with pandas).

    Args:
        long: the long leaderboard rows; the overall ranking (task "overall") is left out.
    """
    long = long[long["task"] != "overall"]
    parts = ["# What the board shows", "", wrap_prose(INTRO), ""]
    for (_task, _train_len), board in long.groupby(["task", "train_len"], sort=False):
        head, *items = board_findings(board)
        parts += [head, *(wrap_prose(item, indent="  ") if item else item for item in items), ""]
    return "\n".join(parts).rstrip() + "\n"
