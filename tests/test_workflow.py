"""The pull-request workflow (.github/workflows/bench.yml), checked without GitHub Actions.

GitHub Actions cannot run here: these tests read the workflow with yaml.safe_load and check what
can go wrong by inspection: reporting steps that a failure skips, a comment without permission,
kernel timing settings that differ from the published baseline's, `lenbench compare` flags the
command line does not know, shell syntax, and the accept label spelled one way everywhere.
"""

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lenbench.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "bench.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def steps(workflow) -> dict[str, dict]:
    return {s.get("name", s.get("uses", "")): s for s in workflow["jobs"]["bench"]["steps"]}


def test_runs_on_pull_requests_with_permission_to_comment(workflow):
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True
    assert {"opened", "synchronize", "labeled"} <= set(on["pull_request"]["types"])
    assert workflow["permissions"]["pull-requests"] == "write"


def test_reporting_steps_run_after_a_failure(workflow):
    named = steps(workflow)
    reporting = [n for n in named if n.startswith(("Report", "Compare", "Post", "Upload", "Gate", "Save"))]
    assert len(reporting) == 7, reporting
    for name in reporting:
        assert "always()" in named[name].get("if", ""), f"step {name!r} is skipped after a failure"


def test_kernel_settings_equal_the_published_baselines(workflow):
    """results/bench.json was produced with the quick suite's `kernels:` section and no override
    (docs/regression.md); the workflow's run must time the same kernels, so it sets no override either."""
    from lenbench.kernels.plans import KERNEL_ENV

    env = workflow["env"]
    overrides = sorted(set(KERNEL_ENV) & set(env))
    assert not overrides, f"bench.yml overrides {overrides}: the published baseline used quick.yaml's kernels: section"
    assert "--suite quick" in WORKFLOW.read_text()


def test_accept_label_is_spelled_one_way(workflow):
    label = workflow["env"]["ACCEPT_LABEL"]
    text = WORKFLOW.read_text()
    assert f"contains(github.event.pull_request.labels.*.name, '{label}')" in workflow["env"]["ACCEPTED"]
    assert f"github.event.label.name == '{label}'" in workflow["jobs"]["bench"]["if"]
    assert len(re.findall(r"accept-\w+", text)) == text.count(label)


def test_base_results_are_cached_by_fingerprint_and_base_sha(workflow):
    named = steps(workflow)
    restore = next(s for n, s in named.items() if n.startswith("Restore"))
    save = next(s for n, s in named.items() if n.startswith("Save"))
    assert restore["uses"].startswith("actions/cache/restore@") and save["uses"].startswith("actions/cache/save@")
    key = restore["with"]["key"]
    assert "steps.base.outputs.fingerprint" in key and "steps.base.outputs.sha" in key and save["with"]["key"] == key
    assert key.startswith(restore["with"]["restore-keys"].strip())
    assert restore["with"]["path"] == save["with"]["path"] == "runs/base"


def run_scripts(workflow) -> dict[str, str]:
    return {n: s["run"] for n, s in steps(workflow).items() if "run" in s}


def test_compare_commands_use_flags_the_command_line_knows(workflow):
    commands = [line for script in run_scripts(workflow).values() for line in script.replace("\\\n", " ").splitlines()
                if line.strip().startswith("lenbench compare")]
    assert len(commands) == 2
    for line in commands:
        args = shlex.split(line.split(">")[0])[1:]
        args = [re.sub(r"\$\w+", "0.25", a) for a in args]
        parsed = build_parser().parse_args(args)  # SystemExit on an unknown flag
        assert parsed.command == "compare" and not parsed.allow_missing and not parsed.allow_no_overlap
    assert "--force-speed" in commands[1]  # the published baseline comes from another machine


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_shell_steps_parse(workflow, tmp_path):
    for name, script in run_scripts(workflow).items():
        path = tmp_path / "step.sh"
        path.write_text(re.sub(r"\$\{\{.*?\}\}", "X", script))
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, f"step {name!r}: {proc.stderr}"


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_readme_cpu_install_is_the_workflows(page):
    """The CPU-only install line of the README and of docs/getting-started.md uses the torch version
    and CPU wheel index the workflow installs, so following them off this machine gives the CPU
    wheel, not the CUDA build."""
    env = yaml.safe_load(WORKFLOW.read_text())["env"]
    text = (ROOT / page).read_text()
    assert env["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    assert f"pip install torch=={env['TORCH_VERSION']} --index-url {env['TORCH_INDEX']}" in text
