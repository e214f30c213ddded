"""docs/suite-reference.md documents every key a suite file may hold, with the code's defaults and ranges.

Checked against the schema itself: the fields of the dataclasses of `lenbench.config.schema`,
`config.kernels` and `config.resources` (every key, no extra one), their defaults (rendered as YAML
flow, the way a suite writes them), `lenbench.config.sections.RANGES` (the *valid* column, verbatim),
and the keyword parameters of every registered encoding, task and rope type (with their defaults).
"""

import dataclasses
import inspect

import pytest
import yaml
from docs_markdown import DOCS, code_spans, table_after

from lenbench.config.kernels import KernelSpec
from lenbench.config.resources import ResourceSpec
from lenbench.config.schema import EncodingSpec, EvalSpec, ModelSpec, Suite, TaskSpec, TrainSpec, VariantSpec
from lenbench.config.sections import RANGES, VARIANT_EXTRA_KEYS
from lenbench.encodings import ENCODINGS
from lenbench.encodings.rope_types import ROPE_TYPES
from lenbench.tasks import TASKS

pytestmark = pytest.mark.docs

PAGE = DOCS / "suite-reference.md"
#: Each table of the page and the dataclass whose fields it documents.
SECTIONS = {"suite": Suite, "tasks": TaskSpec, "encodings": EncodingSpec, "model": ModelSpec, "train": TrainSpec,
            "eval": EvalSpec, "variants": VariantSpec, "kernels": KernelSpec, "resources": ResourceSpec}
#: Fields of the dataclasses that are not suite keys.
NOT_KEYS = {Suite: {"source"}}
#: Parameters of a rope type that the model supplies, never the suite (`parse_suite` skips them too).
MODEL_ROPE_ARGS = ("dim", "base", "seq_len")


def page() -> str:
    return PAGE.read_text()


def yaml_flow(value) -> str:
    """A default as a suite file writes it: YAML flow style (`[1, 2]`, `true`, `0.001`), `""` for empty text."""
    if value == "":
        return '""'
    if isinstance(value, tuple):
        value = list(value)
    return yaml.safe_dump(value, default_flow_style=True).replace("\n...\n", "").strip()


def test_yaml_flow_renders_defaults_as_a_suite_writes_them():
    assert [yaml_flow(v) for v in ((1, 2, 4), ("fp32", "bf16"), True, 1e-3, 0.0, "", {}, (), "fixed")] == \
        ["[1, 2, 4]", "[fp32, bf16]", "true", "0.001", "0.0", '""', "{}", "[]", "fixed"]


@pytest.mark.parametrize("section", SECTIONS)
def test_every_key_of_the_section_is_documented_with_its_default_and_range(section):
    cls = SECTIONS[section]
    rows = table_after(page(), f"<!-- keys: {section} -->")
    documented = [code_spans(r["key"])[0] for r in rows]
    fields = [f for f in dataclasses.fields(cls) if f.name not in NOT_KEYS.get(cls, set())]
    assert sorted(documented) == sorted(f.name for f in fields), \
        f"suite-reference.md's {section} table documents {sorted(documented)}; {cls.__name__} has " \
        f"{sorted(f.name for f in fields)}"
    by_key = dict(zip(documented, rows, strict=True))
    for f in fields:
        row = by_key[f.name]
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        if not has_default:
            assert f.name == "name" or row["default"] == "required", f"{section}.{f.name} has no default: write `required`"
        elif dataclasses.is_dataclass(default):
            assert f"[{f.name}](#{f.name})" in row["default"], f"{section}.{f.name}: link its own table"
        else:
            spans = code_spans(row["default"])
            assert spans and spans[0] == yaml_flow(default), \
                f"{section}.{f.name}: the default is `{yaml_flow(default)}`, the page says {row['default']!r}"
        key = f"{section}.{f.name}"
        if key in RANGES:
            assert row["valid"] == f"`{RANGES[key][1]}`", \
                f"{key}: the valid range is `{RANGES[key][1]}` (RANGES), the page says {row['valid']!r}"


def test_every_range_is_a_documented_key():
    ranged = {k.split(".")[0] for k in RANGES}
    assert ranged <= set(SECTIONS), f"RANGES covers sections the page has no table for: {ranged - set(SECTIONS)}"


def test_variant_keys_beside_rope_type_are_documented():
    text = page()
    for key in (*VARIANT_EXTRA_KEYS, "type"):
        assert f"`{key}`" in text, f"suite-reference.md does not mention the variant key `{key}`"


def params_table(marker: str) -> dict[str, str]:
    rows = table_after(page(), f"<!-- params: {marker} -->")
    first = next(iter(rows[0]))
    return {code_spans(r[first])[0]: r[next(c for c in r if c != first)] for r in rows}


def documented_params(cell: str) -> dict[str, str]:
    """`name` (`default`; …) entries of a parameters cell → the default's first code span ("" if derived)."""
    if cell.startswith("none"):
        return {}
    found = {}
    for entry in cell.split("), "):
        spans = code_spans(entry)
        name = spans[0]
        found[name] = "" if "(derived" in entry or len(spans) < 2 else spans[1]
    return found


def keyword_params(fn, skip=()) -> dict[str, object]:
    sig = inspect.signature(fn).parameters
    return {n: p.default for n, p in sig.items() if n not in ("self", "dims", *skip)
            and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


@pytest.mark.parametrize("registry, marker", [(ENCODINGS, "encodings"), (TASKS, "tasks")])
def test_every_parameter_of_every_encoding_and_task_is_documented(registry, marker):
    table = params_table(marker)
    assert sorted(table) == sorted(registry.names()), \
        f"suite-reference.md's {marker} parameters table names {sorted(table)}, the registry {sorted(registry.names())}"
    for name in registry.names():
        want = keyword_params(registry.get(name).__init__)
        got = documented_params(table[name])
        assert list(got) == list(want), f"{marker} {name!r}: parameters {list(want)}, the page says {list(got)}"
        for param, default in want.items():
            if default is None:
                assert got[param] == "", f"{name}.{param} defaults to None: say (derived: …) what fills it"
            else:
                assert got[param] == yaml_flow(default), \
                    f"{name}.{param}: default `{yaml_flow(default)}`, the page says `{got[param]}`"


def test_every_task_parameter_range_is_documented_as_declared():
    """The tasks table's *valid* column states each parameter's declaration (`Task.PARAMS`), verbatim."""
    rows = {code_spans(r["task"])[0]: r["valid"] for r in table_after(page(), "<!-- params: tasks -->")}
    for name in TASKS.names():
        declared = TASKS.get(name).PARAMS
        want = "; ".join(f"`{param}`: {spec.valid}" for param, spec in declared.items()) or "none"
        assert rows[name] == want, f"task {name!r}: the valid column says {rows[name]!r}, the declaration {want!r}"


def test_every_parameter_of_every_rope_type_is_documented():
    table = params_table("rope types")
    assert sorted(table) == sorted(ROPE_TYPES.names())
    for name in ROPE_TYPES.names():
        want = list(keyword_params(ROPE_TYPES.get(name), skip=MODEL_ROPE_ARGS))
        got = code_spans(table[name]) if not table[name].startswith("none") else []
        assert got == want, f"rope_type {name!r}: parameters {want}, the page says {got}"
