"""Tables, step 3 of the report path: the leaderboard frames, their CSV text and markdown.

Reads rows (`lenbench.report.rows`) and statistics (`lenbench.report.stats`); the cost tables
(`lenbench.report.cost`), figures (`lenbench.report.plots`) and the page (`lenbench.report.page`)
read these tables, never the other way round.

The leaderboard (`leaderboard`) aggregates per task (and training length) and per (encoding,
variant) on the task's primary metric (`lenbench.metrics.PRIMARY_METRIC`: exact match for sequence
tasks, perplexity for lm); the statistics themselves are `lenbench.report.stats` (seed-level t
intervals, paired support ranks, not-learned flags, retention, variant tables), whose docstring
defines them:

- ``in_dist``, ``past_train_mean`` (a failed length counts as the worst score: 0 for accuracies,
  +inf for perplexity; ``n_failed`` counts them), ``retention`` and ``degradation``, each with
  ``_ci_low`` / ``_ci_high``, and ``max_ratio_within_10pct`` (no interval);
- ``learnability`` (learned / not learned / uncertain, with the interval it used), ``complete``,
  the margin over the board's best trivial baseline (``floor_baseline``, ``margin`` and its
  interval, ``above_floor``);
- ``rank`` in the task's main table (trained models, variant "none"), ``variant_rank`` in the table
  of one encoding's inference-time variants; only learned, complete entries above the floor are
  ranked, with Holm's correction over each table's pairs;
- overall: each trained encoding's mean rank over the boards where it learned the task.

The leaderboard CSVs carry ``schema_version`` (`LEADERBOARD_SCHEMA_VERSION`) and the provenance
columns `PROVENANCE`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from lenbench.escape import csv_text, md_cell, md_text
from lenbench.metrics import METRICS, find_metric
from lenbench.report import secondary, stats
from lenbench.report.rows import (
    _read_csv_strings,
    csv_kind,
    encoding_sort_key,
    load_results,
    primary_metric,
    series_label,
    series_sort_key,
    task_order,
    variant_sort_key,
    whole_length,
)
from lenbench.results.schema import COLUMNS, ResultsError
from lenbench.results.values import to_bool, to_float, to_int

SCORE_STATS = stats.STATS
#: The leaderboard CSVs' schema: 3 has seed-level t intervals, Holm-corrected ranks, learnability,
#: completeness, the floor margin and degradation (2: bootstrap intervals, support ranks).
LEADERBOARD_SCHEMA_VERSION = 3
#: Per-entry columns beside the statistics (`lenbench.report.stats.board_statistics`).
ENTRY_FLAGS = ("complete", "learnability", "learned_ci_low", "learned_ci_high", "floor_baseline", "margin",
               "margin_ci_low", "margin_ci_high", "above_floor")
#: Provenance columns of the leaderboard CSVs: the distinct values of the board's rows, joined by "; ".
#: `settings`: the training and evaluation settings of the board's cells (a task's overrides show here).
PROVENANCE = ("suite", "lenbench_version", "git_sha", "torch_version", "device", "dtype", "python_version",
              "threads", "code_fingerprint", "data_fingerprint", "cpu_model", "cpu_capability", "numerics", "settings")
KIND_ORDER = {"model": 0, "baseline": 1, "variant": 2}


def _provenance(rows: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {"schema_version": LEADERBOARD_SCHEMA_VERSION}
    for col in PROVENANCE:
        values = sorted({str(v) for v in rows[col]} - {""}) if col in rows.columns else []
        out[col] = "; ".join(values)
    return out


@dataclasses.dataclass
class Leaderboard:
    """The leaderboard of a results frame (statistics: `lenbench.report.stats`).

    Attributes:
        per_task: one row per (task, train_len, encoding, variant): task, train_len, metric,
            higher_is_better (of the metric), encoding, variant, series, kind ("model": a trained
            encoding, variant "none"; "variant": an inference-time or fine-tuned variant;
            "baseline"), n_seeds, n_samples, ci_method, for each of `SCORE_STATS` the point value
            and ``<stat>_ci_low`` / ``<stat>_ci_high``, n_failed, not_learned, `ENTRY_FLAGS`, rank
            (main table: models only; NaN when unranked), variant_rank (the encoding's variant
            table), the secondary columns, then schema_version and `PROVENANCE`. Ordered by task,
            train_len, kind (models, baselines, variants), rank, score, canonical series order.
        overall: one row per trained encoding: encoding, variant, series, mean_rank, n_tasks,
            n_at_floor, n_uncertain, n_not_learned, rank.
        wide: the primary metric (mean over seeds) per (task, train_len, encoding, variant) and
            length ratio ("1x", "2x", …), then "<r>x_ci_low" / "<r>x_ci_high", with kind,
            not_learned, n_seeds, rank, schema_version and provenance.
    """

    per_task: pd.DataFrame
    overall: pd.DataFrame
    wide: pd.DataFrame
    #: per seed, each trained entry's learnability (`lenbench.report.stats.seed_learnability`),
    #: with task and train_len.
    seeds: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    #: {(task, train_len): the `Board` its ranks came from} (paired tests the tables do not print).
    boards: dict = dataclasses.field(default_factory=dict, repr=False)

    def long(self) -> pd.DataFrame:
        """Tidy long form: one row per task × train_len × encoding × variant × statistic, with
        value, ci_low, ci_high, n (seeds; tasks for the overall rows), higher_is_better of the
        statistic, kind, not_learned, ci_method, schema_version and provenance. The overall
        ranking appears under task "overall" (train_len 0, metric "rank")."""
        rows = []
        prov_cols = ["schema_version", *PROVENANCE]
        for r in self.per_task.to_dict("records"):
            base = {"task": r["task"], "train_len": r["train_len"], "metric": r["metric"], "encoding": r["encoding"],
                    "variant": r["variant"], "series": r["series"], "kind": r["kind"], "not_learned": r["not_learned"],
                    "learnability": r["learnability"], "complete": r["complete"], "above_floor": r["above_floor"],
                    "n": r["n_seeds"], "ci_method": r["ci_method"], "ranked_by": r["ranked_by"],
                    **{c: r[c] for c in prov_cols}}
            for stat in SCORE_STATS:
                if stat == "degradation" and math.isnan(r[stat]):
                    continue
                hib = True if stat in ("max_ratio_within_10pct", "retention") else \
                    False if stat == "degradation" else r["higher_is_better"]
                rows.append({**base, "statistic": stat, "value": r[stat], "ci_low": r[f"{stat}_ci_low"],
                             "ci_high": r[f"{stat}_ci_high"], "higher_is_better": hib})
            if r["floor_baseline"]:  # the margin over the best trivial baseline, of the ranked_by metric
                rows.append({**base, "metric": r["ranked_by"], "statistic": f"margin over {r['floor_baseline']}",
                             "value": r["margin"], "ci_low": r["margin_ci_low"], "ci_high": r["margin_ci_high"],
                             "higher_is_better": True})
            for stat in ("n_failed", "rank", "variant_rank"):
                rows.append({**base, "statistic": stat, "value": float(r[stat]), "ci_low": math.nan,
                             "ci_high": math.nan, "higher_is_better": False})
            if r["secondary_metric"]:  # the secondary metric's statistics: rows of that metric
                second = METRICS.get(r["secondary_metric"], True)
                for stat in secondary.STATS:
                    rows.append({**base, "metric": r["secondary_metric"], "statistic": stat,
                                 "value": r[f"secondary_{stat}"], "ci_low": r[f"secondary_{stat}_ci_low"],
                                 "ci_high": r[f"secondary_{stat}_ci_high"], "higher_is_better": second})
        prov = self.per_task[prov_cols].iloc[0].to_dict() if len(self.per_task) else {c: "" for c in prov_cols}
        if len(self.per_task):  # the overall ranking spans every board: join their provenance
            for c in PROVENANCE:
                prov[c] = "; ".join(sorted({v for s in self.per_task[c] for v in str(s).split("; ")} - {""}))
        for r in self.overall.to_dict("records"):
            base = {"task": "overall", "train_len": 0, "metric": "rank", "encoding": r["encoding"],
                    "variant": r["variant"], "series": r["series"], "kind": "model",
                    "not_learned": r["n_tasks"] == 0, "learnability": "", "complete": True, "above_floor": True,
                    "ci_low": math.nan, "ci_high": math.nan, "n": r["n_tasks"],
                    "ci_method": "", "ranked_by": "", "higher_is_better": False, **prov}
            rows.append({**base, "statistic": "mean_rank", "value": r["mean_rank"]})
            rows.append({**base, "statistic": "n_at_floor", "value": float(r["n_at_floor"])})
            rows.append({**base, "statistic": "rank", "value": float(r["rank"])})
        columns = ["task", "train_len", "metric", "encoding", "variant", "series", "kind", "statistic", "value",
                   "ci_low", "ci_high", "n", "higher_is_better", "not_learned", "learnability", "complete",
                   "above_floor", "ci_method", "ranked_by", *prov_cols]
        out = pd.DataFrame(rows, columns=columns)
        return out.astype({"train_len": "int64", "n": "int64", "value": "float64", "ci_low": "float64",
                           "ci_high": "float64", "higher_is_better": bool, "not_learned": bool, "complete": bool,
                           "above_floor": bool, "schema_version": "int64"})


def _series_key(encoding: str, variant: str) -> tuple:
    return (int(stats.is_baseline(encoding)), series_sort_key(encoding, variant))


def leaderboard(df: pd.DataFrame, *, n_boot: int | None = None) -> Leaderboard:
    """Aggregate a tidy results frame into the leaderboard (see the module docstring and
    `lenbench.report.stats`). `n_boot` overrides the number of bootstrap resamples."""
    df = load_results(df) if not list(df.columns) == list(COLUMNS) else df
    df = whole_length(df)  # bucketed rows (per position, per needle depth) are not leaderboard rows
    per_task_parts, wide_rows, seed_parts, boards = [], [], [], {}
    ratios_all: set[float] = set()
    for task in task_order(df["task"]):
        tdf = df[df["task"] == task]
        metric = primary_metric(task, tdf["metric"].unique())
        hib = bool(METRICS.get(metric, tdf.loc[tdf["metric"] == metric, "higher_is_better"].iloc[0]))
        mdf = tdf[tdf["metric"] == metric]
        for train_len in sorted(mdf["train_len"].unique()):
            board = mdf[mdf["train_len"] == train_len]
            primary = stats.board_statistics(board, task, metric, hib, n_boot=n_boot or stats.N_BOOT)
            curves = primary.curves
            entries, boards[(task, int(train_len))] = secondary.with_secondary(
                primary, tdf[tdf["train_len"] == train_len], task, metric, hib, n_boot or stats.N_BOOT)
            seed_parts.append(stats.seed_learnability(board, task, metric, hib, n_boot=n_boot or stats.N_BOOT)
                              .assign(task=task, train_len=int(train_len), metric=metric))
            prov = _provenance(tdf[tdf["train_len"] == train_len])
            entries = entries.assign(task=task, train_len=int(train_len), metric=metric, higher_is_better=hib,
                                     series=[series_label(e, v) for e, v in zip(entries["encoding"], entries["variant"],
                                                                                strict=True)], **prov)
            sign = -1.0 if hib else 1.0  # ties (a shared rank, unranked entries) ordered by score, best first
            entries["_order"] = [(KIND_ORDER[k], math.inf if math.isnan(r) else r,
                                  math.inf if math.isnan(p) else sign * p, _series_key(e, v))
                                 for k, r, p, e, v in zip(entries["kind"], entries["rank"], entries["past_train_mean"],
                                                          entries["encoding"], entries["variant"], strict=True)]
            entries = entries.iloc[sorted(range(len(entries)), key=lambda i: entries["_order"].iloc[i])]
            per_task_parts.append(entries.drop(columns="_order"))
            for e in sorted(entries.to_dict("records"), key=lambda e: _series_key(e["encoding"], e["variant"])):
                c = curves[(curves["encoding"] == e["encoding"]) & (curves["variant"] == e["variant"])]
                sdf = board[(board["encoding"] == e["encoding"]) & (board["variant"] == e["variant"])]
                # A length where any seed failed shows as failed (NaN) in the wide table.
                shown = sdf.groupby("ratio", sort=True)["value"].agg(lambda v: v.mean() if v.notna().all() else math.nan)
                ratios_all.update(shown.index)
                row = {"task": task, "train_len": int(train_len), "metric": metric, "higher_is_better": hib,
                       "encoding": e["encoding"], "variant": e["variant"], "series": e["series"], "kind": e["kind"],
                       "not_learned": e["not_learned"], "n_seeds": e["n_seeds"], "rank": e["rank"],
                       "variant_rank": e["variant_rank"], **prov}
                row.update({float(k): float(v) for k, v in shown.items()})
                for ratio, lo, hi, ok in zip(c["ratio"], c["ci_low"], c["ci_high"], ~c["ratio"].map(shown).isna(),
                                             strict=True):
                    row[(float(ratio), "lo")] = lo if ok else math.nan
                    row[(float(ratio), "hi")] = hi if ok else math.nan
                wide_rows.append(row)
    stat_cols = [c for s in SCORE_STATS for c in (s, f"{s}_ci_low", f"{s}_ci_high")]
    prov_cols = ["schema_version", *PROVENANCE]
    columns = ["task", "train_len", "metric", "higher_is_better", "encoding", "variant", "series", "kind", "n_seeds",
               "n_samples", "ci_method", *stat_cols, "n_failed", "not_learned", *ENTRY_FLAGS, "rank", "variant_rank",
               *secondary.COLUMNS, *prov_cols]
    per_task = pd.concat(per_task_parts, ignore_index=True)[columns] if per_task_parts else pd.DataFrame(columns=columns)
    per_task = per_task.astype({"train_len": "int64", "n_seeds": "int64", "n_samples": "int64", "higher_is_better": bool,
                                "not_learned": bool, "complete": bool, "above_floor": bool, "schema_version": "int64",
                                **{c: "float64" for c in (*stat_cols, "n_failed", "rank", "variant_rank", "margin",
                                                          "margin_ci_low", "margin_ci_high", "learned_ci_low",
                                                          "learned_ci_high", *secondary.COLUMNS[2:])}})

    overall = stats.overall_ranks(per_task)
    overall.insert(2, "series", overall["encoding"])
    overall["_o"] = [(math.inf if math.isnan(r) else r, encoding_sort_key(e)) for r, e in
                     zip(overall["rank"], overall["encoding"], strict=True)]
    overall = overall.iloc[sorted(range(len(overall)), key=lambda i: overall["_o"].iloc[i])].drop(columns="_o")
    overall = overall.astype({"mean_rank": "float64", "n_tasks": "int64", "n_at_floor": "int64", "n_uncertain": "int64",
                              "n_not_learned": "int64", "rank": "float64"})

    ratio_cols = sorted(ratios_all)
    ci_cols = [(r, side) for r in ratio_cols for side in ("lo", "hi")]
    wide = pd.DataFrame(wide_rows, columns=["task", "train_len", "metric", "higher_is_better", "encoding", "variant",
                                            "series", "kind", "not_learned", "n_seeds", "rank", "variant_rank",
                                            *ratio_cols, *ci_cols, *prov_cols])
    names = {r: ratio_label(r) for r in ratio_cols}
    names.update({(r, s): f"{ratio_label(r)}_ci_{'low' if s == 'lo' else 'high'}" for r, s in ci_cols})
    wide.columns = [names.get(c, c) for c in wide.columns]
    wide = wide.astype({"train_len": "int64", "higher_is_better": bool, "not_learned": bool, "n_seeds": "int64",
                        "rank": "float64", "variant_rank": "float64", "schema_version": "int64",
                        **{names[c]: "float64" for c in (*ratio_cols, *ci_cols)}})
    seed_cols = ["task", "train_len", "metric", "encoding", "variant", "seed", "in_dist", "ci_low", "ci_high",
                 "threshold", "learnability"]
    seeds = pd.concat(seed_parts, ignore_index=True)[seed_cols] if seed_parts else pd.DataFrame(columns=seed_cols)
    return Leaderboard(per_task.reset_index(drop=True), overall.reset_index(drop=True), wide.reset_index(drop=True),
                       seeds, boards)


def ratio_label(ratio: float) -> str:
    return f"{ratio:g}x"


def read_leaderboard_csv(path: str | Path) -> pd.DataFrame:
    """A long-form leaderboard CSV (as `Leaderboard.long` writes it), typed."""
    path = Path(path)
    raw = _read_csv_strings(path)
    if csv_kind(raw.columns) != "leaderboard":
        raise ResultsError(f"{path}: not a leaderboard CSV (expected columns task, encoding, variant, statistic, "
                           "value, higher_is_better as written by `lenbench report`)")
    try:
        out = pd.DataFrame({
            "task": raw["task"].astype(str), "train_len": [to_int(v, 0) for v in raw.get("train_len", [""] * len(raw))],
            "metric": raw.get("metric", pd.Series([""] * len(raw))).astype(str),
            "encoding": raw["encoding"].astype(str), "variant": raw["variant"].astype(str),
            "statistic": raw["statistic"].astype(str), "value": [to_float(v) for v in raw["value"]],
            "higher_is_better": [to_bool(v) for v in raw["higher_is_better"]],
        })
    except (ValueError, KeyError) as err:
        raise ResultsError(f"{path}: malformed leaderboard CSV ({err})") from None
    return out


# --- text ---------------------------------------------------------------------------------------


def to_csv_text(df: pd.DataFrame) -> str:
    """CSV text with floats written by repr (exact round trip), NaN as empty, inf as "inf"; string
    cells a spreadsheet would run as formulas are quoted (`lenbench.escape.csv_text`)."""
    return csv_text(df)


def _fmt(value: float, metric: str = "") -> str:
    if math.isnan(value):
        return "fail" if metric and metric != "retention" else "–"
    facts = find_metric(metric)
    if math.isinf(value):
        worst = facts is not None and (value < 0) == facts.higher_is_better
        return "fail" if worst else f"{value}"
    if facts is not None and facts.bounds is None and abs(value) >= 1000:
        return f"{value:.4g}"
    text = f"{value:.3f}"
    return "0.000" if text == "-0.000" else text


def _fmt_ci(mean: float, lo: float, hi: float, metric: str) -> str:
    text = _fmt(mean, metric)
    if math.isfinite(lo) and math.isfinite(hi) and math.isfinite(mean):
        text += f" ± {_fmt((hi - lo) / 2)}"
    return text


#: What "holds to" means, where a table shows it (leaderboard.md and the page quote this one sentence).
HOLDS_TO = (f"*holds to*: the largest length ratio up to which every score stays within {stats.WITHIN * 100:g} % of the in-dist "
            f"score (at least {(1 - stats.WITHIN) * 100:g} % of it; for perplexity at most {(1 + stats.WITHIN) * 100:g} %), of the "
            "mean over seeds (a discrete statistic: no interval); n/a for an entry whose in-dist score is 0, such as "
            "one at zero everywhere: it has nothing to hold.")
#: The rank column's marks (leaderboard.md, summary.md and the page quote this one sentence).
RANK_MARKS = ("\"=3\": a rank shared by entries the data do not separate; *?*: uncertain whether learned at 1× (the "
              "interval of its in-dist score straddles the threshold); *n/l*: not learned at 1×; *inc*: a length or "
              "seed missing; *floor*: not above the best trivial baseline past the training length with support. "
              "Only learned, complete entries above the floor are ranked; baselines are not ranked.")


def _holds_nothing(r: dict) -> bool:
    """An entry whose in-dist score is 0 on a higher-is-better metric: "holds to" is n/a for it."""
    return bool(r["higher_is_better"]) and r["in_dist"] == 0


def _fmt_ratio(mean: float, *, holds_nothing: bool = False) -> str:
    """"Holds to": a ratio, never with an interval (it is discrete)."""
    if holds_nothing:
        return "n/a"
    return "–" if math.isnan(mean) else f"{mean:g}×"


def wrap_prose(text: str, indent: str = "") -> str:
    """Prose hard-wrapped at 110 characters, as the docs pages are (a table row is not); `indent`
    starts every line after the first (a list item's continuation)."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width=110, subsequent_indent=indent, break_long_words=False,
                                    break_on_hyphens=False))


def markdown_table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    """A GitHub markdown table (no tabulate needed); `align` per column: "l" or "r". Every cell
    is escaped (`lenbench.escape.md_cell`)."""
    align = align or ["l"] * len(header)
    esc = md_cell

    widths = [max(len(esc(h)), *(len(esc(r[i])) for r in rows)) if rows else len(esc(h)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(  # noqa: E731
        esc(c).rjust(w) if a == "r" else esc(c).ljust(w) for c, w, a in zip(cells, widths, align, strict=True)) + " |"
    rule = "| " + " | ".join(("-" * (w - 1) + ":") if a == "r" else "-" * w for w, a in zip(widths, align, strict=True)) + " |"
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def _fmt_rank(rank: float, ranks: Iterable[float], not_learned: bool = False, kind: str = "model", *,
              learnability: str = "", complete: bool = True, above_floor: bool = True) -> str:
    """"3" for a rank of its own, "=3" for a rank shared with another entry of the table; for an
    unranked entry why (`RANK_MARKS`): "inc" incomplete, "?" uncertain, "n/l" not learned,
    "floor" at the floor, "–" otherwise (baselines)."""
    if kind == "baseline":
        return "–"
    if not complete:
        return "inc"
    if learnability == stats.UNCERTAIN:
        return "?"
    if not_learned:
        return "n/l"
    if not above_floor:
        return "floor"
    if math.isnan(rank):
        return "–"
    shared = sum(1 for r in ranks if r == rank) > 1
    return f"{'=' if shared else ''}{int(rank)}"


def entry_rank(r: dict, rank_col: str, ranks: Iterable[float]) -> str:
    """`_fmt_rank` of one `Leaderboard.per_task` record."""
    return _fmt_rank(r[rank_col], ranks, r["not_learned"], r["kind"], learnability=r.get("learnability", ""),
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


BOARD_ALIGN = ["r", "l", "r", "r", "r", "r", "r", "r", "r"]


def board_second(rows: pd.DataFrame) -> str:
    """The secondary metric a board's tables show ("" when it has none)."""
    return str(rows["secondary_metric"].iloc[0]) if len(rows) and "secondary_metric" in rows else ""


def board_degrades(rows: pd.DataFrame) -> bool:
    """Whether a board's tables show the degradation (metrics built from nll sums: lm)."""
    return "degradation" in rows and bool(rows["degradation"].notna().any())


def board_header(metric: str, hib: bool, second: str = "", degradation: bool = False) -> list[str]:
    """Column names of a task's main or variant table (markdown and web page alike); with the
    secondary metric `second`, its mean past train after the primary's; with `degradation`, the
    nll past the training length minus the nll at 1× after retention."""
    arrow = {True: "↑", False: "↓"}
    extra = [f"past train {second} {arrow[bool(METRICS.get(second, True))]}"] if second else []
    return ["rank ↓", "encoding", f"in-dist {metric} {arrow[hib]}", f"mean past train {arrow[hib]}", *extra,
            "margin over floor ↑", "retention ↑", *(["degradation (nats) ↓"] if degradation else []),
            "holds to (ratio) ↑", "failed lengths ↓", "seeds"]


def board_align(second: str = "", degradation: bool = False) -> list[str]:
    """Column alignment of `board_header`'s table."""
    return [*BOARD_ALIGN[:4], *(["r"] if second else []), *BOARD_ALIGN[4:], *(["r"] if degradation else [])]


def board_table_rows(table: pd.DataFrame, rank_col: str, metric: str) -> list[list[str]]:
    """The formatted cells of a main (`rank_col` "rank") or variant ("variant_rank") table: rank
    (`RANK_MARKS`), series, then ``mean ± half-width`` of each statistic, the margin over the floor
    (of the metric the board ranks by), failed lengths and seeds, one list per row of `table`
    (`Leaderboard.per_task` rows)."""
    ranks = list(table[rank_col])
    second = board_second(table)
    degrades = board_degrades(table)
    return [[entry_rank(r, rank_col, ranks), entry_label(r),
             _fmt_ci(r["in_dist"], r["in_dist_ci_low"], r["in_dist_ci_high"], metric),
             _fmt_ci(r["past_train_mean"], r["past_train_mean_ci_low"], r["past_train_mean_ci_high"], metric),
             *([_fmt_ci(r["secondary_past_train_mean"], r["secondary_past_train_mean_ci_low"],
                        r["secondary_past_train_mean_ci_high"], second)] if second else []),
             "–" if r["kind"] == "baseline" or math.isnan(r["margin"]) else
             _fmt_ci(r["margin"], r["margin_ci_low"], r["margin_ci_high"], r["ranked_by"]).replace("fail", "–"),
             _fmt_ci(r["retention"], r["retention_ci_low"], r["retention_ci_high"], "retention"),
             *([_fmt_ci(r["degradation"], r["degradation_ci_low"], r["degradation_ci_high"], "retention")]
               if degrades else []),
             _fmt_ratio(r["max_ratio_within_10pct"], holds_nothing=_holds_nothing(r)),
             f"{r['n_failed']:g}", str(r["n_seeds"])] for r in table.to_dict("records")]


def variant_table(rows: pd.DataFrame, encoding: str) -> pd.DataFrame:
    """One encoding's trained model and its inference-time variants of a board, by variant rank."""
    table = rows[(rows["encoding"] == encoding) & (rows["kind"] != "baseline")]
    sign = -1.0 if bool(table["higher_is_better"].iloc[0]) else 1.0

    def key(i: int) -> tuple:
        rank, past = table["variant_rank"].iloc[i], table["past_train_mean"].iloc[i]
        return (math.inf if math.isnan(rank) else rank, math.inf if math.isnan(past) else sign * past,
                variant_sort_key(table["variant"].iloc[i]))

    return table.iloc[sorted(range(len(table)), key=key)]


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
        level = f" ({_fmt_ci(b['past_train_mean'], b['past_train_mean_ci_low'], b['past_train_mean_ci_high'], by)})"
    return (f"Floor: {named[0]}{level}, the best trivial baseline by {by} past the training length; "
            f"{above} of {len(learned)} learned models are above it with support (the 95 % interval of the margin).")


def learnability_lines(board: Leaderboard, task: str, train_len: int, rows: pd.DataFrame) -> list[list[str]]:
    """Rows of a board's learnability table: series, the pooled verdict with the interval it used,
    and each seed's verdict with its 1× score."""
    seeds = board.seeds[(board.seeds["task"] == task) & (board.seeds["train_len"] == train_len)] \
        if len(board.seeds) else board.seeds
    metric = rows["metric"].iloc[0]
    out = []
    for r in rows[rows["kind"] != "baseline"].to_dict("records"):
        lo, hi = r["learned_ci_low"], r["learned_ci_high"]
        against = "" if math.isnan(lo) else f" [{_fmt(lo)}, {_fmt(hi)}]"
        own = seeds[(seeds["encoding"] == r["encoding"]) & (seeds["variant"] == r["variant"])] if len(seeds) else seeds
        per_seed = ", ".join(f"{int(x['seed'])}: {_fmt(x['in_dist'], metric)} {_SHORT[x['learnability']]}"
                             for x in own.to_dict("records"))
        out.append([r["series"], r["learnability"] + against, per_seed or "–"])
    return out


_SHORT = {stats.LEARNED: "✓", stats.NOT_LEARNED: "✗", stats.UNCERTAIN: "?"}


def _learnability_note(metric: str, hib: bool, task: str) -> str:
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
    floor = floor_sentence(rows)
    if floor:
        parts += [md_text(floor), ""]
    main = rows[rows["kind"].isin(["model", "baseline"])]
    parts += [markdown_table(header, body(main, "rank"), align), ""]
    wide = board.wide[(board.wide["task"] == task) & (board.wide["train_len"] == train_len)
                      & (board.wide["kind"] != "variant")]
    ratio_cols = [c for c in wide.columns if c.endswith("x") and wide[c].notna().any()]
    if ratio_cols:
        parts += [f"{md_text(metric)} {arrow[hib]} by length ratio (mean over seeds ± 95 % half-width):", ""]
        lines = [[entry_label(r), *(_fmt_ci(r[c], r[f"{c}_ci_low"], r[f"{c}_ci_high"], metric) for c in ratio_cols)]
                 for r in wide.assign(learnability=wide.set_index(["encoding", "variant"]).index.map(
                     rows.set_index(["encoding", "variant"])["learnability"]).fillna("")).to_dict("records")]
        parts += [markdown_table(["encoding", *ratio_cols], lines, ["l", *["r"] * len(ratio_cols)]), ""]
    parts += [_learnability_note(metric, hib, task), ""]
    parts += [markdown_table(["entry", "learnability (95 % interval)", "per seed: in-dist"],
                             learnability_lines(board, task, train_len, rows[rows["kind"] != "variant"]),
                             ["l", "l", "l"]), ""]
    for encoding in dict.fromkeys(rows.loc[rows["kind"] == "variant", "encoding"]):
        table = variant_table(rows, encoding)
        parts += [f"### {md_text(task)}: {md_text(encoding)} and its inference-time variants (ranked among themselves)", ""]
        parts += [markdown_table(header, body(table, "variant_rank"), align), ""]
    return parts


#: The sentence on the statistics every leaderboard.md opens with (docs/statistics.md says more).
STATISTICS_NOTE = ("↑ higher is better, ↓ lower is better. Every value is the mean over seeds ± the half-width of its "
                   "95 % interval: a t interval over the seeds (the unit of replication), never narrower than the "
                   "evaluation samples allow. *In-dist*: score at the training length; *mean past train*: mean over "
                   "ratios > 1 (a failed length scores 0 accuracy / infinite perplexity); *margin over floor*: mean "
                   "past train minus the best trivial baseline's (better positive); *retention*: (score − chance) / "
                   "(in-dist − chance) averaged past 1× (ppl: in-dist / ppl); *degradation* (lm): nll past the training "
                   "length minus nll at 1×, in nats, on the same scored bytes; ")


def leaderboard_markdown(board: Leaderboard, df: pd.DataFrame | None = None) -> str:
    """The leaderboard as markdown: per task (and training length) the main table (trained
    models and baselines), the scores by length ratio, the learnability table and one table per
    encoding with variants; then the overall ranking. Values are ``mean ± 95 % half-width``;
    shared ranks show as "=3"."""
    parts = ["# lenbench leaderboard", ""]
    if df is not None and len(df):
        suites = md_text(", ".join(sorted(set(df["suite"]) - {""})) or "?")
        seeds = sorted(set(df["seed"]))
        prov = {c: ", ".join(sorted(set(df[c]) - {""})) or "?" for c in ("lenbench_version", "torch_version", "device", "git_sha")}
        prov = {c: md_text(v[:12] if c == "git_sha" else v) for c, v in prov.items()}
        one = " (one seed: intervals from evaluation sampling alone)" if len(seeds) == 1 else ""
        parts += [f"Suite: {suites}; seeds: {', '.join(map(str, seeds))}{one}; lenbench {prov['lenbench_version']}, "
                  f"torch {prov['torch_version']}, device {prov['device']}, commit {prov['git_sha']}.", ""]
    parts += [STATISTICS_NOTE + f"{HOLDS_TO} Rank = 1 + the number of entries better with support: the paired t test "
              "on the seeds' differences in mean past train, Holm-corrected over every pair of the table at a "
              f"family-wise {stats.ALPHA:g}. {RANK_MARKS}", ""]
    for (task, train_len), rows in board.per_task.groupby(["task", "train_len"], sort=False):
        parts += _board_sections(board, task, int(train_len), rows)
    parts += ["## Overall ranking (trained models; mean rank over the boards where each learned the task)", "",
              OVERALL_NOTE, ""]
    parts += [markdown_table(OVERALL_HEADER, overall_lines(board), ["r", "l", "r", "r", "r", "r", "r"]), ""]
    return "\n".join(parts)


#: The overall table's header and note (leaderboard.md, summary.md and the page).
OVERALL_HEADER = ["rank ↓", "encoding", "mean rank ↓", "boards counted", "at floor", "uncertain", "not learned"]
OVERALL_NOTE = ("Mean rank over the boards where the encoding learned the task (and the board ranked anything); on a "
                "board where it is at the floor it counts as that board's last place. Boards counted says on how "
                "many; uncertain and not learned boards are not counted.")


def overall_lines(board: Leaderboard) -> list[list[str]]:
    ranks = list(board.overall["rank"])
    return [[_fmt_rank(r.rank, ranks, r.n_tasks == 0), r.series,
             "–" if math.isnan(r.mean_rank) else f"{r.mean_rank:.2f}", str(r.n_tasks), str(r.n_at_floor),
             str(r.n_uncertain), str(r.n_not_learned)] for r in board.overall.itertuples(index=False)]


#: The ratios the summary shows where a board has them, with the board's longest ratio always added.
SUMMARY_RATIOS = (1.0, 2.0, 4.0)


def summary_ratios(wide: pd.DataFrame, ratios: Iterable[float] | None = None) -> list[str]:
    """The ratio columns of a board's summary: `ratios` (default `SUMMARY_RATIOS` plus the board's
    longest evaluated ratio, so a suite evaluated to 8× or 32× shows its own end) among those measured."""
    measured = [c for c in wide.columns if re.fullmatch(r"[0-9.]+x", c) and wide[c].notna().any()]
    if ratios is None:
        longest = max((float(c[:-1]) for c in measured), default=None)
        ratios = [*SUMMARY_RATIOS, *([longest] if longest is not None else [])]
    return list(dict.fromkeys(c for c in (ratio_label(r) for r in ratios) if c in measured))


def _summary_body(table: pd.DataFrame, rank_col: str, wide: pd.DataFrame, cols: list[str], metric: str) -> list[list[str]]:
    """Lines of a summary table: rank, series, the metric at each ratio column, mean past train."""
    ranks = list(table[rank_col])
    lines = []
    for r in table.to_dict("records"):
        w = wide.loc[(r["encoding"], r["variant"])]
        lines.append([entry_rank(r, rank_col, ranks), entry_label(r),
                      *(_fmt_ci(w[c], w[f"{c}_ci_low"], w[f"{c}_ci_high"], metric) for c in cols),
                      _fmt_ci(r["past_train_mean"], r["past_train_mean_ci_low"], r["past_train_mean_ci_high"], metric)])
    return lines


def summary_markdown(board: Leaderboard, ratios: Iterable[float] | None = None) -> str:
    """The short tables docs/board.md quotes: per task (and training length) the trained models and
    baselines, primary metric at `ratios` (default: `summary_ratios`, 1×, 2×, 4× and the board's
    longest; mean ± 95 % half-width), main-table rank
    (`RANK_MARKS`); then the overall ranking. `write_report` writes it as ``summary.md``; a test
    keeps docs/board.md's copy equal to the published one."""
    arrow = {True: "↑", False: "↓"}
    parts = []
    for (task, train_len), rows in board.per_task.groupby(["task", "train_len"], sort=False):
        metric = rows["metric"].iloc[0]
        hib = bool(rows["higher_is_better"].iloc[0])
        wide = board.wide[(board.wide["task"] == task) & (board.wide["train_len"] == train_len)].set_index(
            ["encoding", "variant"])
        cols = summary_ratios(wide, ratios)
        header = ["rank", "encoding", *(f"{metric} {c.replace('x', '×')}" for c in cols), f"mean past train {arrow[hib]}"]
        align = ["r", "l", *["r"] * (len(cols) + 1)]
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
