"""`python bench/kernel_plans.py BENCH.json [MORE.json …]`: every performance target with ok / MISS.

The same as `python -m lenbench.benchmark BENCH.json`; the plans live in `lenbench.benchmark.plans`.
"""

from lenbench.benchmark.plans import main

if __name__ == "__main__":
    raise SystemExit(main(prog="python bench/kernel_plans.py"))
