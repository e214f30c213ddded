"""Issue 38, item 1: committed reference rows of a cell from each CPU vendor, recomputed here, with
the match this machine's numeric kind promises.

Pinned numerics give the same bits on every machine of one vendor, not across vendors (training
takes another draw: `docs/reproducibility.md`), so the numeric kind in every row and fingerprint
names the vendor. This test holds both halves of that claim on whatever machine runs it:

- a reference of this machine's kind must be recomputed bit for bit (every value and every
  per-sample score digest);
- a reference of the same mode on the other vendor is expected to differ: continuous metrics to
  float noise (measured: lm perplexity within 3.7e-7 relative, AMD against Intel), accuracies
  anywhere in their range (a model at chance flips samples);
- a machine of another mode (native, non-x86) has no reference: skipped, naming the command that
  writes one (`bench/reference_cell.py`).

The references come from the published catalog: parity x nope (seed 1, an AMD EPYC) and lm x
learned (seed 2, an Intel Xeon), each a suite cut down to that one cell, so they outlive a
republication of the catalog.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from lenbench_testing import load_script

from lenbench.config import parse_suite
from lenbench.metrics import METRICS, get_metric
from lenbench.numerics import numerics_tag
from lenbench.run.driver import run_cell

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = sorted((Path(__file__).parent / "reference_cells").glob("*.json"))
#: Largest relative difference of a continuous metric between vendors (measured 3.7e-7 on lm).
FLOAT_NOISE = 1e-5


def expectation(kind: str, here: str) -> str:
    """What a reference of `kind` promises on a machine of kind `here`."""
    if kind == here:
        return "same-bits"
    if kind.split("@")[0] == here.split("@")[0]:
        return "float-noise"
    return "no-reference"


def _writer():
    """bench/reference_cell.py, which wrote the references: its row key and digest are what they hold."""
    return load_script(ROOT / "bench" / "reference_cell.py")


WRITER = _writer()
key, digest = WRITER.row_key, WRITER.samples_digest


def test_there_is_a_reference_of_each_vendor():
    kinds = {json.loads(p.read_text())["kind"] for p in REFERENCES}
    assert {k.rsplit("@", 1)[1] for k in kinds} >= {"amd", "intel"}, kinds


@pytest.mark.slow
@pytest.mark.parametrize("path", REFERENCES, ids=lambda p: f"{p.stem}-expects-"
                         f"{expectation(json.loads(p.read_text())['kind'], numerics_tag())}")
def test_a_reference_cell_recomputes_to_the_match_its_kind_promises(path, tmp_path):
    reference = json.loads(path.read_text())
    here = numerics_tag()
    expected = expectation(reference["kind"], here)
    if expected == "no-reference":
        pytest.skip(f"no reference of this machine's kind {here}: compute a cell here and keep it with "
                    "`python bench/reference_cell.py CELL_FILE SUITE`")
    [cell] = parse_suite(reference["suite"]).cells()
    assert cell.cell_id == reference["cell_id"]
    result = run_cell(cell, tmp_path, device="cpu", progress=False)
    got = {key(r): r for r in result.rows if r["status"] == "ok"}
    missing = sorted(set(reference["rows"]) - set(got))
    assert not missing, f"rows of the reference this code no longer measures: {missing[:5]}"
    if expected == "same-bits":
        differ = [k for k, (value, samples) in reference["rows"].items()
                  if got[k]["value"] != value or digest(got[k]) != samples]
        assert not differ, (f"{len(differ)} of {len(reference['rows'])} rows differ from the reference of this "
                            f"machine's kind {here} (computed at {reference['git_sha'][:12]}): {differ[:5]}")
        return
    for k, (value, _) in reference["rows"].items():
        metric = k.split("|")[2]
        bounds = get_metric(metric).bounds if metric in METRICS else None
        if bounds is None or math.isinf(bounds[1]):  # continuous: perplexity, bits per byte, nll
            assert math.isclose(got[k]["value"], value, rel_tol=FLOAT_NOISE), (k, got[k]["value"], value)
        else:  # an accuracy: another vendor's training may flip samples
            assert bounds[0] <= got[k]["value"] <= bounds[1], (k, got[k]["value"])
