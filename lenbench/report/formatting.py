"""Number formatting and markdown primitives of the report's tables: a value, a value with its
interval's half-width, an effective-length ratio, a rank with why an entry is unranked,
hard-wrapped prose, a GitHub markdown table and exact CSV text.

The leaderboard's markdown (`lenbench.report.markdown`), the page, the findings and the claims
format their numbers here, so one value reads the same everywhere. No formatter prints a negative
zero ("-0.000", "-0×", "-0 µs"): a value that rounds to zero at the printed precision reads as zero
whatever its sign (`fixed`), and the CSVs write -0.0 as 0.0 (`to_csv_text`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import pandas as pd

from lenbench.escape import csv_text, md_cell
from lenbench.metrics import find_metric
from lenbench.report import stats


def to_csv_text(df: pd.DataFrame) -> str:
    """CSV text with floats written by repr (exact round trip), NaN as empty, inf as "inf", -0.0 as
    0.0 (equal as numbers; a sign no reader should see); string cells a spreadsheet would run as
    formulas are quoted (`lenbench.escape.csv_text`).

    Args:
        df: the frame to write (not modified).
    """
    floats = [c for c in df.columns if df[c].dtype.kind == "f"]
    return csv_text(df.assign(**{c: df[c] + 0.0 for c in floats}) if floats else df)  # IEEE: -0.0 + 0.0 == +0.0


#: A formatted number's mantissa holds a nonzero digit (what an exponent, if any, scales).
_NONZERO = re.compile(r"[1-9]")


def fixed(value: float, spec: str) -> str:
    """`value` formatted by the format `spec` (".3f", ".3g", …) without a negative zero: a negative
    value that rounds to zero at that precision prints as zero ("-0.0004" at ".3f" → "0.000").

    Args:
        value: any float (NaN and inf print as Python formats them).
        spec: a `format` spec for a float.
    """
    text = format(value, spec)
    mantissa = re.split(r"[eE]", text, maxsplit=1)[0]
    return text[1:] if text.startswith("-") and not _NONZERO.search(mantissa) else text


def fmt_value(value: float, metric: str = "") -> str:
    """A value at 3 decimals (at 4 significant digits from 1000 on for an unbounded metric);
    "fail" for a failed (NaN) or worst-possible (infinite) score of a metric, "–" for a missing one.

    Args:
        value: the value.
        metric: its metric's registered name, "" for a plain number ("retention" for a ratio).
    """
    if math.isnan(value):
        return "fail" if metric and metric != "retention" else "–"
    facts = find_metric(metric)
    if math.isinf(value):
        worst = facts is not None and (value < 0) == facts.higher_is_better
        return "fail" if worst else f"{value}"
    if facts is not None and facts.bounds is None and abs(value) >= 1000:
        return fixed(value, ".4g")
    return fixed(value, ".3f")


def fmt_ci(mean: float, lo: float, hi: float, metric: str) -> str:
    text = fmt_value(mean, metric)
    if math.isfinite(lo) and math.isfinite(hi) and math.isfinite(mean):
        text += f" ± {fmt_value((hi - lo) / 2)}"
    return text


def holds_nothing(r: dict) -> bool:
    """An entry whose in-dist score is 0 on a higher-is-better metric: its effective length is n/a."""
    return bool(r["higher_is_better"]) and r["in_dist"] == 0


def fmt_ratio(mean: float, *, holds_nothing: bool = False) -> str:
    """An effective length: a ratio, never with an interval (it is discrete)."""
    if holds_nothing:
        return "n/a"
    return "–" if math.isnan(mean) else f"{fixed(mean, 'g')}×"


def fmt_seconds(seconds: float) -> str:
    """A duration in s, ms or µs with three significant digits; "–" when not measured."""
    if math.isnan(seconds):
        return "–"
    if seconds >= 1:
        return f"{fixed(seconds, '.3g')} s"
    return f"{fixed(seconds * 1e3, '.3g')} ms" if seconds >= 1e-3 else f"{fixed(seconds * 1e6, '.3g')} µs"


def fmt_times(value: float) -> str:
    """A ratio as "1.23×"; "–" when not measured."""
    return "–" if math.isnan(value) else f"{fixed(value, '.2f')}×"


def wrap_prose(text: str, indent: str = "") -> str:
    """Prose hard-wrapped at 110 characters, as the docs pages are (a table row is not); `indent`
    starts every line after the first (a list item's continuation)."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width=110, subsequent_indent=indent, break_long_words=False,
                                    break_on_hyphens=False))


def markdown_table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    """A GitHub markdown table (no tabulate needed); `align` per column: "l" or "r". Every cell
    is escaped (`lenbench.escape.md_cell`)."""
    align = align or ["l"] * len(header)
    esc = md_cell

    widths = [max(len(esc(h)), *(len(esc(r[i])) for r in rows)) if rows else len(esc(h)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(  # noqa: E731
        esc(c).rjust(w) if a == "r" else esc(c).ljust(w) for c, w, a in zip(cells, widths, align, strict=True)) + " |"
    rule = "| " + " | ".join(("-" * (w - 1) + ":") if a == "r" else "-" * w for w, a in zip(widths, align, strict=True)) + " |"
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def fmt_rank(rank: float, ranks: Iterable[float], not_learned: bool = False, kind: str = "model", *,
              learnability: str = "", complete: bool = True, above_floor: bool = True) -> str:
    """"3" for a rank of its own, "=3" for a rank shared with another entry of the table; for an
    unranked entry why (`RANK_MARKS`): "inc" incomplete, "?" uncertain, "n/l" not learned,
    "floor" at the floor, "–" otherwise (baselines)."""
    if kind == "baseline":
        return "–"
    if not complete:
        return "inc"
    if learnability == stats.UNCERTAIN:
        return "?"
    if not_learned:
        return "n/l"
    if not above_floor:
        return "floor"
    if math.isnan(rank):
        return "–"
    shared = sum(1 for r in ranks if r == rank) > 1
    return f"{'=' if shared else ''}{int(rank)}"
