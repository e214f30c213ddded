"""The published catalog (results/catalog/, issue 24): the `catalog` preset's cells, every one ok or
with its reason, and a report rebuilt from them byte for byte.

Publish it with `pytest bench --suite catalog --benchmark-json runs/catalog-bench.json`, then
`lenbench publish runs/catalog --benchmark-json runs/catalog-bench.json --to results/catalog`.
"""

import gzip
import json
import re
from pathlib import Path

import pytest
from test_published import assert_same_text_within_tolerance

from lenbench.config import load_suite
from lenbench.publication import read_marker, report_machine
from lenbench.report.build import COST_FILES, REPORT_FILES, write_report
from lenbench.report.rows import load_results
from lenbench.run.store import cell_files

ROOT = Path(__file__).resolve().parent.parent.parent
CATALOG = ROOT / "results" / "catalog"

pytestmark = pytest.mark.skipif(
    not (CATALOG / "cells").is_dir(),
    reason="results/catalog/ is not published: `pytest bench --suite catalog --benchmark-json runs/catalog-bench.json`, "
           "then `lenbench publish runs/catalog --benchmark-json runs/catalog-bench.json --to results/catalog`")


def first_difference(a: bytes, b: bytes) -> int:
    """The number (from 1) of the first line where `a` and `b` differ."""
    la, lb = a.splitlines(), b.splitlines()
    return next((i + 1 for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y), min(len(la), len(lb)) + 1)


def cells() -> list[dict]:
    return [json.loads(p.read_text()) for p in cell_files(CATALOG)]


#: Tasks of the preset whose cells this publication does not hold yet, and why. The list only shrinks:
#: the test below fails once such a task's cells are published, until its entry is removed.
NOT_YET_PUBLISHED: dict[str, str] = {}


def test_the_catalog_holds_exactly_the_presets_cells():
    planned = load_suite("catalog").cells()
    want = {c.cell_id: c.title for c in planned if c.task.key not in NOT_YET_PUBLISHED}
    got = {c["cell_id"]: c["title"] for c in cells()}
    assert sorted(set(want) - set(got), key=want.get) == [], "cells of the preset missing from results/catalog/"
    assert sorted(set(got) - set(want), key=got.get) == [], "cells in results/catalog/ that the preset does not plan"
    for task in NOT_YET_PUBLISHED:
        assert not any(c["title"].startswith(f"{task}-") for c in cells()), f"{task} is published: drop its entry"


@pytest.mark.slow
def test_every_cell_is_ok_or_records_its_reason():
    bad = [(c["title"], c["status"], c.get("error")) for c in cells() if c["status"] != "ok"]
    assert all(error for _, _, error in bad), f"cells that failed without a reason: {bad}"
    rows = load_results(CATALOG)
    failed = rows[rows["status"] != "ok"]
    assert failed["error"].astype(str).str.len().gt(0).all(), "a failed row without its error"


@pytest.mark.slow
def test_the_cells_and_the_benchmark_json_hold_the_same_rows():
    if not (CATALOG / "bench.json").is_file():
        pytest.skip("results/catalog/ was published from its cells alone (no kernel timings)")
    assert load_results(CATALOG).equals(load_results(CATALOG / "bench.json"))


@pytest.mark.slow
def test_the_report_rebuilds_from_the_cells_byte_for_byte(tmp_path):
    """On a machine of the kind that built the published report (its marker's `report_machine`: CPU
    model and ISA) every table is byte-identical; elsewhere numbers may differ in their last printed
    digit (numpy's own SIMD paths are not pinned: an AVX-512 machine's report of AVX2-computed rows
    differs there), as for results/ (`assert_same_text_within_tolerance`)."""
    write_report(CATALOG, tmp_path, plots=False, page=False)
    same_kind = (read_marker(CATALOG) or {}).get("report_machine") == report_machine()
    names = [*REPORT_FILES, *(COST_FILES if (CATALOG / "bench.json").is_file() else ())]
    for name in names:
        fresh, published = (tmp_path / name).read_bytes(), (CATALOG / name).read_bytes()
        if name.endswith(".gz"):  # compared as the text it holds (its header carries no timestamp)
            fresh, published = gzip.decompress(fresh), gzip.decompress(published)
        message = f"results/catalog/{name} is not the report of its cells: rerun `lenbench report results/catalog`"
        if same_kind:  # a line number, not pytest's diff of a 100,000-line file (quadratic: it never ends)
            same = fresh == published
            assert same, f"{message} (line {first_difference(fresh, published)} differs)"
        else:
            assert_same_text_within_tolerance(fresh.decode(), published.decode(), message)


def test_the_page_is_self_contained():
    text = (CATALOG / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"https?:", text) and "<link" not in text
