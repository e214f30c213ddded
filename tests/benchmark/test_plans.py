"""The performance targets read what the encodings declare (`kernel_family`), not a list of names."""

from lenbench import kernels as K
from lenbench.benchmark.plans import bias_family, performance_targets
from lenbench.encodings import ENCODINGS, EncodingDims, build_encoding

DIMS = EncodingDims(d_model=64, n_heads=4, max_len=64)


def test_every_bias_kernel_encoding_is_held_to_the_attention_target():
    kinds = {name: K.kernel_kind(build_encoding(name, DIMS)) for name in ENCODINGS.names()}
    family = bias_family()
    assert {name for name, kind in kinds.items() if kind == "bias"} <= set(family)
    assert "cope" in family  # content-dependent, declared in its own module
    assert all(kinds[name] in ("bias", "content") for name in family)
    assert not {"rope", "nope", "fox"} & set(family)


def test_the_targets_have_one_attention_row_per_declared_encoding_and_length():
    rows = [r["metric"] for r in performance_targets({"benchmarks": []})]
    attention = [m for m in rows if m.startswith("fused attention ")]
    assert attention == [f"fused attention {name} (best fused impl, T={T}, fp32) / unbiased causal SDPA"
                         for name in bias_family() for T in (1024, 4096)]


def test_the_kernels_package_holds_ops_only():
    """No module of `lenbench.kernels` imports, at module or function level, the harness or what it
    times with (suites, cells, tasks, the training step): those are `lenbench.benchmark`'s. (The
    model's `attend` is an op: `kernels.layer`'s eager reference is the model's own attention.)"""
    import ast
    from pathlib import Path

    root = Path(K.__file__).resolve().parent
    harness = ("lenbench.benchmark", "lenbench.config", "lenbench.run", "lenbench.tasks", "lenbench.train",
               "lenbench.flops", "lenbench.timing")
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {n}" for n in names if n.startswith(harness)]
    assert found == []
    assert not (root / "plans.py").exists() and not (root / "__main__.py").exists()
