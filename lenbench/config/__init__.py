"""Suites: the typed schema, the YAML parser with its checks, and the preset suites (package data).

    >>> from lenbench.config import load_suite
    >>> suite = load_suite("smoke")         # a preset of lenbench/config/suites/, or a path to a .yaml file

Modules: `schema` (the frozen dataclasses `Suite`, `Cell`, ... and `digest`), `parse` (YAML →
`Suite`: `load_suite`, `parse_suite`, `list_suites`, range checks), `checks` (duplicate YAML keys,
seeds, encoding probes), `fields` (`SuiteError`, `SuiteWarning` and the shared field checks),
`kernels` (the `kernels:` section, `KernelSpec`), `resources` (the `resources:` section, `ResourceSpec`).
"""

from lenbench.config.fields import SuiteError, SuiteWarning
from lenbench.config.kernels import KernelSpec, parse_kernels
from lenbench.config.parse import SUITES_DIR, list_suites, load_suite, parse_suite
from lenbench.config.resources import ResourceSpec, parse_resources
from lenbench.config.schema import (
    PURPOSE_NOTES,
    Cell,
    EncodingSpec,
    EvalSpec,
    ModelSpec,
    Suite,
    TaskSpec,
    TrainSpec,
    VariantSpec,
    digest,
)

__all__ = [
    "PURPOSE_NOTES",
    "SUITES_DIR",
    "Cell",
    "EncodingSpec",
    "EvalSpec",
    "KernelSpec",
    "ModelSpec",
    "ResourceSpec",
    "Suite",
    "SuiteError",
    "SuiteWarning",
    "TaskSpec",
    "TrainSpec",
    "VariantSpec",
    "digest",
    "list_suites",
    "load_suite",
    "parse_kernels",
    "parse_resources",
    "parse_suite",
]
