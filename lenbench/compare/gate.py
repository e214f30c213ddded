"""The verdict of `lenbench compare BASE HEAD`: the comparison, its report text and exit code.

`compare` reads both sides (`lenbench.compare.sides`), compares quality
(`lenbench.compare.quality`, or statistically: `lenbench.compare.stats`) and speed
(`lenbench.compare.speed`), and returns a `Comparison`.

The gate (`Comparison.failures`, exit code 1) fails on: a worse measurement, a cell failed in head,
anything ok in base missing in head (opt out: ``allow_missing``), no measurement or kernel in
common at all (opt out: ``allow_no_overlap``), and a slower kernel or training step.

The report (`Comparison.format`) is compact: warnings, counts per category, the ``top`` (default
10) largest changes per table, and every line with ``show_all``.

Exit codes of the command: 0 no regression, 1 a regression, 2 unreadable input or a refused
comparison.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd

from lenbench.compare.across import unpaired_summary_line
from lenbench.compare.quality import (
    FAILED,
    IMPROVED,
    MISSING,
    NEW,
    REGRESSION,
    UNCHANGED,
    WITHIN,
    compare_quality,
)
from lenbench.compare.sides import compare_setups, load_side, numeric_kinds
from lenbench.compare.speed import FASTER, KERNEL_JOIN, SLOWER, compare_speed
from lenbench.compare.stats import parse_margins, summary_line, units_table
from lenbench.report.formatting import markdown_table
from lenbench.results.schema import ResultsError

#: How quality can be compared (`compare`'s ``method``; "auto" picks exact or unpaired by numeric kind).
METHODS = ("exact", "paired", "unpaired")


@dataclasses.dataclass
class Comparison:
    """The outcome of `compare`; `format()` is the readable report, `exit_code` 0 or 1.

    `failures()` lists why the gate fails (empty: it passes); see the module docstring.
    """

    base: str
    head: str
    level: str  # "rows", "leaderboard" or "none"
    quality: pd.DataFrame
    speed: pd.DataFrame | None
    tolerance: float
    speed_threshold: float
    notes: list[str] = dataclasses.field(default_factory=list)
    cells: pd.DataFrame | None = None  # CELL_KEY, base_status, head_status, error, status
    allow_missing: bool = False
    allow_no_overlap: bool = False
    warnings: list[str] = dataclasses.field(default_factory=list)
    top: int = 10
    margins: dict | None = None  # statistical comparison (lenbench.compare.stats) when set, else exact
    machines: str = ""  # the machine difference between the sides, "" when none is recorded
    method: str = "exact"  # how quality was compared: exact, paired or unpaired (METHODS)
    kinds: str = ""  # the sides' numeric kinds, "base → head" or the one kind ("" unknown)

    def _count(self, frame: pd.DataFrame | None, status: str) -> int:
        return 0 if frame is None or frame.empty else int((frame["status"] == status).sum())

    def _missing_ok_in_base(self) -> int:
        """Measurements ok in base (a value) and absent from head (not counting failed cells' rows)."""
        q = self.quality
        if q.empty:
            return 0
        return int(((q["status"] == MISSING) & q["base"].notna()).sum())

    @property
    def failed_cells(self) -> int:
        return self._count(self.cells, FAILED)

    @property
    def missing_cells(self) -> int:
        return self._count(self.cells, MISSING)

    @property
    def overlap(self) -> int:
        """Measurements, kernels and cells present on both sides (a cell failed on one side counts)."""
        n = 0
        for frame in (self.quality, self.speed):
            if frame is not None and not frame.empty:
                n += int((~frame["status"].isin([MISSING, NEW, FAILED])).sum())
        if self.cells is not None and not self.cells.empty:
            n += int((self.cells["base_status"].notna() & self.cells["head_status"].notna()).sum())
        return n

    @property
    def quality_regressions(self) -> int:
        missing = 0 if self.allow_missing else self._missing_ok_in_base()
        return self._count(self.quality, REGRESSION) + self.failed_cells + missing

    @property
    def speed_regressions(self) -> int:
        return self._count(self.speed, SLOWER) + (0 if self.allow_missing else self._count(self.speed, MISSING))

    def failures(self) -> list[str]:
        """Why the gate fails, one reason per entry (empty: it passes)."""
        out = []
        if n := self._count(self.quality, REGRESSION):
            out.append({"exact": f"{n} measurement(s) worse than base",
                        "paired": f"{n} measurement(s) worse than base beyond the margin with support, or ok in base "
                                  "and failed in head",
                        "unpaired": f"{n} measurement(s) worse than base beyond the margin after Holm's correction, or "
                                    "ok in base and failed in head"}[self.method])
        if n := self.failed_cells:
            out.append(f"{n} cell(s) ok in base failed in head")
        if not self.allow_missing and (self._missing_ok_in_base() or self.missing_cells):
            out.append(f"{self._missing_ok_in_base()} measurement(s) ok in base missing in head "
                       f"({self.missing_cells} whole cell(s); --allow-missing accepts)")
        if n := self._count(self.speed, SLOWER):
            out.append(f"{n} kernel(s) slower beyond {self.speed_threshold:.0%}")
        if not self.allow_missing and (n := self._count(self.speed, MISSING)):
            out.append(f"{n} kernel(s) missing in head (--allow-missing accepts)")
        if not self.overlap and not self.allow_no_overlap:
            out.append("no measurement or kernel in common: nothing was compared (--allow-no-overlap accepts)")
        return out

    @property
    def exit_code(self) -> int:
        return 1 if self.failures() else 0

    def format(self, show_all: bool = False) -> str:
        """The report: warnings, counts per category, the `top` largest changes per table (all with `show_all`)."""
        lines = [f"lenbench compare: base {self.base}  vs  head {self.head}", ""]
        lines += [f"WARNING: {w}" for w in self.warnings]
        if self.warnings:
            lines.append("")
        limit = None if show_all else self.top
        if self.cells is not None and not self.cells.empty:
            c = self.cells
            lines.append(f"Cells (task, encoding, train_len, seed): {int(c['base_status'].notna().sum())} in base, "
                         f"{int(c['head_status'].notna().sum())} in head; {self.failed_cells} failed in head, "
                         f"{self.missing_cells} missing in head, {self._count(c, NEW)} new in head, "
                         f"{self._count(c, IMPROVED)} failed in base and ok in head.")
            odd = c[c["status"].isin([FAILED, MISSING, IMPROVED])]
            for _, r in odd.head(len(odd) if limit is None else limit).iterrows():
                why = f": {r['error']}" if r["status"] == FAILED and r["error"] else ""
                lines.append(f"  {r['status']}: {r['task']} {r['encoding']} train_len {r['train_len']} seed {r['seed']}{why}")
            if limit is not None and len(odd) > limit:
                lines.append(f"  … {len(odd) - limit} more cell(s) (--all shows every one)")
            lines.append("")
        tol = "exact (any worse value)" if self.tolerance == 0 else f"{self.tolerance:g} relative"
        q = self.quality
        if self.level == "none":
            lines.append("Quality: no extrapolation results on either side.")
        elif self.method != "exact":
            lines += self._statistical_section(limit)
        else:
            counts = {s: self._count(q, s) for s in (REGRESSION, FAILED, IMPROVED, WITHIN, UNCHANGED, MISSING, NEW)}
            what = "measurements" if self.level == "rows" else "leaderboard statistics"
            lines.append(f"Quality ({what}, tolerance {tol}): {counts[REGRESSION]} regression(s), "
                         f"{counts[FAILED]} in cells failed in head, "
                         f"{counts[IMPROVED]} improved, {counts[WITHIN]} worse within tolerance, "
                         f"{counts[UNCHANGED]} unchanged, {counts[MISSING]} missing in head, {counts[NEW]} new in head.")
            changed = q[q["status"] != UNCHANGED]
            if len(changed):
                lines += ["", self._quality_table(changed, limit)]
        lines.append("")
        if self.speed is None:
            lines.append("Speed: not compared (kernel timings need a benchmark JSON on both sides).")
        else:
            s = self.speed
            counts = {k: self._count(s, k) for k in (SLOWER, FASTER, UNCHANGED, MISSING, NEW)}
            lines.append(f"Speed (kernel time / copy time of the same bytes; training step / nope step; threshold "
                         f"{self.speed_threshold:.0%}): {counts[SLOWER]} slower, {counts[FASTER]} faster, "
                         f"{counts[UNCHANGED]} within threshold, {counts[MISSING]} missing in head, {counts[NEW]} new in head.")
            changed = s[s["status"] != UNCHANGED]
            if len(changed):
                lines += ["", self._speed_table(changed, limit)]
        for note in self.notes:
            lines.append(f"note: {note}")
        lines.append("")
        if self.level == "rows":  # the comparison the verdict rests on, just above it (the verdict stays last)
            lines.append(f"Quality was compared {self.how()}.")
        failures = self.failures()
        if failures:
            lines.append(f"FAIL: {self.quality_regressions} quality regression(s), {self.speed_regressions} speed "
                         f"regression(s): {'; '.join(failures)}.")
        else:
            lines.append("OK: no regression.")
        return "\n".join(lines)

    def how(self) -> str:
        """Which comparison the verdict rests on, in words (the line above the verdict)."""
        kinds = f" ({self.kinds})" if self.kinds else ""
        return {"exact": f"exactly, value by value{kinds}",
                "paired": f"by the paired bootstrap over seeds × samples against margins{kinds}",
                "unpaired": f"across numeric kinds{kinds}: seeds unpaired, Welch t against margins, Holm"}[self.method]

    def _statistical_section(self, limit: int | None) -> list[str]:
        """The quality section of a statistical comparison: units over seeds, then the measurements
        not ok on both sides, compared exactly."""
        q = self.quality
        lines = [unpaired_summary_line(q, self.margins, self.kinds) if self.method == "unpaired" else
                 summary_line(q, self.margins, self.machines)]
        if table := units_table(q, limit):
            lines += ["", table]
        exact = q[q["seed"].astype(str) != "all"]
        if len(exact):
            counts = {s: self._count(exact, s) for s in (REGRESSION, FAILED, IMPROVED, MISSING, NEW)}
            lines += ["", f"Measurements not ok on both sides (compared exactly, per seed): {counts[REGRESSION]} ok in base "
                      f"and failed in head, {counts[FAILED]} in cells failed in head, {counts[IMPROVED]} failed in base "
                      f"and ok in head, {counts[MISSING]} missing in head, {counts[NEW]} new in head."]
            changed = exact[exact["status"] != UNCHANGED]
            if len(changed):
                lines += ["", self._quality_table(changed, limit)]
        return lines

    @staticmethod
    def _largest_first(frame: pd.DataFrame, order: dict, change: pd.Series, limit: int | None) -> tuple[pd.DataFrame, int]:
        """Rows by status priority, then the largest |change| first; the first `limit` and how many were cut."""
        frame = frame.assign(_o=frame["status"].map(order).fillna(len(order)), _c=-change.abs().fillna(math.inf))
        frame = frame.sort_values(["_o", "_c"], kind="mergesort")
        cut = 0 if limit is None else max(0, len(frame) - limit)
        return (frame if limit is None else frame.head(limit)), cut

    def _quality_table(self, frame: pd.DataFrame, limit: int | None = None) -> str:
        order = {REGRESSION: 0, FAILED: 1, MISSING: 2, WITHIN: 3, IMPROVED: 4, NEW: 5, UNCHANGED: 6}
        rel = (frame["head"] - frame["base"]).abs() / frame["base"].abs().where(frame["base"] != 0)
        frame, cut = self._largest_first(frame, order, rel.replace([math.inf, -math.inf], math.nan), limit)
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
        table = markdown_table(header, body, align)
        return table + (f"\n… {cut} more changed measurement(s) not shown (--all shows every one)" if cut else "")

    def _speed_table(self, frame: pd.DataFrame, limit: int | None = None) -> str:
        order = {SLOWER: 0, MISSING: 1, FASTER: 2, NEW: 3, UNCHANGED: 4}
        frame, cut = self._largest_first(frame, order, frame["change"], limit)
        body = []
        for _, r in frame.iterrows():
            ident = (" ".join(f"{r[k]:g}" if isinstance(r[k], float) else str(r[k]) for k in KERNEL_JOIN)
                     if "encoding" in frame.columns else r["kernel"])
            body.append([r["status"], ident, r["measure"], _num(r["base"]), _num(r["head"]),
                         "" if math.isnan(r["change"]) else percent(r["change"])])
        table = markdown_table(["status", "kernel (encoding kind impl T dtype)", "measure", "base", "head", "change"], body,
                               ["l", "l", "l", "r", "r", "r"])
        return table + (f"\n… {cut} more changed kernel(s) not shown (--all shows every one)" if cut else "")


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
    rel = f" ({percent(diff / abs(b))})" if b not in (0, math.inf, -math.inf) and math.isfinite(diff) else ""
    return f"{diff:+.4g}{rel}"


def percent(fraction: float) -> str:
    """A relative change in percent: one decimal, or two significant digits below 0.1 %, so a change
    never reads as none (30.2694 → 30.2795 is "+0.033%", not "+0.0%")."""
    pct = fraction * 100
    return "0%" if pct == 0 else f"{pct:+.1f}%" if abs(pct) >= 0.1 else f"{pct:+.2g}%"


def compare(base: str | Path, head: str | Path, *, tolerance: float = 0.0, speed_threshold: float = 0.10,
            allow_missing: bool = False, allow_no_overlap: bool = False,
            force_speed: bool = False, top: int = 10, statistical: bool = False,
            margins: list[str] | None = None, method: str = "auto") -> Comparison:
    """Compare two runs (see `lenbench.compare` and the docstrings of its modules).

    Args:
        base, head: a results directory, tidy or leaderboard CSV, or pytest-benchmark JSON each.
        tolerance: relative worsening of a metric tolerated (0: any worse value is a regression).
        speed_threshold: relative growth of a kernel's copy ratio tolerated (0.10 = 10 %).
        allow_missing: cells, rows and kernels ok in base but absent from head do not fail.
        allow_no_overlap: two sides without a measurement or kernel in common do not fail.
        force_speed: compare kernel timings from two different machines (otherwise refused).
        top: the report shows this many of the largest changes per table.
        statistical: compare quality by paired bootstrap over seeds × samples against practical
            margins (`lenbench.compare.stats`), for results from different machines.
        margins: ``--margin`` overrides of the statistical margins (``X`` or ``METRIC=X``).
        method: how quality is compared (`METHODS`): "auto" (default) compares exactly when both sides
            hold one numeric kind, the same, or record no machine difference, and unpaired
            (`lenbench.compare.across`) when their kinds differ (recorded, or inferred from the machine
            facts of older results); "exact", "paired" (= `statistical`) or "unpaired" force one.

    Raises:
        ResultsError: unreadable input, negative thresholds, a task measured on different data, or
            timings from different machines without `force_speed` (one line each).
    """
    if method not in ("auto", *METHODS):
        raise ResultsError(f"--method {method!r}: expected auto, {', '.join(METHODS)}")
    if statistical:
        if method not in ("auto", "paired"):
            raise ResultsError(f"--statistical is --method paired; it cannot be combined with --method {method}")
        method = "paired"
    if margins and method in ("auto", "exact"):
        raise ResultsError("--margin applies to a statistical comparison: add --method paired or unpaired")
    if method in ("paired", "unpaired") and tolerance:
        raise ResultsError(f"--tolerance applies to the exact comparison; --method {method} uses --margin instead")
    if tolerance < 0 or speed_threshold < 0 or math.isnan(tolerance) or math.isnan(speed_threshold):
        raise ResultsError(f"--tolerance and --speed-threshold must be ≥ 0, got {tolerance} and {speed_threshold}")
    if top < 1:
        raise ResultsError(f"--top must be at least 1, got {top}")
    b, h = load_side(base), load_side(head)
    setup = compare_setups(b, h)
    kb, kh = numeric_kinds(b), numeric_kinds(h)
    kinds = (next(iter(kb)) if kb == kh and len(kb) == 1 else
             f"{', '.join(sorted(kb)) or 'unknown'} → {', '.join(sorted(kh)) or 'unknown'}" if kb or kh else "")
    if method == "auto":  # another kind, recorded or inferred from the machine facts: unpaired
        same = (kb == kh and len(kb) == 1) or not setup.machines or setup.pinned
        rows = all(s.rows is not None and not s.rows.empty and s.board is None for s in (b, h))
        method = "exact" if same or tolerance or not rows else "unpaired"
    margin_of = parse_margins(margins) if method != "exact" else None
    q = compare_quality(b, h, tolerance, margin_of, setup, method)
    speed, speed_warnings, speed_notes = compare_speed(b, h, speed_threshold, force_speed, setup)
    level = q.level
    if method != "exact" and level != "rows":
        raise ResultsError(f"--method {method} needs measurement rows with sample scores on both sides (a results "
                           f"directory, results CSV or benchmark JSON), not {'a leaderboard CSV' if level == 'leaderboard' else 'kernel timings only'}")
    if level == "none" and speed is None:
        raise ResultsError(f"nothing to compare: neither {base} nor {head} holds extrapolation rows, and they do not "
                           "both hold kernel timings")
    return Comparison(str(base), str(head), level, q.frame, speed, tolerance, speed_threshold,
                      q.notes + speed_notes, cells=q.cells, allow_missing=allow_missing,
                      allow_no_overlap=allow_no_overlap, warnings=setup.warnings + q.warnings + speed_warnings,
                      top=top, margins=margin_of, machines=setup.machines, method=method, kinds=kinds)
