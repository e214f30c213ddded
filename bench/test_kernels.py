"""`pytest bench -k kernels`: the kernel, training-step and MFU benchmarks of
`lenbench.benchmark.bench.test_kernels` and `lenbench.benchmark.bench.test_training` (their
docstrings say what each times and records), collected here under this file's name so the test ids
stay `bench/test_kernels.py::…`."""

from lenbench.benchmark.bench.test_kernels import *  # noqa: F403  (tests, fixtures, the parametrization hook)
from lenbench.benchmark.bench.test_training import *  # noqa: F403
