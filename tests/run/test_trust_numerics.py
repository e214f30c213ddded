"""Pinned CPU numerics (lenbench.numerics): the same bits whatever code paths the libraries would
choose on their own, recorded in every row and in the fingerprint (issue 19, part 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lenbench_testing import TINY_SUITE, write_suite

from lenbench import numerics
from lenbench.run.fingerprint import Fingerprint, stale_reasons

ROOT = Path(__file__).resolve().parents[2]
needs_pin = pytest.mark.skipif(not numerics.pinnable(), reason=f"this CPU ({numerics.cpu_isa()}) cannot run the "
                               "pinned x86-avx2 code paths; rows here are native and say so")

#: What another machine's libraries might choose on their own: scalar ATen kernels, MKL's SSE2
#: branch, oneDNN capped at SSE4.1. Pinned mode must override every one of them.
OTHER_MACHINE = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}

#: A few training steps of a small Transformer (matmuls: MKL; GELU: oneDNN; softmax, LayerNorm,
#: AdamW: ATen's vectorised kernels), printing the capability, the tag and a digest of the weights.
TRAIN = r"""
import hashlib, json, torch
import lenbench
from lenbench.model import ModelConfig, Transformer
from lenbench.numerics import numerics_tag
torch.set_num_threads(1)
torch.manual_seed(0)
net = Transformer(ModelConfig(vocab_size=32, d_model=32, n_layers=1, n_heads=2, ff_mult=2, encoding="nope"))
opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
x = torch.randint(0, 32, (8, 48))
for _ in range(5):
    loss = torch.nn.functional.cross_entropy(net(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
    opt.zero_grad(); loss.backward(); opt.step()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest()
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "tag": numerics_tag(), "digest": digest}))
"""


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in (*numerics.PINNED_ENV, numerics.MODE_ENV)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**base, "PYTHONPATH": str(ROOT), **env}, cwd=ROOT)


def native_capability() -> str:
    """The kernels torch picks on this CPU left to itself (a fresh process without the pin): this
    test process runs pinned (AVX2), so its own capability says nothing of an AVX-512 machine's."""
    done = _python("import torch; print(torch.backends.cpu.get_cpu_capability())")
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


def _train(**env: str) -> dict:
    done = _python(TRAIN, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.subprocess
@needs_pin
def test_pinned_mode_gives_the_same_bits_whatever_the_libraries_would_choose():
    """A process whose environment asks every library for other code paths (as another CPU's
    defaults would) trains to the same bits as a plain pinned process; in native mode the same
    environment changes the bits, so the pin is what makes them equal."""
    pinned = _train()
    pinned_elsewhere = _train(**OTHER_MACHINE)
    native_elsewhere = _train(LENBENCH_NUMERICS="native", **OTHER_MACHINE)
    assert pinned["capability"] == pinned_elsewhere["capability"] == "AVX2"
    assert pinned["tag"] == pinned_elsewhere["tag"] == f"pinned:x86-avx2@{numerics.cpu_vendor()}"
    assert pinned_elsewhere["digest"] == pinned["digest"]
    assert native_elsewhere["capability"] == "DEFAULT" and native_elsewhere["tag"] == f"native:DEFAULT@{numerics.cpu_vendor()}"
    assert native_elsewhere["digest"] != pinned["digest"]


@pytest.mark.subprocess
def test_native_mode_sets_nothing_and_says_which_kernels_ran():
    done = _python("import os, lenbench; from lenbench.numerics import numerics_tag, PINNED_ENV; "
                   "print(numerics_tag(), sorted(k for k in PINNED_ENV if k in os.environ))",
                   LENBENCH_NUMERICS="native")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"native:{native_capability()}@{numerics.cpu_vendor()}", "[]"]


@pytest.mark.subprocess
@needs_pin
def test_pinning_after_torch_chose_its_kernels_is_refused_in_one_line():
    done = _python("import torch; torch.ones(4).sum(); import lenbench; from lenbench.numerics import numerics_tag; "
                   "numerics_tag()", ATEN_CPU_CAPABILITY="default")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "torch already runs its DEFAULT kernels, so the pinned numeric mode cannot apply" in last
    assert "LENBENCH_NUMERICS=native" in last


@pytest.mark.subprocess
def test_unknown_mode_is_one_line_from_the_cli(tmp_path):
    suite = write_suite(tmp_path, TINY_SUITE)
    done = subprocess.run([sys.executable, "-m", "lenbench.cli", "run", "--suite", str(suite), "--out",
                           str(tmp_path / "out"), "--quiet"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "LENBENCH_NUMERICS": "fastest"}, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "lenbench: error: LENBENCH_NUMERICS='fastest' is not a numeric mode; use one of pinned, native"]


def test_the_numeric_mode_is_part_of_the_fingerprint():
    pinned = Fingerprint(sources={"model.py": "ab"}, torch_version="2.13.0", device="cpu", dtype="float32",
                         threads=1, numerics="pinned:x86-avx2")
    native = Fingerprint(**{**pinned.__dict__, "numerics": "native:AVX512"})
    assert pinned.code != native.code
    assert stale_reasons(pinned.to_json(), native) == ["numerics pinned:x86-avx2 → native:AVX512"]
    old = {k: v for k, v in pinned.to_json().items() if k != "numerics"}  # a cell made before issue 19
    assert stale_reasons(old, pinned) == ["numerics (not recorded) → pinned:x86-avx2"]


def _rows(out: Path) -> list[dict]:
    cells = [json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))]
    assert cells and all(c["status"] == "ok" for c in cells)
    return cells


@pytest.mark.subprocess
@pytest.mark.parametrize("mode", ["pinned", "native"])
def test_process_workers_run_the_drivers_mode_and_every_row_records_the_machine(tmp_path, mode):
    suite = write_suite(tmp_path, {**TINY_SUITE, "variants": []})
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "lenbench.cli", "run", "--suite", str(suite), "--out", str(out),
                           "--executor", "process", "--workers", "2", "--quiet", "--numerics", mode],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**{k: v for k, v in os.environ.items() if k != numerics.MODE_ENV},
                               "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    kind = "pinned:x86-avx2" if mode == "pinned" and numerics.pinnable() else f"native:{native_capability()}"
    expected = f"{kind}@{numerics.cpu_vendor()}"
    for cell in _rows(out):
        assert cell["fingerprint"]["numerics"] == expected
        for where in (cell["provenance"], *cell["rows"]):
            assert where["numerics"] == expected
            assert where["cpu_isa"] == numerics.cpu_isa() and where["cpu_model"] == numerics.cpu_model()
            assert where["blas"] == numerics.blas() and where["numpy_version"] and where["pandas_version"]
            if mode == "pinned" and numerics.pinnable():
                assert where["cpu_capability"] == "AVX2"


def test_cpu_isa_reads_the_widest_vector_extension(monkeypatch):
    monkeypatch.setattr(numerics.platform, "machine", lambda: "x86_64")
    for flags, isa in ((("sse2", "avx", "avx2", "avx512f", "avx512bw", "avx512dq", "avx512vl"), "avx512"),
                       (("sse2", "avx", "avx2", "avx512f"), "avx2"), (("sse2", "avx"), "avx"), (("sse2",), "sse")):
        monkeypatch.setattr(numerics, "_cpu_flags", lambda flags=flags: frozenset(flags))
        assert numerics.cpu_isa() == isa
        assert numerics.pinnable() == (isa in ("avx2", "avx512"))
    monkeypatch.setattr(numerics.platform, "machine", lambda: "arm64")
    assert numerics.cpu_isa() == "arm64" and not numerics.pinnable()


def test_the_numeric_kind_names_the_cpu_vendor(monkeypatch):
    """Issue 38: pinned numerics give one vendor's bits, not every vendor's, so the kind that rows
    and fingerprints record names the vendor, and a cell computed on the other vendor is stale."""
    for vendor_id, vendor in (("GenuineIntel", "intel"), ("AuthenticAMD", "amd"), ("HygonGenuine", "hygongenuine")):
        monkeypatch.setattr(numerics, "_read", lambda path, v=vendor_id: f"vendor_id\t: {v}\nmodel name\t: X\n")
        assert numerics.cpu_vendor() == vendor
    amd = Fingerprint(sources={"model.py": "0" * 16}, torch_version="2.13.0+cpu", device="cpu", dtype="float32",
                      threads=1, numerics="pinned:x86-avx2@amd")
    intel = Fingerprint(**{**amd.__dict__, "numerics": "pinned:x86-avx2@intel"})
    assert amd.code != intel.code
    assert stale_reasons(amd.to_json(), intel) == ["numerics pinned:x86-avx2@amd → pinned:x86-avx2@intel"]
    # a cell of the catalog computed before the tag named the vendor: stale on both kinds
    old = {**amd.to_json(), "numerics": "pinned:x86-avx2"}
    assert stale_reasons(old, amd) == ["numerics pinned:x86-avx2 → pinned:x86-avx2@amd"]


def test_the_numeric_kind_of_an_older_row_is_read_from_its_cpu_model():
    assert numerics.numeric_kind("pinned:x86-avx2", "AMD EPYC") == "pinned:x86-avx2@amd"
    assert numerics.numeric_kind("pinned:x86-avx2", "Intel(R) Xeon(R) Processor") == "pinned:x86-avx2@intel"
    assert numerics.numeric_kind("pinned:x86-avx2@amd", "Intel(R) Xeon(R)") == "pinned:x86-avx2@amd"
    assert numerics.numeric_kind("native:DEFAULT", "Apple M2") == "native:DEFAULT"
    assert numerics.numeric_kind("", "AMD EPYC") == ""
