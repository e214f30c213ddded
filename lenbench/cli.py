"""The `lenbench` command line.

    lenbench list {encodings,tasks,suites}
    lenbench run --suite NAME|PATH [--device auto|cpu|cuda|xpu|mps] [--workers N] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys


def _list(what: str) -> int:
    if what == "encodings":
        from lenbench.encodings import ENCODINGS

        for name, cls in ENCODINGS.items():
            print(f"{name:<12} {cls.description}")
            print(f"{'':<12} paper: {cls.paper}")
            for variant, doc in cls.variant_descriptions().items():
                print(f"{'':<12}   variant {variant:<10} {doc}")
    elif what == "tasks":
        from lenbench.tasks import TASKS

        for name, cls in TASKS.items():
            print(f"{name:<10} [{cls.length_unit}] {cls.description}")
    else:
        from lenbench.suite import list_suites

        for name, path in list_suites().items():
            print(f"{name:<10} {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lenbench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="list registered encodings, tasks or suites")
    p_list.add_argument("what", choices=["encodings", "tasks", "suites"])
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "list":
            return _list(args.what)
    except (ValueError, KeyError, FileNotFoundError) as err:
        print(f"lenbench: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
