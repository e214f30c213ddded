"""The `lenbench` command line.

    lenbench list {encodings,tasks,suites} [--plugin MODULE_OR_PATH ...]
    lenbench run --suite NAME|PATH [--device auto|cpu|cuda|xpu|mps] [--executor auto|serial|process|ray] [--ray-address auto|HOST:PORT] [--workers N] [--threads N] [--out DIR] [--keep-stale] [--no-report] [--plugin MODULE_OR_PATH ...]
    lenbench calibrate [TASK ...] [--suite calibration|PATH] [--out DIR] [--every-rung] [--from TABLE] [--executor ...] [--workers N]
    lenbench report RESULTS [--out DIR] [--plugin MODULE_OR_PATH ...]
    lenbench publish RUN_DIR [--benchmark-json FILE] [--to results]
    lenbench slim-bench IN OUT [--cells DIR]
    lenbench export-bench BENCH_JSON --out DIR
    lenbench export {lm-eval,hf,mlflow,wandb} SOURCE [--out PATH] [--experiment NAME] [--mode offline|online]
    lenbench compare BASE HEAD [--method auto|exact|paired|unpaired] [--tolerance X] [--speed-threshold 0.10]
                     [--allow-missing] [--allow-no-overlap] [--force-speed] [--top N | --all] [--margin [METRIC=]X ...]
    lenbench speed-gate BASE_TREE HEAD_TREE [--base-python PY] [--head-python PY] [--threshold 0.10] [--rounds 21]
                        [--kernels PATTERN ...] [--json FILE] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from lenbench.cli_bench import BENCH_COMMANDS, add_bench_parsers
from lenbench.cli_export import EXPORT_COMMANDS, add_export_parser
from lenbench.cli_stage import STAGE_COMMANDS, add_stage_parser, open_run_staging

# Nothing heavy at module level (torch, pandas): `main` imports them inside its handling of
# Ctrl-C, so an interrupt while they load ends in one line, not a traceback.


def _list(what: str) -> int:
    if what == "encodings":
        from lenbench.encoding_display import encoding_rank
        from lenbench.encodings import ENCODINGS

        _broken(ENCODINGS.load_all())
        for name, cls in sorted(ENCODINGS.items(), key=lambda item: encoding_rank(item[0])):  # the boards' order
            print(f"{name:<12} {cls.description}")
            origin = _origin(ENCODINGS, name)
            if origin:
                print(f"{'':<12} {origin}")
            print(f"{'':<12} paper: {cls.paper}")
            if cls.length_behaviour:
                print(f"{'':<12} length: {cls.length_behaviour}")
            for variant, doc in cls.variant_descriptions().items():
                print(f"{'':<12}   variant {variant:<10} {doc}")
    elif what == "tasks":
        from lenbench.tasks import TASKS

        _broken(TASKS.load_all())
        for name, cls in TASKS.items():
            origin = _origin(TASKS, name)
            print(f"{name:<10} [{cls.length_unit}] {cls.description}" + (f" ({origin})" if origin else ""))
    else:
        from lenbench.config import list_suites, load_suite
        from lenbench.run.estimate import command_seconds, estimate_suite, format_seconds
        from lenbench.run.executors.base import plan_execution

        print("time on a CPU like the reference 2-core one: the cells one after another, then on this machine's "
              "default executor; then the whole `lenbench run` (cells and report) and the whole `pytest bench` "
              "(cells, kernel benchmarks and report); 'measured' = mean seconds per finished cell in runs/<name> "
              "x cells, 'model' = the cost model of lenbench/run/estimate.py")
        for name, path in list_suites().items():
            suite = load_suite(path)
            cells = len(suite.cells())
            est = estimate_suite(suite, Path("runs") / suite.name)
            plan = plan_execution("auto", None, "cpu", pending=cells)
            t = command_seconds(suite, est, plan.workers if plan.executor == "process" else 1)
            how = f"{plan.workers} processes" if plan.executor == "process" else "serial"
            print(f"{name:<10} {cells:>4} cells  ~{format_seconds(t.cells_serial):<8} serial, "
                  f"~{format_seconds(t.cells_wall):<8} on {how}; lenbench run ~{format_seconds(t.run)}, "
                  f"pytest bench ~{format_seconds(t.main)} ({est.kind})")
            print(f"{'':<10} {suite.description}")
    return 0


def _origin(registry, name: str) -> str:
    from lenbench.plugins import origin_label

    return origin_label(registry.origin(name))


def _broken(lines: list[str]) -> None:
    """Broken entry points: one line each on stderr; the listing goes on without them."""
    for line in lines:
        print(f"lenbench: warning: {line}", file=sys.stderr)


PLUGIN_HELP = ("load an encoding / task plugin first: an importable module name or a path to a .py file "
               "(repeatable; see docs/add-encoding.md)")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults formatter, except where the help already states the default or there is
    none to state (None, or a flag's False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    import lenbench
    from lenbench.device import DEVICES

    parser = argparse.ArgumentParser(prog="lenbench", description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"lenbench {lenbench.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="list registered encodings, tasks or suites", formatter_class=HelpFormatter)
    p_list.add_argument("what", choices=["encodings", "tasks", "suites"])
    p_list.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_PATH", help=PLUGIN_HELP)

    p_run = sub.add_parser("run", help="train and evaluate every cell of a suite (resumable)", formatter_class=HelpFormatter)
    p_run.add_argument("--suite", default="quick", help="a preset name (`lenbench list suites` lists them) or a YAML path")
    p_run.add_argument("--device", default="auto", choices=DEVICES, help="auto picks CUDA / XPU / MPS if present, else CPU")
    p_run.add_argument("--executor", default="auto", help="where cells run: auto, serial, process or ray (auto: CPU "
                       "cells in one process per core, others serial; --workers N > 1 with serial means process)")
    p_run.add_argument("--ray-address", default=None, help="with --executor ray: auto or HOST:PORT of a running Ray "
                       "cluster (default: start a local Ray sized to this machine)")
    p_run.add_argument("--workers", type=int, default=None,
                       help="processes of the process executor (default: one per usable core, within memory)")
    p_run.add_argument("--threads", type=int, default=None,
                       help="intra-op CPU threads per cell (default: 1); recorded in every row")
    p_run.add_argument("--numerics", default=None, choices=("pinned", "native"),
                       help="CPU numeric code paths (default: $LENBENCH_NUMERICS, else pinned: the same bits on "
                       "every x86 machine of one CPU vendor with AVX2); native: each library's own, faster on AVX-512")
    p_run.add_argument("--out", default=None, help="results directory (default: runs/<suite name>)")
    p_run.add_argument("--retry-failed", action="store_true", help="rerun cells recorded as failed")
    p_run.add_argument("--keep-stale", action="store_true",
                       help="keep finished cells whose code/environment fingerprint changed (default: recompute them)")
    p_run.add_argument("--quiet", action="store_true", help="no progress bars")
    p_run.add_argument("--no-report", action="store_true",
                       help="do not write the report (board, tables, figures, page) into the results directory; "
                            "`lenbench report DIR` writes it later")
    p_run.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_PATH",
                       help=PLUGIN_HELP + "; the suite's own `plugins:` are loaded too")
    p_run.add_argument("--stage", default=None, metavar="DIR",
                       help="a staging publication (new, or one to resume): its finished cells seed the run, and each "
                            "cell the run finishes is copied into it, so a run that outlasts this machine resumes on "
                            "another of the same numeric kind (docs/regression.md, staging publications)")
    p_run.add_argument("--stage-commit", type=float, default=None, metavar="MINUTES",
                       help="with --stage: git-commit the staging directory (only it) at most every MINUTES and at the end")

    p_cal = sub.add_parser("calibrate", help="the smallest training budget at which each task is learned: climb "
                           "the tasks' ladders in a calibration suite (resumable)", formatter_class=HelpFormatter)
    p_cal.add_argument("tasks", nargs="*", metavar="TASK", help="task names to calibrate (default: every ladder of the suite)")
    p_cal.add_argument("--suite", default="calibration", help="calibration suite: preset name or YAML path, one entry "
                       "per rung, cheapest first (see docs/calibration.md)")
    p_cal.add_argument("--out", default=None, help="results directory (default: runs/<suite name>); "
                       "calibration.csv and calibration.md are written there")
    p_cal.add_argument("--every-rung", action="store_true", help="run every rung, not only up to each task's first pass")
    p_cal.add_argument("--from", dest="known", default=None, metavar="TABLE",
                       help="an earlier calibration.csv of this suite (e.g. studies/calibration/calibration.csv): "
                       "its rungs that are unchanged are taken as measured, so only new rungs run; those past a "
                       "task's deciding rung stay in the table")
    p_cal.add_argument("--retry-failed", action="store_true", help="rerun cells recorded as failed")
    p_cal.add_argument("--executor", default="auto", help="where cells run, as for `lenbench run`")
    p_cal.add_argument("--workers", type=int, default=None, help="processes of the process executor, as for `lenbench run`")
    p_cal.add_argument("--quiet", action="store_true", help="no progress bars")
    p_cal.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_PATH",
                       help=PLUGIN_HELP + "; the suite's own `plugins:` are loaded too")

    p_report = sub.add_parser("report", help="leaderboard CSVs, markdown table and plots of a run", formatter_class=HelpFormatter)
    p_report.add_argument("results", help="results directory (cells/*.json), tidy results CSV or benchmark JSON")
    p_report.add_argument("--out", default=None,
                          help="output directory (default: RESULTS itself when it is a directory, else the directory holding it; "
                               "the published results/ only when named: see `lenbench publish`)")
    p_report.add_argument("--no-plots", action="store_true", help="tables only")
    p_report.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_PATH",
                          help=PLUGIN_HELP + "; needed only for a plugin encoding's geometry figure")

    p_pub = sub.add_parser("publish", help="copy a run's cells and benchmark JSON into the published directory "
                           "and rebuild its report there (atomically)", formatter_class=HelpFormatter)
    p_pub.add_argument("run_dir", metavar="RUN_DIR", help="results directory of a finished run, e.g. runs/quick, or a "
                       "complete staging publication (`lenbench stage DIR` says whether it is)")
    p_pub.add_argument("--benchmark-json", default=None,
                       help="the run's pytest-benchmark JSON (its kernel timings become the speed baseline; it names the "
                            "run's cells, so cells an earlier configuration of the suite left in RUN_DIR are not published)")
    p_pub.add_argument("--to", default="results", help="published directory: the files the previous publication wrote are replaced, what else is in it "
                       "(publications nested in it, your own files) is kept")
    p_pub.add_argument("--no-plots", action="store_true", help="tables only")

    add_bench_parsers(sub, HelpFormatter)
    add_export_parser(sub, HelpFormatter)
    add_stage_parser(sub, HelpFormatter)

    p_cmp = sub.add_parser("compare", help="quality and speed regressions of HEAD against BASE (exit 1 on a regression)", formatter_class=HelpFormatter)
    p_cmp.add_argument("base", help="results directory, results / leaderboard CSV or benchmark JSON")
    p_cmp.add_argument("head", help="results directory, results / leaderboard CSV or benchmark JSON")
    p_cmp.add_argument("--tolerance", type=float, default=0.0,
                       help="relative worsening of a metric tolerated, e.g. 0.01 = 1%% (default 0: any worse value)")
    p_cmp.add_argument("--speed-threshold", type=float, default=0.10,
                       help="relative slowdown of a kernel (time / copy time) tolerated (default 0.10)")
    p_cmp.add_argument("--allow-missing", action="store_true",
                       help="cells, rows or kernels ok in BASE but absent from HEAD do not fail the comparison")
    p_cmp.add_argument("--allow-no-overlap", action="store_true",
                       help="two sides without a measurement or kernel in common do not fail the comparison")
    p_cmp.add_argument("--force-speed", action="store_true",
                       help="compare kernel timings measured on different machines (refused otherwise)")
    p_cmp.add_argument("--method", default="auto", choices=("auto", "exact", "paired", "unpaired"),
                       help="how quality is compared: auto (default) is exact when both sides hold one numeric kind "
                       "(CPU vendor and numerics mode), the same, and unpaired when their kinds differ: seeds "
                       "unpaired, Welch t against a practical margin, Holm over all measurements; paired: the "
                       "paired bootstrap over seeds x samples (same as --statistical)")
    p_cmp.add_argument("--statistical", action="store_true",
                       help="--method paired: a regression is a paired-bootstrap difference over seeds x samples "
                       "whose 95%% interval excludes 0 and that is worse than a practical margin")
    p_cmp.add_argument("--margin", action="append", metavar="[METRIC=]X", default=None,
                       help="with --method paired or unpaired: the practical margin, every metric's or one metric's (repeatable; "
                       "default 0.02 absolute for accuracies, 1%% of base for perplexity; see docs/regression.md)")
    p_cmp.add_argument("--top", type=int, default=10, help="show the N largest changes per table (default 10)")
    p_cmp.add_argument("--all", "--verbose", dest="show_all", action="store_true", help="show every change")

    return parser


def _report(args: argparse.Namespace) -> int:
    from lenbench.api import report_dir, write_report

    written = write_report(args.results, args.out, plots=not args.no_plots, log=_note, notes=_note_line)
    print(f"wrote {len(written)} file(s) to {report_dir(args.results, args.out)}:")
    for path in written:
        print(f"  {path}")
    return 0


def _note(line: str | None) -> None:
    if line:
        print(line, file=sys.stderr)


def _note_line(line: str) -> None:
    """A report's note (a figure left out, and how to get it): one line on stderr."""
    print(f"lenbench: note: {line}", file=sys.stderr)


def _publish(args: argparse.Namespace) -> int:
    from lenbench.publish import publish

    written = publish(args.run_dir, args.to, benchmark_json=args.benchmark_json, plots=not args.no_plots)
    print(f"published {args.run_dir} to {args.to}: {len(written)} file(s)")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from lenbench.compare import compare

    result = compare(args.base, args.head, tolerance=args.tolerance, speed_threshold=args.speed_threshold,
                     allow_missing=args.allow_missing,
                     allow_no_overlap=args.allow_no_overlap, force_speed=args.force_speed, top=args.top,
                     statistical=args.statistical, margins=args.margin, method=args.method)
    for warning in result.warnings:
        print(f"lenbench: warning: {warning}", file=sys.stderr)
    print(result.format(show_all=args.show_all))
    return result.exit_code


def _run(args: argparse.Namespace) -> int:
    from lenbench.config import load_suite
    from lenbench.run.driver import run_suite
    from lenbench.run.store import load_rows

    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    suite = load_suite(args.suite)
    out = Path(args.out or Path("runs") / suite.name)
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {args.threads}")
    options = {}
    if args.stage_commit is not None and (args.stage is None or args.stage_commit < 0):
        raise ValueError("--stage-commit needs --stage DIR and a number of minutes at least 0, e.g. --stage-commit 10")
    if args.stage is not None:
        options["staging"] = open_run_staging(args, suite)
    if args.ray_address is not None:
        if args.executor != "ray":
            raise ValueError("--ray-address needs --executor ray")
        options["address"] = args.ray_address
    run = run_suite(suite, out, device=args.device, executor=args.executor, workers=args.workers,
                        threads=args.threads, retry_failed=args.retry_failed, keep_stale=args.keep_stale,
                        progress=not args.quiet, **options)
    rows = load_rows(out)
    busy = f", {len(run.busy)} in progress in another run (skipped)" if run.busy else ""
    failed = len(run.failed) + len(run.failed_before)  # never "0 failed" over failed cells kept from before
    before = (f" ({len(run.failed_before)} of them in an earlier run; --retry-failed reruns them)"
              if run.failed_before else "")
    print(f"{len(run.computed)} cell(s) run, {run.done} already done{busy}, {failed} failed{before}; "
          f"{len(rows)} rows in {out}")
    for r in run.failed:
        again = " (outside the cell: the next run computes it again)" if r.outside else ""
        print(f"  failed: {r.title}: {r.error}{again}")
    for title in run.failed_before:
        print(f"  failed before: {title}")
    for r in run.computed:  # cells an executor had to resubmit (e.g. a Ray worker or node lost mid-cell)
        if (r.executor or {}).get("retries"):
            print(f"  retried: {r.title}: {r.executor['retries']} time(s) after {'; '.join(r.executor['lost'])}")
    cell_ids = [cell.cell_id for cell in suite.cells()]
    print(summary_table(out, cell_ids))
    if not args.no_report:
        _run_report(out, cell_ids, suite.note)
    if suite.note:
        print(suite.note)
    return 0


def _run_report(out: Path, cell_ids: list[str], note: str) -> None:
    """The report of a run's own cells into its results directory, as `pytest bench` writes it at
    the end of its session (no cost view: `lenbench run` times no kernels). Nothing to report (every
    cell failed) is one line saying so."""
    from lenbench.report.build import write_report
    from lenbench.report.rows import load_results

    if load_results(out, cell_ids=cell_ids).empty:
        print(f"no report: {out} holds no rows of this suite")
        return
    written = write_report(out, out, cell_ids=cell_ids, notes=_note_line, note=note)
    page = next((p for p in written if p.name == "index.html"), None)
    print(f"report: {len(written)} file(s) in {out}" + (f"; open {page}" if page is not None else ""))


def _calibrate(args: argparse.Namespace) -> int:
    from lenbench.calibration import calibrate
    from lenbench.config import load_suite

    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    suite = load_suite(args.suite)
    out = Path(args.out or Path("runs") / suite.name)
    known = None
    if args.known is not None:
        from lenbench.calibration import read_table

        if not Path(args.known).is_file():
            raise ValueError(f"--from {args.known}: no such file; pass a calibration.csv written by `lenbench calibrate`")
        known = read_table(args.known)
    table = calibrate(suite, out, tasks=args.tasks or None, every_rung=args.every_rung, known=known,
                      executor=args.executor, workers=args.workers, progress=not args.quiet,
                      retry_failed=args.retry_failed)
    for row in table.itertuples():
        if row.verdict:
            print(f"{row.task}: {row.label}: {row.n_learned}/{row.n_encodings} learned: {row.verdict}")
    print(f"wrote {out / 'calibration.csv'} and {out / 'calibration.md'}")
    if int(table["n_failed"].sum()):  # never a clean exit over a cell that did not run: a verdict may be wrong
        from lenbench.run.store import load_cell_results

        for r in load_cell_results(out):
            if r.failed:
                print(f"  failed: {r.title}: {r.error}", file=sys.stderr)
        print(f"lenbench: {int(table['n_failed'].sum())} cell(s) of the rungs failed; --retry-failed reruns them",
              file=sys.stderr)
        return 1
    return 0


def summary_table(out: Path, cell_ids: list[str] | None = None) -> str:
    """The leaderboard's wide view of a results directory (of its cells `cell_ids` only, e.g. a
    suite's, when given): primary metric by length ratio, as text, one block per board with the
    board's own lengths, so "fail" marks a failed length and never a length the task does not have
    (a dense axis at training length 6 and one at 8 share few ratios)."""
    from lenbench.report.rows import load_results
    from lenbench.report.tables import leaderboard

    df = load_results(out, cell_ids=cell_ids)  # a suite's own: an earlier configuration's cells are not this run's
    if df.empty:
        return "(no rows)"
    board = leaderboard(df)
    blocks = []
    for (task, train_len), rows in board.wide.groupby(["task", "train_len"], sort=False):
        cols = ["not_learned", *board.ratio_columns(task, train_len)]  # the means; intervals are in the report
        blocks.append(rows.set_index(["task", "train_len", "metric", "series"])[cols].to_string(
            float_format=lambda v: f"{v:.3f}", na_rep="fail"))
    return "\n\n".join(blocks)


INTERRUPTED = "lenbench: interrupted; finished cells are kept, rerun the same command to resume"


def _interrupted() -> int:
    """Say once that the command was interrupted (a second Ctrl-C now is ignored); exit status 130."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(INTERRUPTED, file=sys.stderr)
    return 130


def main(argv: list[str] | None = None) -> int:
    """The command line. Exit status: 0 done, 1 a regression (`compare`), 2 bad input (one line),
    130 interrupted by Ctrl-C at any point, imports included (one line)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # the executor has cancelled its outstanding cells on the way out
        return _interrupted()
    except BrokenPipeError:  # `lenbench list encodings | head`: the reader left; say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "plugin", None):
            from lenbench.plugins import load_plugins

            load_plugins(args.plugin)  # before any name is looked up (relative to the current directory)
        if args.command == "list":
            return _list(args.what)
        if args.command == "run":
            if args.numerics:
                from lenbench.numerics import set_mode

                set_mode(args.numerics)  # before any cell: workers inherit the environment
            return _run(args)
        if args.command == "calibrate":
            return _calibrate(args)
        if args.command == "report":
            return _report(args)
        if args.command == "publish":
            return _publish(args)
        if args.command in STAGE_COMMANDS:
            return STAGE_COMMANDS[args.command](args)
        if args.command == "compare":
            return _compare(args)
        if args.command in BENCH_COMMANDS:
            return BENCH_COMMANDS[args.command](args)
        if args.command in EXPORT_COMMANDS:
            return EXPORT_COMMANDS[args.command](args)
    except (ValueError, KeyError, FileNotFoundError) as err:
        print(f"lenbench: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a full disk is one line (lenbench.atomic.DiskFullError), other OS errors stay loud
        from lenbench.atomic import disk_full_message, is_disk_full

        if not is_disk_full(err):
            raise
        print(f"lenbench: error: {disk_full_message(err)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
