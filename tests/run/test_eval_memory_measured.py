"""The evaluation memory estimate (`lenbench.run.memory.estimate`) against the measured peak.

For every registered encoding (its defaults) and every encoding entry of the catalog (its parameters),
a model of the catalog's geometry runs one evaluation forward (no grad, logits and the per-token loss)
at the catalog's longest evaluation, batch 1 and 2, in a child process. The measured peak is the growth
of the process's peak resident set (VmHWM, reset through /proc/self/clear_refs) over its resident set
before the forward, with glibc's mmap threshold fixed so every large tensor is mapped and unmapped
(freed memory then leaves the resident set and one encoding's leftovers cannot hide the next one's
peak). The estimate, less the parameters the resident set already held, must be at least that peak:
an undercount lets an evaluation batch past the machine's memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: Linux only: VmHWM and clear_refs are procfs facts.
LINUX = Path("/proc/self/clear_refs").exists()

CHILD = textwrap.dedent('''
    import gc, json, re, sys
    import torch, torch.nn.functional as F
    from lenbench.model import ModelConfig, Transformer
    from lenbench.run.memory import estimate

    def status(key):
        return int(re.search(key + r":\\s+(\\d+)", open("/proc/self/status").read()).group(1)) * 1024

    spec = json.loads(sys.argv[1])
    torch.set_num_threads(1)
    out = []
    for name, params in spec["encodings"]:
        torch.manual_seed(0)
        cfg = ModelConfig(**spec["model"], encoding=name, encoding_params=params)
        m = Transformer(cfg).eval()
        params_bytes = sum(t.numel() * t.element_size() for t in (*m.parameters(), *m.buffers()))
        for batch in (1, 2):
            x = torch.randint(0, cfg.vocab_size, (batch, spec["tokens"]))
            with torch.no_grad():
                m(x[:, :8])  # lazy caches are built before the baseline
                gc.collect()
                before = status("VmRSS")
                open("/proc/self/clear_refs", "w").write("5")  # VmHWM := VmRSS
                logits = m(x)
                F.cross_entropy(logits.transpose(1, 2), x, reduction="none")
                peak = status("VmHWM") - before
                del logits
            out.append({"encoding": name, "params": params, "batch": batch, "measured": peak,
                        "estimate": estimate(m, spec["tokens"]).peak(batch) - params_bytes})
        del m
        gc.collect()
    print(json.dumps(out))
''')


def _catalog_spec() -> dict:
    """The catalog's geometry, its longest evaluation (the task and length with the most tokens) and
    the encodings to measure: every registered one with its defaults, and the catalog's entries."""
    from lenbench.config import load_suite
    from lenbench.encodings import ENCODINGS
    from lenbench.run.cell import model_config
    from lenbench.tasks import build_task

    suite = load_suite("catalog")
    longest = None
    for cell in suite.cells():
        if cell.encoding.name != "nope" or cell.seed != suite.seeds[0]:
            continue
        task = build_task(cell.task.name, **cell.task.params)
        cfg = model_config(cell, task)
        if longest is None or cfg.max_len > longest[1]["max_len"]:
            longest = (cell.task.name, {"vocab_size": cfg.vocab_size, "d_model": cfg.d_model, "n_layers": cfg.n_layers,
                                        "n_heads": cfg.n_heads, "ff_mult": cfg.ff_mult, "max_len": cfg.max_len,
                                        "train_len": cfg.train_len, "causal": True})
    entries = [(name, {}) for name in ENCODINGS.names()]
    entries += [(e.name, dict(e.params)) for e in suite.encodings if e.params and (e.name, dict(e.params)) not in entries]
    return {"task": longest[0], "model": longest[1], "tokens": longest[1]["max_len"], "encodings": entries}


@pytest.mark.subprocess
@pytest.mark.skipif(not LINUX, reason="measures the peak resident set through Linux's /proc/self/clear_refs")
def test_the_estimate_is_at_least_the_measured_peak_for_every_encoding():
    spec = _catalog_spec()
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0",
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert {(r["encoding"], json.dumps(r["params"])) for r in rows} == \
        {(n, json.dumps(p)) for n, p in spec["encodings"]}
    under = [f"{r['encoding']} {r['params']} batch {r['batch']}: estimate {r['estimate'] / 2**20:.1f} MiB < measured "
             f"{r['measured'] / 2**20:.1f} MiB" for r in rows if r["estimate"] < r["measured"]]
    assert not under, f"at {spec['tokens']} tokens ({spec['task']}):\n" + "\n".join(under)
    # the measurement sees the (T, T) planes at all: an additive bias's forward grows the resident set
    # by more than a bias-free one's
    peak = {(r["encoding"], r["batch"]): r["measured"] for r in rows if not r["params"]}
    assert peak[("alibi", 1)] > 2 * peak[("nope", 1)] and peak[("stickbreaking", 2)] > peak[("stickbreaking", 1)]
