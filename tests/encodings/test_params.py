"""The constructor checks of `lenbench.encodings.params`: `one_of` refuses two parameters that set one quantity."""
import copy

import pytest
from lenbench_testing import TINY_SUITE, suite_load_error, write_suite

from lenbench.encodings.params import one_of


def test_one_of_accepts_none_or_one_parameter():
    one_of("fire", "the initial threshold", threshold=None, threshold_fraction=None)
    one_of("fire", "the initial threshold", threshold=None, threshold_fraction=0.25)
    one_of("fire", "the initial threshold", threshold=0, threshold_fraction=None)  # 0 is given, not absent


def test_one_of_names_every_parameter_given_in_one_line():
    with pytest.raises(ValueError) as err:
        one_of("x", "the scale", a=1, b=None, c=2.5, d="s")
    assert str(err.value) == "encoding 'x': a = 1 and c = 2.5 and d = 's' both set the scale; keep one"


@pytest.mark.parametrize("encoding, params", [
    ("fire", {"threshold": 100, "threshold_fraction": 0.25}),
    ("xpos", {"scale_base": 100, "scale_base_fraction": 0.5}),
    ("cope", {"npos_max": 8, "npos_fraction": 1.0}),
    ("randomized", {"max_position": 100, "max_position_factor": 4}),
])
def test_a_suite_setting_both_forms_fails_at_load_naming_both(tmp_path, encoding, params):
    suite = copy.deepcopy(TINY_SUITE)
    suite["encodings"] = [{"name": encoding, "params": params}]
    text = suite_load_error(write_suite(tmp_path, suite))
    first, second = params
    assert f"{first} = {params[first]!r} and {second} = {params[second]!r} both set" in text and "keep one" in text
