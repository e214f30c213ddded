"""One side of `lenbench compare`: what a results directory, CSV or benchmark JSON holds, and where it ran.

Each side is a results directory (``cells/*.json``, or a report directory with ``results.csv``
and / or ``bench.json``), a tidy results CSV, a leaderboard CSV or a pytest-benchmark JSON
(`load_side`; malformed input is one line, `lenbench.compare.inputs`). A `Side` holds its tidy
rows or its leaderboard, its kernel timings, its cells (status from ``cells/*.json`` or the
benchmark JSON's ``extra_info["lenbench_cell"]``; a CSV: from its rows), its machine_info, its data
fingerprints and its machine facts.

Provenance (`compare_setups`): differing torch / Python versions, devices or thread counts between
the sides are WARNING lines, and so are differing machine facts (`MACHINE_FACTS`: CPU model, vector
capability, BLAS, numpy / pandas versions, numerics mode, from rows and cells; for old results
without them, cpu_model and cpu_capability inferred from the benchmark JSON's ``machine_info.cpu``
brand and flags, and numerics "native", each marked inferred). Rows of a task whose data
fingerprint (``data_fingerprint``, e.g. the ``lm`` corpus sha256; for a results directory also its
cells' ``task_fingerprint``) differs between the sides are refused (`check_fingerprints`, a one-line
error): their values measure different data. An unknown fingerprint (empty or absent) is allowed,
with a note.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pandas as pd

from lenbench import numerics
from lenbench.compare.inputs import check_benchmark_json, check_cells_directory, guard, read_json
from lenbench.report.rows import (
    csv_kind,
    load_results,
    read_csv_strings,
    readable_cell_results,
    resolve_source,
)
from lenbench.report.tables import leaderboard, read_leaderboard_csv
from lenbench.report.timings import load_kernel_timings
from lenbench.results.bench_rows import cell_rows
from lenbench.results.schema import ResultsError

BOARD_JOIN = ("task", "train_len", "metric", "encoding", "variant", "statistic")

CELL_KEY = ("task", "encoding", "train_len", "seed")
CELL_OK = "ok"
#: A cell title as `lenbench.config.schema.Cell.title` writes it: task-encoding-L<train_len>-s<seed>.
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
        if csv_kind(read_csv_strings(path).columns) == "leaderboard":
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
            _collect_facts([c for e in extras.values() for c in [e.get("lenbench_cell") or {}, *(cell_rows(e) or [])]],
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
        _collect_facts([result.to_json(), result.provenance or {}, *result.rows], facts)
        config = result.config or {}
        if not {"task", "train_len", "seed"} <= set(config):
            continue  # a hand-written cell file: its rows speak for it
        fp = (result.task_fingerprint or {}).get("corpus_sha256", "")
        records.append({"task": str(config.get("task_label") or config["task"]), "encoding": str(config.get("label") or config.get("encoding")),
                        "train_len": int(config["train_len"]), "seed": int(config["seed"]),
                        "status": str(result.status or CELL_OK), "error": str(result.error or ""),
                        "timestamp": str(result.timestamp or ""), "data_fingerprint": str(fp or "")})
    return records


def _cell_of_benchmark(extra: dict) -> dict:
    """The cell record of one extrapolation benchmark (its rows, else its title)."""
    info = extra["lenbench_cell"]
    rows = cell_rows(extra) or []
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
    if side.rows is not None and {"numerics", "cpu_model"} <= set(side.rows.columns):
        kinds = {numerics.numeric_kind(str(n), str(m)) for n, m in zip(side.rows["numerics"], side.rows["cpu_model"], strict=True)}
        facts["numerics"] = (kinds - {"", "nan"}) or facts.get("numerics", set())
    if len(facts.get("cpu_model", ())) == 1:  # a kind recorded before it named the vendor: the CPU's
        [model] = facts["cpu_model"]
        facts["numerics"] = {numerics.numeric_kind(k, model) for k in facts.get("numerics", ())}
    facts = {k: v for k, v in facts.items() if v}
    return facts, inferred


def machine_difference(b: Side, h: Side, *, named: tuple[str, ...] = ()) -> tuple[list[str], bool]:
    """The machine facts that differ between the sides ("fact base → head", inferred values marked)
    and whether both sides pinned the same numerics on the same CPU vendor, i.e. the same numeric
    kind (then exact values should still match; across vendors training takes another draw).

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


def numeric_kinds(side: Side) -> set[str]:
    """The numeric kinds of a side's rows (`lenbench.numerics.numeric_kind` of each row's numerics and CPU
    model); empty when its rows record no numerics (older results, a leaderboard CSV)."""
    rows = side.rows
    if rows is None or rows.empty or "numerics" not in rows.columns:
        return set()
    models = rows["cpu_model"] if "cpu_model" in rows.columns else pd.Series([""] * len(rows), index=rows.index)
    pairs = {(str(n), "" if m is None or m != m else str(m)) for n, m in zip(rows["numerics"], models, strict=True)
             if n is not None and n == n and str(n)}
    return {numerics.numeric_kind(n, m) for n, m in pairs}


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



@dataclasses.dataclass
class Setup:
    """How the two sides' setups differ (`compare_setups`).

    Attributes:
        warnings: the WARNING lines, in the report's order.
        timing_machines: the machine_info facts of the timings that differ ("cpu A vs B"), `MACHINE_KEYS`.
        timing_known: both sides' machine_info name at least one of `MACHINE_KEYS`.
        facts: the `MACHINE_FACTS` that differ (`machine_difference`).
        pinned: both sides pinned the same numerics.
    """

    warnings: list[str]
    timing_machines: list[str]
    timing_known: bool
    facts: list[str]
    pinned: bool

    @property
    def machines(self) -> str:
        """The machine difference between the sides, "" when none is recorded."""
        return "; ".join(self.timing_machines + self.facts)


def compare_setups(b: Side, h: Side) -> Setup:
    """The provenance and machine differences between the sides, with their warnings (module docstring)."""
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
    return Setup(warnings, other, bool(shared), facts, pinned)
