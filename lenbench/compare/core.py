"""`lenbench compare BASE HEAD`: quality and speed regressions between two runs.

Each side is a results directory (``cells/*.json``, or a report directory with ``results.csv``
and / or ``bench.json``), a tidy results CSV, a leaderboard CSV or a pytest-benchmark JSON.

Quality: measurements are joined on (task, encoding, variant, train_len, eval_len, ratio, metric,
seed) (plus suite when that alone is ambiguous). A value is *worse* in the metric's direction
(`higher_is_better`); it is a regression when it is worse by more than ``tolerance × |base|``
(relative; the default 0 flags any worse value, since same-platform runs are deterministic). A
measurement that was ok and now failed is a regression; one that failed and is now ok an
improvement. When either side is a leaderboard CSV, both are compared at the leaderboard level
instead: the statistics in_dist, past_train_mean and max_ratio_within_10pct per (task, train_len,
encoding, variant), ranks left out (one entry's gain moves every other entry's rank).

Cells: a cell that diverged stores no rows, so cells are compared as well, on (task, encoding,
train_len, seed) — never on cell ids, which change with the code. Their status comes from
``cells/*.json`` or the benchmark JSON's ``extra_info["lenbench_cell"]`` (a CSV: from its rows). A
cell ok in base and failed in head is a regression (``FAILED in head``, with the reason), and so
are its measurements; a cell or measurement ok in base and absent from head is ``missing in head``.

The gate (`Comparison.failures`, exit code 1) fails on: a worse measurement, a cell failed in head,
anything ok in base missing in head (opt out: ``allow_missing``), no measurement or kernel in
common at all (opt out: ``allow_no_overlap``), and a slower kernel or training step.

Speed: kernel benchmarks (extra_info without ``lenbench_rows``) are joined on (encoding, kind,
impl, T, dtype) (on the full test name when that is ambiguous) and compared by the fastest round
over the copy floor (``copy_ratio_min``), else ``copy_ratio`` — median time divided by the time of
a plain copy of the same bytes measured in the same session — which cancels most of the
difference between two machines; training-step benchmarks (``kind`` "training-step") by
``ratio_to_nope``, the step time over the `nope` step timed in the same loop. A kernel whose
measure grew by more than ``speed_threshold`` (default 10 %) is a regression. Without any of these
the raw median times are compared, with a note. Timings from two different machines
(``machine_info``: CPU brand, device name, CPU count) are refused unless ``force_speed``.

Provenance: differing torch / Python versions, devices or thread counts between the sides are
printed as WARNING lines, and so are differing machine facts (`MACHINE_FACTS`: CPU model, vector
capability, BLAS, numpy / pandas versions, numerics mode, from rows and cells; for old results
without them, cpu_model and cpu_capability inferred from the benchmark JSON's ``machine_info.cpu``
brand and flags, and numerics "native", each marked inferred). Across machines the exact comparison
is expected to differ, and the warning says to pass ``statistical`` (`lenbench.compare.stats`:
paired bootstrap over seeds × samples against per-metric practical margins) unless both sides
pinned the same numerics; rows of a task whose data fingerprint (``data_fingerprint``, e.g. the
``lm`` corpus sha256; for a results directory also its cells' ``task_fingerprint``) differs
between the sides are refused (a one-line error): their values measure different data. An unknown
fingerprint (empty or absent) is allowed, with a note.

The report is compact: counts per category, the ``top`` (default 10) largest changes per table,
and every line with ``show_all``.

Exit codes of the command: 0 no regression, 1 a regression, 2 unreadable input or a refused
comparison.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pandas as pd

from lenbench import numerics
from lenbench.compare.inputs import check_benchmark_json, check_cells_directory, guard, read_json
from lenbench.evaluate import METRICS
from lenbench.report.rows import (
    ResultsError,
    _read_csv_strings,
    csv_kind,
    load_kernel_timings,
    load_results,
    resolve_source,
    whole_length,
)
from lenbench.report.tables import SCORE_STATS, leaderboard, markdown_table, read_leaderboard_csv
from lenbench.run.store import readable_cell_results

ROW_JOIN = ("task", "encoding", "variant", "train_len", "eval_len", "ratio", "metric", "seed")
BOARD_JOIN = ("task", "train_len", "metric", "encoding", "variant", "statistic")
KERNEL_JOIN = ("encoding", "kind", "impl", "T", "dtype")

CELL_KEY = ("task", "encoding", "train_len", "seed")

REGRESSION, IMPROVED, WITHIN, UNCHANGED, MISSING, NEW = (
    "REGRESSION", "improved", "worse (within tolerance)", "unchanged", "missing in head", "new in head")
SLOWER, FASTER = "SLOWER", "faster"
FAILED = "FAILED in head"  # the whole cell failed in head (diverged): it stored no rows
CELL_OK = "ok"
#: A cell title as `lenbench.config.suite.Cell.title` writes it: task-encoding-L<train_len>-s<seed>.
TITLE = re.compile(r"(?P<task>[^-]+)-(?P<encoding>.+)-L(?P<train_len>\d+)-s(?P<seed>\d+)")
#: machine_info facts that identify the machine timings were measured on.
MACHINE_KEYS = ("cpu", "device_name", "cpu_count")
#: Provenance compared between the sides (row columns / machine_info.lenbench keys).
PROVENANCE_KEYS = ("torch_version", "python_version", "device", "threads")
#: What decides a CPU cell's float rounding, recorded in rows and cells (absent in old results).
MACHINE_FACTS = numerics.MACHINE_KEYS


@dataclasses.dataclass
class Side:
    """What one side of a comparison holds: measurement rows or a leaderboard, and kernel timings."""

    source: str
    rows: pd.DataFrame | None = None  # tidy rows (load_results)
    board: pd.DataFrame | None = None  # long-form leaderboard (read_leaderboard_csv)
    kernels: pd.DataFrame | None = None  # load_kernel_timings (+ ratio_to_nope)
    cells: pd.DataFrame | None = None  # CELL_KEY + status, error (one row per cell)
    machine: dict = dataclasses.field(default_factory=dict)  # benchmark JSON machine_info
    fingerprints: dict = dataclasses.field(default_factory=dict)  # task → set of data fingerprints ("" unknown)
    facts: dict = dataclasses.field(default_factory=dict)  # MACHINE_FACTS recorded in rows / cells → set of values

    def leaderboard_long(self) -> pd.DataFrame:
        if self.board is not None:
            return self.board
        assert self.rows is not None
        if self.rows.empty:
            return pd.DataFrame(columns=[*BOARD_JOIN, "value", "higher_is_better"])
        return leaderboard(self.rows).long()


def load_side(source: str | Path) -> Side:
    """Read one side of a comparison (see the module docstring for what it may be).

    Raises:
        ResultsError: one line naming the file and what is wrong with it, whatever is malformed
            (`lenbench.compare.inputs`).
    """
    with guard(source):
        return _load_side(source)


def _load_side(source: str | Path) -> Side:
    path = resolve_source(source)
    side = Side(str(source))
    bench = None
    cell_records: list[dict] = []
    if path.is_dir():  # a results directory with cells/
        check_cells_directory(path)
        side.rows = load_results(path)
        cell_records = _cells_of_directory(path, side.facts)
        if (path / "bench.json").is_file():
            bench = path / "bench.json"
    elif path.suffix.lower() == ".csv":
        if csv_kind(_read_csv_strings(path).columns) == "leaderboard":
            side.board = read_leaderboard_csv(path)
        else:
            side.rows = load_results(path)
        sibling = path.parent / "bench.json"
        if Path(source).is_dir() and sibling.is_file():
            bench = sibling
    else:
        if path.suffix.lower() == ".json":  # checked before load_results reads it
            check_benchmark_json(path, read_json(path))
        side.rows = load_results(path)  # a one-line error for anything but a benchmark JSON
        bench = path
    if bench is not None:
        data = read_json(bench)
        if bench != path:
            check_benchmark_json(bench, data)
        side.kernels = load_kernel_timings(bench)
        side.machine = data.get("machine_info") or {}
        extras = {b.get("fullname", b.get("name", "")): b.get("extra_info") or {} for b in data["benchmarks"]}
        _collect_facts([side.machine.get("lenbench") or {}], side.facts)
        if bench == path:
            _collect_facts([c for e in extras.values() for c in [e.get("lenbench_cell") or {}, *e.get("lenbench_rows", [])]],
                           side.facts)
        side.kernels["ratio_to_nope"] = [_float(extras.get(n, {}).get("ratio_to_nope")) for n in side.kernels["fullname"]]
        if bench == path:
            cell_records = [_cell_of_benchmark(e) for e in extras.values() if isinstance(e.get("lenbench_cell"), dict)]
    if side.rows is not None:
        side.cells = _cell_table(side.rows, cell_records)
        side.fingerprints = _fingerprints(side.rows, cell_records)
    return side


def _float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _collect_facts(records, facts: dict) -> None:
    """Add the MACHINE_FACTS of `records` (rows, cell results, their provenance) to `facts` (fact → set)."""
    for record in records:
        for fact in MACHINE_FACTS:
            if record.get(fact) not in (None, ""):
                facts.setdefault(fact, set()).add(str(record[fact]))


def _cells_of_directory(directory: Path, facts: dict) -> list[dict]:
    """One record per cells/*.json: CELL_KEY, status, error, timestamp, data fingerprint; the
    machine facts of the cells, their provenance and rows go into `facts`."""
    records = []
    for result in readable_cell_results(directory):  # unreadable files: load_results reports them
        _collect_facts([result, result.get("provenance") or {}, *result.get("rows", [])], facts)
        config = result.get("config") or {}
        if not {"task", "train_len", "seed"} <= set(config):
            continue  # a hand-written cell file: its rows speak for it
        fp = (result.get("task_fingerprint") or {}).get("corpus_sha256", "")
        records.append({"task": str(config["task"]), "encoding": str(config.get("label") or config.get("encoding")),
                        "train_len": int(config["train_len"]), "seed": int(config["seed"]),
                        "status": str(result.get("status", CELL_OK)), "error": str(result.get("error", "")),
                        "timestamp": str(result.get("timestamp", "")), "data_fingerprint": str(fp or "")})
    return records


def _cell_of_benchmark(extra: dict) -> dict:
    """The cell record of one extrapolation benchmark (its rows, else its title)."""
    info = extra["lenbench_cell"]
    rows = extra.get("lenbench_rows") or []
    if rows:
        key = {k: rows[0].get(k) for k in CELL_KEY}
    else:
        m = TITLE.fullmatch(str(info.get("title", "")))
        key = m.groupdict() if m else {"task": "", "encoding": str(info.get("title", "")), "train_len": 0, "seed": 0}
    return {"task": str(key["task"]), "encoding": str(key["encoding"]), "train_len": int(key["train_len"]),
            "seed": int(key["seed"]), "status": str(info.get("status", CELL_OK)), "error": str(info.get("error") or ""),
            "timestamp": "", "data_fingerprint": ""}


def _cell_table(rows: pd.DataFrame, records: list[dict]) -> pd.DataFrame:
    """One row per cell (CELL_KEY, status, error): the recorded cells, else the cells the rows show."""
    from_rows = rows.groupby(list(CELL_KEY), sort=False)["status"].agg(lambda s: CELL_OK if (s == "ok").any() else "failed")
    frame = from_rows.reset_index().assign(error="", timestamp="")
    if records:  # a recorded status wins over the rows'; the newest record of a cell wins
        recorded = pd.DataFrame(records)[[*CELL_KEY, "status", "error", "timestamp"]]
        frame = pd.concat([frame.assign(timestamp=""), recorded.assign(timestamp="~" + recorded["timestamp"])])
    frame = frame.sort_values("timestamp", kind="mergesort").drop_duplicates(list(CELL_KEY), keep="last")
    return frame[[*CELL_KEY, "status", "error"]].reset_index(drop=True)


def _fingerprints(rows: pd.DataFrame, records: list[dict]) -> dict:
    """task → the set of data fingerprints of its rows ("" where unknown)."""
    out: dict[str, set] = {}
    col = rows["data_fingerprint"] if "data_fingerprint" in rows.columns else pd.Series([""] * len(rows), index=rows.index)
    for task, fp in zip(rows["task"], col.fillna("").astype(str), strict=True):
        out.setdefault(task, set()).add(fp)
    for r in records:  # cells/*.json record the lm corpus sha256 even when rows do not
        if r["data_fingerprint"]:
            found = out.setdefault(r["task"], set())
            found.discard("")
            found.add(r["data_fingerprint"])
    return out


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
    fail_missing: bool = False  # kept for callers of the old API: missing now fails unless allow_missing
    notes: list[str] = dataclasses.field(default_factory=list)
    cells: pd.DataFrame | None = None  # CELL_KEY, base_status, head_status, error, status
    allow_missing: bool = False
    allow_no_overlap: bool = False
    warnings: list[str] = dataclasses.field(default_factory=list)
    top: int = 10
    margins: dict | None = None  # statistical comparison (lenbench.compare.stats) when set, else exact
    machines: str = ""  # the machine difference between the sides, "" when none is recorded

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
            out.append(f"{n} measurement(s) worse than base" if self.margins is None else
                       f"{n} measurement(s) worse than base beyond the margin with support, or ok in base and failed in head")
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
        elif self.margins is not None:
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
        failures = self.failures()
        if failures:
            lines.append(f"FAIL: {self.quality_regressions} quality regression(s), {self.speed_regressions} speed "
                         f"regression(s): {'; '.join(failures)}.")
        else:
            lines.append("OK: no regression.")
        return "\n".join(lines)

    def _statistical_section(self, limit: int | None) -> list[str]:
        """The quality section of a statistical comparison: units over seeds, then the measurements
        not ok on both sides, compared exactly."""
        from lenbench.compare import stats as compare_stats
        q = self.quality
        lines = [compare_stats.summary_line(q, self.margins, self.machines)]
        if table := compare_stats.units_table(q, limit):
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
                         "" if math.isnan(r["change"]) else f"{r['change']:+.1%}"])
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
    rel = f" ({diff / abs(b):+.1%})" if b not in (0, math.inf, -math.inf) and math.isfinite(diff) else ""
    return f"{diff:+.4g}{rel}"


def compare_cells(base: pd.DataFrame, head: pd.DataFrame) -> pd.DataFrame:
    """Cell-level comparison on CELL_KEY: one row per cell with base_status, head_status, error (head's), status.

    status: FAILED (ok in base, failed in head), MISSING (ok in base, absent from head), NEW, IMPROVED
    (failed in base, ok in head), UNCHANGED otherwise.
    """
    merged = base.merge(head, on=list(CELL_KEY), how="outer", suffixes=("_base", "_head"), sort=False)
    merged = merged.rename(columns={"status_base": "base_status", "status_head": "head_status", "error_head": "error"})
    merged = merged.astype({"base_status": object, "head_status": object})
    b_ok, h_ok = merged["base_status"] == CELL_OK, merged["head_status"] == CELL_OK
    status = pd.Series(UNCHANGED, index=merged.index, dtype=object)
    status[b_ok & merged["head_status"].notna() & ~h_ok] = FAILED
    status[b_ok & merged["head_status"].isna()] = MISSING
    status[merged["base_status"].isna()] = NEW
    status[merged["base_status"].notna() & ~b_ok & h_ok] = IMPROVED
    merged["status"] = status
    merged["error"] = merged["error"].fillna("")
    return merged[[*CELL_KEY, "base_status", "head_status", "error", "status"]]


def _machine(side: Side) -> dict:
    """The facts identifying the machine a benchmark JSON's timings come from (absent ones left out)."""
    info = side.machine or {}
    lb = info.get("lenbench") or {}
    facts = {"cpu": (info.get("cpu") or {}).get("brand_raw"), "device_name": lb.get("device_name"),
             "cpu_count": lb.get("cpu_count")}
    return {k: v for k, v in facts.items() if v not in (None, "")}


def _provenance(side: Side) -> dict:
    """Provenance values of one side: row columns (sets of values) and machine_info.lenbench."""
    out: dict[str, set] = {}
    if side.rows is not None and not side.rows.empty:
        for key in PROVENANCE_KEYS:
            if key in side.rows.columns:
                values = set(side.rows[key].astype(str)) - {"", "nan"}
                if values:
                    out[key] = values
    lb = (side.machine or {}).get("lenbench") or {}
    machine_keys = {"torch_version": "torch_version", "device": "device", "threads": "cpu_threads",
                    "python_version": None}
    for key, src in machine_keys.items():
        value = lb.get(src) if src else (side.machine or {}).get("python_version")
        if value not in (None, "") and key not in out:
            out[key] = {str(value)}
    return out


def cpu_capability_from_flags(flags: list[str]) -> str:
    """The top vector capability as `torch.backends.cpu.get_cpu_capability()` names it, from CPU flags
    (py-cpuinfo's ``machine_info.cpu.flags``): AVX512 needs avx512f, bw, dq and vl."""
    have = set(flags)
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= have:
        return "AVX512"
    return "AVX2" if "avx2" in have else "DEFAULT"


def _machine_facts(side: Side) -> tuple[dict[str, set], set[str]]:
    """(fact → values, the facts inferred): recorded MACHINE_FACTS, else what the benchmark JSON's
    machine_info implies (cpu_model from cpu.brand_raw, cpu_capability from cpu.flags)."""
    facts = {k: set(v) for k, v in side.facts.items()}
    if side.rows is not None:
        for fact in MACHINE_FACTS:  # row columns, when the tidy schema carries them
            if fact in side.rows.columns:
                facts.setdefault(fact, set()).update(set(side.rows[fact].astype(str)) - {"", "nan"})
    facts = {k: v for k, v in facts.items() if v}
    inferred = set()
    cpu = (side.machine or {}).get("cpu") or {}
    if "cpu_model" not in facts and cpu.get("brand_raw"):
        facts["cpu_model"], inferred = {cpu["brand_raw"]}, inferred | {"cpu_model"}
    if "cpu_capability" not in facts and cpu.get("flags"):
        facts["cpu_capability"], inferred = {cpu_capability_from_flags(cpu["flags"])}, inferred | {"cpu_capability"}
    return facts, inferred


def machine_difference(b: Side, h: Side, *, named: tuple[str, ...] = ()) -> tuple[list[str], bool]:
    """The machine facts that differ between the sides ("fact base → head", inferred values marked)
    and whether both sides pinned the same numerics (then exact values should still match).

    Args:
        named: facts another warning already names (left out here).
    """
    (fb, ib), (fh, ih) = _machine_facts(b), _machine_facts(h)
    for facts, inferred, other in ((fb, ib, fh), (fh, ih, fb)):  # rows from before the numerics record ran native
        if "numerics" in other and "numerics" not in facts and facts:
            facts["numerics"] = {"native"}
            inferred.add("numerics")

    def shown(fact: str, facts: dict, inferred: set) -> str:
        return _describe(facts[fact]) + (" (inferred)" if fact in inferred else "")

    differ = [f"{k} {shown(k, fb, ib)} → {shown(k, fh, ih)}" for k in MACHINE_FACTS
              if k in fb and k in fh and fb[k] != fh[k] and k not in named]
    numerics = fb.get("numerics", {""}) | fh.get("numerics", {""})  # both sides must record it
    pinned = len(numerics) == 1 and next(iter(numerics)).startswith("pinned") and not (ib | ih) & {"numerics"}
    return differ, pinned


def _describe(values: set) -> str:
    return ", ".join(sorted(values))


def check_fingerprints(b: Side, h: Side) -> list[str]:
    """Raise when a task's data fingerprint differs between the sides; notes for unknown lm fingerprints."""
    notes = []
    for task in sorted(set(b.fingerprints) & set(h.fingerprints)):
        fb, fh = b.fingerprints[task] - {""}, h.fingerprints[task] - {""}
        if fb and fh and fb != fh:
            raise ResultsError(f"task {task!r}: base and head measured different data (data_fingerprint {_describe(fb)} "
                               f"vs {_describe(fh)}); their values are not comparable: run both on the same data "
                               "(the default lm corpus depends on the Python version)")
        if task == "lm" and not (fb and fh):
            side = " and ".join(name for name, f in (("base", fb), ("head", fh)) if not f)
            notes.append(f"quality: the lm corpus of {side} is unknown (no data_fingerprint); compared without "
                         "checking that both used the same corpus")
    return notes


def compare(base: str | Path, head: str | Path, *, tolerance: float = 0.0, speed_threshold: float = 0.10,
            fail_missing: bool = False, allow_missing: bool = False, allow_no_overlap: bool = False,
            force_speed: bool = False, top: int = 10, statistical: bool = False,
            margins: list[str] | None = None) -> Comparison:
    """Compare two runs (see the module docstring).

    Args:
        base, head: a results directory, tidy or leaderboard CSV, or pytest-benchmark JSON each.
        tolerance: relative worsening of a metric tolerated (0: any worse value is a regression).
        speed_threshold: relative growth of a kernel's copy ratio tolerated (0.10 = 10 %).
        fail_missing: accepted for compatibility; missing rows and kernels fail unless `allow_missing`.
        allow_missing: cells, rows and kernels ok in base but absent from head do not fail.
        allow_no_overlap: two sides without a measurement or kernel in common do not fail.
        force_speed: compare kernel timings from two different machines (otherwise refused).
        top: the report shows this many of the largest changes per table.
        statistical: compare quality by paired bootstrap over seeds × samples against practical
            margins (`lenbench.compare.stats`), for results from different machines.
        margins: ``--margin`` overrides of the statistical margins (``X`` or ``METRIC=X``).

    Raises:
        ResultsError: unreadable input, negative thresholds, a task measured on different data, or
            timings from different machines without `force_speed` (one line each).
    """
    from lenbench.compare import stats as compare_stats
    if margins and not statistical:
        raise ResultsError("--margin applies to the statistical comparison: add --statistical")
    if statistical and tolerance:
        raise ResultsError("--tolerance applies to the exact comparison; --statistical uses --margin instead")
    margin_of = compare_stats.parse_margins(margins) if statistical else {}
    if tolerance < 0 or speed_threshold < 0 or math.isnan(tolerance) or math.isnan(speed_threshold):
        raise ResultsError(f"--tolerance and --speed-threshold must be ≥ 0, got {tolerance} and {speed_threshold}")
    if top < 1:
        raise ResultsError(f"--top must be at least 1, got {top}")
    b, h = load_side(base), load_side(head)
    notes: list[str] = []
    warnings: list[str] = []
    pb, ph = _provenance(b), _provenance(h)
    differ = [f"{k} {_describe(pb[k])} vs {_describe(ph[k])}" for k in PROVENANCE_KEYS if k in pb and k in ph and pb[k] != ph[k]]
    if differ:
        warnings.append(f"base and head come from different setups ({'; '.join(differ)}): values and timings are only "
                        "reproducible on one machine with one software stack")
    mb, mh = _machine(b), _machine(h)
    shared = [k for k in MACHINE_KEYS if k in mb and k in mh]
    other = [f"{k} {mb[k]} vs {mh[k]}" for k in shared if str(mb[k]) != str(mh[k])]
    if other:
        warnings.append(f"base and head ran on different machines ({'; '.join(other)})")
    cpu_named = "cpu" in shared and str(mb["cpu"]) != str(mh["cpu"])  # the warning above names the CPU model
    facts, pinned = machine_difference(b, h, named=("cpu_model",) if cpu_named else ())
    if facts:
        why = ""
        if any("(inferred)" in f for f in facts):
            why = " (inferred: read from a benchmark JSON's machine_info where rows record no machine facts"
            why += "; results from before the numerics record ran native)" if any(
                f.startswith("numerics") and "(inferred)" in f for f in facts) else ")"
        warnings.append(f"base and head ran on different machines: {'; '.join(facts)}{why}")
    machines = "; ".join(other + facts)
    cells = None
    if b.board is not None or h.board is not None:
        level = "leaderboard"
        quality = compare_boards(b.leaderboard_long(), h.leaderboard_long(), tolerance, (b.source, h.source))
    elif (b.rows is None or b.rows.empty) and (h.rows is None or h.rows.empty) and not (
            (b.cells is not None and len(b.cells)) or (h.cells is not None and len(h.cells))):
        level = "none"
        quality = pd.DataFrame(columns=["status"])
    else:
        level = "rows"
        notes += check_fingerprints(b, h)
        quality = compare_rows(b.rows, h.rows, tolerance, (b.source, h.source))
        if statistical:
            quality = compare_stats.statistical_quality(b.rows, h.rows, quality, margin_of, (b.source, h.source))
        elif machines and not pinned:
            warnings.append("the exact comparison is expected to differ across machines (float rounding of another "
                            "vector ISA or BLAS): compare with --statistical (paired bootstrap over seeds × samples, "
                            "regressions beyond a practical margin)")
        elif machines:
            notes.append("both sides pinned the same numerics: exact values should match across these machines")
        cells = compare_cells(b.cells, h.cells)
        failed = cells.loc[cells["status"] == FAILED, list(CELL_KEY)]
        if len(failed) and len(quality):
            in_failed = quality[list(CELL_KEY)].merge(failed, how="left", indicator=True)["_merge"].eq("both").to_numpy()
            quality.loc[in_failed & (quality["status"] == MISSING).to_numpy(), "status"] = FAILED
    speed = None
    if b.kernels is not None and h.kernels is not None and (len(b.kernels) or len(h.kernels)):
        if other and not force_speed:
            raise ResultsError(f"speed: base and head timings come from different machines ({'; '.join(other)}); "
                               "timings compare only on one machine: pass --force-speed to compare them anyway "
                               "(copy ratios and ratio_to_nope normalise part of the difference)")
        if other:
            warnings.append(f"speed compared across machines ({'; '.join(other)}) with --force-speed")
        elif not shared:
            notes.append("speed: the machines of the timings are unknown (no machine_info); compared as if one machine")
        speed, speed_notes = compare_kernels(b.kernels, h.kernels, speed_threshold)
        notes += speed_notes
    if statistical and level != "rows":
        raise ResultsError(f"--statistical needs measurement rows with sample scores on both sides (a results "
                           f"directory, results CSV or benchmark JSON), not {'a leaderboard CSV' if level == 'leaderboard' else 'kernel timings only'}")
    if level == "none" and speed is None:
        raise ResultsError(f"nothing to compare: neither {base} nor {head} holds extrapolation rows, and they do not "
                           "both hold kernel timings")
    return Comparison(str(base), str(head), level, quality, speed, tolerance, speed_threshold, fail_missing, notes,
                      cells=cells, allow_missing=allow_missing, allow_no_overlap=allow_no_overlap, warnings=warnings,
                      top=top, margins=margin_of if statistical else None, machines=machines)
