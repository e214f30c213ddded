"""Hugging Face eval results: each encoding's board entry as a model card's ``model-index`` metadata.

The consumer is the Hugging Face Hub: a model repository's ``README.md`` front matter, whose
``model-index`` the Hub renders as the model's evaluation results and leaderboards read. The metadata
is built with ``huggingface_hub``'s own `EvalResult` and `ModelCardData` (the ``hf`` extra), so its
shape is the library's. docs/exports.md states the mapping:

- a **model** is one series of the board: an encoding as trained (``rope``) or one of its inference-time
  or fine-tuned variants (``rope+yarn``); its values are the board's: means over seeds with their 95 %
  intervals (`lenbench.report.tables.leaderboard`). Baselines have no model card.
- a **result** (task, dataset) is one board: task type ``text-generation``, task name ``Length
  extrapolation``, dataset type ``lenbench/<task>``, its config the suite, ``train_len`` in its args.
- its **metrics** are the board's statistics of the entry, ``<metric> <statistic>`` (``exact_match
  past_train_area``: what the board ranks by, `lenbench.metrics.Metric.ranks_on`; ``in_dist``,
  ``effective_length``, ``rank`` …) and the primary metric at each length ratio (``exact_match at 4x``),
  with ``metric_args`` holding the interval (``ci_low``, ``ci_high``) and the number of seeds. Values
  that are not finite numbers (a statistic the entry has none of) are left out; ``verified`` is false.
  The overall ranking is left out too: a rank among this source's encodings, not an evaluation.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from lenbench.atomic import atomic_write_text
from lenbench.export import require
from lenbench.names import RULE, is_safe_name
from lenbench.report.tables import leaderboard

TASK_TYPE = "text-generation"
TASK_NAME = "Length extrapolation"
#: The board rows that are a model's (`Leaderboard.per_task`'s kind): baselines have no model card.
MODEL_KINDS = ("model", "variant")
#: The long leaderboard's task of the overall ranking (`Leaderboard.long`): a rank among this source's
#: encodings, not an evaluation, so it is left out.
OVERALL = "overall"
#: Tags of every card.
TAGS = ["lenbench", "length-extrapolation", "positional-encoding"]


def _args(ci_low: float, ci_high: float, n: int, **extra: Any) -> dict[str, Any]:
    """``metric_args``: the interval where there is one, the number of seeds, and `extra`."""
    args: dict[str, Any] = dict(extra)
    if not math.isnan(ci_low) and not math.isnan(ci_high):
        args.update(ci_low=float(ci_low), ci_high=float(ci_high))
    args["n_seeds"] = int(n)
    return args


def eval_results(long: pd.DataFrame, wide: pd.DataFrame, series: str) -> list:
    """The `huggingface_hub.EvalResult` list of one series of a board (module docstring).

    Args:
        long: `Leaderboard.long()` (one row per statistic).
        wide: `Leaderboard.wide` (the primary metric per length ratio, ``<r>x`` columns).
        series: the series label (``rope``, ``rope+yarn``).
    """
    hub = require("huggingface_hub", "hf", "the hf export")
    out = []

    def result(row, metric_type: str, metric_name: str, config: str, value: float, args: dict) -> None:
        if not math.isfinite(value):
            return
        out.append(hub.EvalResult(
            task_type=TASK_TYPE, task_name=TASK_NAME, dataset_type=f"lenbench/{row.task}",
            dataset_name=f"lenbench {row.task}, trained at length {int(row.train_len)}",
            dataset_config=str(row.suite) or None, dataset_args={"train_len": int(row.train_len)},
            metric_type=metric_type, metric_name=metric_name, metric_config=config, metric_value=float(value),
            metric_args=args, verified=False))

    rows = long[(long["series"] == series) & long["kind"].isin(MODEL_KINDS) & (long["task"] != OVERALL)]
    for row in rows.itertuples(index=False):
        result(row, row.metric, f"{row.metric} {row.statistic}", str(row.statistic), row.value,
               _args(row.ci_low, row.ci_high, row.n, ranked_on=str(row.ranked_on)))
    ratios = [c for c in wide.columns if re.fullmatch(r"\d+(\.\d+)?x", str(c))]
    picked = wide[(wide["series"] == series) & wide["kind"].isin(MODEL_KINDS)]
    for values in picked.to_dict("records"):  # records: "4x" is no attribute name
        row = pd.Series(values)
        for col in ratios:
            result(row, row.metric, f"{row.metric} at {col}", col, float(values[col]),
                   _args(float(values.get(f"{col}_ci_low", math.nan)), float(values.get(f"{col}_ci_high", math.nan)),
                         row.n_seeds, ratio=float(col[:-1])))
    return out


def model_cards(df: pd.DataFrame) -> dict[str, str]:
    """Each series' model card text (front matter with ``model-index``, then a short body), by series.

    Raises:
        ValueError: no trained model in the rows, or a series name that is not a safe file name.
    """
    hub = require("huggingface_hub", "hf", "the hf export")
    board = leaderboard(df)
    long, wide = board.long(), board.wide
    names = [s for s in dict.fromkeys(board.per_task.loc[board.per_task["kind"].isin(MODEL_KINDS), "series"])]
    if not names:
        raise ValueError("no trained model on the board to export (only baselines, or no rows)")
    cards = {}
    for series in names:
        if not is_safe_name(series):
            raise ValueError(f"series {series!r} is not a safe file name ({RULE}); rename it in the source")
        data = hub.ModelCardData(model_name=series, eval_results=eval_results(long, wide, series),
                                 tags=list(TAGS), library_name="lenbench")
        body = (f"# {series}\n\nlenbench's board entry of the positional encoding `{series}`: how far past its "
                "training length it holds up, each value a mean over training seeds with its 95 % interval "
                "(metric_args). See lenbench's docs/exports.md for the mapping.\n")
        cards[series] = f"---\n{data.to_yaml()}\n---\n\n{body}"
    return cards


def export_hf(df: pd.DataFrame, out: str | Path | None) -> list[str]:
    """`lenbench export hf`: one ``<series>/README.md`` model card per series under `out`; the lines to print."""
    if out is None:
        raise ValueError("lenbench export hf needs --out DIR: the directory the model cards (<series>/README.md) go into")
    written = [atomic_write_text(Path(out) / series / "README.md", text) for series, text in model_cards(df).items()]
    return [f"wrote {len(written)} model card(s) to {out}:", *(f"  {p}" for p in written)]
