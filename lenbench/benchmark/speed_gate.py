"""The A/B speed gate: two checkouts' kernels timed interleaved on one machine, judged by an interval.

``lenbench speed-gate BASE_TREE HEAD_TREE`` does what `asv continuous` does for a pull request, with
the noise of a shared machine in the verdict:

1. One worker process per checkout (`lenbench.benchmark.ab_worker`, each with its checkout's
   interpreter), each importing its own lenbench; both list their kernel cases
   (`lenbench.benchmark.cases`, the cases of `bench/test_kernels.py` for the suite's `kernels:`).
2. Case by case, both workers build and warm the case (compilation is never timed), then
   ``rounds`` rounds alternate the sides, A then B, then B then A: a round of a side is the fastest
   of ``calls`` calls, sized so a round lasts about `ROUND_SECONDS`. Each call is timed by the CPU
   time of the worker's one thread (`ab_worker.THREADS`), so time the machine gives other jobs is
   not counted, and what load remains (caches, memory bandwidth) hits the two sides of a round
   alike: the per-round ratio head ÷ base carries little of it. A slowdown that waits without
   computing (sleeping, I/O) is not seen; the CPU kernels timed here do not wait.
3. Per case: the median of the per-round log ratios and its distribution-free 95 % interval (the
   order statistics of the sign test: no assumption on the shape of the noise, robust to a round
   hit by a spike). A case is SLOWER when the whole interval of head ÷ base lies above
   1 + threshold, faster when it lies below 1 / (1 + threshold); otherwise unchanged. A case that
   runs in base and fails in head fails the gate too.
4. Rounds within one pair of processes share that pair's state (heap layout, page sizes): a SLOWER
   case is timed again in `CONFIRM` fresh pairs of workers and stays SLOWER only if every pair agrees.

The threshold is the smallest slowdown the gate is meant to catch; the interval is what keeps the
rate of false alarms down on a noisy machine. Both rates were measured by repeated trials
(`bench/speed_gate_trials.py`, docs/regression.md).

Exit codes of the command: 0 pass, 1 a kernel slower (or failing in head), 2 cannot compare (one line).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

#: A side's round lasts about this long: the fastest of enough calls (at most `MAX_CALLS`).
ROUND_SECONDS = 0.05
MAX_CALLS = 50
#: Confidence of each case's interval.
LEVEL = 0.95
#: Fresh (base, head) worker pairs that must confirm a SLOWER case. Some kernels run at one of two
#: speeds per process (measured: `learned-eager-T1024-fp32` at 0.78–0.83 or 1.24–1.27 of itself in
#: another process of the same code, in 8 of 20 unchanged trials, tight intervals each time): one
#: pair cannot tell that from the checkouts. Three pairs that must all agree make such a case a false
#: alarm about 0.25³ ≈ 1.6 % of the time if its two speeds are equally likely; a real slowdown is
#: SLOWER in every pair.
CONFIRM = 2
SLOWER, FASTER, UNCHANGED, SKIPPED, FAILED, ONLY_BASE, ONLY_HEAD = (
    "SLOWER", "faster", "unchanged", "skipped", "FAILED", "only in base", "only in head")

WORKER = Path(__file__).with_name("ab_worker.py")


class SpeedGateError(ValueError):
    """The two sides cannot be compared (one line)."""


def sign_interval(values: list[float], level: float = LEVEL) -> tuple[float, float]:
    """The distribution-free interval of the median of `values`: order statistics (j, n + 1 − j) with
    j the largest index whose binomial tail P(Bin(n, ½) ≤ j − 1) is at most (1 − level) / 2.
    Its coverage is at least `level` for any continuous distribution; fewer than 6 values give
    (−inf, inf) at 95 % (no interval that short reaches that level)."""
    xs = sorted(values)
    n = len(xs)
    alpha, tail, j = (1 - level) / 2, 0.0, 0
    for k in range(n):
        tail += math.comb(n, k) / 2**n
        if tail > alpha:
            break
        j = k + 1
    if j == 0:
        return -math.inf, math.inf
    return xs[j - 1], xs[n - j]


def case_id_of(case: tuple) -> str:
    """`rope-fused-T1024-fp32` (`lenbench.benchmark.cases.case_id`, without importing torch here)."""
    name, impl, T, dt = case
    return f"{name}-{impl}-T{T}-{dt}"


def median(values: list[float]) -> float:
    xs = sorted(values)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


@dataclasses.dataclass
class CaseResult:
    """One kernel case: the sides' median round seconds, head ÷ base and its interval, the status."""

    case: str
    status: str
    base_s: float = math.nan
    head_s: float = math.nan
    ratio: float = math.nan
    low: float = math.nan
    high: float = math.nan
    rounds: int = 0
    calls: int = 0
    note: str = ""


def judge(ratios: list[float], threshold: float, level: float = LEVEL) -> tuple[str, float, float, float]:
    """(status, median ratio, interval low, high) of per-round ratios head ÷ base (module docstring)."""
    logs = [math.log(r) for r in ratios]
    lo, hi = sign_interval(logs, level)
    mid = median(logs)
    status = UNCHANGED
    if lo > math.log1p(threshold):
        status = SLOWER
    elif hi < -math.log1p(threshold):
        status = FASTER
    return status, math.exp(mid), math.exp(lo), math.exp(hi)


class Worker:
    """A worker process (`ab_worker.py`) for one checkout; `ask` sends a request and reads its answer."""

    def __init__(self, name: str, tree: Path, python: str, suite: str, env: dict[str, str] | None = None) -> None:
        self.name, self.tree = name, tree
        self.log = tempfile.TemporaryFile(mode="w+")
        environ, env = dict(os.environ), dict(env or {})
        paths = [str(tree), *env.pop("PYTHONPATH", "").split(os.pathsep), environ.get("PYTHONPATH", "")]
        environ.update(env)
        environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        try:
            self.proc = subprocess.Popen([python, str(WORKER), str(tree), suite], cwd=tree, env=environ, text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        except OSError as err:
            raise SpeedGateError(f"{name}: cannot start {python} ({err.strerror}); pass --{name}-python "
                                 "with the interpreter of that checkout's environment") from None
        hello = self._read()
        if "fatal" in hello:
            raise SpeedGateError(f"{name}: {hello['fatal']}")
        where = Path(hello["lenbench"]).resolve()
        if not where.is_relative_to(tree.resolve()):
            raise SpeedGateError(f"{name}: {python} imports lenbench from {where.parents[2]}, not from {tree}; "
                                 f"use the interpreter of {tree}'s environment (--{name}-python)")
        self.cases = [tuple(c) for c in hello["cases"]]
        self.torch = hello["torch"]

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            tail = [x for x in self.log.read().splitlines() if x.strip()][-1:] or ["(no output)"]
            raise SpeedGateError(f"{self.name}: the worker for {self.tree} exited ({tail[0].strip()[:300]})")
        return json.loads(line)

    def ask(self, **req) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.log.close()


@dataclasses.dataclass
class GateResult:
    """The gate's outcome: one `CaseResult` per case, the settings, and the verdict."""

    cases: list[CaseResult]
    threshold: float
    rounds: int
    base: str
    head: str
    torch: tuple[str, str] = ("", "")

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.cases)

    def failures(self) -> list[str]:
        out = []
        if n := self.count(SLOWER):
            out.append(f"{n} kernel(s) slower than {self.threshold:.0%} with the whole {LEVEL:.0%} interval beyond it")
        if n := self.count(FAILED):
            out.append(f"{n} kernel(s) run in base and fail in head")
        return out

    @property
    def exit_code(self) -> int:
        return 1 if self.failures() else 0

    def method(self) -> str:
        return (f"A/B interleaved on one machine: {self.rounds} rounds per kernel alternating base and head, each "
                f"round the fastest of several calls by thread CPU time (one thread); head ÷ base by the median of the per-round ratios with its "
                f"distribution-free {LEVEL:.0%} interval; SLOWER when the interval lies above {1 + self.threshold:g}")

    def markdown(self, show_all: bool = False) -> str:
        counts = {s: self.count(s) for s in (SLOWER, FAILED, FASTER, UNCHANGED, SKIPPED, ONLY_BASE, ONLY_HEAD)}
        lines = [f"Speed gate: base {self.base} vs head {self.head}", "", self.method() + ".", "",
                 f"{len(self.cases)} kernel case(s): " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + "."]
        if self.torch[0] != self.torch[1]:
            lines.append(f"note: torch differs between the sides ({self.torch[0]} → {self.torch[1]})")
        shown = [c for c in self.cases if show_all or c.status not in (UNCHANGED, SKIPPED)]
        order = {SLOWER: 0, FAILED: 1, ONLY_BASE: 2, FASTER: 3, ONLY_HEAD: 4, UNCHANGED: 5, SKIPPED: 6}
        shown.sort(key=lambda c: (order[c.status], -abs(math.log(c.ratio)) if c.ratio > 0 else 0))
        if shown:
            lines += ["", "| status | kernel | base ms | head ms | head ÷ base | 95% interval | rounds × calls | note |",
                      "| --- | --- | ---: | ---: | ---: | --- | ---: | --- |"]
            for c in shown:
                ms = lambda s: "" if math.isnan(s) else f"{s * 1e3:.3f}"  # noqa: E731
                interval = "" if math.isnan(c.low) else f"[{c.low:.3f}, {c.high:.3f}]"
                ratio = "" if math.isnan(c.ratio) else f"{c.ratio:.3f}"
                lines.append(f"| {c.status} | {c.case} | {ms(c.base_s)} | {ms(c.head_s)} | {ratio} | {interval} | "
                             f"{c.rounds} × {c.calls} | {c.note} |")
        lines.append("")
        failures = self.failures()
        lines.append(f"FAIL: {'; '.join(failures)}." if failures else
                     f"OK: no kernel slower than {self.threshold:.0%} beyond its interval.")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"method": self.method(), "threshold": self.threshold, "rounds": self.rounds, "level": LEVEL,
                "base": self.base, "head": self.head, "torch": list(self.torch), "exit_code": self.exit_code,
                "failures": self.failures(), "cases": [dataclasses.asdict(c) for c in self.cases]}


def run_gate(base_tree: str | Path, head_tree: str | Path, *, base_python: str = sys.executable,
             head_python: str = sys.executable, suite: str = "quick", threshold: float = 0.10, rounds: int = 21,
             select: list[str] | None = None, head_env: dict[str, str] | None = None, confirm: int = CONFIRM,
             progress: Callable[[str], None] | None = None) -> GateResult:
    """Time both checkouts' kernel cases interleaved and judge each (module docstring).

    Args:
        base_tree, head_tree: checkout roots (each holding ``lenbench/``).
        base_python, head_python: the interpreters of their environments.
        suite: whose `kernels:` section lists the cases (LENBENCH_KERNEL_* variables override it, as in
            `pytest bench`).
        threshold: the relative slowdown a kernel must exceed, with its whole interval, to fail.
        rounds: interleaved rounds per case (at least 6 for a 95 % interval; 21 gives the
            order statistics 6 and 16).
        select: fnmatch patterns of case ids (`rope-fused-T1024-fp32`); None: every case.
        head_env: extra environment of the head worker (PYTHONPATH entries are appended after the tree).
        confirm: fresh process pairs a SLOWER case is timed again in; it stays SLOWER only if every one
            agrees (`CONFIRM`).
        progress: called with each case id before it is timed.

    Raises:
        SpeedGateError: a tree without lenbench, an interpreter that imports another lenbench, a worker
            that dies, too few rounds.
    """
    if rounds < 6:
        raise SpeedGateError(f"--rounds {rounds}: at least 6 rounds are needed for a {LEVEL:.0%} interval of the median")
    if threshold <= 0:
        raise SpeedGateError(f"--threshold {threshold}: must be a positive fraction, e.g. 0.10 for 10 %")
    trees = {}
    for name, tree in (("base", base_tree), ("head", head_tree)):
        tree = Path(tree)
        if not (tree / "lenbench" / "__init__.py").is_file():
            raise SpeedGateError(f"{name}: {tree} is not a lenbench checkout (no lenbench/__init__.py)")
        trees[name] = tree
    base = head = None
    try:
        base = Worker("base", trees["base"], base_python, suite)
        head = Worker("head", trees["head"], head_python, suite, env=head_env)
        results = []
        in_head = set(head.cases)
        in_base = set(base.cases)
        order = [c for c in head.cases if c in in_base]
        base_cases, head_cases, torches = base.cases, head.cases, (base.torch, head.torch)
        timed = {}
        for case in order:
            cid = case_id_of(case)
            if select and not any(fnmatch(cid, p) for p in select):
                continue
            if progress:
                progress(cid)
            timed[cid] = case
            results.append(_time_case(base, head, case, cid, threshold, rounds))
        for w in (base, head):
            w.close()
        base = head = None
        for attempt in range(1, confirm + 1):  # a SLOWER case must stay SLOWER in fresh process pairs
            flagged = [i for i, r in enumerate(results) if r.status == SLOWER]
            if not flagged:
                break
            base = Worker("base", trees["base"], base_python, suite)
            head = Worker("head", trees["head"], head_python, suite, env=head_env)
            for i in flagged:
                r = results[i]
                if progress:
                    progress(f"{r.case} (confirming, process pair {attempt + 1})")
                again = _time_case(base, head, timed[r.case], r.case, threshold, rounds)
                seen = f"process pair {attempt + 1}: {again.ratio:.3f} [{again.low:.3f}, {again.high:.3f}]"
                if again.status == SLOWER:
                    r.note = f"{r.note}; " if r.note else ""
                    r.note += f"confirmed by {seen}"
                else:
                    results[i] = dataclasses.replace(r, status=UNCHANGED, note=(
                        f"SLOWER in process pair 1 only ({r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}]), not in {seen}: "
                        "a difference between two processes, not between the checkouts"))
            for w in (base, head):
                w.close()
            base = head = None
        for case in base_cases:
            if case not in in_head:
                results.append(CaseResult(case_id_of(case), ONLY_BASE))
        for case in head_cases:
            if case not in in_base:
                results.append(CaseResult(case_id_of(case), ONLY_HEAD))
        return GateResult(results, threshold, rounds, str(base_tree), str(head_tree), torches)
    finally:
        for w in (base, head):
            if w is not None:
                w.close()


def _time_case(base: Worker, head: Worker, case: tuple, cid: str, threshold: float, rounds: int) -> CaseResult:
    """Prepare the case on both sides, then `rounds` interleaved rounds, then judge it."""
    a, b = base.ask(op="prepare", case=list(case)), head.ask(op="prepare", case=list(case))
    try:
        if "skip" in a or "skip" in b:
            return CaseResult(cid, SKIPPED, note=a.get("skip") or b.get("skip"))
        if "error" in a:
            return CaseResult(cid, SKIPPED, note=f"fails in base: {a['error']}" + (
                f"; in head: {b['error']}" if "error" in b else ""))
        if "error" in b:
            return CaseResult(cid, FAILED, note=f"head: {b['error']}")
        calls = max(1, min(MAX_CALLS, math.ceil(ROUND_SECONDS / max(a["once"], 1e-9))))
        tb, th = [], []
        for r in range(rounds):
            first, second = (base, head) if r % 2 == 0 else (head, base)
            s1 = first.ask(op="time", calls=calls)["seconds"]
            s2 = second.ask(op="time", calls=calls)["seconds"]
            (tb if first is base else th).append(s1)
            (th if first is base else tb).append(s2)
        status, ratio, lo, hi = judge([h / b_ for b_, h in zip(tb, th, strict=True)], threshold)
        return CaseResult(cid, status, median(tb), median(th), ratio, lo, hi, rounds, calls)
    finally:
        base.ask(op="release")
        head.ask(op="release")
