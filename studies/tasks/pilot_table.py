"""The pilot tables of studies/tasks/README.md, read off a pilot's report (`lenbench report RUN --out BOARD`).

    python studies/tasks/pilot_table.py BOARD [--metric token_accuracy]

Every statistic is the board's own (`lenbench.report.stats`), so the tables and the leaderboard never
disagree. Per board (task × training length), per core encoding: the metric at 1x as the seed mean and
each seed, the board's learnability verdict (the 95 % interval of the 1x score against 0.9), the
statistic the board ranks by (the area past train; for lm the degradation) with its 95 % half-width, the
effective length (RULER's: the longest ratio up to which the seed mean keeps 90 % of its own 1x score and
stays above the best trivial baseline there), the rank (only learned entries above the floor are
ranked), the mean training seconds per cell and the steps each seed trained (``*``: it stopped on
convergence, `train.patience`, before its budget). Then the best trivial baseline at 1x and past training, and how
many learned. `--metric` reads a board's other metric (its token accuracy) with the same statistics.
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

import pandas as pd

from lenbench.report.rows import load_results
from lenbench.report.stats import AREA
from lenbench.report.tables import leaderboard

#: The core 8; FIRE under either label (the authors' threshold, or `fire-relthresh`: a quarter of the training length).
CORE = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5", "kerple", "fire", "fire-relthresh")


def _ci(v: float, lo: float, hi: float) -> str:
    if math.isnan(v):
        return "–"
    return f"{v:.3f}" if math.isnan(lo) else f"{v:.3f} ± {(hi - lo) / 2:.3f}"


def board_tables(rows: pd.DataFrame) -> str:
    """The markdown tables of every board of `rows` (tidy results rows)."""
    out = []
    board = leaderboard(rows)
    for (task, train_len), pt in board.per_task.groupby(["task", "train_len"], sort=False):
        df = rows[(rows["task"] == task) & (rows["train_len"] == train_len)]
        use = pt["metric"].iloc[0]
        stat = pt["ranked_on"].iloc[0] if len(pt) else AREA
        name = "area past train" if stat == AREA else stat
        seeds = board.seeds[board.seeds["train_len"] == train_len]
        by = pt["ranked_by"].iloc[0]
        out += [f"**{task}** (train length {train_len}, {use}; ranks: {name} of {by})", "",
                f"| encoding | {use} at 1x: mean (seeds) | learned | {name} | effective length | rank | train s / cell "
                "| steps (seeds) |",
                "|---|---|---|---|---|---|---|---|"]
        learned = 0
        for enc in CORE:
            e = pt[(pt["encoding"] == enc) & (pt["variant"] == "none")]
            if e.empty:
                continue
            e = e.iloc[0]
            own = seeds[(seeds["task"] == task) & (seeds["encoding"] == enc) & (seeds["variant"] == "none")]
            per_seed = " / ".join(f"{v:.2f}" for v in own.sort_values("seed")["in_dist"])
            learned += e["learnability"] == "learned"
            cells = df[(df["encoding"] == enc) & (df["variant"] == "none")]
            seconds = statistics.mean(cells.groupby("cell_id")["train_seconds"].first())
            trained = cells.groupby("seed")[["train_steps", "stop_reason"]].first()
            steps = " / ".join(f"{n}{'*' if why == 'converged' else ''}" for n, why in trained.itertuples(index=False))
            eff = "–" if math.isnan(e["effective_length"]) else f"{e['effective_length']:g}x"
            rank = "–" if math.isnan(e["rank"]) else f"{e['rank']:g}"
            out.append(f"| {enc} | {e['in_dist']:.3f} ({per_seed}) | {e['learnability']} | "
                       f"{_ci(e[stat], e[f'{stat}_ci_low'], e[f'{stat}_ci_high'])} | {eff} | {rank} | {seconds:.0f} | {steps} |")
        base = pt[pt["kind"] == "baseline"]
        if len(base):
            best = base.loc[base[AREA].idxmax() if pt["higher_is_better"].iloc[0] else base[AREA].idxmin()]
            out += ["", f"best trivial baseline: {best['encoding']} at 1x {best['in_dist']:.3f}, area past train "
                        f"{best[AREA]:.3f}"]
        ratios = sorted(df.loc[df["metric"] == use, "ratio"].unique())
        out += [f"learned at 1x: {learned} of {int(pt['kind'].eq('model').sum())}; ratios: "
                f"{', '.join(f'{r:.4g}' for r in ratios)}", ""]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="a run or report directory, or its results.csv")
    ap.add_argument("--metric", default=None, help="a board's other metric (default: its primary)")
    args = ap.parse_args()
    src = Path(args.source)
    rows = load_results(src / "results.csv" if (src / "results.csv").is_file() else src)
    if args.metric:
        rows = rows[rows["metric"] == args.metric]
    print(board_tables(rows))


if __name__ == "__main__":
    main()
