"""`python -m lenbench.benchmark BENCH.json`: every performance target of `pytest bench` with ok / MISS
(`lenbench.benchmark.plans.performance_targets`; also `python bench/kernel_plans.py BENCH.json`)."""

from lenbench.benchmark.plans import main

raise SystemExit(main(prog="python -m lenbench.benchmark"))
