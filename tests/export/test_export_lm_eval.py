"""`lenbench export lm-eval`: the keys lm-evaluation-harness writes, checked against a schema written from
its source (lm_eval/result_schema.py, lm_eval/loggers/evaluation_tracker.py, lm-eval 0.4.13), and against
lm-eval's own `make_table` where lm_eval is importable (`pip install --no-deps lm-eval pytablewriter`)."""

import json

import numpy as np
import pytest
from export_rows import tiny_rows

from lenbench.export import lm_eval
from lenbench.results.samples import row_value

#: lm-eval's EvalResults keys (result_schema.py) that simple_evaluate always writes, and their types.
TOP_LEVEL = {"results": dict, "group_subtasks": dict, "configs": dict, "versions": dict, "n-shot": dict,
             "higher_is_better": dict, "n-samples": dict, "config": dict, "git_hash": str, "date": float,
             "task_hashes": dict, "model_name": str, "model_name_sanitized": str, "model_source": str}
#: SampleResult's fixed keys and their types.
SAMPLE_KEYS = {"doc_id": int, "doc": dict, "target": str, "arguments": dict, "resps": list, "filtered_resps": list,
               "filter": str, "metrics": list, "doc_hash": str, "prompt_hash": str, "target_hash": str}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm_eval")
    return out, lm_eval.write_lm_eval(tiny_rows(), out)


def results_files(out):
    return sorted(out.glob("*/results_*.json"))


def test_one_run_per_encoding_variant_and_seed_in_lm_evals_layout(written):
    out, paths = written
    runs = results_files(out)
    assert [p.parent.name for p in runs] == sorted(
        lm_eval.sanitize_model_name(lm_eval.model_name("tiny", e, v, s))
        for e, v in (("rope", "none"), ("rope", "yarn"), ("alibi", "none")) for s in (0, 1))
    for path in runs:
        data = json.loads(path.read_text())
        assert path.name == f"results_{lm_eval.date_id(data['date'])}.json"
        for task in (t for t, result in data["results"].items() if result["sample_len"]):  # a failed length has none
            assert (path.parent / f"samples_{task}_{lm_eval.date_id(data['date'])}.jsonl") in paths


def test_results_hold_lm_evals_keys_and_types(written):
    out, _ = written
    for path in results_files(out):
        data = json.loads(path.read_text())
        for key, kind in TOP_LEVEL.items():
            assert isinstance(data[key], kind), (path, key)
        assert "groups" not in data  # no group has an aggregate metric
        tasks = set(data["results"])
        for table in ("configs", "versions", "n-shot", "higher_is_better", "n-samples"):
            assert set(data[table]) == tasks, table
        assert sorted(t for subtasks in data["group_subtasks"].values() for t in subtasks) == sorted(tasks)
        for task, result in data["results"].items():
            assert result["name"] == result["alias"] == task and isinstance(result["sample_len"], int)
            metrics = {k for k in result if "," in k}
            assert all(k.endswith(",none") for k in metrics)
            for key in metrics - {k for k in metrics if "_stderr," in k}:
                assert key.replace(",", "_stderr,") in result
            assert set(data["n-samples"][task]) == {"original", "effective"}
            assert {m for m in data["higher_is_better"][task]} >= {k.split(",")[0] for k in metrics if "_stderr" not in k}
        assert data["config"]["random_seed"] == data["lenbench"]["seed"]
        assert {"code_fingerprints", "data_fingerprints", "numerics", "cells"} <= set(data["lenbench"])


def test_values_are_the_rows_and_the_stderr_is_their_bootstrap(written):
    rows = tiny_rows()
    out, _ = written
    data = json.loads(next(p for p in results_files(out) if "rope-seed1" in p.parent.name).read_text())
    picked = rows[(rows["encoding"] == "rope") & (rows["variant"] == "none") & (rows["seed"] == 1) & (rows["bucket"] == "")]
    for row in picked.itertuples():
        result = data["results"][lm_eval.task_name(row.task, row.train_len, row.ratio)]
        assert result[f"{row.metric},none"] == row.value
        stderr = result[f"{row.metric}_stderr,none"]
        assert 0 <= stderr and (stderr > 0) == (len(set(row.sample_scores.split())) > 1)


def test_a_failed_length_is_left_out_and_named(written):
    out, _ = written
    data = json.loads(next(p for p in results_files(out) if "alibi-seed0" in p.parent.name).read_text())
    task = lm_eval.task_name("copy", 8, 4.0)
    assert "exact_match,none" not in data["results"][task]
    assert data["lenbench"]["failed"] == {task: ["exact_match"]}


def test_sample_lines_have_lm_evals_keys_and_their_sums_give_the_value(written):
    out, _ = written
    run = next(p for p in results_files(out) if "rope+yarn-seed0" in p.parent.name)
    data = json.loads(run.read_text())
    for task, result in data["results"].items():
        path = run.parent / f"samples_{task}_{lm_eval.date_id(data['date'])}.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert [x["doc_id"] for x in lines] == list(range(len(lines))) and len(lines) == result["sample_len"]
        for line in lines:
            for key, kind in SAMPLE_KEYS.items():
                assert isinstance(line[key], kind), key
            assert line["doc_hash"] == lm_eval.hash_string(json.dumps(line["doc"], indent=2, ensure_ascii=False))
            assert all(isinstance(line[m], float) for m in line["metrics"])
        for metric in lines[0]["metrics"]:
            num, den = (np.array([x["doc"]["sums"][metric][i] for x in lines]) for i in (0, 1))
            assert row_value(metric, num, den) == pytest.approx(result[f"{metric},none"])
        hashes = "".join(x["doc_hash"] + x["prompt_hash"] + x["target_hash"] for x in lines)
        assert data["task_hashes"][task] == lm_eval.hash_string(hashes)


def test_the_same_source_writes_the_same_bytes(written, tmp_path):
    out, paths = written
    again = lm_eval.write_lm_eval(tiny_rows(), tmp_path)
    assert [p.relative_to(tmp_path) for p in again] == [p.relative_to(out) for p in paths]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(again, paths, strict=True))


def test_lm_evals_make_table_renders_every_metric(written):
    utils = pytest.importorskip("lm_eval.utils", reason="lm_eval not installed (pip install --no-deps lm-eval "
                                "pytablewriter): checked against the schema above instead")
    pytest.importorskip("pytablewriter", reason="lm_eval's make_table needs pytablewriter")
    out, _ = written
    for path in results_files(out):
        data = json.loads(path.read_text())
        table = utils.make_table(data)
        for task, result in data["results"].items():
            assert task in table or not any("," in k for k in result)  # a task whose every metric failed has no row
            for key in result:
                if "," in key and "_stderr" not in key:
                    assert f"|{key.split(',')[0]}" in table.replace(" ", "")


def test_only_baselines_is_one_line():
    rows = tiny_rows()
    with pytest.raises(ValueError, match=r"^no whole-length rows of a trained model to export"):
        lm_eval.write_lm_eval(rows[rows["encoding"].str.startswith("baseline:")], "unused")
