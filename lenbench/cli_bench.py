"""The benchmark subcommands of `lenbench`: ``slim-bench`` and ``export-bench`` (a benchmark JSON's
form and its github-action-benchmark export) and ``speed-gate`` (two checkouts' kernels timed A/B).

`lenbench.cli` builds the parser and dispatches here (`add_bench_parsers`, `BENCH_COMMANDS`); like it,
nothing heavy is imported at module level.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_bench_parsers(sub, formatter: type[argparse.HelpFormatter]) -> None:
    """Add the subcommands' parsers to `sub` (the `lenbench` parser's subparsers)."""
    HelpFormatter = formatter  # noqa: N806 - the name the parser blocks use
    p_slim = sub.add_parser("slim-bench", help="an earlier benchmark JSON in the current form: rows packed once per "
                            "cell, each cell timed by its compute time, nothing recomputed", formatter_class=HelpFormatter)
    p_slim.add_argument("input", metavar="IN", help="a benchmark JSON of `pytest bench --benchmark-json`")
    p_slim.add_argument("output", metavar="OUT", help="where to write it (atomically; may be IN itself)")
    p_slim.add_argument("--cells", default=None, metavar="DIR",
                        help="results directory whose cells/*.json give each cell's compute seconds (default: IN's "
                             "directory when it holds cells/)")

    p_exp = sub.add_parser("export-bench", help="github-action-benchmark's custom JSON of a benchmark JSON: "
                           "bigger-is-better.json and smaller-is-better.json", formatter_class=HelpFormatter)
    p_exp.add_argument("bench_json", metavar="BENCH_JSON", help="a benchmark JSON of `pytest bench --benchmark-json`")
    p_exp.add_argument("--out", required=True, metavar="DIR", help="directory to write the two files into")

    p_gate = sub.add_parser("speed-gate", help="time two checkouts' kernels interleaved on this machine; exit 1 when "
                            "one is slower beyond the threshold with its whole 95%% interval", formatter_class=HelpFormatter)
    p_gate.add_argument("base_tree", help="checkout of the base (a directory holding lenbench/)")
    p_gate.add_argument("head_tree", help="checkout of the head")
    p_gate.add_argument("--base-python", default=None,
                        help="interpreter of the base checkout's environment (default: this one)")
    p_gate.add_argument("--head-python", default=None,
                        help="interpreter of the head checkout's environment (default: this one)")
    p_gate.add_argument("--suite", default="quick", help="whose kernels: section lists the kernels "
                        "(LENBENCH_KERNEL_* variables override it, as in pytest bench)")
    p_gate.add_argument("--threshold", type=float, default=0.10,
                        help="the slowdown a kernel must exceed with its whole interval to fail (default 0.10 = 10%%)")
    p_gate.add_argument("--rounds", type=int, default=21, help="interleaved rounds per kernel (default 21, at least 6)")
    p_gate.add_argument("--kernels", action="append", default=None, metavar="PATTERN",
                        help="only kernels whose id matches (fnmatch, e.g. 'rope-*-T1024-fp32'; repeatable)")
    p_gate.add_argument("--json", default=None, metavar="FILE", help="also write the result as JSON")
    p_gate.add_argument("--markdown", default=None, metavar="FILE", help="also write the report as markdown")
    p_gate.add_argument("--all", dest="show_all", action="store_true", help="list every kernel, unchanged ones too")
    p_gate.add_argument("--quiet", action="store_true", help="no progress line per kernel")


def _slim_bench(args: argparse.Namespace) -> int:
    from lenbench.benchmark.bench_json import cell_seconds, slim, write
    from lenbench.results.schema import read_json
    from lenbench.run.store import cell_files

    source = Path(args.input)
    cells = Path(args.cells) if args.cells else (source.parent if (source.parent / "cells").is_dir() else None)
    if args.cells and not cell_files(cells.parent if cells.name == "cells" else cells):
        raise ValueError(f"--cells {args.cells}: no cells/*.json there; give the results directory the benchmark "
                         "JSON was made from, or leave --cells out (cells without a time keep their round)")
    before = source.stat().st_size if source.is_file() else 0
    data = slim(read_json(source), cell_seconds(cells) if cells is not None else None, where=str(source))
    write(args.output, data)
    print(f"wrote {args.output}: {before:,} → {Path(args.output).stat().st_size:,} bytes")
    return 0


def _export_bench(args: argparse.Namespace) -> int:
    from lenbench.benchmark.export_github import export

    for path, entries in export(args.bench_json, args.out).items():
        print(f"wrote {path}: {entries} entries")
    return 0


def _speed_gate(args: argparse.Namespace) -> int:
    import json

    from lenbench.atomic import atomic_write_text
    from lenbench.benchmark.speed_gate import run_gate

    def progress(case: str) -> None:
        if not args.quiet:
            print(f"speed-gate: timing {case}", file=sys.stderr, flush=True)

    result = run_gate(args.base_tree, args.head_tree, base_python=args.base_python or sys.executable,
                      head_python=args.head_python or sys.executable,
                      suite=args.suite, threshold=args.threshold, rounds=args.rounds, select=args.kernels,
                      progress=progress)
    text = result.markdown(show_all=args.show_all)
    print(text)
    if args.json:
        atomic_write_text(Path(args.json), json.dumps(result.to_json(), indent=1) + "\n")
    if args.markdown:
        atomic_write_text(Path(args.markdown), text + "\n")
    return result.exit_code


BENCH_COMMANDS = {"slim-bench": _slim_bench, "export-bench": _export_bench, "speed-gate": _speed_gate}
