"""Which CPU numeric settings give the same bits on an Intel and an AMD CPU, and what each costs.

Each setting runs in a fresh interpreter (the libraries read their variables at load), computes a
fixed set of float32 operations at the model's shapes (matrix products, attention, GELU,
layer norm, cross-entropy and its backward) and 40 training steps of the quick suite's model
(rope, copy batches), and reports a sha256 per result plus the median training-step time.
Run it on each CPU vendor; two machines agree on a setting where every hash matches:

    python studies/numerics/vendor_probe.py --out studies/numerics/probe-<vendor>.csv
    python studies/numerics/vendor_probe.py --compare studies/numerics/probe-amd.csv studies/numerics/probe-intel.csv

The settings (`SETTINGS`): lenbench's pinned paths today; MKL's COMPATIBLE branch (documented to
give the same results on Intel and non-Intel CPUs) with torch's and oneDNN's AVX2 paths; the same
with torch's and oneDNN's baseline (non-AVX) paths; and native (each library's own choice).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {
    "pinned": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
               "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "compatible-avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "compatible-default": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "native": {},
}
STEPS = 40


def _sha(t) -> str:
    return hashlib.sha256(t.detach().contiguous().float().numpy().tobytes()).hexdigest()[:16]


def child() -> dict:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32 * 64, 64, generator=g)  # (B·T, d_model)
    w = torch.randn(64, 256, generator=g) * 0.05  # (d_model, 4·d_model)
    q, k, v = (torch.randn(32, 4, 64, 16, generator=g) for _ in range(3))  # (B, H, T, d_head)
    out: dict[str, str] = {}
    out["matmul"] = _sha(x @ w)
    out["bmm_scores"] = _sha(q @ k.transpose(-1, -2))
    out["softmax"] = _sha(torch.softmax(q @ k.transpose(-1, -2) / 4.0, dim=-1))
    out["sdpa"] = _sha(F.scaled_dot_product_attention(q, k, v, is_causal=True))
    out["gelu"] = _sha(F.gelu(x @ w))
    out["layer_norm"] = _sha(F.layer_norm(x, (64,)))
    logits = (x @ w).requires_grad_()
    targets = torch.randint(0, 256, (x.shape[0],), generator=g)
    loss = F.cross_entropy(logits, targets)
    loss.backward()
    out["cross_entropy"] = _sha(loss.reshape(1))
    out["cross_entropy_grad"] = _sha(logits.grad)

    import lenbench  # noqa: F401  (LENBENCH_NUMERICS=native: sets nothing)
    from lenbench.config import TrainSpec
    from lenbench.model import ModelConfig, Transformer
    from lenbench.tasks import build_task
    from lenbench.train import TrainStep

    torch.manual_seed(0)
    task = build_task("copy")
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=64, n_layers=2, n_heads=4, ff_mult=4,
                                    encoding="rope"))
    step = TrainStep(model, TrainSpec(steps=STEPS, batch_size=32, lr=2e-3, warmup=4), lr=2e-3, steps=STEPS)
    gen = torch.Generator().manual_seed(1)
    times = []
    for _ in range(STEPS):
        batch = task.sample(32, 8, gen)
        start = time.perf_counter()
        step(batch)
        times.append(time.perf_counter() - start)
    out["train_40_steps"] = _sha(torch.cat([p.detach().flatten() for p in model.parameters()]))
    out["step_ms_median"] = f"{1000 * statistics.median(times[5:]):.3f}"
    out["torch_capability"] = torch.backends.cpu.get_cpu_capability()
    return out


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help="CSV to write: setting, result, value")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="two probe CSVs: which settings agree")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child()))
        return 0
    if args.compare:
        a, b = ({(r["setting"], r["result"]): r["value"] for r in csv.DictReader(p.open())} for p in args.compare)
        for setting in SETTINGS:
            keys = [k for k in a if k[0] == setting and k in b and k[1] not in ("step_ms_median", "cpu", "torch_capability")]
            same = [k[1] for k in keys if a[k] == b[k]]
            print(f"{setting:20s} {len(same)}/{len(keys)} identical; differ: {sorted(set(k[1] for k in keys) - set(same))}")
        return 0
    rows = []
    for name, env_vars in SETTINGS.items():
        env = {k: v for k, v in os.environ.items() if k not in SETTINGS["pinned"]}
        env.update(env_vars, LENBENCH_NUMERICS="native", PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=True)
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        print(name, result, file=sys.stderr)
        rows += [{"setting": name, "result": key, "value": value} for key, value in result.items()]
        rows.append({"setting": name, "result": "cpu", "value": cpu_model()})
    if args.out:
        with args.out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["setting", "result", "value"])
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
