"""Issue 38: task parameters, RoPE variant factors and YAML aliases are checked when the suite loads.

Task parameters are declared once per task class (`Task.PARAMS`, `lenbench.tasks.params`); the
constructor and the loader both check against that declaration, so `vocab: 0` is one line at load
(exit 2) instead of every cell failing at run time with exit 0. A variant's pinned factor is probed
at load like an encoding's parameters. A YAML alias bomb is refused before it is expanded.
"""

import inspect

import pytest
import yaml
from lenbench_testing import TINY_SUITE, suite_load_error, write_suite

from lenbench.cli import main
from lenbench.config import load_suite, parse_suite
from lenbench.config.checks import MAX_VALUES, TooManyValuesError, check_expanded_size
from lenbench.tasks import TASKS
from lenbench.tasks.params import SHOWN_CHARS, Param

TINY = TINY_SUITE


load_error = suite_load_error


def with_params(name: str, params: dict, train_len: int = 8) -> dict:
    return {**TINY, "tasks": [{"name": name, "train_len": train_len, "params": params}]}


# --- task parameters ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TASKS.names()))
def test_every_task_declares_each_constructor_parameter(name):
    cls = TASKS.get(name)
    keywords = [n for n in inspect.signature(cls.__init__).parameters if n != "self"]
    assert cls.PARAMS is not None and list(cls.PARAMS) == keywords
    for param, default in ((n, p.default) for n, p in inspect.signature(cls.__init__).parameters.items() if n != "self"):
        assert cls.PARAMS[param].accepts(default), f"{name}.{param}: the default {default!r} is not valid"


@pytest.mark.parametrize("name, params, shown", [
    ("copy", {"vocab": 0}, "parameter vocab must be an int >= 2, got 0"),
    ("reverse", {"vocab": -3}, "parameter vocab must be an int >= 2, got -3"),
    ("sort", {"vocab": "many"}, "parameter vocab must be an int >= 2, got 'many'"),
    ("copy", {"vocab": 4.5}, "parameter vocab must be an int >= 2, got 4.5"),
    ("copy", {"vocab": True}, "parameter vocab must be an int >= 2, got True"),
    ("count", {"spread": 0}, "parameter spread must be an int >= 1, got 0"),
    ("recall", {"queries": "some"}, "parameter queries must be an int >= 1 or 'all', got 'some'"),
    ("recall", {"feed_answers": "yes"}, "parameter feed_answers must be true or false, got 'yes'"),
    ("lm", {"source": "pile"}, "parameter source must be one of stdlib, long-range, got 'pile'"),
    ("lm", {"path": 7}, "parameter path must be a string, got 7"),
    ("addition", {"index_hints": -1}, "parameter index_hints must be an int >= 0, got -1"),
])
def test_a_bad_task_parameter_is_one_line_at_load(tmp_path, name, params, shown):
    path = write_suite(tmp_path, with_params(name, params))
    assert load_error(path) == f"{path}: tasks[0]: task {name!r}: {shown}"


def test_the_command_line_refuses_a_bad_task_parameter_before_any_cell(tmp_path, capsys):
    path = write_suite(tmp_path, with_params("copy", {"vocab": 0}))
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"lenbench: error: {path}: tasks[0]: task 'copy': parameter vocab must be an int >= 2, got 0"]
    assert not (tmp_path / "out").exists()


def test_a_long_bad_value_is_shown_cut_to_one_short_line(tmp_path):
    path = write_suite(tmp_path, with_params("copy", {"vocab": list(range(5000))}))
    text = load_error(path)
    assert text.endswith("…") and len(text) < len(str(path)) + 100 + SHOWN_CHARS


def test_the_constructor_checks_the_same_declaration():
    with pytest.raises(ValueError, match=r"^task 'copy': parameter vocab must be an int >= 2, got 1$"):
        TASKS.get("copy")(vocab=1)
    assert Param(int, low=2).valid == "an int >= 2"


def test_valid_task_parameters_still_load():
    suite = parse_suite({**TINY, "tasks": [
        {"name": "recall", "train_len": 4, "params": {"queries": "all", "distinct_values": True, "num_values": 8}},
        {"name": "lm", "train_len": 8, "params": {"path": "/nowhere/corpus.txt"}},  # read where the cell runs
        {"name": "count", "train_len": 4, "params": {"max_count": 64}}]})
    assert [t.params for t in suite.tasks][1] == {"path": "/nowhere/corpus.txt"}


def test_a_float_train_len_is_one_line(tmp_path, capsys):
    path = write_suite(tmp_path, {**TINY, "tasks": [{"name": "copy", "train_len": 4.5}]})
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"lenbench: error: {path}: tasks[0].train_len must be a positive integer or a list of them, got 4.5"]


# --- variant factors ------------------------------------------------------------------------------


@pytest.mark.parametrize("variant, shown", [
    ({"rope_type": "linear", "factor": -2}, "rope_type 'linear': factor=-2 is below 1; set factor >= 1"),
    ({"rope_type": "yarn", "factor": 0.5}, "rope_type 'yarn': factor=0.5 is below 1"),
    ({"rope_type": "ntk", "factor": "big"}, "rope_type 'ntk': factor = 'big' is out of range (valid: a finite number)"),
    ({"rope_type": "linear", "factor": float("nan")}, "rope_type 'linear': factor = nan is out of range"),
    ({"rope_type": "llama3", "original_max_position_embeddings": 0}, "rope_type 'llama3': original_max_position_embeddings=0 must be a positive"),
])
def test_a_bad_variant_factor_is_one_line_at_load(tmp_path, variant, shown):
    path = write_suite(tmp_path, {**TINY, "variants": [variant]})
    text = load_error(path)
    assert text.startswith(f"{path}: variants[0]: {shown}")


def test_good_variants_still_load():
    suite = parse_suite({**TINY, "variants": ["linear", {"rope_type": "yarn", "factor": 4}, {"rope_type": "dynamic", "factor": 2},
                                             {"rope_type": "linear", "finetune_steps": 2, "finetune_ratio": 2}]})
    assert [v.key for v in suite.variants] == ["linear", "yarn@4", "dynamic@2", "finetune-linear-x2"]


# --- YAML aliases ---------------------------------------------------------------------------------


def bomb(levels: int) -> str:
    """A "billion laughs" suite: `levels` lists of ten aliases to the list before, 10**levels values."""
    names = "abcdefghijk"
    parts = ["&a [x, x, x, x, x, x, x, x, x, x]"]
    parts += [f"&{names[i]} [" + ", ".join([f"*{names[i - 1]}"] * 10) + "]" for i in range(1, levels)]
    return ("tasks:\n  - name: copy\n    train_len: 4\n    params:\n      vocab: [" + ",\n        ".join(parts)
            + "]\nencodings: [nope]\n")


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(9))  # 10**9 values in 542 bytes; a loader that expanded them would need gigabytes
    assert len(path.read_bytes()) < 600
    assert load_error(path) == (
        f"{path}: line 9: the value here expands, through its aliases (*name), past {MAX_VALUES} values; a suite "
        f"holds at most {MAX_VALUES} values (the presets: a few hundred): write the values out instead of repeating aliases")


def test_the_count_is_of_the_expansion_and_walks_each_node_once():
    loader = yaml.SafeLoader(bomb(4))
    try:
        root = loader.get_single_node()
    finally:
        loader.dispose()
    # vocab: [a, b, c, d] with a = 10 x's (11 values), b = 10 a's (111), c (1111), d (11111), and the
    # 14 values around it (the top mapping, its keys, the task's mapping and scalars, encodings)
    assert check_expanded_size(root) == 1 + 11 + 111 + 1111 + 11111 + 14
    with pytest.raises(TooManyValuesError):
        check_expanded_size(root, limit=10**4)


def test_an_alias_inside_itself_is_one_line(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("tasks: &t [{name: copy, train_len: 4, params: {vocab: *t}}]\nencodings: [nope]\n")
    assert load_error(path) == (f"{path}: line 1: the value here holds an alias to itself; a suite holds at most "
                                f"{MAX_VALUES} values (the presets: a few hundred): write the values out instead of "
                                "repeating aliases")


def test_a_document_nested_too_deeply_is_one_line(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 5000)
    assert load_error(path) == (f"{path}: is nested too deeply to read (lists or mappings inside each other about a "
                                "thousand levels down); a suite nests a few levels")


def test_aliases_within_the_bound_still_work(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("train: &t {steps: 6, batch_size: 4, lr: 0.003, warmup: 2}\n"
                    "model: {d_model: 16, n_layers: 1, n_heads: 2, ff_mult: 2}\n"
                    "tasks: [{name: copy, train_len: 4, train: *t}]\nencodings: [nope]\n")
    assert load_suite(path).tasks[0].train == {"steps": 6, "batch_size": 4, "lr": 0.003, "warmup": 2}
