"""Every number formatter of the report (lenbench.report.formatting) prints no negative zero: a value
that rounds to zero at the printed precision reads "0…" whatever its sign, while a negative value
that does not round to zero keeps its sign; the CSVs write -0.0 as 0.0 and still round-trip."""

import io
import itertools
import math
import re

import pandas as pd
import pytest

from lenbench.report.formatting import (
    fixed,
    fmt_ci,
    fmt_ratio,
    fmt_seconds,
    fmt_times,
    fmt_value,
    to_csv_text,
)

#: Negative values at and around zero, down past every precision the formatters print.
TINY = (-0.0, -1e-300, -1e-12, -1e-9, -4e-7, -1e-6, -4e-5, -4e-4, -4.9e-3, -5e-3, -0.049)
#: The format specs the report prints floats with (3 decimals, ratios, seconds, heatmap cells).
SPECS = (".3f", ".2f", ".1f", ".3g", ".4g", "g")

#: Each formatter as value → text, with the specs it prints by (for the expected sign).
FORMATTERS = {
    "fmt_value": lambda v: fmt_value(v),
    "fmt_value exact_match": lambda v: fmt_value(v, "exact_match"),
    "fmt_value perplexity": lambda v: fmt_value(v, "perplexity"),
    "fmt_ci": lambda v: fmt_ci(v, v - 2e-4, v + 2e-4, "exact_match"),
    "fmt_ci half-width": lambda v: fmt_ci(0.5, 0.5 - v, 0.5 + v, "exact_match"),
    "fmt_ratio": lambda v: fmt_ratio(v),
    "fmt_seconds": lambda v: fmt_seconds(v),
    "fmt_times": lambda v: fmt_times(v),
}

NEGATIVE_ZERO = re.compile(r"(?<![\w.])-0(?:\.0*)?(?![\d.]*[1-9])")


def is_negative_zero(text: str) -> bool:
    """Whether `text` holds a number that reads as minus zero ("-0", "-0.000", "-0×", "-0 µs")."""
    return any(not re.search(r"[1-9]", m.group(0).split("e")[0]) for m in NEGATIVE_ZERO.finditer(text))


def test_the_detector_sees_a_negative_zero_and_only_that():
    assert all(is_negative_zero(t) for t in ("-0.000", "-0", "-0×", "x -0.00 µs", "-0.0 ± 0.1"))
    assert not any(is_negative_zero(t) for t in ("0.000", "-0.001", "-1e-09", "-0.010", "10-0", "2×"))


@pytest.mark.parametrize(("value", "spec"), list(itertools.product(TINY, SPECS)))
def test_fixed_prints_no_negative_zero_and_keeps_a_real_sign(value, spec):
    text = fixed(value, spec)
    plain = format(value, spec)
    assert not is_negative_zero(text), (value, spec, text)
    if is_negative_zero(plain):  # Python's own formatting shows "-0…": fixed drops only the sign
        assert text == plain[1:] == format(abs(value), spec)
    else:  # a negative value that prints as a nonzero number keeps its sign
        assert text == plain and text.startswith("-")


@pytest.mark.parametrize("name", FORMATTERS)
@pytest.mark.parametrize("value", TINY)
def test_no_formatter_prints_a_negative_zero(name, value):
    text = FORMATTERS[name](value)
    assert not is_negative_zero(text), f"{name}({value!r}) = {text!r}"


def test_a_value_rounding_to_zero_reads_as_the_positive_zero():
    assert fmt_value(-0.0004) == fmt_value(0.0004) == fmt_value(-0.0) == "0.000"
    assert fmt_value(-0.0006) == "-0.001"  # not zero at 3 decimals: the sign stays
    assert (fmt_ratio(-0.0), fmt_times(-0.001), fmt_seconds(-0.0)) == ("0×", "0.00×", "0 µs")
    assert fixed(-1e-9, ".4g") == "-1e-09"  # an exponent scales a nonzero mantissa: not a zero


def test_the_csv_writes_no_negative_zero_and_round_trips():
    df = pd.DataFrame({"value": [-0.0, -1e-9, 0.5, math.nan, -math.inf], "name": ["a", "b", "c", "d", "e"],
                       "n": [0, -1, 2, 3, 4]})
    text = to_csv_text(df)
    assert "-0.0" not in text.split(",") and "\n-0.0," not in text and ",-0.0\n" not in text
    assert [line.split(",")[0] for line in text.splitlines()[1:3]] == ["0.0", "-1e-09"]
    back = pd.read_csv(io.StringIO(text))
    assert back["value"].tolist()[:3] == [0.0, -1e-9, 0.5] and math.isnan(back["value"][3])
    assert math.copysign(1.0, back["value"][0]) == 1.0
    assert math.copysign(1.0, df["value"][0]) == -1.0  # the frame written is not modified
