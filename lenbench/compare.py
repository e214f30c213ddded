"""`lenbench compare BASE HEAD`: quality and speed regressions between two runs.

Each side is a results directory (``cells/*.json``, or a report directory with ``results.csv``
and / or ``bench.json``), a tidy results CSV, a leaderboard CSV or a pytest-benchmark JSON.

Quality: measurements are joined on (task, encoding, variant, train_len, eval_len, ratio, metric,
seed) (plus suite when that alone is ambiguous). A value is *worse* in the metric's direction
(`higher_is_better`); it is a regression when it is worse by more than ``tolerance × |base|``
(relative; the default 0 flags any worse value, since same-platform runs are deterministic). A
measurement that was ok and now failed is a regression; one that failed and is now ok an
improvement. Rows present on one side only are reported (``missing`` / ``new``) and fail the
comparison only with ``fail_missing``. When either side is a leaderboard CSV, both are compared
at the leaderboard level instead: the statistics in_dist, past_train_mean and
max_ratio_within_10pct per (task, train_len, encoding, variant), ranks left out (one entry's gain
moves every other entry's rank).

Speed: kernel benchmarks (extra_info without ``lenbench_rows``) are joined on (encoding, kind,
impl, T, dtype) (on the full test name when that is ambiguous) and compared by ``copy_ratio`` —
median time divided by the time of a plain copy of the same bytes measured in the same session —
which cancels most of the difference between two machines. A kernel whose ratio grew by more
than ``speed_threshold`` (default 10 %) is a regression. Without copy ratios the raw median times
are compared, with a note.

Exit codes of the command: 0 no regression, 1 a regression, 2 unreadable input.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd

from lenbench.evaluate import METRICS
from lenbench.results import (
    SCORE_STATS,
    ResultsError,
    _read_csv_strings,
    csv_kind,
    leaderboard,
    load_kernel_timings,
    load_results,
    markdown_table,
    read_leaderboard_csv,
    resolve_source,
    whole_length,
)

ROW_JOIN = ("task", "encoding", "variant", "train_len", "eval_len", "ratio", "metric", "seed")
BOARD_JOIN = ("task", "train_len", "metric", "encoding", "variant", "statistic")
KERNEL_JOIN = ("encoding", "kind", "impl", "T", "dtype")

REGRESSION, IMPROVED, WITHIN, UNCHANGED, MISSING, NEW = (
    "REGRESSION", "improved", "worse (within tolerance)", "unchanged", "missing in head", "new in head")
SLOWER, FASTER = "SLOWER", "faster"


@dataclasses.dataclass
class Side:
    """What one side of a comparison holds: measurement rows or a leaderboard, and kernel timings."""

    source: str
    rows: pd.DataFrame | None = None  # tidy rows (load_results)
    board: pd.DataFrame | None = None  # long-form leaderboard (read_leaderboard_csv)
    kernels: pd.DataFrame | None = None  # load_kernel_timings

    def leaderboard_long(self) -> pd.DataFrame:
        if self.board is not None:
            return self.board
        assert self.rows is not None
        if self.rows.empty:
            return pd.DataFrame(columns=[*BOARD_JOIN, "value", "higher_is_better"])
        return leaderboard(self.rows).long()


def load_side(source: str | Path) -> Side:
    """Read one side of a comparison (see the module docstring for what it may be)."""
    path = resolve_source(source)
    side = Side(str(source))
    if path.is_dir():  # a results directory with cells/
        side.rows = load_results(path)
        if (path / "bench.json").is_file():
            side.kernels = load_kernel_timings(path / "bench.json")
        return side
    if path.suffix.lower() == ".csv":
        if csv_kind(_read_csv_strings(path).columns) == "leaderboard":
            side.board = read_leaderboard_csv(path)
        else:
            side.rows = load_results(path)
        sibling = path.parent / "bench.json"
        if Path(source).is_dir() and sibling.is_file():
            side.kernels = load_kernel_timings(sibling)
        return side
    side.rows = load_results(path)  # a one-line error for anything but a benchmark JSON
    side.kernels = load_kernel_timings(path)
    return side


def _worse_by(base: float, head: float, higher_is_better: bool) -> float:
    """How much worse head is than base (negative: better); inf-safe."""
    if base == head:
        return 0.0
    return (base - head) if higher_is_better else (head - base)


def _classify(base_ok: bool, head_ok: bool, base: float, head: float, hib: bool, tolerance: float) -> str:
    if base_ok and head_ok:
        worse = _worse_by(base, head, hib)
        if worse > 0:
            return REGRESSION if worse > tolerance * abs(base) else WITHIN
        return IMPROVED if worse < 0 else UNCHANGED
    if base_ok and not head_ok:
        return REGRESSION
    if head_ok and not base_ok:
        return IMPROVED
    return UNCHANGED


def _unique_key(frame: pd.DataFrame, key: list[str], what: str, source: str) -> None:
    dup = frame.duplicated(subset=key, keep=False)
    if dup.any():
        first = frame.loc[dup, key].iloc[0].to_dict()
        raise ResultsError(f"{source}: {int(dup.sum())} {what} share one key, e.g. {first}; "
                           "compare needs one measurement per key")


def compare_rows(base: pd.DataFrame, head: pd.DataFrame, tolerance: float, sources=("base", "head")) -> pd.DataFrame:
    """Row-level quality comparison; one row per measurement with base, head, change, status.
    Bucketed rows (per position / needle depth) are left out, as on the leaderboard."""
    base, head = whole_length(base), whole_length(head)
    key = list(ROW_JOIN)
    if base.duplicated(subset=key).any() or head.duplicated(subset=key).any():
        key = ["suite", *key]
    _unique_key(base, key, "measurements", sources[0])
    _unique_key(head, key, "measurements", sources[1])
    cols = [*key, "value", "status", "higher_is_better"]
    merged = base[cols].merge(head[cols], on=key, how="outer", suffixes=("_base", "_head"), indicator=True, sort=False)
    out = []
    for r in merged.to_dict("records"):
        hib = METRICS.get(r["metric"], r["higher_is_better_head"] if r["_merge"] != "left_only" else r["higher_is_better_base"])
        rec = {k: r[k] for k in key}
        b, h = float(r["value_base"]), float(r["value_head"])
        rec.update(base=b, head=h, higher_is_better=bool(hib))
        if r["_merge"] == "left_only":
            rec["status"] = MISSING
        elif r["_merge"] == "right_only":
            rec["status"] = NEW
        else:
            b_ok = r["status_base"] == "ok" and not math.isnan(b)
            h_ok = r["status_head"] == "ok" and not math.isnan(h)
            rec["status"] = _classify(b_ok, h_ok, b, h, bool(hib), tolerance)
        out.append(rec)
    return pd.DataFrame(out, columns=[*key, "base", "head", "higher_is_better", "status"])


def compare_boards(base: pd.DataFrame, head: pd.DataFrame, tolerance: float, sources=("base", "head")) -> pd.DataFrame:
    """Leaderboard-level quality comparison on the score statistics (ranks left out)."""
    key = list(BOARD_JOIN)
    base = base[base["statistic"].isin(SCORE_STATS) & (base["task"] != "overall")]
    head = head[head["statistic"].isin(SCORE_STATS) & (head["task"] != "overall")]
    _unique_key(base, key, "leaderboard entries", sources[0])
    _unique_key(head, key, "leaderboard entries", sources[1])
    cols = [*key, "value", "higher_is_better"]
    merged = base[cols].merge(head[cols], on=key, how="outer", suffixes=("_base", "_head"), indicator=True, sort=False)
    out = []
    for r in merged.to_dict("records"):
        hib = bool(r["higher_is_better_head"] if r["_merge"] != "left_only" else r["higher_is_better_base"])
        b, h = float(r["value_base"]), float(r["value_head"])
        rec = {**{k: r[k] for k in key}, "base": b, "head": h, "higher_is_better": hib}
        if r["_merge"] == "left_only":
            rec["status"] = MISSING
        elif r["_merge"] == "right_only":
            rec["status"] = NEW
        else:
            rec["status"] = _classify(not math.isnan(b), not math.isnan(h), b, h, hib, tolerance)
        out.append(rec)
    return pd.DataFrame(out, columns=[*key, "base", "head", "higher_is_better", "status"])


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
        for measure in ("copy_ratio_min", "copy_ratio", "median"):
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
        notes.append(f"speed: {raw} kernel(s) without a copy ratio on both sides were compared by raw median time")
    frame = pd.DataFrame(out, columns=[*key, "kernel", "measure", "base", "head", "change", "status"])
    return frame, notes


@dataclasses.dataclass
class Comparison:
    """The outcome of `compare`; `format()` is the readable report, `exit_code` 0 or 1."""

    base: str
    head: str
    level: str  # "rows", "leaderboard" or "none"
    quality: pd.DataFrame
    speed: pd.DataFrame | None
    tolerance: float
    speed_threshold: float
    fail_missing: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)

    def _count(self, frame: pd.DataFrame | None, status: str) -> int:
        return 0 if frame is None or frame.empty else int((frame["status"] == status).sum())

    @property
    def quality_regressions(self) -> int:
        return self._count(self.quality, REGRESSION) + (self._count(self.quality, MISSING) if self.fail_missing else 0)

    @property
    def speed_regressions(self) -> int:
        return self._count(self.speed, SLOWER) + (self._count(self.speed, MISSING) if self.fail_missing else 0)

    @property
    def exit_code(self) -> int:
        return 1 if self.quality_regressions or self.speed_regressions else 0

    def format(self) -> str:
        lines = [f"lenbench compare: base {self.base}  vs  head {self.head}", ""]
        tol = "exact (any worse value)" if self.tolerance == 0 else f"{self.tolerance:g} relative"
        q = self.quality
        if self.level == "none":
            lines.append("Quality: no extrapolation results on either side.")
        else:
            counts = {s: self._count(q, s) for s in (REGRESSION, IMPROVED, WITHIN, UNCHANGED, MISSING, NEW)}
            what = "measurements" if self.level == "rows" else "leaderboard statistics"
            lines.append(f"Quality ({what}, tolerance {tol}): {counts[REGRESSION]} regression(s), "
                         f"{counts[IMPROVED]} improved, {counts[WITHIN]} worse within tolerance, "
                         f"{counts[UNCHANGED]} unchanged, {counts[MISSING]} missing in head, {counts[NEW]} new in head.")
            changed = q[q["status"] != UNCHANGED]
            if len(changed):
                lines += ["", self._quality_table(changed)]
        lines.append("")
        if self.speed is None:
            lines.append("Speed: not compared (kernel timings need a benchmark JSON on both sides).")
        else:
            s = self.speed
            counts = {k: self._count(s, k) for k in (SLOWER, FASTER, UNCHANGED, MISSING, NEW)}
            lines.append(f"Speed (kernel time / copy time of the same bytes, threshold {self.speed_threshold:.0%}): "
                         f"{counts[SLOWER]} slower, {counts[FASTER]} faster, {counts[UNCHANGED]} within threshold, "
                         f"{counts[MISSING]} missing in head, {counts[NEW]} new in head.")
            changed = s[s["status"] != UNCHANGED]
            if len(changed):
                lines += ["", self._speed_table(changed)]
        for note in self.notes:
            lines.append(f"note: {note}")
        lines.append("")
        if self.exit_code:
            lines.append(f"FAIL: {self.quality_regressions} quality regression(s), {self.speed_regressions} speed regression(s).")
        else:
            lines.append("OK: no regression.")
        return "\n".join(lines)

    def _quality_table(self, frame: pd.DataFrame) -> str:
        order = {REGRESSION: 0, MISSING: 1, WITHIN: 2, IMPROVED: 3, NEW: 4, UNCHANGED: 5}
        frame = frame.assign(_o=frame["status"].map(order)).sort_values("_o", kind="mergesort")
        if self.level == "rows":
            header = ["status", "task", "encoding", "variant", "train_len", "ratio", "metric", "seed", "base", "head",
                      "change"]
            body = [[r["status"], r["task"], r["encoding"], r["variant"], str(r["train_len"]), f"{r['ratio']:g}x",
                     f"{r['metric']} {'↑' if r['higher_is_better'] else '↓'}", str(r["seed"]), _num(r["base"], r["status"], "base"),
                     _num(r["head"], r["status"], "head"), _change(r["base"], r["head"])] for _, r in frame.iterrows()]
        else:
            header = ["status", "task", "train_len", "encoding", "variant", "statistic", "base", "head", "change"]
            body = [[r["status"], r["task"], str(r["train_len"]), r["encoding"], r["variant"],
                     f"{r['statistic']} {'↑' if r['higher_is_better'] else '↓'}", _num(r["base"], r["status"], "base"),
                     _num(r["head"], r["status"], "head"),
                     _change(r["base"], r["head"])] for _, r in frame.iterrows()]
        align = ["l"] * (len(header) - 3) + ["r"] * 3
        return markdown_table(header, body, align)

    def _speed_table(self, frame: pd.DataFrame) -> str:
        order = {SLOWER: 0, MISSING: 1, FASTER: 2, NEW: 3, UNCHANGED: 4}
        frame = frame.assign(_o=frame["status"].map(order)).sort_values("_o", kind="mergesort")
        body = []
        for _, r in frame.iterrows():
            ident = (" ".join(f"{r[k]:g}" if isinstance(r[k], float) else str(r[k]) for k in KERNEL_JOIN)
                     if "encoding" in frame.columns else r["kernel"])
            body.append([r["status"], ident, r["measure"], _num(r["base"]), _num(r["head"]),
                         "" if math.isnan(r["change"]) else f"{r['change']:+.1%}"])
        return markdown_table(["status", "kernel (encoding kind impl T dtype)", "measure", "base", "head", "change"], body,
                              ["l", "l", "l", "r", "r", "r"])


def _num(v: float, status: str = "", side: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        absent = (status == MISSING and side == "head") or (status == NEW and side == "base")
        return "–" if absent or not status else "failed"
    return f"{v:.6g}"


def _change(b: float, h: float) -> str:
    if math.isnan(b) or math.isnan(h):
        return ""
    if b == h:
        return "0"
    diff = h - b
    rel = f" ({diff / abs(b):+.1%})" if b not in (0, math.inf, -math.inf) and math.isfinite(diff) else ""
    return f"{diff:+.4g}{rel}"


def compare(base: str | Path, head: str | Path, *, tolerance: float = 0.0, speed_threshold: float = 0.10,
            fail_missing: bool = False) -> Comparison:
    """Compare two runs (see the module docstring).

    Args:
        base, head: a results directory, tidy or leaderboard CSV, or pytest-benchmark JSON each.
        tolerance: relative worsening of a metric tolerated (0: any worse value is a regression).
        speed_threshold: relative growth of a kernel's copy ratio tolerated (0.10 = 10 %).
        fail_missing: count rows / kernels missing in head as regressions.

    Raises:
        ResultsError: unreadable input or negative thresholds (one line).
    """
    if tolerance < 0 or speed_threshold < 0 or math.isnan(tolerance) or math.isnan(speed_threshold):
        raise ResultsError(f"--tolerance and --speed-threshold must be ≥ 0, got {tolerance} and {speed_threshold}")
    b, h = load_side(base), load_side(head)
    notes = []
    if b.board is not None or h.board is not None:
        level = "leaderboard"
        quality = compare_boards(b.leaderboard_long(), h.leaderboard_long(), tolerance, (b.source, h.source))
    elif (b.rows is None or b.rows.empty) and (h.rows is None or h.rows.empty):
        level = "none"
        quality = pd.DataFrame(columns=["status"])
    else:
        level = "rows"
        quality = compare_rows(b.rows, h.rows, tolerance, (b.source, h.source))
        devices = [sorted(set(x.rows["device"]) - {""}) for x in (b, h)]
        if all(devices) and devices[0] != devices[1]:
            notes.append(f"quality: base ran on {', '.join(devices[0])}, head on {', '.join(devices[1])}; "
                         "values are only reproducible on the same platform")
    speed = None
    if b.kernels is not None and h.kernels is not None and (len(b.kernels) or len(h.kernels)):
        speed, speed_notes = compare_kernels(b.kernels, h.kernels, speed_threshold)
        notes += speed_notes
    if level == "none" and speed is None:
        raise ResultsError(f"nothing to compare: neither {base} nor {head} holds extrapolation rows, and they do not "
                           "both hold kernel timings")
    return Comparison(str(base), str(head), level, quality, speed, tolerance, speed_threshold, fail_missing, notes)
