"""`python -m lenbench.kernels BENCH.json`: every performance target of `pytest bench` with ok / MISS
(`lenbench.kernels.plans.performance_targets`; also `python bench/kernel_plans.py BENCH.json`)."""

from lenbench.kernels.plans import _main

raise SystemExit(_main(prog="python -m lenbench.kernels"))
