"""bench/test_kernels.py's benchmarks are independent of what ran before them: a benchmark
selected alone (-k), in random order (pytest-random-order) or on an xdist worker records every
ratio it records in the whole session, dividing by references it timed itself where needed."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = {"LENBENCH_KERNEL_LENGTHS": "64", "LENBENCH_KERNEL_DTYPES": "fp32", "LENBENCH_KERNEL_ENCODINGS": "rope,alibi",
        "LENBENCH_KERNEL_SECONDS": "0.01", "LENBENCH_TRAIN_ROUNDS": "2"}
#: No compiled implementation: seconds, not minutes, on a loaded CPU.
SELECTION = "alibi and not flex or rope and not fused or training_step or baseline"


def _bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "bench/test_kernels.py", "--suite", "smoke", "-q", "-p", "no:cacheprovider",
         *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, **TINY, "PYTHONPATH": str(ROOT)})


def _ratios(path: Path) -> dict[str, set[str]]:
    benches = json.loads(path.read_text())["benchmarks"]
    return {b["name"]: {k for k in b["extra_info"] if k.startswith(("over_", "ratio_", "speedup_"))} for b in benches}


@pytest.mark.subprocess
def test_a_benchmark_selected_alone_records_every_ratio(tmp_path):
    """alibi's cached kernel without its eager reference or the SDPA baseline in the session, and
    rope's training step without nope's: each divides by the reference it timed itself."""
    out = tmp_path / "alone.json"
    proc = _bench(tmp_path, "-k", "alibi-cached or training_step and rope", f"--benchmark-json={out}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ratios = _ratios(out)
    assert ratios["test_kernel[alibi-cached-T64-fp32]"] == {"over_eager", "over_unbiased", "over_unbiased_interleaved"}
    assert ratios["test_training_step[rope]"] == {"ratio_to_nope", "ratio_to_nope_interleaved",
                                                  "ratio_to_nope_sequential"}


@pytest.mark.subprocess
def test_random_order_records_the_same_ratios_as_the_default_order(tmp_path):
    if importlib.util.find_spec("random_order") is None:
        pytest.skip("pytest-random-order is not installed (the dev extra has it)")
    default, shuffled = tmp_path / "default.json", tmp_path / "random.json"
    for out, extra in ((default, ()), (shuffled, ("-p", "random_order", "--random-order-seed=3"))):
        proc = _bench(tmp_path, "-k", SELECTION, f"--benchmark-json={out}", *extra)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _ratios(shuffled) == _ratios(default)
    assert len(_ratios(default)) == 9


@pytest.mark.subprocess
def test_two_xdist_workers_run_the_selection(tmp_path):
    """Under xdist pytest-benchmark times nothing (it disables itself); every test still runs its
    setup, checks and ratios on whichever worker it lands."""
    if importlib.util.find_spec("xdist") is None:
        pytest.skip("pytest-xdist is not installed (the dev extra has it)")
    proc = _bench(tmp_path, "-k", SELECTION, "-n", "2", "-p", "random_order", "--random-order-seed=7")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "9 passed" in proc.stdout
