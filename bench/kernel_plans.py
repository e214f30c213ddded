"""`python bench/kernel_plans.py BENCH.json [MORE.json …]`: every performance target with ok / MISS.

The same as `python -m lenbench.kernels BENCH.json`; the plans live in `lenbench.kernels.plans`.
"""

from lenbench.kernels.plans import _main

if __name__ == "__main__":
    raise SystemExit(_main(prog="python bench/kernel_plans.py"))
