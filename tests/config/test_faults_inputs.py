"""Bad suite inputs are load-time errors of one line naming the file, the key, the value and the range.

Issue 9, item 7: values accepted before and silently wrong (grad_clip < 0 trains uphill, steps 0
stores an untrained model as ok, finetune_steps < 0 labels a variant fine-tuned that never was …),
late failures that belong at load time, PyYAML's exponent floats read as strings, duplicate grid
entries, a suite name that escapes runs/, a directory given as a suite, a binary lm corpus.
"""

import math
import warnings

import pytest
import yaml
from lenbench_testing import TINY_SUITE

from lenbench.cli import main
from lenbench.config import SuiteError, SuiteWarning, load_suite, parse_suite
from lenbench.tasks import TASKS

TINY = TINY_SUITE


def write(tmp_path, data, name="bad.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def section(key, **values):
    return {**TINY, key: {**TINY.get(key, {}), **values}}


FT = {"rope_type": "linear", "finetune_steps": 3}

RANGE_CASES = [
    (section("train", grad_clip=-1.0), "train.grad_clip = -1.0 is out of range (valid: > 0"),
    (section("train", grad_clip=0.0), "train.grad_clip = 0.0 is out of range (valid: > 0"),
    (section("train", steps=0), "train.steps = 0 is out of range (valid: >= 1)"),
    (section("train", steps=-4), "train.steps = -4 is out of range (valid: >= 1)"),
    (section("train", warmup=-5), "train.warmup = -5 is out of range (valid: >= 0)"),
    (section("train", batch_size=0), "train.batch_size = 0 is out of range (valid: >= 1)"),
    (section("train", lr=0.0), "train.lr = 0.0 is out of range (valid: > 0 and finite)"),
    (section("train", lr=-1e-3), "train.lr = -0.001 is out of range (valid: > 0 and finite)"),
    (section("train", lr=math.inf), "train.lr = inf is out of range (valid: > 0 and finite)"),
    (section("train", weight_decay=-0.1), "train.weight_decay = -0.1 is out of range (valid: >= 0 and finite)"),
    (section("model", n_layers=0), "model.n_layers = 0 is out of range (valid: >= 1)"),
    (section("model", d_model=0), "model.d_model = 0 is out of range (valid: >= 1)"),
    (section("model", n_heads=0), "model.n_heads = 0 is out of range (valid: >= 1)"),
    (section("model", ff_mult=0), "model.ff_mult = 0 is out of range (valid: >= 1)"),
    (section("model", d_model=18, n_heads=4), "model.d_model = 18 is out of range (valid: a multiple of model.n_heads = 4)"),
    (section("model", dropout=1.5), "model.dropout = 1.5 is out of range (valid: 0 <= dropout < 1)"),
    (section("model", dropout=1.0), "model.dropout = 1.0 is out of range (valid: 0 <= dropout < 1)"),
    (section("model", dropout=-0.1), "model.dropout = -0.1 is out of range (valid: 0 <= dropout < 1)"),
    (section("eval", samples=0), "eval.samples = 0 is out of range (valid: >= 1)"),
    (section("eval", tokens_per_batch=0), "eval.tokens_per_batch = 0 is out of range (valid: >= 1)"),
    (section("eval", ratios=[1, math.inf]), "eval.ratios[1] = inf is out of range (valid: > 0 and finite)"),
    (section("eval", ratios=[1, math.nan]), "eval.ratios[1] = nan is out of range (valid: > 0 and finite)"),
    (section("eval", ratios=[1, -2]), "eval.ratios[1] = -2 is out of range (valid: > 0 and finite)"),
    (section("eval", ratios=["a"]), "eval.ratios[0] must be a number, got 'a'"),
    (section("eval", ratios=[1, True]), "eval.ratios[1] must be a number, got True"),
    ({**TINY, "seeds": [0, True]}, "seeds must be an integer or a list of integers (not true/false)"),
    ({**TINY, "seeds": True}, "seeds must be an integer or a list of integers (not true/false)"),
    ({**TINY, "seeds": [-1]}, "seeds = -1 is out of range (valid: >= 0)"),
    ({**TINY, "variants": [{**FT, "finetune_steps": -3}]}, "variants[0].finetune_steps = -3 is out of range (valid: >= 0)"),
    ({**TINY, "variants": [{**FT, "finetune_ratio": 0.5}]}, "variants[0].finetune_ratio = 0.5 is out of range (valid: >= 1"),
    ({**TINY, "variants": [{**FT, "finetune_lr": 0}]}, "variants[0].finetune_lr = 0 is out of range (valid: > 0"),
    ({**TINY, "variants": [{**FT, "finetune_lr": -1e-4}]}, "variants[0].finetune_lr = -0.0001 is out of range (valid: > 0"),
    ({**TINY, "name": "../../x"}, "name '../../x' is not a safe directory name"),
    ({**TINY, "name": "/etc"}, "name '/etc' is not a safe directory name"),
    ({**TINY, "name": ".."}, "name '..' is not a safe directory name"),
    ({**TINY, "name": ""}, "name '' is not a safe directory name"),
]


@pytest.mark.parametrize("data,message", RANGE_CASES, ids=[m.split(" ")[0] for _, m in RANGE_CASES])
def test_every_range_check_is_one_line_naming_file_key_value_and_range(tmp_path, data, message):
    path = write(tmp_path, data)
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    text = str(err.value)
    assert message in text and str(path) in text
    assert "\n" not in text


def test_finetune_ratio_and_lr_are_free_without_finetune_steps():
    """finetune_ratio / finetune_lr only matter for a fine-tuned variant."""
    suite = parse_suite({**TINY, "variants": [{"rope_type": "linear", "finetune_ratio": 0.5, "finetune_lr": 0}]})
    assert suite.variants[0].finetune_steps == 0


def test_range_errors_are_one_line_on_the_command_line(tmp_path, capsys):
    path = write(tmp_path, section("train", grad_clip=-1.0))
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "o")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "train.grad_clip = -1.0 is out of range" in lines[0]
    assert not (tmp_path / "o").exists()  # nothing trained


def test_numeric_strings_are_accepted_for_float_fields(tmp_path):
    """PyYAML reads `1.0e9` and `1e-3` (no sign, or no dot) as strings; float fields accept them."""
    text = yaml.safe_dump({k: v for k, v in TINY.items() if k not in ("train", "eval", "variants")})
    text += ("train: {steps: 6, batch_size: 4, lr: 1e-3, warmup: 2, weight_decay: 1.0e-2, grad_clip: 1.0e9}\n"
             "eval: {ratios: [1, 2e0, 4], samples: 4}\n"
             "variants: [{rope_type: linear, finetune_steps: 2, finetune_ratio: 2e0, finetune_lr: 1e-4}]\n")
    path = tmp_path / "strings.yaml"
    path.write_text(text)
    assert yaml.safe_load(text)["train"]["lr"] == "1e-3"  # the PyYAML behaviour this works around
    suite = load_suite(path)
    assert suite.train.lr == 1e-3 and suite.train.weight_decay == 0.01 and suite.train.grad_clip == 1e9
    assert suite.eval.ratios == (1, 2.0, 4)
    assert suite.variants[0].finetune_ratio == 2.0 and suite.variants[0].finetune_lr == 1e-4
    # a string that is not a number stays a type error, and a numeric string is still range-checked
    for bad, message in (("lr: fast", "train.lr must be float, got 'fast'"), ("lr: 1e9e9", "train.lr must be float"),
                         ("lr: -1e-3", "train.lr = -0.001 is out of range"), ("lr: .nan", "train.lr = nan is out of range")):
        path.write_text(text.replace("lr: 1e-3", bad, 1))
        with pytest.raises(SuiteError, match="train.lr"), warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                load_suite(path)
            except SuiteError as err:
                assert message in str(err)
                raise


def test_duplicate_grid_entries_run_once_with_a_warning():
    data = {**TINY, "seeds": [0, 1, 0], "tasks": [{"name": "copy", "train_len": [4, 4]}, {"name": "copy", "train_len": [4, 6]}],
            "encodings": ["nope", "rope", "nope", {"name": "rope", "label": "rope"}],
            "variants": ["linear", "linear", {"rope_type": "linear"}], "eval": {"ratios": [1, 2, 2.0]}}
    with pytest.warns(SuiteWarning) as record:
        suite = parse_suite(data, source="dup.yaml")
    messages = [str(w.message) for w in record]
    assert all("\n" not in m and m.startswith("dup.yaml: ") and m.endswith("is listed twice; it runs once") for m in messages)
    assert any("seed 0" in m for m in messages)
    assert any("task 'copy' at train_len 4" in m for m in messages)
    assert any("encoding 'nope'" in m for m in messages) and any("encoding 'rope'" in m for m in messages)
    assert any("variant 'linear'" in m for m in messages)
    assert suite.seeds == (0, 1)
    assert [(t.name, t.train_len) for t in suite.tasks] == [("copy", (4,)), ("copy", (6,))]
    assert [e.key for e in suite.encodings] == ["nope", "rope"]
    assert [v.key for v in suite.variants] == ["linear"]
    assert suite.eval.ratios == (1, 2)
    titles = [c.title for c in suite.cells()]
    assert len(titles) == len(set(titles)) == 2 * 2 * 2  # (4, 6) × (nope, rope) × seeds (0, 1)


def test_distinct_entries_that_share_a_name_are_still_errors():
    """Dedupe drops exact repeats only; two different entries under one label stay an error."""
    with pytest.raises(SuiteError, match="two encodings share the label 'rope'"):
        parse_suite({**TINY, "encodings": ["rope", {"name": "rope", "params": {"theta": 500}}]})
    with pytest.raises(SuiteError, match="two variants share the name 'linear'"):
        parse_suite({**TINY, "variants": ["linear", {"rope_type": "linear", "params": {"factor": 2}, "name": "linear"}]})
    # two parameter sets of one task at one length would share a board of results: refused, with a label to give
    with pytest.raises(SuiteError, match=r"tasks\[1\] and tasks\[0\] are both task 'copy' at train_len 4 but differ in "
                                         r"params, so their rows would merge; give one a distinct `label` \(e.g. label: copy_vocab12\)"):
        parse_suite({**TINY, "tasks": [{"name": "copy", "train_len": 4}, {"name": "copy", "train_len": 4, "params": {"vocab": 12}}]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no duplicate: no warning
        suite = parse_suite({**TINY, "tasks": [{"name": "copy", "train_len": 4},
                                               {"name": "copy", "train_len": 4, "params": {"vocab": 12}, "label": "copy_v12"}]})
    assert [t.key for t in suite.tasks] == ["copy", "copy_v12"]


def test_suite_name_from_the_file_name_is_sanitised(tmp_path):
    data = {k: v for k, v in TINY.items() if k != "name"}
    suite = load_suite(write(tmp_path, data, "my suite (v2).yaml"))
    assert suite.name == "my_suite__v2_"
    assert load_suite(write(tmp_path, data, ".hidden.yaml")).name == "_.hidden"
    assert load_suite(write(tmp_path, {**data, "name": "ok-name_1.2"})).name == "ok-name_1.2"


def test_a_directory_given_as_a_suite_says_it_is_a_directory(tmp_path):
    for path in (tmp_path, tmp_path / "sub.yaml"):
        path.mkdir(exist_ok=True)
        with pytest.raises(SuiteError) as err:
            load_suite(path)
        assert f"suite {str(path)!r} is a directory" in str(err.value) and "does not exist" not in str(err.value)
    with pytest.raises(SuiteError, match="does not exist"):
        load_suite(tmp_path / "absent.yaml")
    with pytest.raises(SuiteError, match="unknown suite 'quik'; did you mean 'quick'"):
        load_suite("quik")


def test_a_preset_name_wins_over_a_directory_of_that_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smoke").mkdir()
    assert load_suite("smoke").name == "smoke"


def test_a_binary_suite_file_is_one_line(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"name: x\n\xff\xfe\x00junk")
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    assert "not a UTF-8 text file" in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_lm_rejects_a_binary_corpus(tmp_path):
    corpus = tmp_path / "corpus.bin"
    corpus.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ValueError) as err:
        TASKS.get("lm")(path=corpus)
    text = str(err.value)
    assert "\n" not in text and "is not UTF-8 text (byte 128" in text and "corpus.bin" in text
    text_corpus = tmp_path / "corpus.txt"
    text_corpus.write_text("héllo wörld " * 100, encoding="utf-8")
    assert TASKS.get("lm")(path=text_corpus).corpus.size == len(("héllo wörld " * 100).encode())


def test_a_binary_lm_corpus_fails_its_cell_with_the_reason(tmp_path):
    from lenbench.run.driver import run_suite

    corpus = tmp_path / "corpus.bin"
    corpus.write_bytes(b"\x80\x81" * 4096)
    suite = parse_suite({**TINY, "tasks": [{"name": "lm", "train_len": 8, "params": {"path": str(corpus)}}],
                         "encodings": ["nope"]})
    (result,) = run_suite(suite, tmp_path / "out", device="cpu", progress=False).computed
    assert result.status == "failed" and "is not UTF-8 text" in result.error
    assert not list((tmp_path / "out").glob("checkpoints/*.pt"))  # nothing trained


def test_a_directory_as_suite_on_the_command_line_is_one_line(tmp_path, capsys):
    assert main(["run", "--suite", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"suite {str(tmp_path)!r} is a directory" in lines[0]
