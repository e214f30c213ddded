"""Escaping of user-controlled labels per output format: CSV cells and markdown.

Labels (task, encoding and variant names, suite names, error texts, provenance strings) come from
suite files, cells and benchmark JSONs that anyone can write, and reach every report file. Each
writer passes them through this module, the one place that knows each format's hazards:

- CSV (`csv_text`, `csv_cell`, `csv_frame`): a spreadsheet runs a cell that starts with ``=``,
  ``+``, ``-``, ``@``, a tab or a carriage return as a formula (OWASP, "CSV Injection"). Such a
  string cell gets a leading ``'``, which spreadsheets show as text. Numbers are never touched:
  only string values are escaped, so numeric columns (``-0.5``) stay numbers. A string that starts
  with ``'`` and would itself be escaped after it gets one more ``'``, so `csv_uncell` (what the
  readers apply) inverts `csv_cell` exactly. A carriage return inside a cell, which Python's CSV
  writer leaves unquoted with ``\n`` line ends (a new row for most readers), makes `csv_text`
  quote every string cell of that file.
- Markdown (`md_cell`, `md_text`): ``<``, ``>`` and ``&`` are HTML-escaped (a renderer would
  otherwise pass ``<script>`` through as HTML), line breaks become spaces, and in a table cell
  ``\\`` and ``|`` are backslash-escaped so a label cannot end its cell or open a new one.

Ordinary labels (letters, digits, ``-_.+@:/ ×±`` inside a name) come out unchanged.
"""

from __future__ import annotations

import csv
import html
import re

import pandas as pd

#: First characters a spreadsheet reads as the start of a formula (OWASP CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _needs_quote(text: str) -> bool:
    """Whether `text` gets a leading ``'`` in a CSV cell (see the module docstring)."""
    if text.startswith("'"):
        return _needs_quote(text[1:])
    return text.startswith(FORMULA_START)


def csv_cell(value: object) -> object:
    """The CSV form of one cell: a string that a spreadsheet would run as a formula, prefixed
    with ``'``; any other value (numbers, booleans, NaN, other strings) unchanged.

    Args:
        value: the cell's value.
    """
    return "'" + value if isinstance(value, str) and _needs_quote(value) else value


def csv_uncell(text: str) -> str:
    """The string `csv_cell` was given, from the cell it wrote (what the CSV readers apply).

    Args:
        text: a cell as read from a CSV, as a string.
    """
    return text[1:] if text.startswith("'") and _needs_quote(text[1:]) else text


def csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with `csv_cell` applied to every string cell; numeric and boolean columns untouched.

    Args:
        df: the frame about to be written as CSV (not modified).
    """
    out = df.copy()
    for col in out.columns:
        if pd.api.types.is_numeric_dtype(out[col]) or pd.api.types.is_bool_dtype(out[col]):
            continue
        out[col] = out[col].map(csv_cell)
    return out


def csv_text(df: pd.DataFrame) -> str:
    """`df` as CSV text: no index, ``\n`` line ends, NaN as empty, floats by repr, every string
    cell through `csv_cell`; string cells quoted when one holds a carriage return.

    Args:
        df: the frame to write (not modified).
    """
    out = csv_frame(df)
    carriage_return = any(isinstance(v, str) and "\r" in v for col in out.columns if out[col].dtype.kind not in "biufc"
                          for v in out[col])
    return out.to_csv(index=False, lineterminator="\n", na_rep="",
                      quoting=csv.QUOTE_NONNUMERIC if carriage_return else csv.QUOTE_MINIMAL)


def uncsv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A frame read from CSV with every cell as a string, with `csv_uncell` applied to each.

    Args:
        df: read with ``dtype=str`` and no NA conversion (not modified).
    """
    return df.apply(lambda col: col.map(csv_uncell)) if len(df) else df


def md_text(text: object) -> str:
    """Markdown prose or a heading holding `text`: ``<``, ``>``, ``&`` HTML-escaped, line breaks
    as spaces.

    Args:
        text: any value; shown as ``str(text)``.
    """
    return html.escape(re.sub(r"[\r\n]+", " ", str(text)), quote=False)


def md_cell(text: object) -> str:
    """A markdown table cell holding `text`: `md_text`, then ``\\`` and ``|`` backslash-escaped.

    Args:
        text: any value; shown as ``str(text)``.
    """
    return md_text(text).replace("\\", "\\\\").replace("|", "\\|")
