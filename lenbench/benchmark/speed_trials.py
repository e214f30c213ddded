"""How often the A/B speed gate is right on this machine: repeated trials with known truth.

Two kinds of trial, each a whole `lenbench.benchmark.speed_gate.run_gate` of a checkout against itself:

- **unchanged**: head = base. Any SLOWER verdict is a false alarm.
- **planted**: the head worker runs a kernel function made ``factor`` times slower (every call of it
  spins, after it returns, until ``factor`` × its own CPU time has passed), through a
  ``sitecustomize`` module on the head worker's path; nothing in the checkout changes. The gate must
  fail, naming only cases that call the planted function.

`python bench/speed_gate_trials.py` runs them and prints the counts docs/regression.md reports;
`tests/benchmark/test_speed_gate.py` runs a short version.
"""

from __future__ import annotations

import dataclasses
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

from lenbench.benchmark.speed_gate import SLOWER, GateResult, run_gate

#: The head worker's sitecustomize: wraps MODULE.FUNCTION so each call lasts FACTOR times as long.
PLANT = textwrap.dedent('''\
    """A planted slowdown for the speed gate's trials (lenbench.benchmark.speed_trials)."""
    import functools, importlib, time

    def _plant(module, name, factor):
        mod = importlib.import_module(module)
        fn = getattr(mod, name)

        @functools.wraps(fn)
        def slow(*args, **kwargs):
            start = time.thread_time()
            out = fn(*args, **kwargs)
            end = start + factor * (time.thread_time() - start)
            while time.thread_time() < end:
                pass
            return out

        setattr(mod, name, slow)

    _plant({module!r}, {name!r}, {factor!r})
''')


def plant_directory(function: str, factor: float, directory: str | Path) -> Path:
    """Write the sitecustomize that slows `function` ("package.module:name") by `factor` into `directory`."""
    module, _, name = function.partition(":")
    if not module or not name or factor <= 1:
        raise ValueError(f"plant {function!r} x{factor}: expected MODULE:FUNCTION and a factor above 1, "
                         "e.g. lenbench.kernels:attention_toeplitz and 1.3")
    path = Path(directory) / "sitecustomize.py"
    path.write_text(PLANT.format(module=module, name=name, factor=float(factor)))
    return Path(directory)


@dataclasses.dataclass
class Trials:
    """Counts of the trials: passes of unchanged code, failures caught on the planted function."""

    unchanged: list[GateResult] = dataclasses.field(default_factory=list)
    planted: list[GateResult] = dataclasses.field(default_factory=list)
    planted_cases: set[str] = dataclasses.field(default_factory=set)

    @property
    def false_alarms(self) -> int:
        return sum(r.exit_code != 0 for r in self.unchanged)

    @property
    def caught(self) -> int:
        """Planted trials that failed with every SLOWER case one that calls the planted function."""
        return sum(r.exit_code != 0 and self._only_planted(r) for r in self.planted)

    def _only_planted(self, r: GateResult) -> bool:
        slow = {c.case for c in r.cases if c.status == SLOWER}
        return bool(slow) and slow <= self.planted_cases

    def summary(self) -> str:
        lines = [f"unchanged code: {len(self.unchanged) - self.false_alarms} of {len(self.unchanged)} trials pass "
                 f"({self.false_alarms} false alarm(s))",
                 f"planted slowdown: {self.caught} of {len(self.planted)} trials fail on the planted kernel(s) only"]
        worst = max((c.low for r in self.unchanged for c in r.cases if c.low == c.low), default=float("nan"))
        lines.append(f"largest interval low of head ÷ base over unchanged cases: {worst:.3f}")
        return "\n".join(lines)


def run_trials(tree: str | Path, *, trials: int, function: str, factor: float, planted_cases: list[str],
               suite: str = "quick", threshold: float = 0.10, rounds: int = 21, select: list[str] | None = None,
               progress: Callable[[str], None] | None = None,
               on_trial: Callable[[Trials], None] | None = None) -> Trials:
    """`trials` unchanged and `trials` planted gates of `tree` against itself, alternating.

    Args:
        planted_cases: fnmatch patterns of the case ids that call `function` (the gate may flag only those).
        on_trial: called with the trials so far after every gate, so that a run stopped early keeps
            the trials it finished (bench/speed_gate_trials.py writes its JSON there).
    """
    from fnmatch import fnmatch

    out = Trials()
    with tempfile.TemporaryDirectory(prefix="lenbench-plant-") as tmp:
        plant = plant_directory(function, factor, tmp)
        for i in range(trials):
            for kind in ("unchanged", "planted"):
                if progress:
                    progress(f"trial {i + 1}/{trials} {kind}")
                env = {"PYTHONPATH": str(plant)} if kind == "planted" else None
                r = run_gate(tree, tree, suite=suite, threshold=threshold, rounds=rounds, select=select, head_env=env)
                if kind == "planted":
                    out.planted_cases |= {c.case for c in r.cases if any(fnmatch(c.case, p) for p in planted_cases)}
                    out.planted.append(r)
                else:
                    out.unchanged.append(r)
                if on_trial:
                    on_trial(out)
    return out
