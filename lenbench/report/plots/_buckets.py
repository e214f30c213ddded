"""The bucketed rows of a results frame (loss by position, needle depth), which
`lenbench.report.plots.position` and `lenbench.report.plots.needle` draw; the leaderboard ignores them."""

from __future__ import annotations

import pandas as pd

from lenbench.report.rows import series_label


def bucketed(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Rows whose bucket is of `kind` ("pos", "depth") that succeeded, with the bucket's bounds
    `lo` / `hi` and `series` added."""
    from lenbench.results.labels import parse_bucket

    if "bucket" not in df.columns:
        return df.iloc[0:0].assign(lo=[], hi=[], series=[])
    sel = df[df["bucket"].str.startswith(f"{kind}:") & df["value"].notna()]
    spans = [parse_bucket(b) for b in sel["bucket"]]
    return sel.assign(lo=[s[1] for s in spans], hi=[s[2] for s in spans],
                      series=[series_label(e, v) for e, v in zip(sel["encoding"], sel["variant"], strict=True)])


def has_bucket_rows(df: pd.DataFrame, kind: str) -> bool:
    """Whether a tidy results frame holds successful bucketed rows of `kind` ("pos" or "depth")."""
    return len(bucketed(df, kind)) > 0
