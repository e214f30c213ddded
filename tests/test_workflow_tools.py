"""The workflow's Python tools under .github/: the summary and verdict (bench_summary.py) and the
local runner (run_locally.py), checked cheaply: built artifacts, expressions, a dry run."""

import json
from pathlib import Path

import pytest
import yaml
from lenbench_testing import load_script

from lenbench.benchmark.speed_gate import SKIPPED, UNCHANGED, CaseResult, GateResult

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "bench.yml"


def load(name: str):
    return load_script(ROOT / ".github" / f"{name}.py")


summary = load("bench_summary")
local = load("run_locally")


# --- bench_summary ----------------------------------------------------------------------------------


def artifact(tmp_path: Path, *, quality=None, speed=None, reused=(True, True, False), numerics=("pinned:x",),
             speed_json=None, speed_err="") -> Path:
    """An artifact directory: `quality` / `speed` an exit code (str) or ("skipped", why) or None."""
    facts = {"suite": "quick", "base_ref": "main", "base_sha": "a" * 40, "head_sha": "b" * 40,
             "quality_tolerance": "0", "speed_threshold": "0.10", "cpu_model": "Some CPU", "head_cache_hit": False,
             "head_cache_key": "lenbench-cells-Linux-quick-m-head-"}
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "bench-facts.json").write_text(json.dumps(facts))
    for name, state in (("quality", quality), ("speed", speed)):
        if isinstance(state, tuple):
            (tmp_path / f"{name}.skipped").write_text(state[1] + "\n")
        elif state is not None:
            (tmp_path / f"{name}.status").write_text(state + "\n")
    (tmp_path / "compare-quality.txt").write_text("OK\n")
    if speed_json is not None:
        (tmp_path / "speed.json").write_text(json.dumps(speed_json))
    if speed_err:
        (tmp_path / "speed.err").write_text(speed_err + "\n")
    benchmarks = [{"extra_info": {"lenbench_cell": {"reused": r}}} for r in reused]
    (tmp_path / "head-cells.json").write_text(json.dumps({"benchmarks": benchmarks}))
    for side in ("base", "head"):
        cells = tmp_path / "runs" / side / "cells"
        cells.mkdir(parents=True)
        for i, mode in enumerate(numerics):
            (cells / f"{i}.json").write_text(json.dumps({"fingerprint": {"numerics": mode}}))
    return tmp_path


def test_a_pass_names_each_gate_what_it_ran_against_and_the_cells(tmp_path):
    reused = (True, True, True, False)
    kernels = ["k1", "k2", "k3"]
    gate = GateResult([CaseResult(k, UNCHANGED) for k in kernels] + [CaseResult("k4", SKIPPED)], 0.1, 21, "b", "h")
    text, passed, notes = summary.render(artifact(tmp_path, quality="0", speed="0", reused=reused,
                                                  speed_json=gate.to_json()))
    assert passed and not notes
    assert "**Verdict: pass**" in text
    quality = next(line for line in text.splitlines() if line.startswith("- **Quality**"))
    assert "pass" in quality and "exact" in quality and "Some CPU" in quality and "pinned:x" in quality
    assert "`main`" in quality and "a" * 10 in quality and "b" * 10 in quality
    speed = next(line for line in text.splitlines() if line.startswith("- **Speed**"))
    assert "A/B interleaved" in speed and f"{len(kernels)} kernel(s)" in speed and "10 %" in speed
    cells = next(line for line in text.splitlines() if line.startswith("- **Cells"))
    assert f"{sum(reused)} reused, {len(reused) - sum(reused)} trained (of {len(reused)})" in cells
    assert "<details>" in text and "OK" in text


def test_a_skip_says_why(tmp_path):
    why = "the base branch has no lenbench/benchmark/cases.py, so it cannot be A/B-timed"
    text, passed, _ = summary.render(artifact(tmp_path, quality="0", speed=("skipped", why)))
    assert passed and f"- **Speed**: skipped: {why}." in text


def test_a_regression_fails_with_its_reason_unless_accepted(tmp_path):
    directory = artifact(tmp_path, quality="1", speed="0")
    text, passed, notes = summary.render(directory)
    assert not passed and "**Verdict: FAIL**" in text and "quality: a metric or cell regressed" in text
    assert notes == [("error", "quality: a metric or cell regressed")]
    text, passed, notes = summary.render(directory, accepted=True, label="accept-regression")
    assert passed and "failures accepted" in text and notes[0][0] == "notice"


def test_cannot_compare_is_an_error_with_the_commands_line(tmp_path):
    line = "lenbench: speed-gate: the base checkout has no kernels to time"
    text, passed, _ = summary.render(artifact(tmp_path, quality="0", speed="2", speed_err=line))
    assert not passed and f"could not compare (exit 2: {line})" in text


def test_a_failed_bench_job_is_never_accepted(tmp_path):
    text, passed, notes = summary.render(artifact(tmp_path, quality="0", speed="0"), bench_result="failure",
                                         accepted=True)
    assert not passed and "could not be measured" in text and notes[0][0] == "error"


def test_differing_numerics_are_said(tmp_path):
    text, _, _ = summary.render(artifact(tmp_path, quality="0", numerics=("pinned:x", "native:y")))
    assert "numerics differ" in text


def test_the_cli_writes_atomically_and_exits_with_the_verdict(tmp_path):
    directory = artifact(tmp_path / "a", quality="1")
    out = tmp_path / "comment.md"
    assert summary.main(["render", str(directory), "--out", str(out)]) == 1
    assert "FAIL" in out.read_text() and not list(tmp_path.glob(".comment.md.*"))
    assert summary.main(["render", str(directory), "--accepted", "true", "--out", str(out)]) == 0
    assert summary.main(["render", str(tmp_path / "missing")]) == 2


def test_facts_record_the_environment(tmp_path, monkeypatch):
    for key, value in {"BASE_REF": "main", "BASE_SHA": "c" * 40, "SUITE": "smoke", "HEAD_CACHE_HIT": "true"}.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "facts.json"
    assert summary.main(["facts", "--out", str(out)]) == 0
    facts = json.loads(out.read_text())
    assert facts["base_sha"] == "c" * 40 and facts["suite"] == "smoke" and facts["head_cache_hit"] is True
    assert facts["cpu_model"] and facts["python"]


# --- run_locally ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def scope(steps=None, env=None, failed=False):
    runner = local.Runner({"jobs": {}}, scratch=Path("/nonexistent"), cache_dir=Path("/nonexistent"), base="main",
                          head_sha="f" * 40, env_overrides={}, reuse_venv=None, labels=[])
    return runner.scope(env or {}, steps or {}, {"failed": failed}, Path("/nonexistent"))


def test_expressions_of_the_workflow_evaluate(workflow):
    bench = {s.get("id"): s for s in workflow["jobs"]["bench"]["steps"] if s.get("id")}
    save_head = next(s for s in workflow["jobs"]["bench"]["steps"] if s.get("name", "").startswith("Save this"))
    hit = {"head_run": {"outcome": "success"}, "head_cache": {"outputs": {"cache-hit": "true"}}}
    miss = {"head_run": {"outcome": "success"}, "head_cache": {"outputs": {"cache-hit": "false"}}}
    assert local.evaluate(save_head["if"], scope(hit)) is False
    assert local.evaluate(save_head["if"], scope(miss)) is True
    assert local.evaluate("!cancelled()", scope()) is True
    key = bench["head_cache"]["with"]["key"]
    steps = {"keys": {"outputs": {"prefix": "p-", "tree": "t"}}}
    assert local.evaluate(key, scope(steps)) == "p-head-t"
    assert local.evaluate("${{ github.base_ref }}/${{ env.SUITE }}", scope(env={"SUITE": "smoke"})) == "main/smoke"
    assert local.evaluate("steps.base.outputs.lenbench == 'true'", scope({"base": {"outputs": {}}})) is False
    assert local.evaluate("success() && steps.x.outcome == 'success'", scope(failed=True)) is False


def test_output_files_are_parsed_like_the_runners(tmp_path):
    path = tmp_path / "out"
    path.write_text("a=1\nb=x=y\nmulti<<EOF\nline 1\nline 2\nEOF\n")
    assert local.parse_outputs(path) == {"a": "1", "b": "x=y", "multi": "line 1\nline 2"}


def test_the_dry_run_lists_every_step_in_order(workflow, capsys):
    assert local.main(["--dry-run"]) == 0
    listed = [line.split("] ", 1)[1].split("  (if:")[0] for line in capsys.readouterr().out.splitlines()
              if line.startswith("[")]
    expected = [s.get("name") or s["uses"] for job in ("bench", "gate") for s in workflow["jobs"][job]["steps"]]
    assert listed == expected


def test_every_uses_step_has_an_emulation_and_the_install_steps_exist(workflow):
    names = [s.get("name", "") for job in workflow["jobs"].values() for s in job["steps"]]
    assert all(any(n.startswith(prefix) for n in names) for prefix in local.INSTALL_STEPS)
    emulated = {"actions/checkout", "actions/setup-python", "actions/cache/restore", "actions/cache/save",
                "actions/upload-artifact", "actions/download-artifact", "actions/github-script"}
    used = {s["uses"].split("@")[0] for job in workflow["jobs"].values() for s in job["steps"] if "uses" in s}
    assert used <= emulated
    source = (ROOT / ".github" / "run_locally.py").read_text()
    assert all(f'"{action}"' in source for action in used)


def test_the_quality_line_names_the_comparison_lenbench_compare_made(tmp_path):
    directory = artifact(tmp_path, quality="0", speed=("skipped", "no cases"))
    (directory / "compare-quality.txt").write_text(
        "OK: no regression.\nQuality was compared exactly, value by value (pinned:x86-avx2@amd).\n")
    text, passed, _ = summary.render(directory)
    quality = next(line for line in text.splitlines() if line.startswith("- **Quality**"))
    assert passed and "exactly, value by value (pinned:x86-avx2@amd)" in quality
