"""lenbench: how far past its training length does each positional encoding hold up?

The Python API (docs/api.md) is `lenbench.api`, exposed here on first use (PEP 562), so that
``import lenbench`` stays cheap and imports neither pandas nor torch::

    from lenbench import load_suite, run_suite, load_board, write_report, compare_runs

Import side effect: ``import lenbench`` pins the CPU's numeric code paths of this process
(`lenbench.numerics.apply`) so that cells give the same bits on every x86 machine: in the default mode
(``LENBENCH_NUMERICS`` unset or ``pinned``), on an x86 CPU with AVX2, it sets these environment variables,
replacing values set before (`lenbench.numerics.PINNED_ENV`)::

    ATEN_CPU_CAPABILITY=avx2  MKL_CBWR=AVX2,STRICT  MKL_ENABLE_INSTRUCTIONS=AVX2  ONEDNN_MAX_CPU_ISA=AVX2

With ``LENBENCH_NUMERICS=native`` set before the import, on other CPUs, or with a bad value of it (reported,
in one line, where a cell reads the mode), it sets nothing. It has no other effect: no thread, warnings
filter, logging handler or torch setting (tests/test_api.py compares a fresh interpreter before and after
against this list). The variables act only if torch has not computed anything yet in this process, so a
notebook imports lenbench before torch runs, or sets ``LENBENCH_NUMERICS=native``.
"""

__version__ = "0.1.0"

# Pin the CPU's numeric code paths before torch computes anything in this process (see
# lenbench.numerics; LENBENCH_NUMERICS=native turns it off). A bad value is reported, in one
# line, where the mode is read (`numerics_tag`), not as an import error.
from lenbench import numerics as _numerics  # noqa: E402

try:
    _numerics.apply()
except _numerics.NumericsError:
    pass

#: The public API's names (`lenbench.api.__all__`), stated here too so that reading them imports nothing.
__all__ = ["Board", "compare_runs", "load_board", "load_suite", "run_suite", "write_report"]


def __getattr__(name: str):
    """`lenbench.api`'s names, imported on first use; any other name is a plain AttributeError (so
    ``from lenbench import plugins`` still imports the submodule, without the API)."""
    if name in __all__:
        from lenbench import api

        return getattr(api, name)
    raise AttributeError(f"module 'lenbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
