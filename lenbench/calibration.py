"""`lenbench calibrate`: the smallest training budget at which a task is learned, by measurement.

A calibration suite (the preset `calibration`, or any suite YAML) lists each task's *ladder*: its
entries of one task name, in the order to try them (cheapest first), each a per-task override of
the suite's budget with its own label, e.g.::

    tasks:
      - {name: copy, train_len: 16, label: copy_L16_1k}
      - {name: copy, train_len: 8, train: {steps: 2000}, label: copy_L8_2k}

A *rung* passes when at least half of the suite's encodings are learned at 1× — the board's own
definition (`lenbench.report.tables.leaderboard`: the mean in-distribution score over the seeds
reaches the metric's learned threshold, e.g. exact match ≥ 0.9; perplexity better than the
unigram baseline). A rung that trains until convergence (`train.patience` > 0: its `steps` are a
maximum) passes only if, besides, every run of it converged (`stop_reason` "converged"): its
budget is then a maximum no core run reaches, not the quorum's edge, and a ladder of maxima climbs
until the runs stop by themselves. The seeds should be disjoint from the published boards' (the
preset `calibration` uses 3, 4 and 5; quick and the catalog 0, 1 and 2), so that a budget is not
chosen on the noise of the very cells it publishes; `calibrate` says so when they overlap.

`calibrate` runs the first rung of every task named, then the next rung of the tasks still
unlearned, and so on (each round one `run_suite` call: cells are cached and resumable like any
run's), and stops a task at its first passing rung (all rungs with `every_rung`). A task
no rung passes is reported as such: it is not to be ranked at any budget tried. A rung with failed
cells that does not pass stops its task *undecided* (what failed might have learned it): the
command exits 1 and names them; `--retry-failed` reruns them.

The study's table (`calibration.csv`, `calibration.md` in the output directory) has one row per
rung tried: its settings, how many encodings were learned (and which), every encoding's
in-distribution score with its 95 % interval, the mean training seconds per cell, and the verdict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from lenbench.atomic import atomic_write_text
from lenbench.config import Suite, TaskSpec
from lenbench.registry import did_you_mean

#: Columns of calibration.csv, in order.
COLUMNS = ("task", "rung", "label", "train_len", "settings", "params", "metric", "threshold", "n_learned",
           "n_encodings", "passes", "learned", "scores", "seconds_per_cell", "n_cells", "n_failed", "verdict",
           "n_converged", "max_train_steps")

#: The columns tables written before convergence training lack (`read_table` fills them empty: those
#: rungs trained exactly their steps).
CONVERGENCE_COLUMNS = ("n_converged", "max_train_steps")


#: The fraction of a suite's encodings that must be learned for a rung to pass.
QUORUM = 0.5


def ladders(suite: Suite, tasks: Iterable[str] | None = None) -> dict[str, list[TaskSpec]]:
    """Each task name's entries in `suite`, in suite order (its ladder); only `tasks` when given.

    Raises:
        ValueError: a task name the suite has no entry of (with a did-you-mean).
    """
    out: dict[str, list[TaskSpec]] = {}
    for spec in suite.tasks:
        out.setdefault(spec.name, []).append(spec)
    if tasks is None:
        return out
    wanted = list(dict.fromkeys(tasks))
    for name in wanted:
        if name not in out:
            raise ValueError(f"calibrate: suite {suite.name!r} has no ladder for task {name!r}"
                             f"{did_you_mean(name, list(out))} (its tasks: {', '.join(out)}); add entries of it "
                             "to the suite's `tasks:`")
    return {name: out[name] for name in wanted}


def _settings(spec: TaskSpec, suite: Suite) -> str:
    """The rung's budget in one short line: what it overrides of the suite, e.g. "steps=3000"."""
    over = {**spec.train, **{f"eval.{k}": v for k, v in spec.eval.items()}}
    base = suite.train
    shown = {"steps": over.pop("steps", base.steps), **over}
    return " ".join(f"{k}={v}" for k, v in shown.items())


def _until_converged(spec: TaskSpec, suite: Suite) -> bool:
    """Whether the rung trains until convergence (`train.patience` > 0: its steps are a maximum)."""
    return spec.train_spec(suite.train).patience > 0


def _params(spec: TaskSpec) -> str:
    """The rung's task parameters in one short line, e.g. "num_keys=64"."""
    return " ".join(f"{k}={v}" for k, v in spec.params.items())


def rung_result(board: pd.DataFrame, cells: pd.DataFrame, spec: TaskSpec, suite: Suite, rung: int) -> dict[str, Any]:
    """One row of the calibration table: the rung `spec` (the `rung`-th of its ladder) as measured.

    Args:
        board: the leaderboard's `per_task` frame of the calibration run.
        cells: one row per cell of the run (`CELL_COLUMNS`): task, train_len, encoding,
            train_seconds, status, train_steps, stop_reason.
    """
    from lenbench.metrics import learned_min
    from lenbench.report.rows import board_rows
    from lenbench.results.schema import STOP_CONVERGED

    train_len = spec.train_len[0]
    rows = board_rows(board, spec.key, train_len)
    rows = rows[rows["kind"] == "model"]
    keys = [e.key for e in suite.encodings]
    rows = rows[rows["encoding"].isin(keys)]
    learned_here = set(rows.loc[~rows["not_learned"].astype(bool), "encoding"])
    learned = [e for e in keys if e in learned_here]
    scores = []
    for e in keys:
        r = rows[rows["encoding"] == e]
        if r.empty:
            scores.append(f"{e} –")
            continue
        r = r.iloc[0]
        half = (r["in_dist_ci_high"] - r["in_dist_ci_low"]) / 2
        scores.append(f"{e} {r['in_dist']:.3f}±{half:.3f}")
    mine = board_rows(cells, spec.key, train_len)
    mine = mine[mine["encoding"].isin(keys)]
    failed = mine[mine["status"] != "ok"]
    mine = mine[mine["status"] == "ok"]
    metric = rows["metric"].iloc[0] if len(rows) else ""
    threshold = learned_min(metric) if metric else None
    n = len(keys)
    passes = bool(len(rows)) and len(learned) >= math.ceil(QUORUM * n)
    until_converged = _until_converged(spec, suite)
    converged = int((mine["stop_reason"] == STOP_CONVERGED).sum())
    if until_converged:  # a maximum some run reached is the quorum's edge again: raise it
        passes = passes and converged == len(mine)
    return {
        "task": spec.name, "rung": rung, "label": spec.key, "train_len": train_len,
        "settings": _settings(spec, suite), "params": _params(spec),
        "metric": metric, "threshold": "baseline" if metric and threshold is None else threshold,
        "n_learned": len(learned), "n_encodings": n, "passes": passes, "learned": " ".join(learned),
        "scores": "; ".join(scores), "seconds_per_cell": float(mine["train_seconds"].mean()) if len(mine) else math.nan,
        "n_cells": len(mine), "n_failed": len(failed), "verdict": "",
        "n_converged": converged if until_converged else "",
        "max_train_steps": int(mine["train_steps"].max()) if until_converged and len(mine) else "",
    }


#: The columns of `_cells`' frame, the per-cell facts `rung_result` reads.
CELL_COLUMNS = ("task", "train_len", "encoding", "train_seconds", "status", "train_steps", "stop_reason")


def _cells(out: Path, cell_ids: set[str]) -> pd.DataFrame:
    """One row per finished or failed cell `cell_ids` of a run directory: task, train_len, encoding,
    train_seconds, status, train_steps and stop_reason (from its rows; a cell without rows, or rows
    from before convergence training, stopped at its budget)."""
    from lenbench.results.schema import STOP_BUDGET
    from lenbench.run.store import load_cell_results

    records = [{"task": c.config.get("task_label") or c.config["task"],
                "train_len": int(c.config["train_len"]), "encoding": c.config["label"],
                "train_seconds": float(c.train_seconds), "status": c.status,
                "train_steps": (c.rows[0].get("train_steps") if c.rows else None),
                "stop_reason": (c.rows[0].get("stop_reason", STOP_BUDGET) if c.rows else STOP_BUDGET)}
               for c in load_cell_results(out) if c.cell_id in cell_ids]
    return pd.DataFrame(records, columns=list(CELL_COLUMNS))


def known_rungs(table: pd.DataFrame, suite: Suite) -> dict[str, dict[str, Any]]:
    """The rows of an earlier calibration table (`read_table`) that measured a rung of `suite` as it
    is now, by label: same task, training length, settings, parameters, encodings and number of
    cells (encodings × the suite's seeds). A row whose rung has changed since, or that left cells
    failed, is not reused: that rung runs again.

    Raises:
        ValueError: the table scored other encodings than `suite` has (both named).
    """
    keys = [e.key for e in suite.encodings]
    known: dict[str, dict[str, Any]] = {}
    for row in table.to_dict("records"):
        scored = [part.split(" ", 1)[0] for part in str(row["scores"]).split("; ") if part]
        if scored != keys:
            raise ValueError(f"calibrate --from: rung {row['label']!r} of the table scored encodings {', '.join(scored)}, "
                             f"suite {suite.name!r} has {', '.join(keys)}; calibrate with the suite the table was made with")
        known[row["label"]] = row
    reusable = {}
    for spec in suite.tasks:
        row = known.get(spec.key)
        if row is None or row["n_failed"] or row["n_cells"] != len(keys) * len(suite.seeds):
            continue  # failed cells, or other seeds than the suite's: measure it again
        until_converged = _until_converged(spec, suite)
        if (row["task"], row["train_len"], row["settings"], row["params"], row["n_converged"] != "") == (
                spec.name, spec.train_len[0], _settings(spec, suite), _params(spec), until_converged):
            reusable[spec.key] = {**row, "verdict": ""}
    return reusable


def published_seed_overlap(suite: Suite) -> list[int]:
    """The seeds of `suite` that a benchmark preset (`lenbench list suites`, purpose "benchmark",
    other than `suite` itself) also trains on, sorted: a calibration on them chooses its budgets
    partly on the noise of the cells those boards publish."""
    from lenbench.config import list_suites, load_suite

    presets = [load_suite(name) for name in list_suites() if name != suite.name]
    published = {seed for preset in presets if preset.purpose == "benchmark" for seed in preset.seeds}
    return sorted(set(suite.seeds) & published)


def calibrate(suite: Suite, out: str | Path, *, tasks: Iterable[str] | None = None, every_rung: bool = False,
              known: pd.DataFrame | None = None, run: Callable[..., Any] | None = None,
              log: Callable[[str], None] = print, **run_options: Any) -> pd.DataFrame:
    """Climb each task's ladder in `suite` (see the module docstring); write and return the table.

    Args:
        suite: the calibration suite (its encodings are the quorum's, its tasks the ladders).
        out: the run directory; calibration.csv and calibration.md are written there.
        tasks: task names to calibrate (default: every ladder of the suite).
        every_rung: run every rung instead of stopping each task at its first passing one.
        known: an earlier calibration table of this suite (`read_table`, e.g. the published study):
            its rows of rungs unchanged since (`known_rungs`) are taken as measured instead of run
            again, so a ladder extended by a rung runs that rung only. Its rows past the rung that
            now decides a task (a cheaper rung inserted before them that passes) stay in the table,
            in ladder order: measured once, they are kept, not run.
        run: the runner (default `lenbench.run.driver.run_suite`), called as
            ``run(suite_of_this_round, out, **run_options)``.
        run_options: passed to the runner (executor, workers, threads, progress, ...).
    """
    from lenbench.report.rows import load_results
    from lenbench.report.tables import leaderboard

    if run is None:
        from lenbench.run.driver import run_suite as run
    out = Path(out)
    ladder = ladders(suite, tasks)
    if overlap := published_seed_overlap(suite):
        log(f"calibrate: seed(s) {', '.join(map(str, overlap))} of suite {suite.name!r} are also seeds of the benchmark "
            "presets: a budget chosen on them is chosen partly on the noise of the cells it publishes; calibrate on "
            "other seeds (the preset `calibration` uses 3, 4 and 5)")
    todo = {name: list(rungs) for name, rungs in ladder.items()}
    results: dict[str, list[dict]] = {name: [] for name in todo}
    reuse = known_rungs(known, suite) if known is not None else {}

    def settled(name: str) -> bool:  # the task's ladder is decided: no rung left to run
        rows = results[name]
        return bool(rows) and ((rows[-1]["passes"] and not every_rung) or len(rows) == len(todo[name]))

    round_no = 0
    while todo:
        for name in list(todo):  # rungs the earlier table measured: taken as they are, in ladder order
            while not settled(name) and todo[name][len(results[name])].key in reuse:
                spec = todo[name][len(results[name])]
                results[name].append({**reuse[spec.key], "rung": len(results[name]) + 1})
                log(f"calibrate: {spec.key}: {results[name][-1]['n_learned']}/{results[name][-1]['n_encodings']} "
                    "learned (from the earlier table)")
            if settled(name):
                del todo[name]
        if not todo:
            break
        round_no += 1
        this_round = {name: rungs[len(results[name])] for name, rungs in todo.items()}
        log(f"calibrate: round {round_no}: {', '.join(s.key for s in this_round.values())}")
        round_suite = dataclasses.replace(suite, tasks=tuple(this_round.values()))
        run(round_suite, out, **run_options)
        # this round's cells only: a rung whose settings changed since an earlier calibration into `out`
        # keeps its label, and its older cells there measure the same rows
        ids = {cell.cell_id for cell in round_suite.cells()}
        board = leaderboard(load_results(out, cell_ids=ids)).per_task
        cells = _cells(out, ids)
        for name, spec in this_round.items():
            row = rung_result(board, cells, spec, suite, len(results[name]) + 1)
            results[name].append(row)
            log(f"calibrate: {spec.key}: {row['n_learned']}/{row['n_encodings']} learned"
                f"{' (passes)' if row['passes'] else ''}")
            undecided = row["n_failed"] and not row["passes"]  # what failed might have learned it
            if undecided or settled(name):
                del todo[name]
    for name, rows in results.items():  # past a passing rung: the rungs the earlier table measured stay in it
        if rows and rows[-1]["passes"]:
            rows += [{**reuse[spec.key], "rung": i + 1} for i, spec in enumerate(ladder[name]) if i >= len(rows)
                     and spec.key in reuse]
    for rows in results.values():
        passing = [r for r in rows if r["passes"]]
        if rows[-1]["n_failed"] and not rows[-1]["passes"]:
            rows[-1]["verdict"] = f"undecided: {rows[-1]['n_failed']} cell(s) failed; rerun with --retry-failed"
        elif passing:
            passing[0]["verdict"] = ("calibrated: the smallest maximum tried at which every run converged"
                                     if passing[0]["n_converged"] != "" else
                                     "calibrated: the smallest budget tried that passes")
        elif rows[-1]["n_converged"] != "" and rows[-1]["n_learned"] >= math.ceil(QUORUM * rows[-1]["n_encodings"]):
            last = rows[-1]
            rows[-1]["verdict"] = (f"learned, but {last['n_cells'] - last['n_converged']} of {last['n_cells']} runs "
                                   "stopped at the maximum: raise it (findings resting on them depend on the budget)")
        else:
            rows[-1]["verdict"] = "not learned at any budget tried: shown, not ranked"
    table = pd.DataFrame([r for rows in results.values() for r in rows], columns=list(COLUMNS))
    write_table(table, out, suite)
    return table


def markdown(table: pd.DataFrame, suite: Suite) -> str:
    """The calibration table as markdown: one row per rung tried, the verdicts in bold."""
    from lenbench.escape import md_text
    from lenbench.report.formatting import markdown_table, wrap_prose

    n = len(suite.encodings)
    head = [f"# Calibration of suite {md_text(suite.name)}", "",
            f"A rung passes when at least {math.ceil(QUORUM * n)} of the {n} encodings ({', '.join(e.key for e in suite.encodings)}) "
            f"are learned at 1× (the board's definition: the mean in-distribution score over seed(s) "
            f"{', '.join(map(str, suite.seeds))} reaches the metric's learned threshold). Base budget: "
            f"d_model {suite.model.d_model}, {suite.model.n_layers} layer(s), {suite.train.steps} steps × batch "
            f"{suite.train.batch_size}, lr {suite.train.lr:g}, {suite.train.length_sampling} lengths; each rung's "
            "overrides are in *settings*. Scores: in-distribution mean ± 95 % half-width. Seconds: mean training "
            "time per cell.", ""]
    header = ["task", "rung", "train len", "settings", "metric", "learned", "s / cell", "verdict"]
    rows = [[r.task, r.label, str(r.train_len), " ".join(x for x in (r.settings, r.params) if isinstance(x, str) and x),
             r.metric, f"{r.n_learned}/{r.n_encodings}" + (f" ({r.n_failed} failed)" if r.n_failed else ""),
             "–" if math.isnan(r.seconds_per_cell) else f"{r.seconds_per_cell:.1f}",
             r.verdict or ("passes" if r.passes else "")] for r in table.itertuples()]
    align = ["l", "l", "r", "l", "l", "r", "r", "l"]
    if (table["n_converged"] != "").any():  # rungs trained until convergence: how many runs stopped by themselves
        header.insert(6, "converged (most steps)")
        align.insert(6, "r")
        for row, r in zip(rows, table.itertuples(), strict=True):
            row.insert(6, "–" if r.n_converged == "" else f"{r.n_converged}/{r.n_cells} ({r.max_train_steps})")
        head[2] += (" *Converged*: the runs that stopped because their validation loss stopped improving, of the "
                    "rung's finished runs, with the most steps any of them trained; a rung trained until convergence "
                    "passes only if every run converged.")
    scores = ["", "## Scores per rung", ""]
    for _, r in table.iterrows():
        scores.append(wrap_prose(f"- **{md_text(r['label'])}**: {md_text(r['scores'])}", indent="  "))
    head[2] = wrap_prose(head[2])
    return "\n".join([*head, markdown_table(header, rows, align), *scores, ""])


def read_table(path: str | Path) -> pd.DataFrame:
    """A calibration.csv as `calibrate` returned it (the types `markdown` reads).

    Raises:
        ValueError: one line naming the file: unreadable, empty, not a CSV, other columns, a row
            with more fields than the header, no rows, or a value of the wrong type.
    """
    what = f"not a calibration table (columns {', '.join(COLUMNS)} as `lenbench calibrate` writes them)"
    try:
        table = pd.read_csv(path, keep_default_na=False, dtype=str)
    except OSError as err:
        raise ValueError(f"{path}: cannot be read ({err.strerror or type(err).__name__}); pass a calibration.csv "
                         "written by `lenbench calibrate`") from None
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ValueError(f"{path}: {what}: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    if list(table.columns) == [c for c in COLUMNS if c not in CONVERGENCE_COLUMNS]:
        table = table.assign(**{c: "" for c in CONVERGENCE_COLUMNS})  # rungs that trained exactly their steps
    if list(table.columns) != list(COLUMNS):
        raise ValueError(f"{path}: {what}")
    if not isinstance(table.index, pd.RangeIndex):  # pandas makes the extra leading fields an index
        raise ValueError(f"{path}: {what}: its rows have more fields than its header")
    if table.empty:
        raise ValueError(f"{path}: a calibration table with no rows, so no rung to reuse; pass the calibration.csv "
                         "of a run that measured some, or leave out --from")
    try:
        table = table.astype({"rung": int, "train_len": int, "n_learned": int, "n_encodings": int, "n_cells": int,
                              "n_failed": int,
                              "seconds_per_cell": float}).assign(passes=table["passes"] == "True")
        for col in CONVERGENCE_COLUMNS:  # an int where the rung trained until convergence, "" where not
            table[col] = [int(v) if v != "" else "" for v in table[col]]
        return table
    except (ValueError, OverflowError) as err:
        raise ValueError(f"{path}: {what}: {str(err).splitlines()[0]}") from None


def write_table(table: pd.DataFrame, out: Path, suite: Suite) -> list[Path]:
    """calibration.csv and calibration.md in `out`, each written atomically."""
    return [atomic_write_text(out / "calibration.csv", table.to_csv(index=False)),
            atomic_write_text(out / "calibration.md", markdown(table, suite))]
