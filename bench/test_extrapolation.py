"""`pytest bench -k extrapolation`: one benchmark per cell of `--suite`
(`lenbench.benchmark.bench.test_extrapolation` says what it runs and records), collected here under
this file's name so the test ids stay `bench/test_extrapolation.py::…`."""

from lenbench.benchmark.bench.test_extrapolation import *  # noqa: F403  (the test, its fixtures and hook)
