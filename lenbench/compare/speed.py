"""Speed in `lenbench compare`: kernel timings and training steps of two benchmark JSONs.

Kernel benchmarks (extra_info without a cell's rows) are joined on (encoding, kind, impl, T,
dtype) (on the full test name when that is ambiguous) and compared by the fastest round over the
copy floor (``copy_ratio_min``), else ``copy_ratio`` — median time divided by the time of a plain
copy of the same bytes measured in the same session — which cancels most of the difference between
two machines; training-step benchmarks (``kind`` "training-step") by ``ratio_to_nope``, the step
time over the `nope` step timed in the same loop. A kernel whose measure grew by more than
``speed_threshold`` (default 10 %) is a regression. Without any of these the raw median times are
compared, with a note. Timings from two different machines (``machine_info``: CPU brand, device
name, CPU count; `lenbench.compare.sides.compare_setups`) are refused unless ``force_speed``.
"""

from __future__ import annotations

import math

import pandas as pd

from lenbench.compare.quality import MISSING, NEW, UNCHANGED
from lenbench.compare.sides import Setup, Side
from lenbench.results.schema import ResultsError

KERNEL_JOIN = ("encoding", "kind", "impl", "T", "dtype")

SLOWER, FASTER = "SLOWER", "faster"


def compare_kernels(base: pd.DataFrame, head: pd.DataFrame, threshold: float) -> tuple[pd.DataFrame, list[str]]:
    """Speed comparison of kernel timings by the fastest round over the copy floor (`copy_ratio_min`),
    else by `copy_ratio` (median over the copy floor), else by raw median time.

    Measured here: rerunning the kernels unchanged on a shared 2-core machine moved 27 % of the
    median-based ratios by more than 10 %, against 23 % of the min-based ones (fused fp32 kernels:
    17 % vs 11 %), so the minimum is preferred wherever both sides have it.
    """
    notes = []
    key = list(KERNEL_JOIN)
    if base.duplicated(subset=key).any() or head.duplicated(subset=key).any():
        key = ["fullname"]
    merged = base.merge(head, on=key, how="outer", suffixes=("_base", "_head"), indicator=True, sort=False)
    out = []
    raw = 0
    for r in merged.to_dict("records"):
        rec = {k: r[k] for k in key}
        name = r.get("fullname_head") if r["_merge"] != "left_only" else r.get("fullname_base")
        rec["kernel"] = r.get("fullname", name) or ""
        one_sided = r["_merge"] != "both"
        kind = r.get("kind", r.get("kind_head") if r["_merge"] != "left_only" else r.get("kind_base"))
        measures = ("ratio_to_nope", "median") if kind == "training-step" else ("copy_ratio_min", "copy_ratio", "median")
        for measure in measures:
            b, h = float(r.get(f"{measure}_base", math.nan)), float(r.get(f"{measure}_head", math.nan))
            if (math.isfinite(b) or one_sided) and (math.isfinite(h) or one_sided) and not b <= 0:
                break
        measure = "median_s" if measure == "median" else measure
        rec.update(measure=measure, base=b, head=h)
        if r["_merge"] == "left_only":
            rec.update(change=math.nan, status=MISSING)
        elif r["_merge"] == "right_only":
            rec.update(change=math.nan, status=NEW)
        else:
            raw += measure == "median_s"
            change = h / b - 1 if b > 0 and math.isfinite(h) else math.nan
            status = UNCHANGED
            if math.isnan(change) or change > threshold:
                status = SLOWER
            elif change < -threshold:
                status = FASTER
            rec.update(change=change, status=status)
        out.append(rec)
    if raw:
        notes.append(f"speed: {raw} kernel(s) without a copy ratio (training steps: ratio_to_nope) on both sides "
                     "were compared by raw median time")
    frame = pd.DataFrame(out, columns=[*key, "kernel", "measure", "base", "head", "change", "status"])
    return frame, notes


def compare_speed(b: Side, h: Side, threshold: float, force_speed: bool,
                  setup: Setup) -> tuple[pd.DataFrame | None, list[str], list[str]]:
    """(the kernel comparison or None when a side has no timings, warnings, notes) (module docstring).

    Raises:
        ResultsError: timings from different machines without `force_speed` (one line).
    """
    speed = None
    warnings: list[str] = []
    notes: list[str] = []
    other = setup.timing_machines
    if b.kernels is not None and h.kernels is not None and (len(b.kernels) or len(h.kernels)):
        if other and not force_speed:
            raise ResultsError(f"speed: base and head timings come from different machines ({'; '.join(other)}); "
                               "timings compare only on one machine: pass --force-speed to compare them anyway "
                               "(copy ratios and ratio_to_nope normalise part of the difference)")
        if other:
            warnings.append(f"speed compared across machines ({'; '.join(other)}) with --force-speed")
        elif not setup.timing_known:
            notes.append("speed: the machines of the timings are unknown (no machine_info); compared as if one machine")
        speed, speed_notes = compare_kernels(b.kernels, h.kernels, threshold)
        notes += speed_notes
    return speed, warnings, notes
