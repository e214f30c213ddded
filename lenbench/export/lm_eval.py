"""lm-evaluation-harness results: the aggregated results JSON and the ``--log_samples`` JSONL of each run.

The consumer is EleutherAI's lm-evaluation-harness and what reads its output (``lm_eval.utils.make_table``,
its W&B logger, the Open LLM Leaderboard's parsers, Zeno): the keys are those of ``lm_eval/result_schema.py``
(``EvalResults``, ``_TaskMetrics``, ``_SampleCount``, ``SampleResult``; lm-eval 0.4.x) and the file layout
that of ``lm_eval/loggers/evaluation_tracker.py`` (``<out>/<model_name_sanitized>/results_<date id>.json``
beside ``samples_<task>_<date id>.jsonl``). docs/exports.md states the mapping:

- a **model** (one results file) is one (encoding, variant, seed) of the source: an lm-eval run evaluates one
  model with one random seed (``config.random_seed``); the seeds of an encoding are separate runs, as
  separate lm-eval invocations would be (the board's seed-level mean and interval is the Hugging Face
  export's, `lenbench.export.hf`). Its name is ``lenbench-<suite>/<encoding>[+<variant>]-seed<seed>``;
  each task of it is its own trained checkpoint (lenbench trains one per task), named by the task's
  ``cell_id`` under ``lenbench.cells``.
- a **task** is one (task, training length, length ratio) — ``<task>_L<train_len>_x<ratio>`` (a ratio's
  ``.`` written ``p``) — and the ratios of one (task, training length) are the subtasks of the group
  ``<task>_L<train_len>`` (``group_subtasks``; the group has no aggregate metric, so like lm-eval the
  file has no ``groups`` key).
- a **metric** is ``"<metric>,none"`` (no filter), with ``"<metric>_stderr,none"``: the bootstrap standard
  error of the value over that run's evaluation samples (`BOOT_SEED`, `N_BOOT` resamples, as the board's
  intervals), or ``"N/A"`` for rows without sample scores. Only whole-length rows are exported (bucketed
  rows, per position or needle depth, have no lm-eval form); a failed length's metric is left out and
  named under ``lenbench.failed``.
- a **sample** (one JSONL line) is one evaluation example: ``doc_id`` its index (the same example for
  every encoding at that task, length and seed), every metric's per-sample score as a top-level float,
  and under ``doc`` the identity and the per-sample sums the metric is f(Σ num / Σ den) of. lenbench
  keeps scores, not texts: ``target``, ``arguments`` and ``resps`` are empty.

Everything is computed from the rows alone (`lenbench.results.samples`), so the same source gives the
same files, byte for byte: ``date`` is the run's first row timestamp, not the time of the export.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lenbench.atomic import atomic_write_text
from lenbench.metrics import decode_arrays, find_metric
from lenbench.names import RULE, is_safe_name
from lenbench.report.intervals import BOOT_SEED, N_BOOT
from lenbench.report.rows import series_label, whole_length
from lenbench.results.labels import is_baseline
from lenbench.results.samples import sample_scores

#: The filter of every metric key: lenbench applies no post-processing to a model's answers.
FILTER = "none"
#: lm-eval's ``output_type`` of a task, by the kind of sums its metrics are built from
#: (`lenbench.metrics.Metric.sums`): nll sums are scored like a rolling log-likelihood, the rest are
#: generated answers.
OUTPUT_TYPE = {"nll": "loglikelihood_rolling"}
DEFAULT_OUTPUT_TYPE = "generate_until"


def sanitize_model_name(name: str) -> str:
    """lm-eval's ``lm_eval.utils.sanitize_model_name``: the model's directory name."""
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)


def hash_string(text: str) -> str:
    """lm-eval's ``lm_eval.utils.hash_string`` (sha256 hex) of the sample hashes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ratio_text(ratio: float) -> str:
    """A length ratio as it appears in a task name: ``4`` for 4.0, ``1p5`` for 1.5."""
    return f"{ratio:g}".replace(".", "p")


def task_name(task: str, train_len: int, ratio: float) -> str:
    """The lm-eval task of one (task, training length, ratio): ``passkey_L32_x4``."""
    return f"{group_name(task, train_len)}_x{ratio_text(ratio)}"


def group_name(task: str, train_len: int) -> str:
    """The lm-eval group of one board (task, training length): ``passkey_L32``."""
    return f"{task}_L{train_len}"


def model_name(suite: str, encoding: str, variant: str, seed: int) -> str:
    """The lm-eval model name of one (encoding, variant, seed) run of a suite."""
    return f"lenbench-{suite or 'results'}/{series_label(encoding, variant)}-seed{seed}"


def bootstrap_stderr(metric: str, numerator: np.ndarray, denominator: np.ndarray) -> float:
    """The standard error of f(Σ num / Σ den) over the samples: the standard deviation of `N_BOOT`
    bootstrap replicates (samples drawn with replacement, `BOOT_SEED`), as lm-eval's
    ``bootstrap_stderr`` for a metric that is not a plain mean.

    Args:
        metric: the metric's name (its transform, `lenbench.metrics`).
        numerator, denominator: (n,) per-sample sums.
    """
    rng = np.random.default_rng(BOOT_SEED)
    idx = rng.integers(0, len(numerator), size=(N_BOOT, len(numerator)))  # (B, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = numerator[idx].sum(axis=1) / denominator[idx].sum(axis=1)  # (B,)
    facts = find_metric(metric)
    reps = ratio if facts is None else np.asarray(facts.values(ratio), dtype=float)
    reps = reps[np.isfinite(reps)]
    return float(reps.std(ddof=1)) if len(reps) > 1 else 0.0


def _date(timestamps: pd.Series) -> float:
    """The run's start as lm-eval's ``date`` (a UNIX time): its earliest row timestamp, 0.0 without one."""
    stamps = [dt.datetime.fromisoformat(t) for t in timestamps if t]
    return min(stamps).timestamp() if stamps else 0.0


def date_id(date: float) -> str:
    """lm-eval's file-name date (``datetime.isoformat()`` with ``:`` as ``-``), in UTC."""
    return dt.datetime.fromtimestamp(date, dt.timezone.utc).replace(tzinfo=None).isoformat().replace(":", "-")


def _task_config(name: str, group: pd.DataFrame) -> dict[str, Any]:
    """``configs[task]``: the task as lm-eval's task YAML would state it, lenbench's settings under metadata."""
    first = group.iloc[0]
    sums = {getattr(find_metric(m), "sums", None) for m in group["metric"]}
    output_type = next((OUTPUT_TYPE[s] for s in sums if s in OUTPUT_TYPE), DEFAULT_OUTPUT_TYPE)
    return {
        "task": name,
        "tag": [group_name(first.task, int(first.train_len))],
        "dataset_path": "lenbench",
        "dataset_name": str(first.task),
        "output_type": output_type,
        "num_fewshot": 0,
        "metric_list": [{"metric": m, "aggregation": "f(sum num / sum den)", "higher_is_better": bool(h)}
                        for m, h in zip(group["metric"], group["higher_is_better"], strict=True)],
        "metadata": {"version": float(first.schema_version), "train_len": int(first.train_len),
                     "eval_len": int(first.eval_len), "ratio": float(first.ratio), "seed": int(first.seed),
                     "settings": str(first.settings)},
    }


def _samples(name: str, group: pd.DataFrame) -> list[dict[str, Any]]:
    """The ``--log_samples`` lines of one task: one per sample index, every metric's score on it."""
    by_index: dict[int, dict[str, Any]] = {}
    for row in group.itertuples(index=False):
        decoded = decode_arrays(row.sample_scores)
        if decoded is None:
            continue
        num, den = decoded
        for i, score in enumerate(sample_scores(row.metric, num, den)):
            entry = by_index.setdefault(i, {"scores": {}, "sums": {}})
            entry["scores"][row.metric] = float(score)
            entry["sums"][row.metric] = [float(num[i]), float(den[i])]
    first = group.iloc[0]
    lines = []
    for i in sorted(by_index):
        doc = {"task": str(first.task), "train_len": int(first.train_len), "eval_len": int(first.eval_len),
               "ratio": float(first.ratio), "seed": int(first.seed), "sample": i, "sums": by_index[i]["sums"]}
        target = ""
        line = {"doc_id": i, "doc": doc, "target": target, "arguments": {}, "resps": [], "filtered_resps": [],
                "filter": FILTER, "metrics": sorted(by_index[i]["scores"]),
                "doc_hash": hash_string(json.dumps(doc, indent=2, ensure_ascii=False)),
                "prompt_hash": hash_string(""), "target_hash": hash_string(target)}
        line.update(by_index[i]["scores"])
        lines.append(line)
    return lines


def _task_result(name: str, group: pd.DataFrame) -> tuple[dict[str, Any], list[str]]:
    """``results[task]`` (alias, sample count, each metric and its stderr) and the metrics that failed."""
    result: dict[str, Any] = {"name": name, "alias": name}
    failed = []
    effective = 0
    for row in group.itertuples(index=False):
        if row.status != "ok" or math.isnan(row.value):
            failed.append(row.metric)
            continue
        decoded = decode_arrays(row.sample_scores)
        result[f"{row.metric},{FILTER}"] = float(row.value)
        result[f"{row.metric}_stderr,{FILTER}"] = ("N/A" if decoded is None
                                                   else bootstrap_stderr(row.metric, *decoded))
        effective = max(effective, len(decoded[0]) if decoded is not None else int(row.n_samples))
    result["sample_len"] = effective
    return result, failed


def run_results(rows: pd.DataFrame) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The aggregated results dict and the per-task sample lines of one model (module docstring).

    Args:
        rows: the whole-length rows of one (suite, encoding, variant, seed), tidy columns.

    Returns:
        (results, samples): results has lm-eval's keys (``results``, ``group_subtasks``, ``configs``,
        ``versions``, ``n-shot``, ``higher_is_better``, ``n-samples``, ``config``, ``git_hash``, ``date``,
        ``task_hashes``, the model's names) and lenbench's provenance under ``lenbench``; samples maps
        each task to its ``--log_samples`` lines.
    """
    first = rows.iloc[0]
    name = model_name(first.suite, first.encoding, first.variant, int(first.seed))
    results: dict[str, Any] = {}
    configs, versions, n_shot, hib, n_samples, group_subtasks = {}, {}, {}, {}, {}, {}
    samples: dict[str, list[dict[str, Any]]] = {}
    failed: dict[str, list[str]] = {}
    cells, code, data, settings = {}, {}, {}, {}
    keys = ["task", "train_len", "ratio", "eval_len"]
    for (task, train_len, ratio, _), group in rows.groupby(keys, sort=True):
        tname = task_name(task, int(train_len), float(ratio))
        results[tname], bad = _task_result(tname, group)
        if bad:
            failed[tname] = bad
        configs[tname] = _task_config(tname, group)
        versions[tname] = float(group["schema_version"].iloc[0])
        n_shot[tname] = 0
        hib[tname] = {m: bool(h) for m, h in zip(group["metric"], group["higher_is_better"], strict=True)}
        n_samples[tname] = {"original": int(group["n_samples"].max()), "effective": results[tname]["sample_len"]}
        group_subtasks.setdefault(group_name(task, int(train_len)), []).append(tname)
        samples[tname] = _samples(tname, group)
        board = group_name(task, int(train_len))
        cells[board], code[board] = str(group["cell_id"].iloc[0]), str(group["code_fingerprint"].iloc[0])
        data[board], settings[board] = str(group["data_fingerprint"].iloc[0]), str(group["settings"].iloc[0])
    task_hashes = {t: hash_string("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in lines))
                   for t, lines in samples.items() if lines}
    out = {
        "results": results,
        "group_subtasks": group_subtasks,
        "configs": configs,
        "versions": versions,
        "n-shot": n_shot,
        "higher_is_better": hib,
        "n-samples": n_samples,
        "config": {"model": name, "model_args": None, "model_dtype": str(first.dtype), "batch_size": None,
                   "batch_sizes": [], "device": str(first.device), "use_cache": None, "limit": None,
                   "bootstrap_iters": N_BOOT, "gen_kwargs": None, "random_seed": int(first.seed),
                   "numpy_seed": int(first.seed), "torch_seed": int(first.seed), "fewshot_seed": int(first.seed)},
        "git_hash": str(first.git_sha)[:7],
        "date": _date(rows["timestamp"]),
        "pretty_env_info": (f"PyTorch version: {first.torch_version}\nPython version: {first.python_version}\n"
                            f"CPU: {first.cpu_model}\nBLAS: {first.blas}\nNumerics: {first.numerics}"),
        "transformers_version": "N/A",
        "task_hashes": task_hashes,
        "model_source": "lenbench",
        "model_name": name,
        "model_name_sanitized": sanitize_model_name(name),
        "lenbench": {"version": str(first.lenbench_version), "git_sha": str(first.git_sha),
                     "suite": str(first.suite), "encoding": str(first.encoding), "variant": str(first.variant),
                     "seed": int(first.seed), "numerics": str(first.numerics), "torch_version": str(first.torch_version),
                     "cells": cells, "code_fingerprints": code, "data_fingerprints": data, "settings": settings,
                     "failed": failed},
    }
    return out, samples


def model_rows(df: pd.DataFrame) -> dict[tuple[str, str, str, int], pd.DataFrame]:
    """The whole-length rows of a results frame by model, (suite, encoding, variant, seed); baselines
    (``baseline:…`` rows, no trained model) are left out."""
    rows = whole_length(df)
    rows = rows[~rows["encoding"].map(is_baseline)]
    for column in ("suite", "task", "encoding", "variant"):  # they become file names
        bad = sorted({v for v in rows[column] if v and not is_safe_name(v)})
        if bad:
            raise ValueError(f"{column} {bad[0]!r} is not a safe file name ({RULE}); rename it in the source")
    return {(s, e, v, int(k)): g for (s, e, v, k), g in rows.groupby(["suite", "encoding", "variant", "seed"], sort=True)}


def write_lm_eval(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Write every model's ``results_<date>.json`` and ``samples_<task>_<date>.jsonl`` under
    ``out_dir/<model_name_sanitized>/`` (lm-eval's layout), each atomically.

    Args:
        df: tidy results rows (`lenbench.report.rows.load_results`).
        out_dir: the output directory (lm-eval's ``--output_path``).

    Returns:
        The paths written, models in (suite, encoding, variant, seed) order.

    Raises:
        ValueError: no row of a trained model to export.
    """
    models = model_rows(df)
    if not models:
        raise ValueError("no whole-length rows of a trained model to export (only baselines, or no rows); "
                         "export a results directory of `lenbench run`")
    written: list[Path] = []
    for rows in models.values():
        results, samples = run_results(rows)
        stamp = date_id(results["date"])
        folder = Path(out_dir) / results["model_name_sanitized"]
        written.append(atomic_write_text(folder / f"results_{stamp}.json",
                                         json.dumps(results, indent=2, ensure_ascii=False) + "\n"))
        for name, lines in samples.items():
            if lines:
                text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
                written.append(atomic_write_text(folder / f"samples_{name}_{stamp}.jsonl", text))
    return written


def export_lm_eval(df: pd.DataFrame, out: str | Path | None) -> list[str]:
    """`lenbench export lm-eval`: `write_lm_eval` into `out`; the lines to print."""
    if out is None:
        raise ValueError("lenbench export lm-eval needs --out DIR: the directory the results JSON and sample "
                         "logs go into (lm-eval's --output_path)")
    written = write_lm_eval(df, out)
    runs = sum(1 for p in written if p.name.startswith("results_"))
    return [f"wrote {runs} run(s), {len(written) - runs} sample log(s) to {out}:", *(f"  {p}" for p in written)]
