"""Helpers shared by several test modules (tests/ is on sys.path under pytest's default import mode)."""

from __future__ import annotations

from pathlib import Path

import torch

from lenbench.atomic import atomic_write_json

#: A suite that trains in a second or two: the engine tests' common ground (copy, nope and rope, PI).
TINY_SUITE = {
    "name": "tiny",
    "model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "ff_mult": 2},
    "train": {"steps": 6, "batch_size": 4, "lr": 0.003, "warmup": 2},
    "eval": {"ratios": [1, 2], "samples": 4},
    "tasks": [{"name": "copy", "train_len": 4}],
    "encodings": ["nope", "rope"],
    "variants": ["linear"],
}


def write_suite(tmp_path: Path, data: dict, name: str = "tiny.yaml") -> Path:
    """Write a suite mapping as YAML into `tmp_path` and return the file's path."""
    import yaml

    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def write_cells(directory: Path, rows: list[dict]) -> Path:
    """Write `rows` as a results directory: one `cells/<cell_id>.json` per cell, as the engine does."""
    by_cell: dict[str, list[dict]] = {}
    for r in rows:
        by_cell.setdefault(r["cell_id"], []).append(r)
    for cell_id, cell_rows in by_cell.items():
        atomic_write_json(directory / "cells" / f"{cell_id}.json",
                          {"schema_version": 1, "cell_id": cell_id, "status": "ok", "error": "", "rows": cell_rows})
    return directory


def assert_scores_depend_on_distance_only(enc, heads: int, head_dim: int, pairs, atol: float) -> None:
    """q_m · k_n after `enc.rotate` equals q_3 · k_0 for every (m, n) in `pairs` with m − n = 3,
    and differs at another distance: the rotary invariant."""
    q = torch.randn(1, heads, 1, head_dim, dtype=torch.float64)
    k = torch.randn(1, heads, 1, head_dim, dtype=torch.float64)

    def score(m: int, n: int) -> torch.Tensor:
        qm, _ = enc.rotate(q, q, torch.tensor([[m]]))
        _, kn = enc.rotate(k, k, torch.tensor([[n]]))
        return (qm * kn).sum(-1)  # (1, heads, 1)

    for m, n in pairs:
        assert m - n == 3
        torch.testing.assert_close(score(m, n), score(3, 0), atol=atol, rtol=0)
    assert not torch.allclose(score(5, 2), score(5, 3))
