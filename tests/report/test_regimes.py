"""Each claim's regime clause is read off the board's own cells (`lenbench.report.regimes`): checked against
closed forms written here (float64, the papers' formulas), at the catalog's geometry and at another one."""

import json
import math

import pandas as pd
import pytest
from lenbench_testing import CATALOG_DRAFT

from lenbench.config import load_suite, parse_suite
from lenbench.encodings import fire, xpos
from lenbench.report import regimes
from lenbench.report.claims import CLAIMS
from lenbench.tasks import build_task

CATALOG = load_suite("catalog")


def frame(cells) -> pd.DataFrame:
    """One tidy row per cell: what `board_entries` reads (task, train_len, encoding label, cell id, suite)."""
    return pd.DataFrame([{"task": c.task.key, "train_len": c.train_len, "encoding": c.encoding.key,
                          "cell_id": c.cell_id, "suite": c.suite} for c in cells])


def write_cells(tmp_path, cells):
    (tmp_path / "cells").mkdir()
    for c in cells:
        (tmp_path / "cells" / f"{c.cell_id}.json").write_text(json.dumps({"cell_id": c.cell_id, "config": c.config()}))
    return tmp_path / "cells"


def clause(claim_label: str, cells, cells_dir=None) -> str:
    claim = next(c for c in CLAIMS if c.label == claim_label)
    df = frame(cells)
    boards = [(task, tl, {s: label for s in (claim.a, *claim.bs)
                          if (label := s.split("+")[0] if claim.table == "variant_rank" else s) in set(g["encoding"])})
              for (task, tl), g in df.groupby(["task", "train_len"]) if task in claim.tasks]
    return regimes.regime_writer(df, cells_dir)(claim, boards)


def yarn_counts(head_dim: int, train_tokens: int, beta_fast=32.0, beta_slow=1.0, base=10000.0):
    """YaRN's pairs kept, on the ramp and interpolated (Peng et al. 2023, section 3.2, truncated as in
    transformers): d(r) = dim · ln(L0 / (2π r)) / (2 ln base)."""
    d = [head_dim * math.log(train_tokens / (2 * math.pi * r)) / (2 * math.log(base)) for r in (beta_fast, beta_slow)]
    low, high = max(math.floor(d[0]), 0), min(math.ceil(d[1]), head_dim - 1)
    ramp = [min(max((i - low) / (high - low), 0.0), 1.0) for i in range(head_dim // 2)]
    kept, divided = sum(r == 0 for r in ramp), sum(r == 1 for r in ramp)
    return kept, len(ramp) - kept - divided, divided


def alibi_clause(n_heads: int) -> str:
    """ALiBi's slopes for a power-of-two head count (Press et al. 2022, section 3): 2^(-8i/n), i = 1..n."""
    slopes = [f"1/{2 ** (8 * i // n_heads)}" for i in range(1, n_heads + 1)]
    return (f"ALiBi at {n_heads} heads has the slopes {', '.join(slopes[:-1])} and {slopes[-1]} "
            "(its paper's 8 heads: 1/2 to 1/256)")




def _params(suite, key: str) -> dict:
    return next(e.params for e in suite.encodings if e.key == key)


@pytest.mark.parametrize("preset", ["catalog", CATALOG_DRAFT], ids=["published", "draft"])
def test_the_catalogs_clauses_from_its_preset(preset, tmp_path):
    """A benchmark JSON's rows of the published preset (no cells at hand: the preset's cells, by id), and
    the draft's cells: each clause states the entry's own value, relative or the authors'."""
    suite = load_suite(preset)
    cells_dir = None if preset == "catalog" else write_cells(tmp_path, [c for c in suite.cells() if c.seed == 0])
    lm = [c for c in suite.cells() if c.task.name == "lm" and c.seed == 0]
    head_dim = suite.model.d_model // suite.model.n_heads
    tokens = lm[0].train_len  # lm: one token per byte
    rope = f"RoPE at head_dim {head_dim} has {head_dim // 2} frequency pairs"
    alibi = alibi_clause(suite.model.n_heads)
    assert clause("ALiBi", lm, cells_dir) == f"{alibi}; {rope}"
    assert clause("KERPLE", lm, cells_dir) == alibi
    threshold = fire.initial_threshold(None, _params(suite, "fire").get("threshold_fraction"), tokens)
    assert threshold == (fire.PAPER_THRESHOLD if preset == "catalog" else tokens / 4)
    assert clause("FIRE", lm, cells_dir) == (f"FIRE's threshold is {threshold:g} positions against a {tokens}-token "
                                             f"training length; {alibi}")
    scale = xpos.xpos_scale_base(None, _params(suite, "xpos").get("scale_base_fraction"), tokens)
    assert scale == (xpos.PAPER_SCALE_BASE if preset == "catalog" else tokens / 2)
    assert clause("xPos", lm, cells_dir) == (f"xPos's scale base is {scale:g} positions against a {tokens}-token "
                                             f"training length; {rope}")
    kept = int(0.75 * head_dim // 2)  # p-RoPE keeps int(p · head_dim / 2) pairs, the highest frequencies
    dropped = [10000.0 ** (-2 * i / head_dim) for i in range(kept, head_dim // 2)]
    n = len(dropped)
    assert clause("p-RoPE", lm, cells_dir) == (f"{rope}; its {['no', 'one', 'two', 'three', 'four'][n]} dropped "
                                               f"pairs turn at most {max(dropped) * tokens:.3f} rad over {tokens} positions")
    k, r, i = yarn_counts(head_dim, tokens)
    assert clause("YaRN", lm, cells_dir) == (f"{rope}; YaRN keeps {k}, ramps {r} and interpolates {i} of them at "
                                             f"{tokens} tokens")
    algorithmic = [c for c in suite.cells() if c.task.name in ("copy", "reverse", "sort", "addition") and c.seed == 0]
    lengths = sorted({c.train_len for c in algorithmic})
    factor = _params(suite, "randomized-rope").get("max_position_factor")
    if factor is None:  # the default: the paper's L = 2048 (every sequence here is shorter)
        ranges = "2048"
    else:  # ⌈factor × the longest sequence⌉ of each task, in tokens
        longest = {c.task.name: build_task(c.task.name, **c.task.params).seq_len(math.ceil(max(c.eval.ratios) * c.train_len))
                   for c in algorithmic}
        ranges = " / ".join(f"{v:g}" for v in sorted({math.ceil(factor * n) for n in longest.values()}))
    assert clause("Randomized PE", algorithmic, cells_dir) == (
        f"positions are drawn from L = {ranges} for training lengths of {lengths[0]}–{lengths[-1]}; {rope}")


def test_a_board_of_another_geometry_gets_its_own_numbers(tmp_path):
    """d_model 64 with 2 heads, FIRE's threshold and xPos's scale base relative to the training length: the
    cells' own configs (a results directory's cells/, a suite no preset names)."""
    suite = parse_suite({
        "name": "mine", "seeds": [0], "model": {"d_model": 64, "n_layers": 1, "n_heads": 2},
        "train": {"steps": 2}, "eval": {"ratios": [1, 2]},
        "tasks": [{"name": "lm", "train_len": 48}],
        "encodings": [{"name": "fire", "params": {"threshold_fraction": 0.25}}, "alibi", "kerple", "t5", "rope",
                      {"name": "xpos", "params": {"scale_base_fraction": 0.5}}, {"name": "prope", "params": {"p": 0.5}}]})
    cells = suite.cells()
    cells_dir = write_cells(tmp_path, cells)
    assert clause("FIRE", cells, cells_dir) == ("FIRE's threshold is 12 positions against a 48-token training length; "
                                                "ALiBi at 2 heads has the slopes 1/16 and 1/256 (its paper's 8 heads: "
                                                "1/2 to 1/256)")
    assert alibi_clause(2) == clause("KERPLE", cells, cells_dir)
    assert clause("Sandwich", cells, cells_dir) == "", "no sandwich entry on this board: no clause"
    assert clause("xPos", cells, cells_dir) == ("xPos's scale base is 24 positions against a 48-token training length; "
                                                "RoPE at head_dim 32 has 16 frequency pairs")
    dropped = [10000.0 ** (-2 * i / 32) for i in range(8, 16)]
    assert clause("p-RoPE", cells, cells_dir).endswith(f"its eight dropped pairs turn at most {max(dropped) * 48:.3f} rad over "
                                                       "48 positions")
    assert clause("FIRE", cells) == ""  # neither its cells nor a preset at hand: no clause, never the catalog's


@pytest.mark.parametrize(("n_heads", "listed"), [(2, "4 and 8"), (8, "1, 2, 3, 4, 5, 6, 7 and 8")])
def test_sandwich_states_its_per_head_compression(tmp_path, n_heads, listed):
    """Sandwich divides head h = 1 … H by 8h/H (Chi et al. 2023): 4 and 8 at 2 heads, 1 to 8 at 8."""
    suite = parse_suite({
        "name": "mine", "seeds": [0], "model": {"d_model": 64, "n_layers": 1, "n_heads": n_heads},
        "train": {"steps": 2}, "eval": {"ratios": [1, 2]}, "tasks": [{"name": "lm", "train_len": 48}],
        "encodings": ["sandwich", "sinusoidal"]})
    cells = suite.cells()
    assert clause("Sandwich", cells, write_cells(tmp_path, cells)) == (
        f"Sandwich at {n_heads} heads divides its bias by {listed} (its paper's 8 heads: 1 to 8)")


def test_configs_are_only_those_of_the_rows_cells(tmp_path):
    """A cell file or a preset cell whose id is not one of the rows' contributes nothing."""
    lm = [c for c in CATALOG.cells() if c.task.name == "lm" and c.seed == 0]
    cells_dir = write_cells(tmp_path, lm)
    df = frame(lm[:1]).assign(cell_id="0" * 16)
    assert regimes.cell_configs(df, cells_dir) == {}
    assert set(regimes.cell_configs(frame(lm[:2]), None)) == {lm[0].cell_id, lm[1].cell_id}  # from the preset


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.regime], ids=lambda c: c.label)
def test_every_regime_fact_is_declared(claim):
    assert set(claim.regime) <= set(regimes.FACTS)


@pytest.mark.parametrize("preset", ["quick", "catalog", "smoke"])
def test_the_model_read_back_from_a_cell_config_is_the_one_the_cell_trains(preset):
    """`config_model` of a cell's config equals the model written out from the cell's own fields: the
    report builds what the compute path built."""
    import dataclasses

    from lenbench.model import ModelConfig
    from lenbench.run.cell import config_model
    from lenbench.tasks import build_task

    for cell in load_suite(preset).cells():
        task = build_task(cell.task.name, **cell.task.params)
        longest = max([*cell.eval.ratios, *(v.finetune_ratio for v in cell.variants if v.finetune_steps)])
        expected = ModelConfig(vocab_size=task.vocab_size, **dataclasses.asdict(cell.model), causal=True,
                               encoding=cell.encoding.name, encoding_params=dict(cell.encoding.params),
                               max_len=task.seq_len(math.ceil(longest * cell.train_len)),
                               train_len=task.seq_len(cell.train_len))
        assert config_model(json.loads(json.dumps(cell.config())), task) == expected, cell.title


@pytest.mark.parametrize(("n_layers", "interval", "local", "schedule"), [
    (2, None, "sliding", "one of its two layers is NoPE-global, the other RoPE over a sliding window of"),
    (4, None, "chunked", "one of its four layers is NoPE-global, the others RoPE over a chunk of"),
    (4, 2, "sliding", "two of its four layers are NoPE-global, the others RoPE over a sliding window of")])
def test_a_hybrid_states_its_layer_schedule_and_span(tmp_path, n_layers, interval, local, schedule):
    """Layer ℓ is NoPE-global when (ℓ + 1) % interval == 0 (Llama 4's is_nope_layer; interval min(4, n_layers)
    by default), and the local span is half of each board's training length unless set."""
    params = {"local": local} | ({} if interval is None else {"interval": interval})
    suite = parse_suite({
        "name": "mine", "seeds": [0], "model": {"d_model": 32, "n_layers": n_layers, "n_heads": 2},
        "train": {"steps": 2}, "eval": {"ratios": [1, 2]},
        "tasks": [{"name": "passkey", "train_len": 32}, {"name": "lm", "train_len": 48}],
        "encodings": ["rope", "nope", {"name": "hybrid", "params": params, "label": "rnope-swa"}]})
    cells = suite.cells()
    every = interval or min(4, n_layers)
    assert sum((layer + 1) % every == 0 for layer in range(n_layers)) == {"one": 1, "two": 2}[schedule.split()[0]]
    assert clause("RNoPE-SWA", cells, write_cells(tmp_path, cells)) == (
        f"{schedule} 24 of the 48 training tokens on lm, 16 of 32 on passkey (Llama 4 and RNoPE-SWA: one NoPE "
        "layer in 4); RoPE at head_dim 16 has 8 frequency pairs")
