"""The leaderboard's markdown: each board's main and variant tables with their notes, the overall
ranking and the summary (leaderboard.md and summary.md), and the table rows the page shows too.

Reads the leaderboard frames (`lenbench.report.tables`) and formats their numbers with
`lenbench.report.formatting`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

import pandas as pd

from lenbench.escape import md_text
from lenbench.metrics import METRICS
from lenbench.numerics import numeric_kind
from lenbench.report import secondary, stats
from lenbench.report.formatting import (
    fixed,
    fmt_ci,
    fmt_rank,
    fmt_ratio,
    fmt_value,
    holds_nothing,
    markdown_table,
    wrap_prose,
)
from lenbench.report.ranks import ALPHA
from lenbench.report.rows import board_rows, variant_sort_key
from lenbench.report.tables import Leaderboard, in_table_order, ratio_label

#: What "effective length" means, where a table shows it (leaderboard.md and the page quote this one sentence).
EFFECTIVE_LENGTH = (f"*effective length*: the longest length ratio up to which every score keeps at least "
                    f"{(1 - stats.WITHIN) * 100:g} % of the entry's own in-dist score (for perplexity at most "
                    f"{(1 + stats.WITHIN) * 100:g} %) and stays above the board's best trivial baseline at that length "
                    "(RULER's effective length, as a ratio of the training length), of the mean over seeds; 1× when the "
                    "first length past training fails; – when the in-dist score itself is not above the baseline, n/a "
                    "when it is 0; a discrete statistic: no interval.")
#: The rank column's marks (leaderboard.md, summary.md and the page quote this one sentence).
RANK_MARKS = ("\"=3\": a rank shared by entries the data do not separate; *?*: uncertain whether learned at 1× (the "
              "interval of its in-dist score straddles the threshold); *n/l*: not learned at 1×; *inc*: a length or "
              "seed missing; *floor*: not above the best trivial baseline past the training length with support. "
              "Only learned, complete entries above the floor are ranked; baselines are not ranked.")


def entry_rank(r: dict, rank_col: str, ranks: Iterable[float]) -> str:
    """`fmt_rank` of one `Leaderboard.per_task` record."""
    return fmt_rank(r[rank_col], ranks, r["not_learned"], r["kind"], learnability=r.get("learnability", ""),
                     complete=bool(r.get("complete", True)), above_floor=bool(r.get("above_floor", True)))


def entry_label(r: dict) -> str:
    """An entry's series with why it is unranked, where that is its learnability or completeness."""
    if r["kind"] == "baseline":
        return r["series"]
    if not r.get("complete", True):
        return r["series"] + " (incomplete)"
    if r.get("learnability") == stats.UNCERTAIN:
        return r["series"] + " (uncertain)"
    return r["series"] + (" (not learned)" if r["not_learned"] else "")


def wide_labels(wide: pd.DataFrame, rows: pd.DataFrame) -> list[str]:
    """`entry_label` of each row of one board's `Leaderboard.wide`, its learnability and completeness
    taken from the board's own entries `rows` (`Leaderboard.per_task`): the by-ratio table and the
    heatmap label an entry as the main table does."""
    facts = {(r["encoding"], r["variant"]): r for r in rows[["encoding", "variant", "learnability", "complete"]]
             .to_dict("records")}
    return [entry_label({**r, **facts.get((r["encoding"], r["variant"]), {})}) for r in wide.to_dict("records")]


def by_ratio_table(board: Leaderboard, task: str, train_len: int,
                   rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str], list[list[str]]]:
    """One board's table by length ratio (leaderboard.md and the page alike): its `Leaderboard.wide`
    rows (variants left out), its own ratio columns (`Leaderboard.ratio_columns`: a length where every
    entry failed shows "fail", not a missing column) and the lines, each entry labelled as the main
    table labels it (`wide_labels`) with the mean ± the 95 % half-width at each ratio."""
    wide = board_rows(board.wide, task, train_len)
    wide = wide[wide["kind"] != "variant"]
    cols = [c for c in board.ratio_columns(task, train_len) if c in wide.columns]
    metric = str(rows["metric"].iloc[0]) if len(rows) else ""
    lines = [[label, *(fmt_ci(r[c], r[f"{c}_ci_low"], r[f"{c}_ci_high"], metric) for c in cols)]
             for label, r in zip(wide_labels(wide, rows), wide.to_dict("records"), strict=True)]
    return wide, cols, lines


BOARD_ALIGN = ["r", "l", "r", "r", "r", "r", "r", "r", "r", "r"]


def board_second(rows: pd.DataFrame) -> str:
    """The secondary metric a board's tables show ("" when it has none)."""
    return str(rows["secondary_metric"].iloc[0]) if len(rows) and "secondary_metric" in rows else ""


def board_degrades(rows: pd.DataFrame) -> bool:
    """Whether a board's tables show the degradation (metrics built from nll sums: lm)."""
    return "degradation" in rows and bool(rows["degradation"].notna().any())


def board_header(metric: str, hib: bool, second: str = "", degradation: bool = False) -> list[str]:
    """Column names of a task's main or variant table (markdown and web page alike); with the
    secondary metric `second`, its area past train after the primary's; with `degradation`, the
    area past train of the nll minus the nll at 1× after retention."""
    arrow = {True: "↑", False: "↓"}
    extra = [f"past train {second} {arrow[bool(METRICS.get(second, True))]}"] if second else []
    return ["rank ↓", "encoding", f"in-dist {metric} {arrow[hib]}", f"area past train {arrow[hib]}", *extra,
            "margin over floor ↑", "effective length ↑", f"mean past train {arrow[hib]}", "retention ↑",
            *(["degradation (nats) ↓"] if degradation else []), "failed lengths ↓", "seeds"]


def board_align(second: str = "", degradation: bool = False) -> list[str]:
    """Column alignment of `board_header`'s table."""
    return [*BOARD_ALIGN[:4], *(["r"] if second else []), *BOARD_ALIGN[4:], *(["r"] if degradation else [])]


def board_table_rows(table: pd.DataFrame, rank_col: str, metric: str) -> list[list[str]]:
    """The formatted cells of a main (`rank_col` "rank") or variant ("variant_rank") table: rank
    (`RANK_MARKS`), series, then ``mean ± half-width`` of each statistic, the margin over the floor
    (of the metric the board ranks by), the effective length, failed lengths and seeds, one list per
    row of `table` (`Leaderboard.per_task` rows)."""
    ranks = list(table[rank_col])
    second = board_second(table)
    degrades = board_degrades(table)
    return [[entry_rank(r, rank_col, ranks), entry_label(r),
             fmt_ci(r["in_dist"], r["in_dist_ci_low"], r["in_dist_ci_high"], metric),
             fmt_stat(r, stats.AREA, metric),
             *([fmt_stat(r, f"secondary_{stats.AREA}", second)] if second else []),
             "–" if r["kind"] == "baseline" or math.isnan(r["margin"]) else
             fmt_ci(r["margin"], r["margin_ci_low"], r["margin_ci_high"], r["ranked_by"]).replace("fail", "–"),
             "–" if r["kind"] == "baseline" else fmt_ratio(r["effective_length"], holds_nothing=holds_nothing(r)),
             fmt_stat(r, "past_train_mean", metric),
             fmt_stat(r, "retention", "retention"),
             *([fmt_stat(r, "degradation", "retention")] if degrades else []),
             f"{r['n_failed']:g}", str(r["n_seeds"])] for r in table.to_dict("records")]


def fmt_stat(r: dict, stat: str, metric: str) -> str:
    """``mean ± half-width`` of statistic `stat` of one `Leaderboard.per_task` record."""
    return fmt_ci(r[stat], r[f"{stat}_ci_low"], r[f"{stat}_ci_high"], metric)


def variant_table(rows: pd.DataFrame, encoding: str) -> pd.DataFrame:
    """One encoding's trained model and its inference-time variants of a board, by variant rank, a
    shared rank by score (`lenbench.report.tables.in_table_order`)."""
    table = rows[(rows["encoding"] == encoding) & (rows["kind"] != "baseline")]
    return in_table_order(table, "variant_rank", lambda r: variant_sort_key(r["variant"]))


def floor_sentence(rows: pd.DataFrame) -> str | None:
    """The board's sentence naming its floor (the best trivial baseline past the training length,
    of the metric it ranks by) and how many learned models are above it; None without baselines."""
    models = rows[rows["kind"] == "model"]
    named = sorted(set(models["floor_baseline"]) - {""})
    if not named:
        return None
    learned = models[models["learnability"] == stats.LEARNED]
    above = int(learned["above_floor"].astype(bool).sum())
    by = rows["ranked_by"].iloc[0]
    base = rows[(rows["encoding"] == named[0]) & (rows["kind"] == "baseline")]
    level = ""
    if len(base) and by == rows["metric"].iloc[0]:
        b = base.iloc[0]
        level = f" ({fmt_stat(b, stats.AREA, by)})"
    return (f"Floor: {named[0]}{level}, the best trivial baseline by the area of {by} past the training length; "
            f"{above} of {len(learned)} learned models are above it with support (the 95 % interval of the margin).")


def learnability_lines(board: Leaderboard, task: str, train_len: int, rows: pd.DataFrame) -> list[list[str]]:
    """Rows of a board's learnability table: series, the pooled verdict with the interval it used,
    and each seed's verdict with its 1× score."""
    seeds = board_rows(board.seeds, task, train_len)
    metric = rows["metric"].iloc[0]
    out = []
    for r in rows[rows["kind"] != "baseline"].to_dict("records"):
        lo, hi = r["learned_ci_low"], r["learned_ci_high"]
        against = "" if math.isnan(lo) else f" [{fmt_value(lo)}, {fmt_value(hi)}]"
        own = seeds[(seeds["encoding"] == r["encoding"]) & (seeds["variant"] == r["variant"])] if len(seeds) else seeds
        per_seed = ", ".join(f"{int(x['seed'])}: {fmt_value(x['in_dist'], metric)} {_SHORT[x['learnability']]}"
                             for x in own.to_dict("records"))
        out.append([r["series"], r["learnability"] + against, per_seed or "–"])
    return out


_SHORT = {stats.LEARNED: "✓", stats.NOT_LEARNED: "✗", stats.UNCERTAIN: "?"}


def learnability_note(metric: str, hib: bool, task: str) -> str:
    if hib and stats.learned_threshold(task, metric) is None:
        return f"Learnability at 1×: {metric} states no learned threshold, so every entry counts as learned."
    if hib:
        return (f"Learnability at 1× (in-dist {metric} against {stats.learned_threshold(task, metric):g}): learned when "
                "the 95 % interval lies at or above the threshold, not learned when below, uncertain otherwise; per "
                "seed from that seed's evaluation samples (✓ learned, ✗ not, ? uncertain).")
    return (f"Learnability at 1× ({metric} against {stats.LEARNED_BASELINE}): the 95 % interval of the paired "
            "difference (model − baseline) below 0 is learned, above 0 not learned, otherwise uncertain; per seed "
            "from that seed's evaluation samples (✓ learned, ✗ not, ? uncertain).")


def _board_sections(board: Leaderboard, task: str, train_len: int, rows: pd.DataFrame) -> list[str]:
    arrow = {True: "↑", False: "↓"}
    metric = rows["metric"].iloc[0]
    hib = bool(rows["higher_is_better"].iloc[0])
    parts = [f"## {md_text(task)} (train length {train_len}, {md_text(metric)} {arrow[hib]})", ""]
    methods = sorted(set(rows.loc[rows["kind"] != "baseline", "ci_method"]))
    if methods:
        parts += [f"Intervals: {md_text('; '.join(methods))}.", ""]
    second = board_second(rows)
    header = board_header(metric, hib, second, board_degrades(rows))

    def body(table: pd.DataFrame, rank_col: str) -> list[list[str]]:
        return board_table_rows(table, rank_col, metric)

    align = board_align(second, board_degrades(rows))
    note = secondary.ranking_note(rows)
    if note:
        parts += [f"**{md_text(note)}**", ""]
    by = rows["ranked_on"].iloc[0]
    if by != stats.AREA:
        parts += [md_text(RANKED_ON[by]), ""]
    floor = floor_sentence(rows)
    if floor:
        parts += [md_text(floor), ""]
    main = rows[rows["kind"].isin(["model", "baseline"])]
    parts += [markdown_table(header, body(main, "rank"), align), ""]
    _, ratio_cols, lines = by_ratio_table(board, task, train_len, rows)
    if ratio_cols:
        parts += [f"{md_text(metric)} {arrow[hib]} by length ratio (mean over seeds ± 95 % half-width):", ""]
        parts += [markdown_table(["encoding", *ratio_cols], lines, ["l", *["r"] * len(ratio_cols)]), ""]
    parts += context_gain_section(board, task, train_len, rows)
    parts += [learnability_note(metric, hib, task), ""]
    parts += [markdown_table(["entry", "learnability (95 % interval)", "per seed: in-dist"],
                             learnability_lines(board, task, train_len, rows[rows["kind"] != "variant"]),
                             ["l", "l", "l"]), ""]
    for encoding in dict.fromkeys(rows.loc[rows["kind"] == "variant", "encoding"]):
        table = variant_table(rows, encoding)
        parts += [f"### {md_text(task)}: {md_text(encoding)} and its inference-time variants (ranked among themselves)", ""]
        parts += [markdown_table(header, body(table, "variant_rank"), align), ""]
    return parts


#: The sentence a board ranked by another statistic than the area past train says above its table.
RANKED_ON = {"degradation": "Ranked by the degradation (nll past the training length minus nll at 1×, nats, on the same "
                            "scored bytes; lower is better, below 0 when the longer context helps): the perplexity "
                            "level past training mostly restates the fit at 1×. The floor still gates on the level: "
                            "an entry is ranked only where its area past train beats the best trivial baseline's."}

CONTEXT_NOTE = ("context_gain ↑ by length ratio (mean over seeds ± 95 % half-width): the perplexity of the same "
                "scored bytes with the context cut to the training length ÷ with the whole window; above 1 the longer "
                "context helps, 1 it is ignored, below 1 it hurts:")


def context_gain_section(board: Leaderboard, task: str, train_len: int, rows: pd.DataFrame) -> list[str]:
    """An lm board's context gain per ratio of its trained models and variants (empty elsewhere)."""
    cg = board_rows(board.context, task, train_len)
    if cg.empty:
        return []
    ratios = sorted(cg["ratio"].unique())
    lines = []
    for r in rows[rows["kind"] != "baseline"].to_dict("records"):
        own = cg[(cg["encoding"] == r["encoding"]) & (cg["variant"] == r["variant"])].set_index("ratio")
        if own.empty:
            continue
        lines.append([entry_label(r), *(fmt_ci(own.at[x, "mean"], own.at[x, "ci_low"], own.at[x, "ci_high"], "retention")
                                        if x in own.index else "–" for x in ratios)])
    header = ["encoding", *(f"{ratio_label(x)}" for x in ratios)]
    return [CONTEXT_NOTE, "", markdown_table(header, lines, ["l", *["r"] * len(ratios)]), ""]


#: The sentence on the statistics every leaderboard.md opens with (docs/statistics.md says more).
STATISTICS_NOTE = ("↑ higher is better, ↓ lower is better. Every value is the mean over seeds ± the half-width of its "
                   "95 % interval: a t interval over the seeds (the unit of replication), never narrower than the "
                   "evaluation samples allow. *In-dist*: score at the training length; *area past train*: the area "
                   "under the score-vs-length curve past the training length per doubling of length (the trapezoid "
                   "rule over log2 of the ratio, the 1× end valued at the first ratio past it; each doubling weighs "
                   "the same however densely it was evaluated); *mean past train*: the plain mean over ratios > 1 (a "
                   "failed length scores 0 accuracy / infinite perplexity in both); *margin over floor*: area past "
                   "train minus the best trivial baseline's (better positive); *retention*: (score − chance) / "
                   "(in-dist − chance) averaged past 1× (ppl: in-dist / ppl); *degradation* (lm): the area past train of "
                   "the nll minus the nll at 1×, in nats, on the same scored bytes; ")


def leaderboard_markdown(board: Leaderboard, df: pd.DataFrame | None = None, note: str = "") -> str:
    """The leaderboard as markdown: per task (and training length) the main table (trained
    models and baselines), the scores by length ratio, the learnability table and one table per
    encoding with variants; then the overall ranking. Values are ``mean ± 95 % half-width``;
    shared ranks show as "=3". `note`: the suite's note (`Suite.note`, e.g. a smoke suite's), first."""
    parts = ["# lenbench leaderboard", "", *([wrap_prose(note), ""] if note else [])]
    if df is not None and len(df):
        suites = md_text(", ".join(sorted(set(df["suite"]) - {""})) or "?")
        seeds = sorted(set(df["seed"]))
        prov = {c: ", ".join(sorted(set(df[c]) - {""})) or "?" for c in ("lenbench_version", "torch_version", "device", "git_sha")}
        prov = {c: md_text(v[:12] if c == "git_sha" else v) for c, v in prov.items()}
        one = " (one seed: intervals from evaluation sampling alone)" if len(seeds) == 1 else ""
        parts += [f"Suite: {suites}; seeds: {', '.join(map(str, seeds))}{one}; lenbench {prov['lenbench_version']}, "
                  f"torch {prov['torch_version']}, device {prov['device']}, commit {prov['git_sha']}.", ""]
        parts += kinds_lines(df)
    parts += [STATISTICS_NOTE + f"{EFFECTIVE_LENGTH} Rank = 1 + the number of entries better with support: the paired "
              "t test on the seeds' differences in area past train (lm: in degradation), Holm-corrected over every "
              "pair of the table at a "
              f"family-wise {ALPHA:g}. {RANK_MARKS}", ""]
    for (task, train_len), rows in board.per_task.groupby(["task", "train_len"], sort=False):
        parts += _board_sections(board, task, int(train_len), rows)
    parts += ["## Overall ranking (trained models; mean rank over the boards where each learned the task)", "",
              OVERALL_NOTE, ""]
    parts += [markdown_table(OVERALL_HEADER, overall_lines(board), ["r", "l", "r", "r", "r", "r", "r"]), ""]
    return "\n".join(parts)


def cell_kinds(df: pd.DataFrame) -> dict[str, int]:
    """Numeric kind (`lenbench.numerics.numeric_kind`) → number of cells of `df` computed on it."""
    if not {"cell_id", "numerics"} <= set(df.columns):
        return {}
    models = df["cpu_model"] if "cpu_model" in df.columns else pd.Series("", index=df.index)
    per_cell = {cell: numeric_kind(str(n), str(m)) for cell, n, m in zip(df["cell_id"], df["numerics"], models, strict=True)}
    kinds = Counter(kind for kind in per_cell.values() if kind)
    return dict(sorted(kinds.items(), key=lambda item: (-item[1], item[0])))


def kinds_lines(df: pd.DataFrame) -> list[str]:
    """The leaderboard's line naming the numeric kind its cells were computed on, and a warning when
    they mix kinds (seeds of one entry, or two entries, trained on different CPU vendors)."""
    kinds = cell_kinds(df)
    if len(kinds) == 1:
        return [f"Numeric kind: {md_text(next(iter(kinds)))} (every cell; other kinds reproduce it to float noise, "
                "not bit for bit).", ""]
    if not kinds:
        return []
    listed = ", ".join(f"{md_text(k)} ({n} cells)" for k, n in kinds.items())
    return [f"**Mixed numeric kinds**: {listed}. Cells of different CPU vendors train to different draws, so this "
            "board compares some entries across machines; `lenbench publish` refuses such a run, and a board "
            "computed on one kind replaces it.", ""]


#: The overall table's header and note (leaderboard.md, summary.md and the page).
OVERALL_HEADER = ["rank ↓", "encoding", "mean rank ↓", "boards counted", "at floor", "uncertain", "not learned"]
OVERALL_NOTE = ("Mean rank over the boards where the encoding learned the task (and the board ranked anything); on a "
                "board where it is at the floor it counts as that board's last place. Boards counted says on how "
                "many; uncertain and not learned boards are not counted.")


def overall_lines(board: Leaderboard) -> list[list[str]]:
    ranks = list(board.overall["rank"])
    return [[fmt_rank(r.rank, ranks, r.n_tasks == 0), r.series,
             "–" if math.isnan(r.mean_rank) else fixed(r.mean_rank, ".2f"), str(r.n_tasks), str(r.n_at_floor),
             str(r.n_uncertain), str(r.n_not_learned)] for r in board.overall.itertuples(index=False)]


#: The most ratio columns a board's summary shows: a board evaluated at this many ratios or fewer shows
#: every one (quick's 1-16×: five), a denser one as many spread over its range.
SUMMARY_MAX_RATIOS = 5


def summary_ratios(measured: list[str], ratios: Iterable[float] | None = None) -> list[str]:
    """The ratio columns of a board's summary from `measured`, the board's own, ascending
    (`Leaderboard.ratio_columns`: a length where every entry failed is one, shown "fail"): `ratios`
    among them, by default every one when there are at most `SUMMARY_MAX_RATIOS`, else that many
    spread evenly over them, the shortest and the longest always in (a suite evaluated to 8× or 32×
    shows its own end, one at 1.5× its own first step)."""
    if ratios is not None:
        return list(dict.fromkeys(c for c in (ratio_label(r) for r in ratios) if c in measured))
    if len(measured) <= SUMMARY_MAX_RATIOS:
        return measured
    last = len(measured) - 1
    picks = (round(i * last / (SUMMARY_MAX_RATIOS - 1)) for i in range(SUMMARY_MAX_RATIOS))
    return list(dict.fromkeys(measured[i] for i in picks))


def _summary_body(table: pd.DataFrame, rank_col: str, wide: pd.DataFrame, cols: list[str], metric: str) -> list[list[str]]:
    """Lines of a summary table: rank, series, the metric at each ratio column, area past train,
    effective length."""
    ranks = list(table[rank_col])
    lines = []
    for r in table.to_dict("records"):
        w = wide.loc[(r["encoding"], r["variant"])]
        lines.append([entry_rank(r, rank_col, ranks), entry_label(r),
                      *(fmt_ci(w[c], w[f"{c}_ci_low"], w[f"{c}_ci_high"], metric) for c in cols),
                      fmt_stat(r, stats.AREA, metric),
                      "–" if r["kind"] == "baseline" else fmt_ratio(r["effective_length"], holds_nothing=holds_nothing(r))])
    return lines


def summary_markdown(board: Leaderboard, ratios: Iterable[float] | None = None, note: str = "") -> str:
    """The short tables docs/board.md quotes: per task (and training length) the trained models and
    baselines, primary metric at `ratios` (default: `summary_ratios`, the board's own ratios; mean ±
    95 % half-width), main-table rank (`RANK_MARKS`); then the overall ranking. `note`: the suite's
    note (`Suite.note`, e.g. a smoke suite's), first. `write_report` writes it as ``summary.md``; a
    test keeps docs/board.md's copy equal to the published one."""
    arrow = {True: "↑", False: "↓"}
    parts = [wrap_prose(note), ""] if note else []
    for (task, train_len), rows in board.per_task.groupby(["task", "train_len"], sort=False):
        metric = rows["metric"].iloc[0]
        hib = bool(rows["higher_is_better"].iloc[0])
        wide = board_rows(board.wide, task, train_len).set_index(["encoding", "variant"])
        cols = summary_ratios(board.ratio_columns(task, train_len), ratios)
        header = ["rank", "encoding", *(f"{metric} {c.replace('x', '×')}" for c in cols), f"area past train {arrow[hib]}",
                  "effective length ↑"]
        align = ["r", "l", *["r"] * (len(cols) + 2)]
        parts += [f"**{md_text(task)}** (train length {train_len}, {md_text(metric)} {arrow[hib]})", ""]
        note = secondary.ranking_note(rows)
        if note:
            parts += [f"Ranked by {md_text(rows['ranked_by'].iloc[0])} past the training length (see leaderboard.md).",
                      ""]
        parts += [markdown_table(header, _summary_body(rows[rows["kind"].isin(["model", "baseline"])], "rank", wide, cols,
                                                       metric), align), ""]
        for encoding in dict.fromkeys(rows.loc[rows["kind"] == "variant", "encoding"]):
            table = variant_table(rows, encoding)
            parts += [f"**{md_text(task)}**: {md_text(encoding)} and its inference-time variants, ranked among themselves", "",
                      markdown_table(header, _summary_body(table, "variant_rank", wide, cols, metric), align), ""]
    parts += ["**overall** (trained models)", "", wrap_prose(OVERALL_NOTE), "",
              markdown_table(OVERALL_HEADER, overall_lines(board), ["r", "l", "r", "r", "r", "r", "r"]), ""]
    return "\n".join(parts)
