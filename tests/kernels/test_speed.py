"""Training speed (issue 12): analytic FLOPs, the fast training step == the eager one, the
suite's `kernels:` section and its environment overrides, and the targets printer."""

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from lenbench import train as train_mod
from lenbench.benchmark import plans as P
from lenbench.benchmark.flops import matmul_rate, mfu, model_step_flops, transformer_flops
from lenbench.config import KernelSpec, SuiteError, TrainSpec, load_suite, parse_suite
from lenbench.encodings import ENCODINGS
from lenbench.model import ModelConfig, Transformer
from lenbench.tasks import build_task
from lenbench.train import TrainingDiverged, TrainStep, token_loss, train_model

ROOT = Path(__file__).resolve().parents[2]

# --- FLOPs --------------------------------------------------------------------------------------


def test_flops_hand_count_of_a_tiny_model():
    """B=1, T=2, D=4, one layer, ff_mult 2 (F=8), V=3, counted by hand (2 FLOPs per multiply-add):
    qkv 2·2·4·12 = 192, scores 2·2·2·4 = 32, values 32, out 2·2·4·4 = 64, mlp 2·(2·2·4·8) = 256,
    head 2·2·4·3 = 48: forward 624, backward 1248, step 1872."""
    f = transformer_flops(batch=1, seq_len=2, d_model=4, n_layers=1, ff_mult=2, vocab_size=3)
    assert f.parts == {"qkv": 192, "scores": 32, "values": 32, "out": 64, "mlp": 256, "head": 48}
    assert (f.forward, f.backward, f.total) == (624, 1248, 1872)


def test_flops_of_the_quick_lm_step():
    """The issue's ≈1.6 GFLOP: B=32, T=64, D=64, 2 layers, ff 4, V=256."""
    f = transformer_flops(batch=32, seq_len=64, d_model=64, n_layers=2, ff_mult=4, vocab_size=256)
    assert f.total == 1_610_612_736


@pytest.mark.parametrize("geometry", [(3, 10, 32, 2, 4, 4, 17), (2, 7, 16, 1, 2, 2, 11), (1, 33, 48, 3, 6, 3, 5)])
def test_flops_equal_torch_flop_counter(geometry):
    """Forward + backward of the real model (SDPA's math path, so the counter sees its matmuls)
    counts exactly the analytic FLOPs."""
    B, T, D, L, H, ff, V = geometry
    model = Transformer(ModelConfig(vocab_size=V, d_model=D, n_layers=L, n_heads=H, ff_mult=ff, encoding="nope"))
    tokens = torch.randint(0, V, (B, T))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(tokens).float().sum().backward()
    assert counter.get_total_flops() == model_step_flops(model, B, T).total


def test_mfu_arithmetic_and_matmul_rate():
    assert mfu(1e9, 0.01, 2e11) == pytest.approx(0.5)
    assert math.isnan(mfu(1e9, 0.0, 2e11))
    rate = matmul_rate(torch.device("cpu"), n=128, rounds=2)
    assert rate > 1e6  # FLOP/s: a positive, finite rate


# --- fast training step == eager --------------------------------------------------------------

SPEC = TrainSpec(steps=20, batch_size=8, lr=3e-3, warmup=5)
# bench/gpu_check.sh runs the fast == eager tests on the accelerator through this variable.
DEVICE = torch.device(os.environ.get("LENBENCH_TEST_DEVICE", "cpu"))


def _losses(encoding: str, fast: bool, task: str = "copy", length: int = 12, steps: int = 20):
    """Losses of `steps` training steps from one seed, and the final parameters."""
    the_task = build_task(task)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=the_task.vocab_size, d_model=32, n_layers=2, n_heads=2, ff_mult=2,
                                    encoding=encoding, max_len=the_task.seq_len(4 * length))).to(DEVICE).train()
    step = TrainStep(model, SPEC, SPEC.lr, steps, fast=fast)
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(1)  # randomized draws positions from the global RNG: the same draws on both paths
    losses = torch.stack([step(the_task.sample(SPEC.batch_size, length, gen, split="train").to(DEVICE)) for _ in range(steps)])
    return losses.cpu(), [p.detach().cpu().clone() for p in model.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ENCODINGS.names())
def test_fast_step_equals_eager_over_20_steps(encoding):
    eager, eager_params = _losses(encoding, fast=False)
    fast, fast_params = _losses(encoding, fast=True)
    assert eager.shape == (20,) and bool(torch.isfinite(eager).all())
    torch.testing.assert_close(fast, eager, rtol=1e-5, atol=1e-5)
    # Adam divides by √v: where a gradient is ~0 (FIRE's scalar parameters) a rounding-level
    # difference can move a weight by a fraction of one step (an Adam step moves a weight by ≲ lr),
    # so weights are held to less than one step; the losses above are the tight check.
    for a, b in zip(fast_params, eager_params, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=SPEC.lr)


@pytest.mark.slow
def test_fast_step_is_deterministic():
    first, _ = _losses("rope", fast=True, task="lm", length=16)
    second, _ = _losses("rope", fast=True, task="lm", length=16)
    assert torch.equal(first, second)


def test_token_loss_equals_masked_loss():
    task = build_task("passkey")
    batch = task.sample(4, 24, torch.Generator().manual_seed(3), split="train")
    assert not bool(batch.loss_mask.all())  # a partial mask, so ignore_index matters
    logits = torch.randn(*batch.inputs.shape, task.vocab_size)
    torch.testing.assert_close(token_loss(logits, batch), train_mod.masked_loss(logits, batch), rtol=1e-6, atol=1e-6)


def test_fast_path_uses_fused_or_foreach_adamw():
    model = Transformer(ModelConfig(vocab_size=11, d_model=16, n_layers=1, n_heads=2, encoding="nope"))
    fast = train_mod.optimizer_for(model, SPEC, 1e-3, fast=True).defaults
    assert fast["fused"] or fast["foreach"]
    eager = train_mod.optimizer_for(model, SPEC, 1e-3, fast=False).defaults
    assert not eager["fused"] and not eager["foreach"]


@pytest.mark.parametrize("fast", [True, False])
def test_divergence_names_the_first_bad_step(monkeypatch, fast):
    """The fast path reads losses every LOG_EVERY steps, yet names the step that first went bad."""
    real = TrainStep.__call__
    calls = {"n": 0}

    def nan_at_7(self, batch):
        loss = real(self, batch)
        calls["n"] += 1
        return loss * float("nan") if calls["n"] - 1 >= 7 else loss

    monkeypatch.setattr(TrainStep, "__call__", nan_at_7)
    task = build_task("copy")
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2, encoding="nope"))
    with pytest.raises(TrainingDiverged, match=r"^loss became nan at step 7 of 30 \(lr 0\.003\); lower train\.lr"):
        train_model(model, task, 8, SPEC, seed=0, device=torch.device("cpu"), steps=30, progress=False, fast=fast)
    assert calls["n"] == (train_mod.LOG_EVERY if fast else 8)  # fast: found at the first read


@pytest.mark.slow
def test_train_model_fast_and_eager_give_the_same_final_loss():
    task = build_task("copy")
    finals = []
    for fast in (False, True):
        torch.manual_seed(0)
        model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2, encoding="alibi"))
        stats = train_model(model, task, 8, SPEC, seed=0, device=torch.device("cpu"), steps=25, progress=False, fast=fast)
        finals.append(stats.final_loss)
        assert stats.steps == 25 and not model.training
    assert finals[1] == pytest.approx(finals[0], rel=1e-5)


# --- the suite's kernels: section --------------------------------------------------------------


def _suite(kernels):
    return parse_suite({"tasks": [{"name": "copy", "train_len": 8}], "encodings": ["nope"], "kernels": kernels}, source="s.yaml")


def test_kernel_section_parses_and_defaults():
    assert parse_suite({"tasks": [{"name": "copy", "train_len": 8}], "encodings": ["nope"]}).kernels == KernelSpec()
    spec = _suite({"lengths": 512, "dtypes": "fp32", "encodings": ["rope"], "seconds": 1, "enabled": False}).kernels
    assert spec == KernelSpec(enabled=False, lengths=(512,), dtypes=("fp32",), seconds=1.0, encodings=("rope",))


@pytest.mark.parametrize("kernels, message", [
    ({"lenghts": [256]}, "s.yaml: unknown key kernels.lenghts; did you mean 'lengths'?"),
    ({"dtypes": ["bf61"]}, "s.yaml: kernels.dtypes: unknown dtype 'bf61'; did you mean 'bf16'? (choose from fp32, bf16)"),
    ({"encodings": ["ropee"]}, "s.yaml: kernels.encodings[0]: unknown encoding 'ropee'; did you mean 'rope'?"),
    ({"lengths": [0]}, "s.yaml: kernels.lengths must be a non-empty list of positive integers, got [0]"),
    ({"seconds": 0}, "s.yaml: kernels.seconds must be positive, got 0.0"),
    ({"enabled": "yes"}, "s.yaml: kernels.enabled must be bool, got 'yes'"),
])
def test_kernel_section_errors(kernels, message):
    with pytest.raises(SuiteError) as err:
        _suite(kernels)
    assert str(err.value).startswith(message)


def test_environment_overrides_the_suite_field_by_field():
    suite = load_suite("smoke")
    assert P.kernel_settings(suite, {}) == suite.kernels
    spec = P.kernel_settings(suite, {"LENBENCH_KERNEL_LENGTHS": "128, 64", "LENBENCH_TRAIN_ROUNDS": "2",
                                     "LENBENCH_KERNEL_ENCODINGS": "t5", "LENBENCH_KERNEL_DTYPES": ""})
    assert spec.lengths == (128, 64) and spec.train_rounds == 2 and spec.encodings == ("t5",)
    assert spec.dtypes == suite.kernels.dtypes and spec.seconds == suite.kernels.seconds  # unset / empty: the suite's
    with pytest.raises(SuiteError, match=r"^LENBENCH_KERNEL_LENGTHS='x' is not valid for kernels.lengths"):
        P.kernel_settings(suite, {"LENBENCH_KERNEL_LENGTHS": "x"})
    with pytest.raises(SuiteError, match=r"kernels.dtypes: unknown dtype 'fp8'"):
        P.kernel_settings(suite, {"LENBENCH_KERNEL_DTYPES": "fp8"})


def test_every_preset_has_a_kernel_section():
    smoke, quick = load_suite("smoke").kernels, load_suite("quick").kernels
    assert smoke.lengths == (256,) and smoke.dtypes == ("fp32",) and set(smoke.encodings) == {"rope", "alibi"}
    assert set(quick.lengths) == {1024, 4096}  # the targets' lengths
    # the encodings of its board (the main command's budget); standard and the catalog time every one
    assert set(quick.encodings) == {e.name for e in load_suite("quick").encodings} < set(ENCODINGS.names())
    assert load_suite("standard").kernels.encodings == ()  # every encoding
    for name in ("standard", "paper"):
        assert set(load_suite(name).kernels.dtypes) == {"fp32", "bf16"}


def _collect(*args, env=None):
    proc = subprocess.run([sys.executable, "-m", "pytest", "bench/test_kernels.py", "--collect-only", "-q",
                           "-p", "no:cacheprovider", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("LENBENCH_")}, **(env or {})})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [line.strip().split("::", 1)[1] for line in proc.stdout.splitlines() if "::" in line]


@pytest.mark.subprocess
def test_smoke_collects_a_handful_and_the_environment_wins():
    ids = _collect("--suite", "smoke")
    assert sorted(ids) == sorted([
        "test_attention_baseline[T256-fp32]",
        *[f"test_kernel[alibi-{i}-T256-fp32]" for i in ("eager", "cached", "flex", "flex_gather", "toeplitz")],
        *[f"test_kernel[rope-{i}-T256-fp32]" for i in ("eager", "hf", "fused")],
        "test_training_step[nope]", "test_training_step[alibi]", "test_training_step[rope]",
        "test_training_mfu[copy]", "test_training_mfu[lm]",
    ])
    ids = _collect("--suite", "smoke", env={"LENBENCH_KERNEL_LENGTHS": "64", "LENBENCH_KERNEL_ENCODINGS": "t5"})
    assert {i for i in ids if i.startswith("test_kernel[")} == {f"test_kernel[t5-{i}-T64-fp32]" for i in ("eager", "cached", "flex", "toeplitz")}


@pytest.mark.subprocess
def test_disabled_kernels_skip_with_the_reason(tmp_path):
    path = tmp_path / "off.yaml"
    path.write_text("tasks: [{name: copy, train_len: 8}]\nencodings: [nope, rope]\nkernels: {enabled: false}\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "bench/test_kernels.py", "-p", "no:cacheprovider", "-rs", "-q",
                           "--suite", str(path), "--benchmark-disable"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "kernels.enabled: false" in proc.stdout and " passed" not in proc.stdout


# --- targets printer ------------------------------------------------------------------------------


def _bench(name, **extra):
    return {"name": name, "extra_info": extra}


@pytest.mark.subprocess
def test_issue_targets_ok_miss_and_not_run(tmp_path):
    data = {"machine_info": {"lenbench": {"suite": "smoke", "session_seconds": 42.0, "selection": ""}}, "benchmarks": [
        _bench("test_training_mfu[lm]", kind="training-mfu", mfu=0.61, mfu_eager=0.45),
        _bench("test_training_step[rope]", kind="training-step", encoding="rope", ratio_to_nope_interleaved=1.2),
        _bench("test_kernel[alibi-flex-T1024-fp32]", over_unbiased=1.3),
        _bench("test_kernel[alibi-cached-T1024-fp32]", over_unbiased=1.1),
        _bench("test_kernel[rope-fused-T1024-fp32]", copy_ratio=1.1, speedup_over_hf=9.0),
    ]}
    rows = {r["metric"]: r for r in P.performance_targets(data)}
    assert rows["training MFU, suite lm step (fast path; median step / fp32 sgemm of the run)"]["ok"] is True
    assert rows["training step rope / nope (interleaved rounds)"]["ok"] is False
    alibi = rows["fused attention alibi (best fused impl, T=1024, fp32) / unbiased causal SDPA"]
    assert alibi["value"] == 1.1 and alibi["ok"] is True  # the best fused implementation
    assert rows["fused attention t5 (best fused impl, T=1024, fp32) / unbiased causal SDPA"]["ok"] is None
    assert rows["fused RoPE q,k (B=8,H=8,T=1024,Dh=64,fp32): time / copy of q,k"]["ok"] is True
    assert rows["pytest bench --suite smoke (whole session, seconds)"]["value"] == 42.0
    assert rows["pytest bench --suite quick (whole session, seconds)"]["value"] is None
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    for command in (["bench/kernel_plans.py"], ["-m", "lenbench.benchmark"]):  # the issue's spelling too
        out = subprocess.run([sys.executable, *command, str(path)], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert any(line.startswith("training step rope / nope") and line.endswith("MISS") for line in lines)
        assert any(line.startswith("pytest bench --suite smoke") and line.endswith("ok") for line in lines)


def test_attention_target_reads_the_round_robin_ratio_when_recorded():
    """A sequential over_unbiased (the baseline timed minutes earlier) is only the fallback."""
    data = {"benchmarks": [
        _bench("test_kernel[t5-toeplitz-T1024-fp32]", over_unbiased=0.5, over_unbiased_interleaved=1.12),
        _bench("test_kernel[t5-flex-T1024-fp32]", over_unbiased=0.6, over_unbiased_interleaved=1.3),
        _bench("test_kernel[kerple-flex-T1024-fp32]", over_unbiased=1.4),
    ]}
    rows = {r["metric"]: r for r in P.performance_targets(data)}
    assert rows["fused attention t5 (best fused impl, T=1024, fp32) / unbiased causal SDPA"]["value"] == 1.12
    assert rows["fused attention kerple (best fused impl, T=1024, fp32) / unbiased causal SDPA"]["value"] == 1.4


def test_quick_training_step_counts_its_flops():
    ts = P.quick_training_step("nope", torch.device("cpu"), suite="smoke", task="lm")
    s = load_suite("smoke")
    expected = transformer_flops(batch=s.train.batch_size, seq_len=ts.geometry["T"], vocab_size=ts.geometry["vocab_size"],
                                 **{k: v for k, v in dataclasses.asdict(s.model).items() if k in ("d_model", "n_layers", "ff_mult")})
    assert ts.flops == expected.total and ts.geometry["fast"] is True
    assert math.isfinite(float(ts.step()))


# --- the GPU check's CPU fallback -----------------------------------------------------------------


@pytest.mark.subprocess
def test_gpu_check_cpu_fallback_writes_its_json_and_log(tmp_path):
    """bench/gpu_check.sh --device cpu: every stage runs (tiny settings) and passes."""
    out = tmp_path / "check"
    proc = subprocess.run(["bash", "bench/gpu_check.sh", str(out), "--device", "cpu"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env={k: v for k, v in os.environ.items() if not k.startswith("LENBENCH_")})
    summary = json.loads((out / "summary.json").read_text())
    assert proc.returncode == 0 and summary["ok"], proc.stdout[-4000:] + proc.stderr[-2000:]
    assert [s["stage"] for s in summary["stages"]] == ["env", "tests", "smoke", "kernels_train", "kernels", "train_step"]
    assert summary["finished"] is True
    env = json.loads((out / "env.json").read_text())
    assert env["device"] == "cpu" and env["float32_matmul_precision"] and "tf32_overrides_unset" in env
    assert 'failures="0"' in (out / "tests.xml").read_text()
    kernels_json = json.loads((out / "kernels.json").read_text())
    meta = kernels_json["machine_info"]["lenbench"]  # what the budget targets read
    assert meta["suite"] == "quick" and meta["session_seconds"] > 0 and meta["selection"]
    assert "test_kernel[rope-eager-T64-fp32]" in {b["name"] for b in kernels_json["benchmarks"]}
    train = {b["name"] for b in json.loads((out / "kernels_train.json").read_text())["benchmarks"]}
    assert train == {"test_training_mfu[lm]"}  # the training benchmarks run first, in their own stage
    targets = (out / "targets.txt").read_text()  # read from both files
    assert "training MFU" in targets and "not run" not in targets.splitlines()[0]
    steps = json.loads((out / "train_step.json").read_text())
    assert [s["variant"] for s in steps["steps"]] == ["eager", "fast"] and steps["steps"][1]["max_loss_diff"] < 1e-5
    assert [p["batch_size"] for p in steps["packing"]] == [32, 128]
    assert "=== train_step: exit 0" in (out / "gpu_check.log").read_text()


def _fake_row(name, encoding, task, *_):
    return {"variant": name, "encoding": encoding, "task": task, "seconds": 1.0, "compile_seconds": 0.0, "mfu": 0.5,
            "losses": [1.0]}


def test_gpu_check_runs_every_cheap_row_before_any_compile(tmp_path, monkeypatch):
    """The compiled variants (tens of seconds each) come after every task's eager, fast and packing
    rows, and only for --compile-tasks x --compile-encodings (cudagraphs: CUDA only)."""
    import gpu_check

    calls = []
    monkeypatch.setattr(gpu_check, "matmul_rate", lambda *a, **k: 1e9)
    monkeypatch.setattr(gpu_check, "_variant", lambda *a: calls.append(a[:3]) or _fake_row(*a))
    monkeypatch.setattr(gpu_check, "_packing", lambda task, *a: calls.append(("packing", task)))
    out = tmp_path / "steps.json"
    assert gpu_check.main(["--device", "cpu", "--out", str(out), "--tasks", "lm,copy", "--encodings", "nope,rope",
                           "--variants", "eager,fast,compile,cudagraphs", "--compile-tasks", "lm,passkey"]) == 0

    def plain(task):
        return [(v, e, task) for v in ("eager", "fast") for e in ("nope", "rope")]

    assert calls == (plain("lm") + [("packing", "lm")] + plain("copy") + [("packing", "copy")]
                     + [("compile", "nope", "lm")])  # passkey is not a task of this run; rope not compiled
    assert len(json.loads(out.read_text())["steps"]) == 9


@pytest.mark.slow
def test_gpu_check_keeps_its_rows_when_its_time_limit_interrupts_it(tmp_path, monkeypatch):
    """gpu_check.sh stops a stage with SIGINT: the rows measured before it are in the JSON."""
    import gpu_check

    real, calls = gpu_check._variant, []

    def variant(*args):
        calls.append(args[0])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(gpu_check, "_variant", variant)
    out = tmp_path / "steps.json"
    code = gpu_check.main(["--device", "cpu", "--out", str(out), "--tasks", "copy", "--encodings", "nope",
                           "--variants", "eager,fast", "--steps", "3", "--rounds", "2", "--matmul-n", "128"])
    saved = json.loads(out.read_text())
    assert code == 130 and saved["interrupted"] is True
    assert [s["variant"] for s in saved["steps"]] == ["eager"] and len(saved["steps"][0]["losses"]) == 3
    assert saved["matmul_flops_per_s"]["fp32"] > 0 and saved["packing"] == []


@pytest.mark.subprocess
def test_gpu_check_usage_errors(tmp_path):
    for args, message in ((["--device", "cpu"], "usage: bench/gpu_check.sh OUT_DIR"),
                          ([str(tmp_path), "--device", "tpu"], "--device must be cuda, xpu or cpu, got tpu"),
                          ([str(tmp_path), "--fast"], "unknown argument --fast")):
        proc = subprocess.run(["bash", "bench/gpu_check.sh", *args], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


_FAULTS_PER_STEP = """
import resource, sys
from lenbench.benchmark import plans as P
import torch
from lenbench.device import keep_freed_memory

torch.set_num_threads(1)
if sys.argv[1] == "keep":
    assert keep_freed_memory()
ts = P.quick_training_step("nope", torch.device("cpu"), suite="quick", task="lm")
for _ in range(20):
    ts.step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    ts.step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


@pytest.mark.subprocess
def test_keep_freed_memory_stops_the_training_step_page_faulting():
    """glibc by default hands the step's freed activations back to the OS and page-faults them in
    again on the next step; with `keep_freed_memory` (what every cell process applies) the step
    reuses them. Each setting in a fresh process: mallopt is process-wide."""
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    faults = {}
    for mode in ("default", "keep"):
        proc = subprocess.run([sys.executable, "-c", _FAULTS_PER_STEP, mode], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        faults[mode] = float(proc.stdout.split()[-1])
    if faults["default"] < 50:  # e.g. transparent huge pages for every mapping: nothing to keep
        pytest.skip(f"glibc's defaults page-fault only {faults['default']:.0f} times per step on this machine")
    # measured on the 2-core machines: default 600-850 faults per step; kept: 0 in most runs, ~120 in a few
    assert faults["keep"] < faults["default"] / 3, faults


def test_every_executor_computes_its_cells_with_freed_memory_kept(monkeypatch):
    from lenbench import device
    from lenbench.run import cell
    from lenbench.run.executors import base as executors
    calls = []
    monkeypatch.setattr(device, "keep_freed_memory", lambda: calls.append("keep") or True)
    monkeypatch.setattr(cell, "compute_cell", lambda job: calls.append(job) or "outcome")
    assert executors.compute_cell("job") == "outcome" and calls == ["keep", "job"]


def test_cell_threads_sets_the_cells_thread_count_on_the_cpu_and_restores():
    from lenbench.run.cell import default_threads

    before = torch.get_num_threads()
    with P.cell_threads(torch.device("cpu")) as threads:
        assert threads == torch.get_num_threads() == default_threads() == 1
    assert torch.get_num_threads() == before
    with P.cell_threads(torch.device("meta")) as threads:  # not the CPU: untouched
        assert threads == before
