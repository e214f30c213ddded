"""The ``export`` subcommand of `lenbench`: a results source in the format another tool reads
(`lenbench.export.FORMATS`, docs/exports.md).

`lenbench.cli` builds the parser and dispatches here (`add_export_parser`, `EXPORT_COMMANDS`); like it,
nothing heavy is imported at module level.
"""

from __future__ import annotations

import argparse

#: The export formats, as the parser offers them (`lenbench.export.FORMATS` holds what each is; listed
#: here too so that building the parser imports nothing: tests/test_cli_export.py holds them equal).
FORMAT_NAMES = ("lm-eval", "hf", "mlflow", "wandb")
DEFAULT_MODE = "offline"


def add_export_parser(sub, formatter: type[argparse.HelpFormatter]) -> None:
    """Add the ``export`` parser to `sub` (the `lenbench` parser's subparsers)."""
    p_exp = sub.add_parser("export", help="a run's results in another tool's format: lm-evaluation-harness JSON, "
                           "Hugging Face model-index, MLflow or W&B runs (docs/exports.md)", formatter_class=formatter)
    p_exp.add_argument("format", metavar="FORMAT", choices=FORMAT_NAMES,
                       help="lm-eval, hf, mlflow or wandb")
    p_exp.add_argument("source", metavar="SOURCE",
                       help="results directory (cells/*.json), tidy results CSV or benchmark JSON")
    p_exp.add_argument("--out", default=None, metavar="PATH",
                       help="lm-eval, hf: the directory to write into (required); mlflow: the tracking URI "
                            "(default: $MLFLOW_TRACKING_URI); wandb: W&B's directory (default: the current one)")
    p_exp.add_argument("--experiment", default=None, metavar="NAME",
                       help="mlflow: the experiment, wandb: the project (default: the source's suite name)")
    p_exp.add_argument("--mode", default=None, choices=("offline", "online"),
                       help=f"wandb: offline writes runs to disk for `wandb sync`, online logs to the server "
                            f"(default: {DEFAULT_MODE})")


def _export(args: argparse.Namespace) -> int:
    from lenbench.export import FORMATS
    from lenbench.report.rows import load_results

    fmt = FORMATS[args.format]
    options = {"experiment": args.experiment, "mode": args.mode}
    for name, value in options.items():
        if value is not None and name not in fmt.options:
            raise ValueError(f"--{name} does not apply to lenbench export {fmt.name}; leave it out")
    rows = load_results(args.source)
    if "experiment" in fmt.options and options["experiment"] is None:
        suites = sorted({s for s in rows["suite"] if s})
        options["experiment"] = suites[0] if len(suites) == 1 else "lenbench"
    if "mode" in fmt.options and options["mode"] is None:
        options["mode"] = DEFAULT_MODE
    for line in fmt.write(rows, args.out, **{k: v for k, v in options.items() if k in fmt.options}):
        print(line)
    return 0


EXPORT_COMMANDS = {"export": _export}
