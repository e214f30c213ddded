"""Row labels shared by the compute path and the report, with no torch: the baseline encodings'
prefix and the bucket labels of bucketed measurements.

A row's `encoding` is `baseline:<name>` for a chance / trivial baseline (`lenbench.baselines`),
and its `bucket` is "" for a whole-length measurement, else `<kind>:<lo>-<hi>`: `pos:0-31` (lm
targets at window positions 0 … 31 inclusive) or `depth:0.20-0.40` (passkey needles at depth
fraction [0.2, 0.4), the last bucket closed). The evaluation writes these labels; the report and
`compare` read them; neither needs the other's imports.
"""

from __future__ import annotations

#: The `variant` of a row measured on the model as trained (no inference-time variant).
BASE_VARIANT = "none"
#: Prefix of a baseline row's encoding label ("baseline:chance", "baseline:unigram", …).
BASELINE_PREFIX = "baseline:"


def is_baseline(encoding: str) -> bool:
    """Whether a row's encoding label is a baseline ("baseline:chance", …)."""
    return encoding.startswith(BASELINE_PREFIX)


def position_bucket(lo: int, hi: int) -> str:
    """Label of the targets at positions lo … hi (inclusive)."""
    return f"pos:{lo}-{hi}"


def depth_bucket(lo: float, hi: float) -> str:
    """Label of the needle depths in [lo, hi)."""
    return f"depth:{lo:.2f}-{hi:.2f}"


def parse_bucket(label: str) -> tuple[str, float, float] | None:
    """(kind, lo, hi) of a bucket label, None for "" (a whole-length row).

    >>> parse_bucket("pos:0-31"), parse_bucket("depth:0.20-0.40"), parse_bucket("")
    (('pos', 0.0, 31.0), ('depth', 0.2, 0.4), None)
    """
    if not label:
        return None
    kind, sep, span = label.partition(":")
    lo, dash, hi = span.partition("-")
    try:
        if not (sep and dash):
            raise ValueError
        return kind, float(lo), float(hi)
    except ValueError:
        raise ValueError(f"bucket {label!r} is not of the form '<kind>:<lo>-<hi>' (e.g. 'pos:0-31', "
                         f"'depth:0.20-0.40', or '' for a whole-length row)") from None


def error_line(err: BaseException) -> str:
    """An exception as a row's ``error`` (and a log's) one line: "Type: first line of its message"."""
    return f"{type(err).__name__}: {err}".splitlines()[0]
