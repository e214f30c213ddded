"""The pilot tables of studies/tasks/README.md, from a pilot's published rows.

    python studies/tasks/pilot_table.py studies/tasks/pilot-mqar/results.csv --metric exact_match --floor 0

Per encoding (the core 8 in the board's order): the metric at 1x as the seed mean and each seed,
whether it is learned (seed mean >= 0.9 and above the floor), the effective length (the longest
evaluated ratio up to which the seed mean keeps >= 90 % of its own 1x value and stays above the
floor past training: RULER's definition, as a ratio of the training length), the mean over the
ratios past training (DeepMind's mean over unseen lengths, on this grid) and the mean seconds per cell.
"""

from __future__ import annotations

import argparse
import statistics

import pandas as pd

CORE = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5", "kerple", "fire")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--metric", default="exact_match")
    ap.add_argument("--floor", type=float, default=0.0, help="the best trivial predictor's score")
    ap.add_argument("--fraction", type=float, default=0.9, help="of the 1x score the effective length keeps")
    args = ap.parse_args()
    df = pd.read_csv(args.csv, keep_default_na=False, na_values=[""])
    df = df[(df.variant == "none") & (df.bucket.isna() | (df.bucket.astype(str) == "")) & (df.metric == args.metric)]
    print(f"| encoding | {args.metric} at 1x: mean (seeds) | learned | effective length | mean past training | s / cell |")
    print("|---|---|---|---|---|---|")
    learned_n = 0
    for enc in CORE:
        rows = df[df.encoding == enc]
        if rows.empty:
            continue
        by_ratio = rows.groupby("ratio").value.mean().sort_index()
        one = rows[rows.ratio == 1.0].sort_values("seed").value.tolist()
        learned = by_ratio[1.0] >= 0.9 and by_ratio[1.0] > args.floor
        learned_n += learned
        effective = None
        if learned:
            effective = 1.0
            for ratio, value in by_ratio[by_ratio.index > 1].items():
                if value < args.fraction * by_ratio[1.0] or value <= args.floor:
                    break
                effective = ratio
        past = by_ratio[by_ratio.index > 1].mean()
        seconds = statistics.mean(rows.groupby("cell_id").train_seconds.first())
        print(f"| {enc} | {by_ratio[1.0]:.3f} ({' / '.join(f'{v:.2f}' for v in one)}) | {'yes' if learned else 'no'} | "
              f"{f'{effective:g}x' if effective else '–'} | {past:.3f} | {seconds:.0f} |")
    print(f"\nlearned at 1x: {learned_n} of {df.encoding.isin(CORE).groupby(df.encoding).any().sum()}; "
          f"ratios: {', '.join(f'{r:g}' for r in sorted(df.ratio.unique()))}")


if __name__ == "__main__":
    main()
