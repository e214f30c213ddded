"""Issue 19, defect 8: bad inputs that were accepted, or failed late or loudly, are one-line errors.

Seeds past what the generators hold, encoding parameters out of range (for every encoding, at
load), an lm corpus too short to train on, a cell whose every measurement failed, a negative
memory budget, a YAML key given twice, a pickled checkpoint, Ctrl-C while torch is imported.
"""

import dataclasses
import io
import subprocess
import sys
import textwrap

import pytest
import torch
import yaml
from lenbench_testing import TINY_SUITE, default_sigint, suite_load_error

from lenbench.cli import main
from lenbench.config import load_suite, parse_suite
from lenbench.run import cell as cell_module
from lenbench.run import store
from lenbench.run.cell import compute_cell
from lenbench.run.checkpoint import load_checkpoint_bytes
from lenbench.run.driver import make_job, read_checkpoints, run_suite

TINY = TINY_SUITE


def write(tmp_path, data, name="bad.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


load_error = suite_load_error


# --- seeds --------------------------------------------------------------------------------------


def test_a_seed_past_2_to_the_32_is_rejected_at_load(tmp_path):
    path = write(tmp_path, yaml.safe_dump({k: v for k, v in TINY.items()}) + "seeds: [0, 1180591620717411303424]\n")
    assert yaml.safe_load(path.read_text())["seeds"] == [0, 2**70]
    assert load_error(path) == f"{path}: seeds = 1180591620717411303424 is out of range (valid: 0 <= seed < 2**32 = 4294967296)"
    assert load_error(write(tmp_path, {**TINY, "seeds": [2**32]})).endswith(
        "seeds = 4294967296 is out of range (valid: 0 <= seed < 2**32 = 4294967296)")
    assert parse_suite({**TINY, "seeds": [2**32 - 1]}).seeds == (2**32 - 1,)


def test_the_largest_seed_trains_and_its_fine_tune_seed_fits(tmp_path):
    """Everything a cell derives from its seed (torch.manual_seed, the batch generator, the
    fine-tune's seed + 1, the int64 seed column) holds the largest valid seed."""
    from lenbench.report.rows import load_results

    suite = parse_suite({**TINY, "encodings": ["rope"], "seeds": [2**32 - 1],
                         "variants": [{"rope_type": "linear", "finetune_steps": 1}], "eval": {"ratios": [1], "samples": 2}})
    (result,) = run_suite(suite, tmp_path, device="cpu", progress=False).computed
    assert result.status == "ok" and all(r["status"] == "ok" for r in result.rows)
    assert set(load_results(tmp_path)["seed"]) == {2**32 - 1}


# --- encoding parameters ------------------------------------------------------------------------

BAD_ENCODINGS = [
    ("rope", {"theta": 0}, "encoding 'rope': theta = 0 is out of range (valid: a finite number > 0)"),
    ("rope", {"theta": -1}, "encoding 'rope': theta = -1 is out of range (valid: a finite number > 0)"),
    ("rope", {"theta": float("inf")}, "encoding 'rope': theta = inf is out of range (valid: a finite number > 0)"),
    ("rope", {"theta": "fast"}, "encoding 'rope': theta = 'fast' is out of range (valid: a finite number > 0)"),
    ("rope", {"partial": "half"}, "encoding 'rope': partial = 'half' is out of range (valid: a number in (0, 1] with "
                                  "partial * head_dim even)"),
    ("rope", {"scaling": "linear"}, "encoding 'rope': scaling = 'linear' is out of range (valid: a rope_scaling mapping "
                                    "such as {rope_type: linear, factor: 4}, or null)"),
    ("rope", {"scaling": {"rope_type": "linear", "factor": 0}}, "rope_type 'linear': factor=0 is below 1; set factor >= 1"),
    ("xpos", {"theta": 0}, "encoding 'xpos': theta = 0 is out of range (valid: a finite number > 0)"),
    ("xpos", {"gamma": -0.4}, "encoding 'xpos': gamma = -0.4 is out of range (valid: a finite number > 0)"),
    ("sandwich", {"base": -1}, "encoding 'sandwich': base = -1 is out of range (valid: a finite number > 0)"),
    ("sandwich", {"dim": 3}, "encoding 'sandwich': dim = 3 is out of range (valid: an even integer >= 2)"),
    ("sinusoidal", {"base": 0}, "encoding 'sinusoidal': base = 0 is out of range (valid: a finite number > 0)"),
    ("sinusoidal", {"embed_scale": -2}, "encoding 'sinusoidal': embed_scale = -2 is out of range (valid: a finite number > 0)"),
    ("learned", {"max_len": 0}, "encoding 'learned': max_len = 0 is out of range (valid: an integer >= 1)"),
    ("cope", {"npos_max": 1.5}, "encoding 'cope': npos_max = 1.5 is out of range (valid: an integer >= 2)"),
    ("fire", {"c": 0}, "encoding 'fire': c = 0 is out of range (valid: a finite number > 0)"),
    ("fire", {"hidden": 0}, "encoding 'fire': hidden = 0 is out of range (valid: an integer >= 1)"),
    ("t5", {"num_buckets": "many"}, "encoding 't5': num_buckets = 'many' is out of range (valid: an integer >= 2)"),
    ("t5", {"max_distance": -8}, "encoding 't5': max_distance = -8 is out of range (valid: an integer >= 1)"),
    ("kerple", {"form": "cubic"}, "kerple form must be 'log' or 'power', got 'cubic'"),
    ("randomized", {"max_position": 0}, "encoding 'randomized': max_position = 0 is out of range (valid: an integer >= 1)"),
    ("randomized", {"base_params": {"theta": 0}}, "encoding 'rope': theta = 0 is out of range (valid: a finite number > 0)"),
    ("randomized", {"base_params": [1]}, "encoding 'randomized': base_params = [1] is out of range (valid: a mapping "
                                         "of the 'rope' encoding's parameters)"),
]


@pytest.mark.parametrize("name,params,message", BAD_ENCODINGS, ids=[f"{n}-{next(iter(p))}" for n, p, _ in BAD_ENCODINGS])
def test_encoding_parameters_out_of_range_are_load_errors(tmp_path, name, params, message):
    path = write(tmp_path, {**TINY, "encodings": ["nope", {"name": name, "params": params}]})
    assert load_error(path).startswith(f"{path}: encodings[1]: {message}")


def test_rope_theta_0_no_longer_reaches_training(tmp_path, capsys):
    """Before: theta 0 loaded, trained, and failed as TrainingDiverged (the wrong cause)."""
    path = write(tmp_path, {**TINY, "encodings": [{"name": "rope", "params": {"theta": 0}, "label": "rope-t0"}]})
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "o")]) == 2 and not (tmp_path / "o").exists()
    assert capsys.readouterr().err.strip().splitlines() == [f"lenbench: error: {path}: encodings[0]: encoding 'rope': theta = 0 is out "
                                                "of range (valid: a finite number > 0)"]


def test_valid_parameters_and_the_presets_still_load():
    for name in ("smoke", "quick", "standard", "paper"):
        load_suite(name)
    suite = parse_suite({**TINY, "encodings": [{"name": "rope", "params": {"theta": "5e5"}},
                                               {"name": "randomized", "params": {"max_position": 64}}]})
    assert [e.params for e in suite.encodings] == [{"theta": "5e5"}, {"max_position": 64}]


def test_probing_an_encoding_leaves_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    parse_suite({**TINY, "encodings": ["fire", "t5", "kerple", "learned"]})
    assert torch.equal(torch.rand(3), expected)


# --- the lm corpus and cells whose every measurement failed --------------------------------------


def test_a_10_byte_lm_corpus_fails_its_cell_with_the_sizes(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("abcdefghij")
    suite = parse_suite({**TINY, "tasks": [{"name": "lm", "train_len": 4, "params": {"path": str(corpus)}}],
                         "encodings": ["nope"]})
    (result,) = run_suite(suite, tmp_path / "out", device="cpu", progress=False).computed
    assert result.status == "failed" and result.rows == []
    assert result.error == (f"ValueError: task 'lm': the corpus has 10 bytes but train_len 4 needs at least 81 (5 to "
                               f"train on in the first 90%, 9 held out to evaluate at the training length: file {corpus}); "
                               "pass a larger path= or a shorter train_len")
    assert not list((tmp_path / "out").glob("checkpoints/*.pt"))  # nothing trained


def test_the_lm_corpus_check_accepts_exactly_the_size_it_names(tmp_path):
    from lenbench.tasks import TASKS

    (tmp_path / "81.txt").write_text("x" * 81)  # corpora are cached per path: one file per size
    TASKS.get("lm")(path=tmp_path / "81.txt").check_train_len(4)
    (tmp_path / "80.txt").write_text("x" * 80)
    with pytest.raises(ValueError, match="the corpus has 80 bytes but train_len 4 needs at least 81"):
        TASKS.get("lm")(path=tmp_path / "80.txt").check_train_len(4)


def test_a_cell_whose_every_measurement_failed_is_failed_and_counted(tmp_path, monkeypatch, capsys):
    from lenbench.cli import main
    from lenbench.run.store import load_cell_results

    def fail(*args, **kwargs):
        raise ValueError("no length fits")

    monkeypatch.setattr(cell_module, "evaluate_length", fail)
    path = write(tmp_path, {**TINY, "encodings": ["nope"], "variants": []})
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "o"), "--executor", "serial", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"1 cell(s) run, 0 already done, 1 failed; 24 rows in {tmp_path / 'o'}"  # 6 of the model's, 18 baselines' (3 baselines)
    assert out[1] == "  failed: copy-nope-L4-s0: every measurement failed (6 of 6); the first: ValueError: no length fits"
    (result,) = load_cell_results(tmp_path / "o")
    own = [r for r in result.rows if r["encoding"] == "nope"]
    assert len(own) == 6 and all(r["status"] == "failed" for r in own)  # 2 lengths × 3 metrics, kept with reasons
    assert result.status == "failed"


def test_one_failed_length_leaves_the_cell_ok():
    rows = [{"encoding": "nope", "bucket": "", "status": "ok", "error": ""},
            {"encoding": "nope", "bucket": "", "status": "failed", "error": "E: x"},
            {"encoding": "unigram", "bucket": "", "status": "failed", "error": "E: y"}]
    assert cell_module.every_measurement_failed(rows, "nope") == ""
    assert cell_module.every_measurement_failed(rows[1:], "nope") == "every measurement failed (1 of 1); the first: E: x"
    assert cell_module.every_measurement_failed(rows[2:], "nope") == ""  # baselines alone: nothing of the model's


# --- memory budget ------------------------------------------------------------------------------


@pytest.mark.parametrize("value,shown", [(-1, "-1.0"), (".nan", "nan"), (".inf", "inf")])
def test_a_negative_or_non_finite_memory_budget_is_rejected(tmp_path, value, shown):
    text = yaml.safe_dump({k: v for k, v in TINY.items() if k != "eval"}) + \
        f"eval: {{ratios: [1, 2], samples: 4, memory_budget_gb: {value}}}\n"
    path = write(tmp_path, text)
    assert load_error(path) == (f"{path}: eval.memory_budget_gb = {shown} is out of range (valid: 0 for automatic, or a "
                                "positive finite number of GiB)")


def test_zero_memory_budget_still_means_automatic():
    assert parse_suite({**TINY, "eval": {"ratios": [1], "memory_budget_gb": 0}}).eval.memory_budget_gb == 0.0
    assert parse_suite({**TINY, "eval": {"ratios": [1], "memory_budget_gb": 2.5}}).eval.memory_budget_gb == 2.5


# --- duplicate YAML keys ------------------------------------------------------------------------


def test_a_top_level_key_given_twice_is_rejected_with_both_lines(tmp_path):
    text = yaml.safe_dump(TINY) + "seeds: [0]\nseeds: [1]\n"
    path = write(tmp_path, text)
    line = text.splitlines().index("seeds: [1]") + 1
    assert load_error(path) == (f"{path}: line {line}: duplicate key 'seeds' (first given on line {line - 1}); YAML would "
                                "keep only the last value: keep one")


def test_a_nested_key_given_twice_is_rejected(tmp_path):
    text = textwrap.dedent("""\
        name: dup
        tasks: [{name: copy, train_len: 4}]
        encodings: [nope]
        train:
          steps: 6
          lr: 0.003
          steps: 60
        """)
    path = write(tmp_path, text)
    assert load_error(path) == (f"{path}: line 7: duplicate key 'steps' (first given on line 5); YAML would keep only "
                                "the last value: keep one")
    inline = write(tmp_path, "name: dup\ntasks: [{name: copy, train_len: 4, train_len: 8}]\nencodings: [nope]\n", "b.yaml")
    assert load_error(inline) == (f"{inline}: line 2: duplicate key 'train_len' (first given on line 2); YAML would keep "
                                  "only the last value: keep one")


def test_merge_keys_may_be_overridden_and_loading_stays_safe(tmp_path):
    text = yaml.safe_dump({k: v for k, v in TINY.items() if k != "train"})
    text += "train: {<<: {steps: 6, batch_size: 4, lr: 0.003, warmup: 2}, steps: 8}\n"
    assert load_suite(write(tmp_path, text)).train.steps == 8  # an override of a merged key is not a duplicate
    evil = write(tmp_path, "!!python/object/apply:os.system ['echo owned']\n", "evil.yaml")
    assert "is not valid YAML" in load_error(evil)


# --- checkpoints --------------------------------------------------------------------------------


class Payload:
    """Any class: pickled into a checkpoint, which weights-only loading refuses."""


def test_a_pickled_checkpoint_is_refused_in_one_line():
    buf = io.BytesIO()
    torch.save({"format": 1, "state_dict": {}, "meta": Payload()}, buf)
    with pytest.raises(ValueError) as err:
        load_checkpoint_bytes(buf.getvalue(), torch.device("cpu"))
    assert str(err.value) == ("not a weights-only file: it holds pickled objects such as test_trust_inputs.Payload, "
                              "which are never loaded")
    with pytest.raises(ValueError) as err:
        load_checkpoint_bytes(b"\x00junk", torch.device("cpu"))
    assert str(err.value) == "unreadable checkpoint (Unsupported operand 0)"


def test_a_pickled_checkpoint_on_disk_is_moved_aside_in_one_line_and_retrained(tmp_path):
    cell = parse_suite({**TINY, "encodings": ["nope"], "variants": []}).cells()[0]
    path = store.checkpoint_path(tmp_path, cell.train_id)
    path.parent.mkdir(parents=True)
    buf = io.BytesIO()
    torch.save({"format": 1, "state_dict": {}, "meta": Payload()}, buf)
    path.write_bytes(buf.getvalue())
    log: list[str] = []
    assert read_checkpoints(tmp_path, cell, log=log.append) == {}
    assert len(log) == 1 and "\n" not in log[0] and "Weights only load failed" not in log[0]
    assert "not a weights-only file: it holds pickled objects such as test_trust_inputs.Payload" in log[0]
    job = dataclasses.replace(make_job(cell, tmp_path, "cpu"), checkpoints={cell.train_id: buf.getvalue()})
    outcome = compute_cell(job)
    assert outcome.result.status == "ok"
    assert outcome.notes["rejected_checkpoints"] == {cell.train_id: "ValueError: not a weights-only file: it holds "
                                                     "pickled objects such as test_trust_inputs.Payload, which are never loaded"}


# --- Ctrl-C -------------------------------------------------------------------------------------

#: The console script's own two lines (`lenbench = "lenbench.cli:main"`), after an import hook that
#: delivers SIGINT to the process the moment torch starts to import: deterministic, no timing.
INTERRUPT_AT_TORCH = """\
import builtins, os, signal, sys
real = builtins.__import__
def hook(name, *args, **kwargs):
    if name == "torch" and "torch" not in sys.modules:
        builtins.__import__ = real
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kwargs)
builtins.__import__ = hook
sys.argv = ["lenbench", *sys.argv[1:]]
from lenbench.cli import main
sys.exit(main())
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("argv", [["list", "encodings"], ["run", "--suite", "smoke", "--out", "{tmp}/o"],
                                  ["report", "results", "--out", "{tmp}/r"], ["--version"]],
                         ids=["list", "run", "report", "version"])
def test_ctrl_c_while_torch_imports_is_one_line_and_exit_130(tmp_path, argv):
    script = tmp_path / "entry.py"
    script.write_text(INTERRUPT_AT_TORCH)
    proc = subprocess.run([sys.executable, str(script), *(a.format(tmp=tmp_path) for a in argv)],
                          capture_output=True, text=True, timeout=300, preexec_fn=default_sigint)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines() == ["lenbench: interrupted; finished cells are kept, rerun the same command to resume"]
    assert proc.stdout == "" and not (tmp_path / "o").exists() and not (tmp_path / "r").exists()


@pytest.mark.subprocess
def test_the_cli_module_imports_nothing_heavy():
    """Ctrl-C can only be handled once `main` runs: importing lenbench.cli loads no torch or pandas."""
    code = "import sys, lenbench.cli; print(sorted(m for m in ('torch', 'pandas', 'numpy') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("train_len", [4.5, "8", True, 0, [8, 4.5], None])
def test_a_train_len_that_is_not_a_positive_integer_is_one_load_error(tmp_path, train_len):
    data = {**TINY_SUITE, "tasks": [{"name": "copy", "train_len": train_len, "params": {"vocab": 8}}]}
    message = load_error(write(tmp_path, data))
    assert "tasks[0].train_len must be a positive integer or a list of them" in message and "\n" not in message


@pytest.mark.parametrize("where", ["cell", "checkpoint"])
def test_a_directory_where_a_result_file_goes_is_one_line_before_training(tmp_path, where):
    suite = parse_suite({**TINY_SUITE, "encodings": ["nope"], "seeds": [0]})
    cell = suite.cells()[0]
    path = store.cell_path(tmp_path, cell) if where == "cell" else store.checkpoint_path(tmp_path, cell.train_id)
    path.mkdir(parents=True)
    with pytest.raises(ValueError, match=rf"{path} is a directory where lenbench writes the .* file of cell"):
        run_suite(suite, tmp_path, device="cpu", executor="serial", progress=False, log=lambda _: None)
    assert path.is_dir() and not [p for p in (tmp_path / "checkpoints").glob("*.pt") if p.is_file()]  # none trained
