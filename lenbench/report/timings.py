"""Timings, part of step 1 of the report path: the kernel timings and training steps of a
pytest-benchmark JSON, as frames.

`load_kernel_timings` reads the kernel benchmarks of ``pytest bench --benchmark-json`` (every
benchmark without a cell's rows, `lenbench.results.bench_rows.is_cell_benchmark`), `load_training_steps` the training-step ones
(`bench/test_kernels.py::test_training_step`). The tidy rows of the same JSON are
`lenbench.report.rows.load_results`; these are other frames, of their own columns (`KERNEL_COLUMNS`,
`TRAINING_STEP_COLUMNS`), which only the build (`lenbench.report.build`, for the cost tables of
`lenbench.report.cost`) and `lenbench compare` (`lenbench.compare.sides`) load.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from lenbench.report.rows import is_benchmark_json
from lenbench.results.bench_rows import is_cell_benchmark
from lenbench.results.schema import ResultsError, read_json
from lenbench.results.values import to_float, to_str


def _benchmark_json(path: Path) -> tuple[dict, dict]:
    """(the pytest-benchmark JSON of `path`, its machine_info["lenbench"]); one-line errors otherwise."""
    data = read_json(path)
    if not is_benchmark_json(data):
        raise ResultsError(f"{path}: JSON without a 'benchmarks' list; expected a pytest-benchmark JSON")
    return data, (data.get("machine_info") or {}).get("lenbench") or {}


KERNEL_COLUMNS = ("name", "fullname", "group", "encoding", "kind", "impl", "T", "dtype", "bytes", "gbps",
                  "copy_ratio", "copy_ratio_min", "median", "mean", "min", "max", "stddev", "rounds", "device",
                  "device_name")


def load_kernel_timings(bench_json: str | Path) -> pd.DataFrame:
    """Kernel timings of a pytest-benchmark JSON: benchmarks whose extra_info carries no cell's rows.

    Columns `KERNEL_COLUMNS`: identity (name, fullname, group, encoding, kind, impl, T, dtype),
    bytes, gbps, copy_ratio (median time / time of a plain copy of the same bytes in the same
    session), the timing stats in seconds, and the device from machine_info; sorted by fullname.
    """
    path = Path(bench_json)
    if path.is_dir():
        path = path / "bench.json"
    if not path.is_file():
        raise ResultsError(f"{path}: no such file; expected a pytest-benchmark JSON")
    data, machine = _benchmark_json(path)
    records = []
    for bench in data["benchmarks"]:
        extra = bench.get("extra_info") or {}
        if is_cell_benchmark(extra):
            continue
        stats = bench.get("stats") or {}
        rec = {"name": bench.get("name", ""), "fullname": bench.get("fullname", bench.get("name", "")),
               "group": bench.get("group") or ""}
        for key in ("encoding", "kind", "impl", "dtype"):
            rec[key] = to_str(extra.get(key))
        for key in ("T", "bytes"):
            rec[key] = to_float(extra.get(key))
        for key in ("gbps", "copy_ratio"):
            rec[key] = to_float(extra.get(key))
        for key in ("median", "mean", "min", "max", "stddev", "rounds"):
            rec[key] = to_float(stats.get(key))
        # The fastest round over the copy floor: on a shared machine other load only ever adds
        # time, so the minimum is the least noisy estimate of a kernel's own cost.
        copy_s = to_float(extra.get("copy_seconds"))
        rec["copy_ratio_min"] = rec["min"] / copy_s if copy_s and copy_s > 0 else math.nan
        rec["device"] = to_str(extra.get("device", machine.get("device")))
        rec["device_name"] = to_str(machine.get("device_name"))
        records.append(rec)
    frame = pd.DataFrame(records, columns=list(KERNEL_COLUMNS))
    return frame.sort_values("fullname", kind="mergesort").reset_index(drop=True)


TRAINING_STEP_COLUMNS = ("encoding", "seconds", "ratio_to_nope", "task", "T", "batch_size", "device", "device_name")


def load_training_steps(bench_json: str | Path) -> pd.DataFrame:
    """Training-step timings of a pytest-benchmark JSON (`bench/test_kernels.py::test_training_step`).

    Columns `TRAINING_STEP_COLUMNS`: the encoding, the benchmark's median seconds per step, its
    ``ratio_to_nope`` (per-round ratios to the `nope` step timed in the same loop, median), the
    task, sequence length T and batch size of the step's geometry, and the device; sorted by
    encoding. Empty when the JSON has no training-step benchmark.
    """
    data, machine = _benchmark_json(Path(bench_json))
    records = []
    for bench in data["benchmarks"]:
        extra = bench.get("extra_info") or {}
        if extra.get("kind") != "training-step":
            continue
        geometry = extra.get("geometry") or {}
        records.append({"encoding": to_str(extra.get("encoding")),
                        "seconds": to_float((bench.get("stats") or {}).get("median", extra.get("seconds"))),
                        "ratio_to_nope": to_float(extra.get("ratio_to_nope")), "task": to_str(geometry.get("task")),
                        "T": to_float(geometry.get("T")), "batch_size": to_float(geometry.get("batch_size")),
                        "device": to_str(extra.get("device", machine.get("device"))),
                        "device_name": to_str(machine.get("device_name"))})
    frame = pd.DataFrame(records, columns=list(TRAINING_STEP_COLUMNS))
    return frame.sort_values("encoding", kind="mergesort").reset_index(drop=True)
