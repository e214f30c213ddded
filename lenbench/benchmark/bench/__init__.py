"""The benchmarks of `pytest bench`, shipped with the package so an installed lenbench runs them too.

    pytest --pyargs lenbench.benchmark.bench --suite smoke --benchmark-json out.json   # from an install
    pytest bench --benchmark-json out.json                                              # from a checkout

`test_kernels` times every encoding's forward kernels (eager reference against the fused
implementations), `test_training` the suite model's training step and its MFU, and
`test_extrapolation` trains and evaluates every cell of `--suite`; `common` holds what they share.
A checkout's `bench/test_kernels.py` and `bench/test_extrapolation.py` import these modules, so
`pytest bench` keeps its test ids (`bench/test_kernels.py::test_kernel[…]`), which
`lenbench compare` and pytest-benchmark's own compare match across runs.
"""
