"""`python bench/speed_gate_trials.py`: the A/B speed gate's false-alarm and detection rates on this machine.

Runs TRIALS gates of this checkout against itself (unchanged code) and TRIALS with a planted slowdown
in one kernel function (`lenbench.benchmark.speed_trials`), alternating, and prints the counts and
every trial's verdict. docs/regression.md reports its numbers, e.g.:

    LENBENCH_KERNEL_LENGTHS=1024 python bench/speed_gate_trials.py --trials 20 \
        --plant lenbench.kernels:attention_toeplitz --factor 1.3 --planted-cases '*-toeplitz-*'
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lenbench.atomic import atomic_write_json
from lenbench.benchmark.speed_trials import run_trials


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/speed_gate_trials.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]), help="the checkout (default: this one)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--plant", default="lenbench.kernels:attention_toeplitz", help="MODULE:FUNCTION slowed down in head")
    parser.add_argument("--factor", type=float, default=1.3)
    parser.add_argument("--planted-cases", action="append", default=None,
                        help="fnmatch patterns of the cases that call the planted function (default '*-toeplitz-*')")
    parser.add_argument("--kernels", action="append", default=None, help="only these cases (fnmatch; default all)")
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--threshold", type=float, default=0.10)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--json", default=None, help="write every trial's gate result here")
    args = parser.parse_args(argv)
    start = time.perf_counter()

    def record(so_far) -> None:
        """Print the gate that just ended and rewrite the JSON with every trial so far (atomically):
        a run stopped early keeps what it finished."""
        kind, results = ("planted", so_far.planted) if len(so_far.planted) == len(so_far.unchanged) else \
            ("unchanged", so_far.unchanged)
        r = results[-1]
        flagged = [f"{c.case} {c.ratio:.3f} [{c.low:.3f}, {c.high:.3f}]" for c in r.cases if c.status not in
                   ("unchanged", "skipped")]
        print(f"{kind} {len(results)}: exit {r.exit_code}; {len(r.cases)} cases; "
              + ("; ".join(flagged) or "none flagged"), flush=True)
        if args.json:
            atomic_write_json(Path(args.json), {"unchanged": [x.to_json() for x in so_far.unchanged],
                                                "planted": [x.to_json() for x in so_far.planted],
                                                "seconds": round(time.perf_counter() - start)})

    trials = run_trials(args.tree, trials=args.trials, function=args.plant, factor=args.factor,
                        planted_cases=args.planted_cases or ["*-toeplitz-*"], suite=args.suite,
                        threshold=args.threshold, rounds=args.rounds, select=args.kernels,
                        progress=lambda s: print(s, file=sys.stderr, flush=True), on_trial=record)
    print(trials.summary())
    print(f"wall time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
