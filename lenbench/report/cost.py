"""Cost tables, step 3b of the report path: what each encoding costs, from the kernel timings and
training steps of a benchmark JSON, as a frame (`cost_table`), markdown (`cost_markdown`) and set
against the leaderboard's retention (`quality_cost_frame`).

Reads the frames of `lenbench.report.timings` (`load_kernel_timings`, `load_training_steps`) and the
leaderboard of `lenbench.report.tables`; figures (`lenbench.report.plots.cost`) and the page
(`lenbench.report.page`) read these tables, never the other way round.
"""

from __future__ import annotations

import math

import pandas as pd

from lenbench.escape import md_text
from lenbench.report.formatting import fmt_seconds, fmt_times, markdown_table
from lenbench.report.rows import board_rows, encoding_sort_key
from lenbench.report.tables import Leaderboard

#: Implementations that are references, not fused kernels (`bench/test_kernels.py`).
REFERENCE_IMPLS = ("eager", "hf")
COST_COLUMNS = ("encoding", "kind", "T", "dtype", "eager_s", "fused_s", "fused_impl", "fused_over_eager",
                "copy_ratio", "ratio_to_sdpa", "train_step_ratio_to_nope", "device", "device_name")


def cost_table(kernels: pd.DataFrame, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """What each encoding costs: one row per (encoding, T, dtype) of the kernel timings.

    Args:
        kernels: `lenbench.report.timings.load_kernel_timings` of a benchmark JSON.
        steps: `lenbench.report.timings.load_training_steps` of it (None or empty: no training-step ratio).

    Returns:
        Columns `COST_COLUMNS`: ``eager_s`` (median seconds of the eager reference), ``fused_s``
        and ``fused_impl`` (the fastest non-reference implementation: compiled, cached, flex, …),
        ``fused_over_eager``, ``copy_ratio`` (fused time over a plain copy of the same bytes: 1 is
        the memory-bandwidth floor), ``ratio_to_sdpa`` (fused time over unbiased causal SDPA, what
        `nope` attends with, at the same T and dtype: an attention kernel's whole cost, a rotary or
        embedding kernel's cost as a fraction of one attention), ``train_step_ratio_to_nope`` (the
        encoding's quick-suite training step over `nope`'s, one value per encoding; `nope` itself
        is a row with only this). NaN where not measured. Sorted by encoding order, T, dtype.
    """
    steps = steps if steps is not None else pd.DataFrame(columns=["encoding", "ratio_to_nope"])
    step_ratio = dict(zip(steps["encoding"], steps["ratio_to_nope"], strict=True))
    k = kernels[~kernels["kind"].isin(["training-step", ""])]
    sdpa = {(r.T, r.dtype): r.median for r in k[k["kind"] == "attention-baseline"].itertuples()}
    rows = []
    for (encoding, T, dtype), g in k[k["kind"] != "attention-baseline"].groupby(["encoding", "T", "dtype"], sort=False):
        eager = g[g["impl"] == "eager"]["median"]
        fused = g[~g["impl"].isin(REFERENCE_IMPLS)].sort_values(["median", "impl"], kind="mergesort")
        eager_s = float(eager.iloc[0]) if len(eager) else math.nan
        best = fused.iloc[0] if len(fused) else None
        fused_s = float(best["median"]) if best is not None else math.nan
        base = sdpa.get((T, dtype), math.nan)
        rows.append({"encoding": encoding, "kind": g["kind"].iloc[0], "T": int(T), "dtype": dtype, "eager_s": eager_s,
                     "fused_s": fused_s, "fused_impl": best["impl"] if best is not None else "",
                     "fused_over_eager": fused_s / eager_s if eager_s > 0 else math.nan,
                     "copy_ratio": float(best["copy_ratio"]) if best is not None else math.nan,
                     "ratio_to_sdpa": fused_s / base if base and base > 0 else math.nan,
                     "train_step_ratio_to_nope": step_ratio.get(encoding, math.nan),
                     "device": g["device"].iloc[0], "device_name": g["device_name"].iloc[0]})
    for encoding in [e for e in step_ratio if e not in {r["encoding"] for r in rows}]:  # nope: no kernel of its own
        rows.append({"encoding": encoding, "kind": "none", "T": 0, "dtype": "", "eager_s": math.nan, "fused_s": math.nan,
                     "fused_impl": "", "fused_over_eager": math.nan, "copy_ratio": math.nan, "ratio_to_sdpa": math.nan,
                     "train_step_ratio_to_nope": step_ratio[encoding],
                     "device": steps["device"].iloc[0] if "device" in steps else "",
                     "device_name": steps["device_name"].iloc[0] if "device_name" in steps else ""})
    out = pd.DataFrame(rows, columns=list(COST_COLUMNS))
    order = sorted(range(len(out)), key=lambda i: (encoding_sort_key(out["encoding"].iloc[i]), out["T"].iloc[i],
                                                   out["dtype"].iloc[i]))
    return out.iloc[order].reset_index(drop=True).astype({"T": "int64"})


def cost_markdown(cost: pd.DataFrame) -> str:
    """The cost table as markdown: the training step per encoding, then per dtype one table of
    fused / eager time per length, and the copy and SDPA ratios at the longest length."""
    parts = ["# What it costs", ""]
    device = ", ".join(sorted(set(cost["device_name"]) - {""}) or sorted(set(cost["device"]) - {""})) or "?"
    parts += [f"Device: {md_text(device)}. Times are medians of `bench/test_kernels.py`; *fused* is the fastest non-reference "
              "implementation (named in the *fused* column, at the longest length); *copy ×*: fused time over a plain copy of the same bytes "
              "(1 = memory-bandwidth floor); *SDPA ×*: fused time over unbiased causal SDPA at the same length.", ""]
    steps = cost.drop_duplicates("encoding")[["encoding", "train_step_ratio_to_nope"]]
    steps = steps[steps["train_step_ratio_to_nope"].notna()]
    if len(steps):
        parts += ["Training step (quick suite geometry) relative to `nope`:", "",
                  markdown_table(["encoding", "training step ↓"],
                                 [[e, fmt_times(r)] for e, r in zip(steps["encoding"], steps["train_step_ratio_to_nope"],
                                                                   strict=True)], ["l", "r"]), ""]
    timed = cost[cost["dtype"] != ""]
    for dtype in sorted(set(timed["dtype"])):
        d = timed[timed["dtype"] == dtype]
        lengths = sorted(set(d["T"]))
        longest = lengths[-1]
        header = ["encoding", "fused", *(f"T={t} fused / eager" for t in lengths), f"copy × (T={longest})",
                  f"SDPA × (T={longest})"]
        body = []
        for encoding, g in d.groupby("encoding", sort=False):
            by_t = {r["T"]: r for r in g.to_dict("records")}
            last = by_t.get(longest)
            body.append([encoding, g["fused_impl"].iloc[-1] or "–",
                         *(f"{fmt_seconds(by_t[t]['fused_s'])} / {fmt_seconds(by_t[t]['eager_s'])}" if t in by_t else "–"
                           for t in lengths),
                         fmt_times(last["copy_ratio"]) if last else "–", fmt_times(last["ratio_to_sdpa"]) if last else "–"])
        parts += [f"## {md_text(dtype)}", "", markdown_table(header, body, ["l", "l", *["r"] * (len(lengths) + 2)]), ""]
    return "\n".join(parts)


def quality_cost_frame(board: Leaderboard, cost: pd.DataFrame) -> pd.DataFrame:
    """Per task board: each trained model's retention (with interval) against its training-step
    cost relative to `nope`, and whether it lies on the Pareto front (no other learned model has
    lower-or-equal cost and higher-or-equal retention, one of them strictly). Not-learned models
    are kept (flagged) but never on the front; models without a training-step timing are left out."""
    steps = dict(zip(cost["encoding"], cost["train_step_ratio_to_nope"], strict=True))
    models = board.per_task[board.per_task["kind"] == "model"]
    rows = []
    for r in models.to_dict("records"):
        x = steps.get(r["encoding"], math.nan)
        if math.isnan(x):
            continue
        rows.append({"task": r["task"], "train_len": r["train_len"], "encoding": r["encoding"], "cost": x,
                     "retention": r["retention"], "retention_ci_low": r["retention_ci_low"],
                     "retention_ci_high": r["retention_ci_high"], "not_learned": r["not_learned"]})
    out = pd.DataFrame(rows, columns=["task", "train_len", "encoding", "cost", "retention", "retention_ci_low",
                                      "retention_ci_high", "not_learned"])
    front = []
    for r in out.to_dict("records"):
        rivals = board_rows(out, r["task"], r["train_len"])
        rivals = rivals[~rivals["not_learned"] & rivals["retention"].notna()]
        dominated = ((rivals["cost"] <= r["cost"]) & (rivals["retention"] >= r["retention"])
                     & ((rivals["cost"] < r["cost"]) | (rivals["retention"] > r["retention"]))).any()
        front.append(bool(not r["not_learned"] and not math.isnan(r["retention"]) and not dominated))
    out["pareto"] = front
    return out
