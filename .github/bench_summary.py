"""The pull-request benchmark's facts, verdict and summary (.github/workflows/bench.yml).

    python .github/bench_summary.py facts --out bench-facts.json
    python .github/bench_summary.py render DIR [--bench-result R] [--accepted true|false] [--label L]
                                           [--annotate] [--out FILE]

`facts` (in the `bench` job) records what the comparisons ran against: the base ref and sha, this
pull request's sha, the suite, the thresholds, the runner's CPU model and Python, and how the
head's results cache was restored, from the environment the workflow sets.

`render` (in the `gate` job, on the downloaded artifact DIR) says which gate ran, against what,
and why the verdict is what it is: quality (an exact `lenbench compare` on one runner, or skipped
and why), speed (`lenbench speed-gate`, A/B interleaved, or skipped and why), the head cells
reused and trained, and the verdict with its reasons. It prints the Markdown (or writes it to
`--out`) and exits 0 (pass, or failures accepted by the label) or 1 (fail). With `--annotate` it
also prints one ``::error::`` / ``::notice::`` line per reason for the Actions log.

The artifact's contract, per gate X in (quality, speed): ``X.status`` holds the exit code of a
comparison that ran, ``X.skipped`` one line saying why it did not; ``compare-quality.txt``,
``speed.md``, ``speed.json`` and ``speed.err`` are the comparisons' own outputs, ``head-cells.json``
the pytest-benchmark JSON of the head's cells (each cell's ``extra_info.lenbench_cell.reused``).
Any exit code other than 0 fails its gate; the accept label turns those failures into notices, but
never a failed `bench` job (something could not be measured).

Standard library only: the gate job checks out .github/ and runs this without installing lenbench.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

GATES = ("quality", "speed")
MAX_DETAIL = 20000  # characters of each comparison's own output in the comment


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in its directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cpu_model() -> str:
    """The CPU model name of /proc/cpuinfo, else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def facts(env: dict[str, str]) -> dict:
    """What the comparisons ran against, from the workflow's environment `env`."""
    return {
        "suite": env.get("SUITE", ""),
        "base_ref": env.get("BASE_REF", ""),
        "base_sha": env.get("BASE_SHA", ""),
        "head_sha": env.get("HEAD_SHA", ""),
        "quality_tolerance": env.get("QUALITY_TOLERANCE", ""),
        "speed_threshold": env.get("SPEED_THRESHOLD", ""),
        "torch": env.get("TORCH_VERSION", ""),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "head_cache_hit": env.get("HEAD_CACHE_HIT", "") == "true",
        "head_cache_key": env.get("HEAD_CACHE", ""),
    }


# --- reading the artifact -------------------------------------------------------------------------


def _text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _json(path: Path):
    text = _text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def gate_state(directory: Path, name: str) -> tuple[str, str]:
    """(state, detail) of gate `name`: ("ran", exit code), ("skipped", why) or ("not run", "")."""
    status = _text(directory / f"{name}.status")
    if status is not None and status.strip():
        return "ran", status.strip()
    skipped = _text(directory / f"{name}.skipped")
    if skipped is not None:
        return "skipped", _last_line(skipped) or "no reason recorded"
    return "not run", ""


def cell_counts(directory: Path) -> dict[str, int] | None:
    """{"reused", "trained", "total"} of the head's cells from head-cells.json; None without it."""
    data = _json(directory / "head-cells.json")
    if not isinstance(data, dict):
        return None
    cells = [b.get("extra_info", {}).get("lenbench_cell") for b in data.get("benchmarks", []) if isinstance(b, dict)]
    cells = [c for c in cells if isinstance(c, dict)]
    reused = sum(1 for c in cells if c.get("reused"))
    return {"reused": reused, "trained": len(cells) - reused, "total": len(cells)}


def numerics(directory: Path, side: str) -> set[str]:
    """The CPU numeric modes recorded in the fingerprints of one side's cell files."""
    found = set()
    for path in sorted((directory / "runs" / side / "cells").glob("*.json")):
        data = _json(path)
        fingerprint = data.get("fingerprint") if isinstance(data, dict) else None
        if isinstance(fingerprint, dict) and fingerprint.get("numerics"):
            found.add(str(fingerprint["numerics"]))
    return found


def speed_kernels(speed: object) -> int | None:
    """How many kernels `lenbench speed-gate`'s JSON (`GateResult.to_json`) timed on both sides: its
    `cases` that were neither skipped nor on one side only; None when it has no `cases`."""
    if not isinstance(speed, dict) or not isinstance(speed.get("cases"), list):
        return None
    untimed = ("skipped", "only in base", "only in head")
    return sum(isinstance(c, dict) and c.get("status") not in untimed for c in speed["cases"])


def _percent(value: str | float | None) -> str:
    try:
        return f"{float(value) * 100:g} %"
    except (TypeError, ValueError):
        return "?"


def _short(sha: str) -> str:
    return f"`{sha[:10]}`" if sha else "(unknown sha)"


# --- the summary ------------------------------------------------------------------------------------


def render(directory: Path, *, bench_result: str = "success", accepted: bool = False,
           label: str = "accept-regression") -> tuple[str, bool, list[tuple[str, str]]]:
    """(Markdown, passed, annotations) for the artifact in `directory`; each annotation is (level, line)."""
    f = _json(directory / "bench-facts.json") or {}
    failures: list[str] = []
    lines = []

    state, detail = gate_state(directory, "quality")
    against = (f"base `{f.get('base_ref') or '?'}` at {_short(f.get('base_sha', ''))} vs this pull request at "
               f"{_short(f.get('head_sha', ''))}")
    modes = numerics(directory, "base") | numerics(directory, "head")
    kind = (f"same numerics ({', '.join(sorted(modes))})" if len(modes) == 1 else
            f"numerics differ ({', '.join(sorted(modes))})" if modes else "numerics not recorded")
    tolerance = f.get("quality_tolerance", "")
    how = "exact" if tolerance in ("0", "0.0", "") else f"tolerance {_percent(tolerance)}"
    said = [line for line in (_text(directory / "compare-quality.txt") or "").splitlines()
            if line.startswith("Quality was compared ")]
    if said:  # `lenbench compare` names the comparison its verdict rests on (exact, or unpaired across kinds)
        how = said[-1].removeprefix("Quality was compared ").rstrip(".")
    quality = f"{how}, {f.get('suite') or 'suite'} suite on one runner (same CPU: {f.get('cpu_model') or '?'}; {kind}), {against}"
    if state == "ran":
        if detail == "0":
            lines.append(f"- **Quality**: pass: {quality}.")
        else:
            why = "a metric or cell regressed" if detail == "1" else f"could not compare (exit {detail})"
            failures.append(f"quality: {why}")
            lines.append(f"- **Quality**: FAIL ({why}): {quality}.")
    else:
        lines.append(f"- **Quality**: skipped: {detail or 'the comparison did not run (see the bench job)'}.")

    state, detail = gate_state(directory, "speed")
    speed = _json(directory / "speed.json")
    count = speed_kernels(speed)
    threshold = speed.get("threshold") if isinstance(speed, dict) and "threshold" in speed else f.get("speed_threshold")
    what = (f"A/B interleaved on one runner, {count if count is not None else 'the'} kernel(s), slower than "
            f"{_percent(threshold)} with a 95 % interval excluding it fails")
    if state == "ran":
        if detail == "0":
            lines.append(f"- **Speed**: pass: {what}.")
        else:
            error = _last_line(_text(directory / "speed.err"))
            why = ("a kernel is slower beyond the threshold" if detail == "1" else
                   f"could not compare (exit {detail}{': ' + error if error else ''})")
            failures.append(f"speed: {why}")
            lines.append(f"- **Speed**: FAIL ({why}): {what}.")
    else:
        lines.append(f"- **Speed**: skipped: {detail or 'the comparison did not run (see the bench job)'}.")

    counts = cell_counts(directory)
    cache = ("exact hit" if f.get("head_cache_hit") else
             f"restored from `{f['head_cache_key']}`" if f.get("head_cache_key") else "no cache restored")
    if counts is None:
        lines.append(f"- **Cells of this pull request**: not recorded (no head-cells.json); cache: {cache}.")
    else:
        lines.append(f"- **Cells of this pull request**: {counts['reused']} reused, {counts['trained']} trained "
                     f"(of {counts['total']}); cache: {cache}.")

    fatal = bench_result not in ("success", "")
    if fatal:
        failures.insert(0, f"the bench job ended in {bench_result}: something could not be measured (see its log)")
    passed = not failures or (accepted and not fatal)
    if not failures:
        verdict = "**Verdict: pass**: " + ("every gate that ran passed." if any(
            gate_state(directory, g)[0] == "ran" for g in GATES) else "nothing was compared (see the skips above).")
    elif passed:
        verdict = f"**Verdict: pass** (label `{label}`: failures accepted): " + "; ".join(failures) + "."
    else:
        verdict = "**Verdict: FAIL**: " + "; ".join(failures) + "."
        if not fatal:
            verdict += f" An intended change: add the label `{label}`."

    annotations = [("notice" if passed else "error", reason) for reason in failures]
    details = []
    for title, name in (("Quality comparison", "compare-quality.txt"), ("Speed comparison", "speed.md")):
        text = _text(directory / name)
        if text:
            fence = "```" if name.endswith(".txt") else ""
            details += ["", f"<details><summary>{title}</summary>", "", fence, text[:MAX_DETAIL].rstrip(), fence,
                        "</details>"]
    body = ["## lenbench benchmark", "", verdict, "", *lines, *details, "",
            f"To accept an intended change in numbers, add the label `{label}` (see .github/workflows/bench.yml)."]
    return "\n".join(line for line in body if line is not None) + "\n", passed, annotations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_facts = sub.add_parser("facts", help="record what the comparisons ran against")
    p_facts.add_argument("--out", type=Path, required=True)
    p_render = sub.add_parser("render", help="the verdict and the summary of an artifact directory")
    p_render.add_argument("directory", type=Path)
    p_render.add_argument("--bench-result", default="success", help="the bench job's result (needs.bench.result)")
    p_render.add_argument("--accepted", choices=("true", "false"), default="false")
    p_render.add_argument("--label", default="accept-regression")
    p_render.add_argument("--annotate", action="store_true", help="print ::error:: / ::notice:: lines")
    p_render.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "facts":
        write_atomic(args.out, json.dumps(facts(dict(os.environ)), indent=2) + "\n")
        return 0
    if not args.directory.is_dir():
        print(f"bench_summary: {args.directory} is not a directory (the downloaded artifact)", file=sys.stderr)
        return 2
    text, passed, annotations = render(args.directory, bench_result=args.bench_result,
                                       accepted=args.accepted == "true", label=args.label)
    if args.annotate:
        for level, line in annotations:
            print(f"::{level}::{line}")
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_atomic(args.out, text)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
