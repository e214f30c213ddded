"""`python -m lenbench.kernels BENCH.json`: every performance target of `pytest bench` with ok / MISS,
as `python bench/kernel_plans.py BENCH.json` (the plans live beside the benchmarks)."""

import importlib.util
import sys
from pathlib import Path

_path = Path(__file__).resolve().parents[2] / "bench" / "kernel_plans.py"
if not _path.is_file():
    raise SystemExit(f"python -m lenbench.kernels needs a lenbench checkout: {_path} not found")
_spec = importlib.util.spec_from_file_location("kernel_plans", _path)
_plans = sys.modules["kernel_plans"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_plans)
raise SystemExit(_plans._main(prog="python -m lenbench.kernels"))
