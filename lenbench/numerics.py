"""CPU numeric code paths, pinned so that cells give the same bits on every x86 machine, and the
machine facts recorded beside every row.

Why: PyTorch, MKL and oneDNN pick their vector kernels by the CPU they find. The same cell on an
AVX-512 and on an AVX2 machine then sums in a different order and its rows differ in the 5th
significant digit (perplexity) or flip a sample (exact match). Each library has a documented
switch that fixes its choice; lenbench sets all three before torch computes anything:

====================  ===================  ===========================================================
library               variable             pinned value (``x86-avx2``)
====================  ===================  ===========================================================
ATen (torch's ops)    ATEN_CPU_CAPABILITY  ``avx2``: the AVX2 build of every dispatched kernel
MKL (sgemm: matmuls)  MKL_CBWR             ``AVX2,STRICT``: conditional numerical reproducibility
                                           (fixed blocking, deterministic reductions; on non-Intel
                                           CPUs MKL runs this as ``AUTO,STRICT``)
MKL                   MKL_ENABLE_INSTRUCTIONS  ``AVX2``: never dispatch past AVX2
oneDNN (GELU etc.)    ONEDNN_MAX_CPU_ISA   ``AVX2``
====================  ===================  ===========================================================

The mode is chosen by the environment variable ``LENBENCH_NUMERICS``: ``pinned`` (the default)
or ``native`` (each library's own choice: faster on AVX-512 machines, bits depend on the CPU);
``lenbench run --numerics`` and ``pytest bench --numerics`` set it. It is applied when `lenbench`
is imported (`apply`, called from ``lenbench/__init__.py``), which is before torch dispatches its
first operation in every process that computes cells: the serial path, the process executor's
spawned workers (they inherit the environment and import lenbench to unpickle their job) and Ray
workers (``LENBENCH_*`` variables are forwarded). `numerics_tag` names the numeric kind in force:
the mode and the CPU vendor (``pinned:x86-avx2@amd`` or ``native:AVX512@intel``); it is in every
row and in the cell fingerprint, so a cell computed in another mode, or on another vendor's CPU, is
recomputed. The vendor is there because the pin does not give the same bits across vendors: MKL
honours its reproducibility branches on Intel CPUs only, and its COMPATIBLE branch, which it honours
everywhere, neither reproduced the AMD bits on an Intel machine nor comes cheap (measured:
docs/reproducibility.md).

Not pinnable here: an x86 CPU without AVX2 (pre-2013) and non-x86 CPUs (Apple silicon, ARM
servers) run native and say so in their tag. Accelerators are not affected.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import sys
from pathlib import Path

#: Environment variable choosing the mode.
MODE_ENV = "LENBENCH_NUMERICS"
MODES = ("pinned", "native")
#: The pinned code paths: every variable lenbench sets in pinned mode.
PIN_NAME = "x86-avx2"
PINNED_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "AVX2,STRICT",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}


class NumericsError(ValueError):
    """The numeric mode cannot be applied as asked (one line saying why and what to do)."""


def requested_mode() -> str:
    """The mode the environment asks for (``LENBENCH_NUMERICS``, default pinned)."""
    mode = os.environ.get(MODE_ENV, "pinned").strip().lower() or "pinned"
    if mode not in MODES:
        raise NumericsError(f"{MODE_ENV}={mode!r} is not a numeric mode; use one of {', '.join(MODES)}")
    return mode


def cpu_isa() -> str:
    """The widest x86 vector ISA the CPU reports ("avx512", "avx2", "avx", "sse") or the machine
    name elsewhere ("arm64" …), from the CPU's own flags, not from torch."""
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64", "i386", "i686"):
        return machine or "unknown"
    flags = _cpu_flags()
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "avx512"
    for isa in ("avx2", "avx"):
        if isa in flags:
            return isa
    return "sse" if flags else "unknown"


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str]:
    text = _read("/proc/cpuinfo")
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.MULTILINE)
    if match:
        return frozenset(match.group(1).split())
    if sys.platform == "darwin":  # Intel macs: sysctl lists the leaf-7 features
        import subprocess

        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.features", "machdep.cpu.leaf7_features"],
                                 capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            return frozenset()
        return frozenset(f.lower().replace(".", "_") for f in out.split())
    return frozenset()


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def pinnable() -> bool:
    """Whether this CPU can run the pinned code paths (x86 with AVX2)."""
    return cpu_isa() in ("avx2", "avx512")


def apply() -> str:
    """Set the numeric code paths of this process from ``LENBENCH_NUMERICS``; returns the mode
    applied ("pinned" or "native"). Idempotent; must run before torch's first operation (see
    `check`). In native mode nothing is set (variables the user set stay as they are)."""
    mode = requested_mode()
    if mode == "pinned" and pinnable():
        os.environ.update(PINNED_ENV)
        return "pinned"
    return "native"


#: CPU vendor ids (``/proc/cpuinfo``'s ``vendor_id``) → the vendor a numeric kind names.
VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


def cpu_vendor() -> str:
    """The CPU's vendor ("intel", "amd", another x86 vendor id lower-cased) or, off x86, the
    machine name ("arm64" …): what, beyond the code paths, decides a cell's bits."""
    match = re.search(r"^vendor_id\s*:\s*(\S+)", _read("/proc/cpuinfo"), re.MULTILINE)
    if match:
        return VENDORS.get(match.group(1), match.group(1).lower())
    return vendor_of_model(cpu_model()) or platform.machine().lower() or "unknown"


def vendor_of_model(model: str) -> str:
    """The vendor a CPU model name names ("AMD EPYC" → "amd"), "" when it names none of `VENDORS`."""
    return next((v for v in VENDORS.values() if v in model.lower()), "")


def numeric_kind(numerics: str, cpu_model_name: str = "") -> str:
    """The numeric kind of a stored row or cell: its `numerics` tag, which names the CPU vendor
    (``pinned:x86-avx2@amd``); for a row from before the tag named it, the vendor is read from
    its `cpu_model` ("" when the row names no mode)."""
    if not numerics or "@" in numerics:
        return numerics
    vendor = vendor_of_model(cpu_model_name)
    return f"{numerics}@{vendor}" if vendor else numerics


def numerics_tag() -> str:
    """The numeric kind in force, as recorded in rows and fingerprints: the mode and code paths,
    and the CPU vendor, ``pinned:x86-avx2@amd`` or ``native:<torch's CPU capability>@<vendor>``
    (e.g. ``native:AVX512@intel``). The vendor is part of it because pinned code paths give the
    same bits on every machine of one vendor but not across vendors (measured: docs/reproducibility.md),
    so a cell is reused only on its own kind.

    Raises:
        NumericsError: pinned mode was asked for but torch had already chosen another capability
            (it computed before lenbench was imported).
    """
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    if requested_mode() == "pinned" and pinnable():
        if capability != PINNED_ENV["ATEN_CPU_CAPABILITY"].upper():
            raise NumericsError(
                f"torch already runs its {capability} kernels, so the pinned numeric mode cannot apply: import "
                f"lenbench before torch computes anything, or set {MODE_ENV}=native")
        return f"pinned:{PIN_NAME}@{cpu_vendor()}"
    return f"native:{capability}@{cpu_vendor()}"


def set_mode(mode: str) -> None:
    """Choose the mode for this process and its workers (a CLI / pytest option); call before torch
    computes anything (`numerics_tag` raises otherwise)."""
    if mode not in MODES:
        raise NumericsError(f"unknown numeric mode {mode!r}; use one of {', '.join(MODES)}")
    os.environ[MODE_ENV] = mode
    if mode == "native":
        for key, value in PINNED_ENV.items():
            if os.environ.get(key) == value:
                del os.environ[key]
    apply()


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC", "Apple M2" …), or the platform's processor string."""
    match = re.search(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo"), re.MULTILINE)
    if match:
        return match.group(1).strip()
    if sys.platform == "darwin":
        import subprocess

        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                 timeout=5).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out:
            return out
    return platform.processor() or platform.machine() or "unknown"


@functools.lru_cache(maxsize=1)
def blas() -> str:
    """torch's BLAS, with its version where torch says it (e.g. "mkl 2024.2")."""
    import torch

    config = torch.__config__.show()
    match = re.search(r"BLAS_INFO=(\w+)", config)
    name = match.group(1) if match else "unknown"
    version = re.search(r"Math Kernel Library Version ([\d.]+)", config) if name == "mkl" else None
    return f"{name} {version.group(1)}" if version else name


def machine_facts() -> dict[str, str]:
    """The machine and numeric stack a row was computed on (recorded in every row and cell)."""
    import torch

    return {"cpu_model": cpu_model(), "cpu_isa": cpu_isa(),
            "cpu_capability": str(torch.backends.cpu.get_cpu_capability()), "blas": blas(),
            "numerics": numerics_tag(), "numpy_version": _version("numpy"), "pandas_version": _version("pandas")}


def _version(distribution: str) -> str:
    """An installed distribution's version without importing it ("" when absent)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return ""


#: The facts of `machine_facts` that, when they differ, make float results differ.
MACHINE_KEYS = ("cpu_model", "cpu_isa", "cpu_capability", "blas", "numerics", "numpy_version", "pandas_version")
