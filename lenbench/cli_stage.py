"""The staging-publication side of `lenbench`: the ``stage`` subcommand (what a staging publication
holds) and the `lenbench run --stage DIR` option's opening of one (`lenbench.run.staging`,
docs/regression.md, "A run longer than one machine").

`lenbench.cli` builds the parser and dispatches here (`add_stage_parser`, `STAGE_COMMANDS`); like it,
nothing heavy is imported at module level.
"""

from __future__ import annotations

import argparse


def add_stage_parser(sub, formatter: type[argparse.HelpFormatter]) -> None:
    """Add the ``stage`` parser to `sub` (the `lenbench` parser's subparsers)."""
    p_stage = sub.add_parser("stage", help="what a staging publication holds: cells done, stale and to compute, "
                             "and whether it is complete (publishable)", formatter_class=formatter)
    p_stage.add_argument("directory", metavar="DIR", help="a staging publication (`lenbench run --stage DIR`)")
    p_stage.add_argument("--check", action="store_true", help="exit 1 when it is not complete")
    p_stage.add_argument("--not-in-suite", action="store_true",
                         help="print only the paths of staged cells the suite no longer has (left by an earlier "
                         "configuration of it; never published), one per line, e.g. for `git rm`")


def open_run_staging(args: argparse.Namespace, suite):
    """The staging publication `lenbench run --stage DIR` resumes from and writes to, for `suite` on
    this machine (its numeric kind, device and threads), committed every ``--stage-commit`` minutes."""
    from lenbench.device import resolve_device
    from lenbench.numerics import numerics_tag
    from lenbench.run.cell import default_threads
    from lenbench.run.staging import open_staging

    return open_staging(args.stage, args.suite, suite.name, [cell.cell_id for cell in suite.cells()],
                        kind=numerics_tag(), device=resolve_device(args.device).type,
                        threads=args.threads or default_threads(),
                        commit_every=None if args.stage_commit is None else 60.0 * args.stage_commit)


def _stage(args: argparse.Namespace) -> int:
    from lenbench.run.driver import expected_fingerprint
    from lenbench.run.staging import stage_status
    from lenbench.run.store import cell_path

    status = stage_status(args.directory, expected_fingerprint)
    if args.not_in_suite:
        lines = [str(cell_path(args.directory, cell_id)) for cell_id in status.extra]
    else:
        lines = status.lines()
    if lines:
        print("\n".join(lines))
    return 1 if args.check and not status.complete else 0


STAGE_COMMANDS = {"stage": _stage}
