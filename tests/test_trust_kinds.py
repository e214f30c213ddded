"""Issue 38, item 1: a board is computed on one numeric kind (mode and CPU vendor). The catalog
mixed 342 cells of an Intel Xeon with 114 of an AMD EPYC under one pinned mode; pinned numerics give
one vendor's bits, not both, so `publish` refuses a mixed run, the marker names the kind and the
leaderboard says which kind (or kinds) it was computed on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from lenbench.publication import MARKER, numeric_kinds
from lenbench.publish import publish
from lenbench.report.markdown import cell_kinds, kinds_lines

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "results" / "catalog" / "cells"


def catalog_cell(vendor: str) -> Path:
    """A published catalog cell computed on `vendor`'s CPU ("AMD" or "Intel")."""
    for path in sorted(CATALOG.glob("*.json")):
        provenance = json.loads(path.read_text())["provenance"]
        if vendor in provenance["cpu_model"] and json.loads(path.read_text())["status"] == "ok":
            return path
    pytest.skip(f"the published catalog has no cell computed on an {vendor} CPU")


def run_dir(tmp_path: Path, *cells: Path) -> Path:
    (tmp_path / "run" / "cells").mkdir(parents=True)
    for cell in cells:
        shutil.copy(cell, tmp_path / "run" / "cells" / cell.name)
    return tmp_path / "run"


def test_the_published_catalog_mixes_two_kinds_and_says_so():
    kinds = numeric_kinds(sorted(CATALOG.glob("*.json")))
    assert kinds == {"pinned:x86-avx2@intel": 342, "pinned:x86-avx2@amd": 114}
    text = (ROOT / "results" / "catalog" / "leaderboard.md").read_text()
    assert "**Mixed numeric kinds**: pinned:x86-avx2@intel (342 cells), pinned:x86-avx2@amd (114 cells)." in text


def test_publish_refuses_a_run_that_mixes_kinds_before_writing_anything(tmp_path):
    run = run_dir(tmp_path, catalog_cell("AMD"), catalog_cell("Intel"))
    with pytest.raises(ValueError) as err:
        publish(run, tmp_path / "pub", plots=False)
    assert str(err.value) == (
        f"{run} holds cells of 2 numeric kinds (pinned:x86-avx2@amd (1 cells), pinned:x86-avx2@intel (1 cells)); a "
        "board is computed on one kind: rerun `lenbench run` into it on one kind of machine (cells of another kind "
        "are recomputed) and publish again")
    assert not (tmp_path / "pub").exists()


def test_a_publication_names_its_kind(tmp_path):
    run = run_dir(tmp_path, catalog_cell("AMD"))
    publish(run, tmp_path / "pub", plots=False)
    marker = json.loads((tmp_path / "pub" / MARKER).read_text())
    assert marker["numeric_kind"] == "pinned:x86-avx2@amd"
    assert "Numeric kind: pinned:x86-avx2@amd (every cell" in (tmp_path / "pub" / "leaderboard.md").read_text()


def test_kinds_are_counted_per_cell_and_read_from_the_cpu_model_of_older_rows():
    rows = pd.DataFrame({"cell_id": ["a", "a", "b", "c"],
                         "numerics": ["pinned:x86-avx2", "pinned:x86-avx2", "pinned:x86-avx2@intel", ""],
                         "cpu_model": ["AMD EPYC", "AMD EPYC", "AMD EPYC", "AMD EPYC"]})
    assert cell_kinds(rows) == {"pinned:x86-avx2@amd": 1, "pinned:x86-avx2@intel": 1}
    assert kinds_lines(rows)[0].startswith("**Mixed numeric kinds**")
    assert kinds_lines(rows.iloc[:2]) == [
        "Numeric kind: pinned:x86-avx2@amd (every cell; other kinds reproduce it to float noise, not bit for bit).", ""]
