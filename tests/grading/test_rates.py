import doctest

import pytest

from grading import rates
from grading.rates import wilson


def test_the_wilson_interval_matches_the_textbook_values():
    assert doctest.testmod(rates).failed == 0
    rate = wilson(0, 20, "wrong")
    assert (rate.label, rate.value, rate.interval[0]) == ("wrong", 0.0, 0.0)
    assert rate.interval[1] == pytest.approx(0.16113, abs=1e-5)


def test_no_trials_has_no_share_and_no_interval():
    assert wilson(0, 0).value is None and wilson(0, 0).interval is None
