"""Small tidy result sources for the export tests: two encodings (one with a variant), two seeds, two
lengths, every row's value computed from its sample scores; plus a baseline, a bucketed row and a failed length."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lenbench.metrics import encode_samples
from lenbench.report.rows import load_results
from lenbench.results.samples import row_value

PROVENANCE = {"suite": "tiny", "lenbench_version": "0.1.0", "git_sha": "0123456789abcdef", "torch_version": "2.13.0+cpu",
              "device": "cpu", "dtype": "float32", "numerics": "pinned:x86-avx2", "code_fingerprint": "c0de",
              "data_fingerprint": "da7a", "settings": "train: steps=10; eval: samples=4", "schema_version": 3}
#: per (encoding, seed): (exact match hits, token hits out of 4) per sample at 1x and at 2x
HITS = {0: ([1, 1, 0, 1], [4, 4, 2, 3]), 1: ([0, 1, 0, 0], [1, 4, 2, 1])}


def _row(encoding, variant, seed, eval_len, metric, num, den, **extra):
    sums = np.array(num, float), np.array(den, float)
    return {**PROVENANCE, "cell_id": f"{encoding}-{seed}", "task": "copy", "encoding": encoding, "variant": variant,
            "train_len": 8, "eval_len": eval_len, "metric": metric, "value": row_value(metric, *sums),
            "n_samples": len(num), "seed": seed, "timestamp": f"2026-12-0{seed + 1}T10:00:00+00:00",
            "sample_scores": encode_samples(list(num), list(den)), **extra}


def tiny_rows(*, failed: bool = True) -> pd.DataFrame:
    rows = []
    for encoding, variants in (("rope", ("none", "yarn")), ("alibi", ("none",))):
        for variant in variants:
            for seed in (0, 1):
                for k, eval_len in enumerate((8, 16)):
                    hits, tokens = HITS[(seed + k + len(encoding)) % 2]
                    rows.append(_row(encoding, variant, seed, eval_len, "exact_match", hits, [1] * 4))
                    rows.append(_row(encoding, variant, seed, eval_len, "token_accuracy", tokens, [4] * 4))
    rows.append(_row("baseline:chance", "none", 0, 8, "exact_match", [0, 0, 0, 0], [1] * 4))
    rows.append({**_row("rope", "none", 0, 8, "exact_match", [1], [1]), "bucket": "pos:0-3", "sample_scores": ""})
    if failed:
        rows.append({**_row("alibi", "none", 0, 32, "exact_match", [0], [1]), "value": None, "status": "failed",
                     "sample_scores": "", "error": "position 31 out of range"})
    return load_results(rows)
