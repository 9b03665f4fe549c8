"""Rankings as people enter them: rank numbers to tiers, JSON tiers, summaries."""

import doctest

import pytest

import grading.rankings
from grading.rankings import parse_tiers, summary, tiers_from_ranks


def test_the_examples_in_the_docstring_hold():
    assert doctest.testmod(grading.rankings, optionflags=doctest.ELLIPSIS).failed == 0


def test_equal_numbers_tie_and_gaps_do_not_matter():
    tiers, unranked = tiers_from_ranks({"a": 3, "b": 10, "c": 3, "d": 1})
    assert tiers == (("d",), ("a", "c"), ("b",)) and unranked == ()


def test_ids_without_a_number_stay_unranked():
    assert tiers_from_ranks({"a": None, "b": None}) == ((), ("a", "b"))


@pytest.mark.parametrize("value", [{"a": 1}, ["a"], [["a", 1]], [[["a"]]], "a", None])
def test_anything_but_a_list_of_lists_of_ids_is_refused(value):
    with pytest.raises(ValueError, match="list of lists"):
        parse_tiers(value)


def test_parsed_tiers_are_tuples():
    assert parse_tiers([["a"], ["b", "c"], []]) == (("a",), ("b", "c"), ())
    assert summary(parse_tiers([["a"], ["b", "c"]])) == "a > b = c"
