"""Tables, step 3 of the report path: the leaderboard frames (their markdown: `lenbench.report.markdown`;
number formatting: `lenbench.report.formatting`).

Reads rows (`lenbench.report.rows`) and statistics (`lenbench.report.stats`); the cost tables
(`lenbench.report.cost`), figures (`lenbench.report.plots`) and the page (`lenbench.report.page`)
read these tables, never the other way round.

The leaderboard (`leaderboard`) aggregates per task (and training length) and per (encoding,
variant) on the task's primary metric (`lenbench.metrics.PRIMARY_METRIC`: exact match for sequence
tasks, perplexity for lm); the statistics themselves are `lenbench.report.stats` (seed-level t
intervals, paired support ranks, not-learned flags, retention, variant tables), whose docstring
defines them:

- ``in_dist``, ``past_train_mean``, ``past_train_area`` (a failed length counts as the worst
  score: 0 for accuracies, +inf for perplexity; ``n_failed`` counts them), ``retention`` and
  ``degradation``, each with ``_ci_low`` / ``_ci_high``, and ``effective_length`` (no interval);
- ``learnability`` (learned / not learned / uncertain, with the interval it used), ``complete``,
  the margin over the board's best trivial baseline (``floor_baseline``, ``margin`` and its
  interval, ``above_floor``);
- ``rank`` in the task's main table (trained models, variant "none"), ``variant_rank`` in the table
  of one encoding's inference-time variants, both on the area past train
  (`lenbench.report.stats.AREA`); only learned, complete entries above the floor are ranked,
  with Holm's correction over each table's pairs;
- overall: each trained encoding's mean rank over the boards where it learned the task.

The leaderboard CSVs carry ``schema_version`` (`LEADERBOARD_SCHEMA_VERSION`) and the provenance
columns `PROVENANCE`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from lenbench.metrics import METRICS
from lenbench.report import intervals, secondary, stats
from lenbench.report.rows import (
    csv_kind,
    encoding_sort_key,
    load_results,
    primary_metric,
    read_csv_strings,
    series_label,
    series_sort_key,
    task_order,
    whole_length,
)
from lenbench.results.schema import COLUMNS, STOP_BUDGET, ResultsError
from lenbench.results.values import to_bool, to_float, to_int

SCORE_STATS = stats.STATS
#: The leaderboard CSVs' schema: 4 ranks on the area past train and has the effective length (3:
#: ranks on the mean past train, "holds to"; seed-level t intervals, Holm-corrected ranks,
#: learnability, completeness, the floor margin and degradation; 2: bootstrap intervals).
LEADERBOARD_SCHEMA_VERSION = 4
#: Per-entry columns beside the statistics (`lenbench.report.stats.board_statistics`).
ENTRY_FLAGS = ("complete", "learnability", "learned_ci_low", "learned_ci_high", "floor_baseline", "margin",
               "margin_ci_low", "margin_ci_high", "above_floor", "ranked_on")
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
            train_len, kind (models, baselines, variants), rank, within a shared rank by the score
            the rank came from (`ranked_score`, best first), then canonical series order.
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
    #: lm boards' `CONTEXT_METRIC` per ratio past the training length: task, train_len, encoding,
    #: variant, ratio, mean (over seeds), ci_low, ci_high (the t interval over seeds).
    context: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    #: trained encodings whose runs trained until convergence (`train.patience` > 0): task,
    #: train_len, encoding, n_runs (seeds), runs_at_max (runs that reached their maximum budget
    #: instead of converging: what rests on them may move with a larger maximum). Empty for boards
    #: trained for a fixed budget.
    budget: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    #: {(task, train_len): the board's own length ratios, ascending}: `wide` holds the union of
    #: every board's, so a board's cell outside its own lengths is absent, not failed.
    ratios: dict = dataclasses.field(default_factory=dict, repr=False)

    def ratio_columns(self, task: str, train_len: int) -> list[str]:
        """The `wide` columns of one board's length ratios ("1x", "2x", …), ascending; a board a
        task does not have has none."""
        return [ratio_label(r) for r in self.ratios.get((task, int(train_len)), [])]

    def long(self) -> pd.DataFrame:
        """Tidy long form: one row per task × train_len × encoding × variant × statistic, with
        value, ci_low, ci_high, n (seeds; tasks for the overall rows), higher_is_better of the
        statistic, kind, not_learned, ci_method, schema_version and provenance. The overall
        ranking appears under task "overall" (train_len 0, metric "rank")."""
        rows = []
        prov_cols = ["schema_version", *PROVENANCE]
        budget = {(b["task"], b["train_len"], b["encoding"]): (b["n_runs"], b["runs_at_max"])
                  for b in self.budget.to_dict("records")}
        for r in self.per_task.to_dict("records"):
            base = {"task": r["task"], "train_len": r["train_len"], "metric": r["metric"], "encoding": r["encoding"],
                    "variant": r["variant"], "series": r["series"], "kind": r["kind"], "not_learned": r["not_learned"],
                    "learnability": r["learnability"], "complete": r["complete"], "above_floor": r["above_floor"],
                    "n": r["n_seeds"], "ci_method": r["ci_method"], "ranked_by": r["ranked_by"],
                    "ranked_on": r["ranked_on"],
                    **{c: r[c] for c in prov_cols}}
            for stat in SCORE_STATS:
                if stat == "degradation" and math.isnan(r[stat]):
                    continue
                hib = True if stat in ("effective_length", "retention") else \
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
            if (r["task"], r["train_len"], r["encoding"]) in budget and r["kind"] != "baseline":
                n_runs, at_max = budget[(r["task"], r["train_len"], r["encoding"])]
                rows.append({**base, "statistic": RUNS_AT_MAX, "value": float(at_max), "ci_low": math.nan,
                             "ci_high": math.nan, "n": n_runs, "higher_is_better": False})
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
                    "ci_method": "", "ranked_by": "", "ranked_on": "", "higher_is_better": False, **prov}
            rows.append({**base, "statistic": "mean_rank", "value": r["mean_rank"]})
            rows.append({**base, "statistic": "n_at_floor", "value": float(r["n_at_floor"])})
            rows.append({**base, "statistic": "rank", "value": float(r["rank"])})
        columns = ["task", "train_len", "metric", "encoding", "variant", "series", "kind", "statistic", "value",
                   "ci_low", "ci_high", "n", "higher_is_better", "not_learned", "learnability", "complete",
                   "above_floor", "ci_method", "ranked_by", "ranked_on", *prov_cols]
        out = pd.DataFrame(rows, columns=columns)
        return out.astype({"train_len": "int64", "n": "int64", "value": "float64", "ci_low": "float64",
                           "ci_high": "float64", "higher_is_better": bool, "not_learned": bool, "complete": bool,
                           "above_floor": bool, "schema_version": "int64"})


#: The long leaderboard's statistic of a trained entry whose runs trained until convergence: how
#: many of its runs (its ``n``) reached their maximum budget instead (`Leaderboard.budget`).
RUNS_AT_MAX = "runs_at_max"
BUDGET_COLUMNS = ["task", "train_len", "encoding", "n_runs", "runs_at_max"]


def _budget_stops(df: pd.DataFrame) -> pd.DataFrame:
    """`Leaderboard.budget` of a results frame: per trained encoding whose rows trained until
    convergence (``patience=`` in their settings), its runs and those that stopped at the budget."""
    trained = df[(df["variant"] == "none") & df["settings"].astype(str).str.contains("patience=", regex=False)
                 & (df["status"] == "ok") & ~df["encoding"].map(stats.is_baseline)]
    if trained.empty:
        return pd.DataFrame(columns=BUDGET_COLUMNS)
    runs = trained.groupby(["task", "train_len", "encoding", "seed"], sort=False)["stop_reason"].first().reset_index()
    out = runs.groupby(["task", "train_len", "encoding"], sort=False).agg(
        n_runs=("seed", "nunique"), runs_at_max=("stop_reason", lambda v: int((v == STOP_BUDGET).sum()))).reset_index()
    return out.astype({"train_len": "int64", "n_runs": "int64", "runs_at_max": "int64"})[BUDGET_COLUMNS]


#: The metric the lm boards show per ratio beside the degradation: perplexity with the context cut
#: to the training length ÷ perplexity with the whole window, the same scored bytes (> 1: the longer
#: context helps).
CONTEXT_METRIC = "context_gain"
CONTEXT_COLUMNS = ["task", "train_len", "encoding", "variant", "ratio", "mean", "ci_low", "ci_high"]


def _context_curves(rows: pd.DataFrame, task: str, train_len: int, n_boot: int) -> pd.DataFrame:
    """`CONTEXT_METRIC`'s curves of one board's rows (empty where it has none)."""
    cg = rows[(rows["metric"] == CONTEXT_METRIC) & (rows["ratio"] > 1.0 + 1e-9)]
    if cg.empty:
        return pd.DataFrame(columns=CONTEXT_COLUMNS)
    curves = stats.board_statistics(cg, task, CONTEXT_METRIC, True, n_boot=n_boot).curves
    return curves.assign(task=task, train_len=int(train_len))[CONTEXT_COLUMNS]


#: Where an entry's point estimate of each ranking statistic (`lenbench.report.stats.RANKING`) is, by
#: whether the board ranks by its primary metric or by its secondary (`lenbench.report.secondary`).
#: The degradation is the primary's on either: it is nats of nll, and the nll metrics (perplexity,
#: bits per byte) rank the same entries in the same order, one a rescaling of the other.
SCORE_COLUMNS = {False: {stats.AREA: stats.AREA, "degradation": "degradation"},
                 True: {stats.AREA: f"secondary_{stats.AREA}", "degradation": "degradation"}}


def ranked_score(r: dict) -> float:
    """The point estimate of the statistic entry `r` was ranked on (its ``ranked_on`` of its
    ``ranked_by`` metric), oriented so that lower is better; +inf where it has none.

    It orders a table's entries within a shared rank (and the unranked ones): ties read best first,
    by the number the ranks came from, not by name. Baselines are never ranked; they are the floor,
    which gates on the area past train (`lenbench.report.stats`), so they read by that area.

    Args:
        r: a `Leaderboard.per_task` record (the entries of `leaderboard`, before or after ordering).
    """
    declared = dict(stats.RANKING.values())  # statistic → its declared direction (None: the metric's)
    on = r.get("ranked_on")
    on = on if isinstance(on, str) and on in declared else stats.AREA  # rows a secondary board left out
    on = stats.AREA if r.get("kind") == "baseline" else on  # a baseline is the floor: it gates on the level's area
    by = r.get("ranked_by") or r["metric"]
    value = float(r.get(SCORE_COLUMNS[by != r["metric"]][on], math.nan))
    up = bool(METRICS.get(by, r["higher_is_better"])) if declared[on] is None else declared[on]
    return math.inf if math.isnan(value) else (-value if up else value)


def in_table_order(entries: pd.DataFrame, rank_col: str, tiebreak: Callable[[dict], Any]) -> pd.DataFrame:
    """`entries` ordered as a table shows them: by rank (`rank_col`; unranked last), within a tie by
    `ranked_score` (best first), then by `tiebreak` (the canonical order of names). A board's rows
    (`rank_col` "rank") are grouped by kind first: models, baselines, variants (`KIND_ORDER`); one
    encoding's variant table ("variant_rank") mixes its trained model with its variants.

    Args:
        entries: `Leaderboard.per_task` rows of one board or one variant table.
        rank_col: "rank" (a board) or "variant_rank" (one encoding's variant table).
        tiebreak: record → a sort key; the last resort between entries of equal score.
    """
    records = entries.to_dict("records")
    keys = [(KIND_ORDER[r["kind"]] if rank_col == "rank" else 0, math.inf if math.isnan(r[rank_col]) else r[rank_col],
             ranked_score(r), tiebreak(r)) for r in records]
    return entries.iloc[sorted(range(len(records)), key=keys.__getitem__)]


def _series_key(encoding: str, variant: str) -> tuple:
    return (int(stats.is_baseline(encoding)), series_sort_key(encoding, variant))


def leaderboard(df: pd.DataFrame, *, n_boot: int | None = None) -> Leaderboard:
    """Aggregate a tidy results frame into the leaderboard (see the module docstring and
    `lenbench.report.stats`). `n_boot` overrides the number of bootstrap resamples."""
    df = load_results(df) if not list(df.columns) == list(COLUMNS) else df
    df = whole_length(df)  # bucketed rows (per position, per needle depth) are not leaderboard rows
    per_task_parts, wide_rows, seed_parts, boards, context_parts, board_ratios = [], [], [], {}, [], {}
    for task in task_order(df["task"]):
        tdf = df[df["task"] == task]
        metric = primary_metric(task, tdf["metric"].unique())
        hib = bool(METRICS.get(metric, tdf.loc[tdf["metric"] == metric, "higher_is_better"].iloc[0]))
        mdf = tdf[tdf["metric"] == metric]
        for train_len in sorted(mdf["train_len"].unique()):
            board = mdf[mdf["train_len"] == train_len]
            board_ratios[(task, int(train_len))] = sorted(float(r) for r in board["ratio"].unique())
            primary = stats.board_statistics(board, task, metric, hib, n_boot=n_boot or intervals.N_BOOT)
            curves = primary.curves
            entries, boards[(task, int(train_len))] = secondary.with_secondary(
                primary, tdf[tdf["train_len"] == train_len], task, metric, hib, n_boot or intervals.N_BOOT)
            seed_parts.append(stats.seed_learnability(board, task, metric, hib, n_boot=n_boot or intervals.N_BOOT)
                              .assign(task=task, train_len=int(train_len), metric=metric))
            context_parts.append(_context_curves(tdf[tdf["train_len"] == train_len], task, int(train_len),
                                                 n_boot or intervals.N_BOOT))
            prov = _provenance(tdf[tdf["train_len"] == train_len])
            entries = entries.assign(task=task, train_len=int(train_len), metric=metric, higher_is_better=hib,
                                     series=[series_label(e, v) for e, v in zip(entries["encoding"], entries["variant"],
                                                                                strict=True)], **prov)
            per_task_parts.append(in_table_order(entries, "rank", lambda r: _series_key(r["encoding"], r["variant"])))
            for e in sorted(entries.to_dict("records"), key=lambda e: _series_key(e["encoding"], e["variant"])):
                c = curves[(curves["encoding"] == e["encoding"]) & (curves["variant"] == e["variant"])]
                sdf = board[(board["encoding"] == e["encoding"]) & (board["variant"] == e["variant"])]
                # A length where any seed failed shows as failed (NaN) in the wide table.
                shown = sdf.groupby("ratio", sort=True)["value"].agg(lambda v: v.mean() if v.notna().all() else math.nan)
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

    ratio_cols = sorted(set().union(*board_ratios.values()))  # every board's lengths
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
    context = [c for c in context_parts if len(c)]
    context = pd.concat(context, ignore_index=True) if context else pd.DataFrame(columns=CONTEXT_COLUMNS)
    return Leaderboard(per_task.reset_index(drop=True), overall.reset_index(drop=True), wide.reset_index(drop=True),
                       seeds, boards, context, _budget_stops(df), board_ratios)


def ratio_label(ratio: float) -> str:
    return f"{ratio:g}x"


def read_leaderboard_csv(path: str | Path) -> pd.DataFrame:
    """A long-form leaderboard CSV (as `Leaderboard.long` writes it), typed."""
    path = Path(path)
    raw = read_csv_strings(path)
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
