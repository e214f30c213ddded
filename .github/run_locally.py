"""Run the pull-request workflow (.github/workflows/bench.yml) on this machine, job `bench` then job `gate`.

    python .github/run_locally.py --base main [--head HEAD] [--scratch DIR] [--cache-dir DIR]
                                  [--reuse-venv VENV] [--env SUITE=smoke] [--label accept-regression]
                                  [--dry-run]

GitHub Actions (and `act`) cannot run here, so this reads the workflow with yaml.safe_load and
executes each job's `run:` steps in order, as a runner would: bash -eo pipefail in the workspace,
the workflow's, job's and step's env, GITHUB_OUTPUT / GITHUB_ENV / GITHUB_STEP_SUMMARY files, `if:`
conditions and `${{ }}` expressions (the contexts github, env, steps, needs, runner and the
functions always(), success(), failure(), cancelled(), hashFiles()), `continue-on-error` and the
step outcomes. The `uses:` steps are emulated:

- actions/checkout: the `bench` workspace is a clone of this repository at `--head` (its `origin`
  is this repository, so the workflow's own `git fetch origin <base branch>` and worktree work);
  the gate's checkout copies the sparse paths it asks for from that clone;
- actions/setup-python: a new virtual environment of this interpreter, first on PATH;
- actions/cache/restore and /save: a directory per key under `--cache-dir`, restore-keys matched
  by prefix, newest first; saving an existing key is a warning, as on GitHub;
- actions/upload-artifact / download-artifact: a directory per artifact name under the scratch dir;
- actions/github-script: not run (no JavaScript runtime is assumed); the comment it would post
  (comment.md) is printed.

`gh` is a stand-in that answers the pull request's labels (`--label`) and nothing else.
`--reuse-venv VENV` skips the install steps (no package index is needed): each side gets a small
virtual environment whose path lists its own checkout first, then VENV's site-packages (torch and
the dependencies), and `lenbench` / `pytest` scripts. `--env KEY=VALUE` overrides the workflow's
env (e.g. SUITE=smoke). Each step's name and wall time are printed, then the total; the exit
status is the gate job's (0 pass, 1 fail) or 2 on a usage error. The scratch directory is new (or
empty) and only ever written by this; it is kept for inspection.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "bench.yml"
#: Install steps `--reuse-venv` replaces (name prefix → which side's environment it builds).
INSTALL_STEPS = {"Install this pull request": "head", "Install the base branch": "base"}
PR_NUMBER = 0
SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]


class WorkflowError(Exception):
    """Something in the workflow this runner cannot do: one line."""


# --- expressions ----------------------------------------------------------------------------------


class Context(SimpleNamespace):
    """A context object: a missing property is '' (GitHub's null compares like an empty string here)."""

    def __getattr__(self, name):
        return ""


def to_context(value):
    if isinstance(value, dict):
        return Context(**{k: to_context(v) for k, v in value.items()})
    return value


def _lookup(scope: dict, path: str):
    parts = path.split(".")
    value = scope.get(parts[0], "")
    for part in parts[1:]:
        if isinstance(value, dict):
            value = value.get(part, "")
        else:
            value = getattr(value, part, "") if value != "" else ""
    return value


def evaluate(expression: str, scope: dict):
    """A GitHub Actions expression evaluated for the subset this workflow uses: context paths
    (hyphens allowed: `steps.x.outputs.cache-hit`), string literals, ==, !=, !, &&, || (returning an
    operand, as Actions does), parentheses and the functions in `scope`. A `${{ }}` template is
    evaluated piece by piece into a string."""
    if "${{" in expression:
        return re.sub(r"\$\{\{(.*?)\}\}", lambda m: _string(evaluate(m.group(1), scope)), expression, flags=re.S)
    literals: list[str] = []

    def keep(match):
        literals.append(match.group(1))
        return f" __lit{len(literals) - 1}__ "

    code = re.sub(r"'([^']*)'", keep, expression.strip())
    paths: list[str] = []

    def path(match):
        if match.group(0).startswith("__lit"):
            return match.group(0)
        paths.append(match.group(0))
        return f" __path{len(paths) - 1}__ "

    code = re.sub(r"\b(?:github|env|steps|needs|runner|inputs|vars|matrix)(?:\.[A-Za-z_][\w-]*)+", path, code)
    code = code.replace("!=", " __ne__ ").replace("==", " __eq__ ").replace("&&", " and ").replace("||", " or ")
    code = re.sub(r"!", " not ", code).replace(" __ne__ ", " != ").replace(" __eq__ ", " == ")
    names = {**{f"__lit{i}__": v for i, v in enumerate(literals)},
             **{f"__path{i}__": _lookup(scope, p) for i, p in enumerate(paths)},
             **{k: v for k, v in scope.items() if callable(v)}}
    try:
        return eval(code, {"__builtins__": {}}, names)  # noqa: S307 - the workflow's own expressions
    except Exception as err:
        raise WorkflowError(f"cannot evaluate {expression!r}: {err}") from None


def template(value, scope: dict) -> str:
    """A `with:` / `env:` value: its `${{ }}` expressions substituted; any other text as it is."""
    text = _string(value)
    return _string(evaluate(text, scope)) if "${{" in text else text


def _string(value) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "" if value is None else str(value)


# --- the emulated runner ----------------------------------------------------------------------------


def parse_outputs(path: Path) -> dict[str, str]:
    """KEY=VALUE lines and KEY<<DELIM blocks of a GITHUB_OUTPUT / GITHUB_ENV file."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delim = line.split("<<", 1)
            block = []
            i += 1
            while i < len(lines) and lines[i] != delim:
                block.append(lines[i])
                i += 1
            out[key] = "\n".join(block)
        elif "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
        i += 1
    return out


class Runner:
    """Runs the jobs of one workflow in a scratch directory (see the module docstring)."""

    def __init__(self, workflow: dict, *, scratch: Path, cache_dir: Path, base: str, head_sha: str,
                 env_overrides: dict[str, str], reuse_venv: Path | None, labels: list[str], dry_run: bool = False):
        self.workflow = workflow
        self.scratch = scratch
        self.cache_dir = cache_dir
        self.base = base
        self.head_sha = head_sha
        self.overrides = env_overrides
        self.reuse_venv = reuse_venv
        self.labels = labels
        self.dry_run = dry_run
        self.head_ws = scratch / "work" / "head"
        self.artifacts = scratch / "artifacts"
        self.timings: list[tuple[str, str, float, str]] = []
        self.bench_result = ""

    # context ----------------------------------------------------------------------------------
    def github(self) -> dict:
        return {"base_ref": self.base, "run_id": "1", "token": "local-token", "repository": "local/lenbench",
                "event": {"action": "synchronize", "label": {"name": ""},
                          "pull_request": {"number": PR_NUMBER, "head": {"sha": self.head_sha}}}}

    def scope(self, env: dict, steps: dict, state: dict, workspace: Path) -> dict:
        def hash_files(*patterns):
            files = sorted({p for pattern in patterns for p in workspace.glob(pattern) if p.is_file()})
            if not files:
                return ""
            digest = hashlib.sha256()
            for f in files:
                digest.update(hashlib.sha256(f.read_bytes()).digest())
            return digest.hexdigest()

        return {"github": to_context(self.github()), "env": to_context(env), "runner": to_context({"os": "Linux"}),
                "steps": to_context(steps), "needs": to_context({"bench": {"result": self.bench_result}}),
                "always": lambda: True, "cancelled": lambda: False, "success": lambda: not state["failed"],
                "failure": lambda: state["failed"], "hashFiles": hash_files}

    # jobs ---------------------------------------------------------------------------------------
    def run_job(self, name: str, workspace: Path) -> str:
        job = self.workflow["jobs"][name]
        workspace.mkdir(parents=True, exist_ok=True)
        env = {k: str(v) for k, v in (self.workflow.get("env") or {}).items()}
        env.update(self.overrides)
        steps: dict[str, dict] = {}
        state = {"failed": False}
        scope = self.scope(env, steps, state, workspace)
        env = {k: template(v, scope) for k, v in env.items()}
        for k, v in (job.get("env") or {}).items():
            env[k] = template(v, self.scope(env, steps, state, workspace))
        env.update(self.overrides)
        summary = self.scratch / f"{name}-summary.md"
        path_prefix: list[str] = []
        print(f"=== job {name} ===", flush=True)
        for index, step in enumerate(job["steps"]):
            title = step.get("name") or step.get("uses", f"step {index}")
            scope = self.scope(env, steps, state, workspace)
            condition = step.get("if", "success()")
            condition = condition if isinstance(condition, str) else _string(condition)
            condition = re.sub(r"^\$\{\{(.*)\}\}$", r"\1", condition.strip(), flags=re.S)
            if not re.search(r"\b(always|cancelled|failure|success)\(\)", condition):
                condition = f"success() && ({condition})"
            if self.dry_run:
                print(f"[{name}] {title}" + (f"  (if: {step['if']})" if "if" in step else ""))
                continue
            if not evaluate(condition, scope):
                self._record(name, title, 0.0, "skipped", step, steps, {})
                continue
            step_env = dict(env)
            for k, v in (step.get("env") or {}).items():
                step_env[k] = template(v, scope)
            started = time.monotonic()
            outputs: dict[str, str] = {}
            try:
                if "uses" in step:
                    with_ = {k: template(v, scope) for k, v in (step.get("with") or {}).items()}
                    ok, outputs = self.uses(step["uses"], with_, workspace, path_prefix, summary)
                elif self.reuse_venv is not None and self._install_side(title):
                    ok = self.overlay_venv(self._install_side(title), workspace)
                    print(f"  (--reuse-venv: {title!r} replaced by an environment over {self.reuse_venv})")
                else:
                    ok, outputs, env_added = self.shell(step["run"], step_env, workspace, path_prefix, summary,
                                                        scope)
                    env.update(env_added)
            except WorkflowError as err:
                print(f"  runner: {err}")
                ok = False
            outcome = "success" if ok else "failure"
            conclusion = "success" if ok or step.get("continue-on-error") else "failure"
            if conclusion == "failure":
                state["failed"] = True
            self._record(name, title, time.monotonic() - started, outcome, step, steps, outputs, conclusion)
        result = "failure" if state["failed"] else "success"
        print(f"=== job {name}: {result} ===", flush=True)
        return result

    def _install_side(self, title: str) -> str:
        return next((side for prefix, side in INSTALL_STEPS.items() if title.startswith(prefix)), "")

    def _record(self, job, title, seconds, outcome, step, steps, outputs, conclusion=None):
        conclusion = conclusion or outcome
        if "id" in step:
            steps[step["id"]] = {"outputs": outputs, "outcome": outcome, "conclusion": conclusion}
        self.timings.append((job, title, seconds, outcome))
        print(f"--- [{job}] {title}: {outcome} in {seconds:.1f} s", flush=True)

    def shell(self, script: str, env: dict, workspace: Path, path_prefix: list[str], summary: Path, scope: dict):
        script = template(script, scope)
        files = {name: self.scratch / "tmp" / f"{name.lower()}-{time.monotonic_ns()}" for name in
                 ("GITHUB_OUTPUT", "GITHUB_ENV")}
        for f in files.values():
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("")
        full = {**os.environ, **env, **{k: str(v) for k, v in files.items()},
                "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(workspace), "GITHUB_RUN_ID": "1",
                "GITHUB_REPOSITORY": "local/lenbench", "GITHUB_BASE_REF": self.base, "RUNNER_OS": "Linux",
                "CI": "true", "LOCAL_LABELS": "\n".join(self.labels),
                "PATH": os.pathsep.join([*path_prefix, str(self.scratch / "bin"), os.environ.get("PATH", "")])}
        full.pop("VIRTUAL_ENV", None)
        proc = subprocess.run([*SHELL, "-c", script], cwd=workspace, env=full)
        return proc.returncode == 0, parse_outputs(files["GITHUB_OUTPUT"]), parse_outputs(files["GITHUB_ENV"])

    # uses: ---------------------------------------------------------------------------------------
    def uses(self, uses: str, with_: dict, workspace: Path, path_prefix: list[str], summary: Path):
        action = uses.split("@")[0]
        if action == "actions/checkout":
            if workspace != self.head_ws:  # the gate's sparse checkout
                for rel in (with_.get("sparse-checkout") or ".").split():
                    src = self.head_ws / rel
                    if src.is_dir():
                        shutil.copytree(src, workspace / rel, dirs_exist_ok=True)
                    elif src.is_file():
                        shutil.copy2(src, workspace / rel)
            return True, {}
        if action == "actions/setup-python":
            venv = self.scratch / "venv-head"
            if not venv.exists():
                if self.reuse_venv is not None:
                    self.make_overlay(venv, self.head_ws)
                else:
                    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            path_prefix.insert(0, str(venv / "bin"))
            return True, {"python-version": sys.version.split()[0], "python-path": str(venv / "bin" / "python")}
        if action == "actions/cache/restore":
            return self.cache_restore(with_, workspace)
        if action == "actions/cache/save":
            return self.cache_save(with_, workspace)
        if action == "actions/upload-artifact":
            return self.upload(with_, workspace)
        if action == "actions/download-artifact":
            src = self.artifacts / with_["name"]
            if not src.is_dir():
                print(f"  no artifact {with_['name']!r}")
                return False, {}
            shutil.copytree(src, workspace / with_.get("path", "."), dirs_exist_ok=True)
            return True, {"download-path": str(workspace / with_.get("path", "."))}
        if action == "actions/github-script":
            comment = workspace / "comment.md"
            print("  (github-script not run; the comment it would post:)")
            print(comment.read_text() if comment.is_file() else "  (no comment.md)")
            return True, {}
        raise WorkflowError(f"no emulation of {uses}")

    def _entries(self) -> list[tuple[float, str, Path]]:
        found = []
        for meta in self.cache_dir.glob("*/key.json"):
            data = json.loads(meta.read_text())
            found.append((data["created"], data["key"], meta.parent / "data"))
        return sorted(found, reverse=True)

    def cache_restore(self, with_: dict, workspace: Path):
        key, target = with_["key"], workspace / with_["path"]
        entries = self._entries()
        match = next((e for e in entries if e[1] == key), None)
        hit = match is not None
        if not hit:
            for prefix in [line.strip() for line in with_.get("restore-keys", "").splitlines() if line.strip()]:
                match = next((e for e in entries if e[1].startswith(prefix)), None)
                if match:
                    break
        if match:
            shutil.copytree(match[2], target, dirs_exist_ok=True)
            print(f"  cache restored from key {match[1]}" + (" (exact)" if hit else ""))
        else:
            print(f"  cache not found for key {key}")
        return True, {"cache-hit": "true" if hit else "false", "cache-primary-key": key,
                      "cache-matched-key": match[1] if match else ""}

    def cache_save(self, with_: dict, workspace: Path):
        key, source = with_["key"], workspace / with_["path"]
        if any(e[1] == key for e in self._entries()):
            print(f"  warning: a cache with key {key} exists already; not saved")
            return True, {}
        if not source.exists():
            print(f"  warning: {with_['path']} does not exist; nothing saved")
            return True, {}
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=self.cache_dir, prefix=".saving-"))
        shutil.copytree(source, staging / "data")
        (staging / "key.json").write_text(json.dumps({"key": key, "created": time.time()}))
        staging.rename(self.cache_dir / hashlib.sha256(key.encode()).hexdigest()[:24])
        print(f"  cache saved under key {key}")
        return True, {}

    def upload(self, with_: dict, workspace: Path):
        target = self.artifacts / with_["name"]
        target.mkdir(parents=True, exist_ok=True)
        for rel in with_["path"].split():
            src = workspace / rel
            if src.is_dir():
                shutil.copytree(src, target / rel, dirs_exist_ok=True)
            elif src.is_file():
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / rel)
            else:
                print(f"  warning: no file {rel}")
        return True, {"artifact-id": with_["name"]}

    # environments -----------------------------------------------------------------------------------
    def make_overlay(self, venv: Path, checkout: Path) -> None:
        """A virtual environment whose path is `checkout`, then the reused environment's site-packages."""
        python = self.reuse_venv / "bin" / "python"
        if not python.exists():
            raise WorkflowError(f"--reuse-venv {self.reuse_venv} has no bin/python")
        subprocess.run([str(python), "-m", "venv", "--without-pip", str(venv)], check=True)
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        mine = subprocess.run([str(venv / "bin" / "python"), "-c",
                               "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        Path(mine, "00-lenbench-overlay.pth").write_text(f"{checkout.resolve()}\n{purelib}\n")
        scripts = {"lenbench": "from lenbench.cli import main", "pytest": "from pytest import console_main as main"}
        for name, line in scripts.items():
            script = venv / "bin" / name
            # the guard: a spawned worker re-imports the main script, which must not run the command again
            script.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\n{line}\n\n"
                              "if __name__ == '__main__':\n    sys.exit(main())\n")
            script.chmod(0o755)

    def overlay_venv(self, side: str, workspace: Path) -> bool:
        if side == "head":
            return True  # setup-python made it
        self.make_overlay(workspace.parent / "venv-base", workspace.parent / "base-src")
        return True

    # the whole workflow -------------------------------------------------------------------------------
    def run(self) -> int:
        started = time.monotonic()
        self.bench_result = self.run_job("bench", self.head_ws)
        gate = self.run_job("gate", self.scratch / "work" / "gate")
        total = time.monotonic() - started
        if not self.dry_run:
            print("\nstep times:")
            for job, title, seconds, outcome in self.timings:
                print(f"  {seconds:8.1f} s  {outcome:8}  [{job}] {title}")
            print(f"  {total:8.1f} s  total")
        return 0 if gate == "success" else 1


def load_workflow(path: Path = WORKFLOW) -> dict:
    return yaml.safe_load(path.read_text())


def prepare(scratch: Path, head_sha: str) -> None:
    """The scratch layout: a clone of this repository at `head_sha` as the bench workspace, and a `gh` stand-in."""
    if scratch.exists() and any(scratch.iterdir()):
        raise WorkflowError(f"{scratch} is not empty: give a new or empty --scratch directory")
    (scratch / "work").mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(scratch / "work" / "head")], check=True)
    subprocess.run(["git", "-C", str(scratch / "work" / "head"), "checkout", "--quiet", "--detach", head_sha],
                   check=True)
    gh = scratch / "bin" / "gh"
    gh.parent.mkdir(parents=True, exist_ok=True)
    gh.write_text('#!/bin/sh\n# run_locally.py: answers the pull request\'s labels, nothing else\n'
                  'case "$2" in */pulls/*) printf "%s\\n" "$LOCAL_LABELS" ;; '
                  '*) echo "gh stand-in: only pulls/N is answered locally" >&2; exit 1 ;; esac\n')
    gh.chmod(0o755)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the base branch (a branch of this repository)")
    parser.add_argument("--head", default="HEAD", help="the pull request's commit (default HEAD; commit first)")
    parser.add_argument("--scratch", type=Path, default=None, help="a new or empty directory (default: a temporary one)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="the actions/cache store (default SCRATCH/cache); "
                        "reuse one across runs to see cells reused")
    parser.add_argument("--reuse-venv", type=Path, default=None, help="skip the install steps; use this venv's packages")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="override the workflow's env")
    parser.add_argument("--label", action="append", default=[], help="a label of the pull request (repeatable)")
    parser.add_argument("--workflow", type=Path, default=WORKFLOW)
    parser.add_argument("--dry-run", action="store_true", help="list each job's steps in order, run nothing")
    args = parser.parse_args(argv)
    try:
        overrides = dict(item.split("=", 1) for item in args.env)
    except ValueError:
        print("run_locally: --env takes KEY=VALUE", file=sys.stderr)
        return 2
    workflow = load_workflow(args.workflow)
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="lenbench-workflow-"))
    try:
        head_sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{args.head}^{{commit}}"],
                                  check=True, capture_output=True, text=True).stdout.strip()
        if not args.dry_run:
            prepare(scratch.resolve(), head_sha)
        runner = Runner(workflow, scratch=scratch.resolve(), cache_dir=(args.cache_dir or scratch / "cache").resolve(),
                        base=args.base, head_sha=head_sha, env_overrides=overrides,
                        reuse_venv=args.reuse_venv.resolve() if args.reuse_venv else None, labels=args.label,
                        dry_run=args.dry_run)
        if not args.dry_run:
            print(f"run_locally: scratch {scratch}, head {head_sha[:10]}, base {args.base}", flush=True)
        return runner.run()
    except (WorkflowError, subprocess.CalledProcessError) as err:
        print(f"run_locally: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
