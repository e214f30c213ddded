"""The benchmark harness of `pytest bench`: what the kernel and training-step benchmarks time
(`plans`), the device-synchronised timer (`timing`), analytic FLOPs and MFU (`flops`) and the
pytest plugin that wires them into a session (`pytest_plugin`).

It sits above the compute path: it imports the model, training step, tasks, suites and kernels to
time them, and nothing under `lenbench.kernels`, `lenbench.run` or the encodings imports it, so
`lenbench.kernels` holds ops only and a cell's fingerprint never covers the harness.
"""
