"""The ranking vocabulary: rank numbers and tiers, validation against the passing ids, summaries."""

import ast
import doctest
from pathlib import Path

import pytest

import grading.rankings
from grading.rankings import (
    InvalidRanking,
    parse_tiers,
    ranks_from_tiers,
    summary,
    tiers_from_ranks,
    validate_ranking,
)

ROOT = Path(grading.rankings.__file__).parents[1]
VOCABULARY = {"FLAGS", "InvalidRanking", "validate_ranking", "ranks_from_tiers", "tiers_from_ranks",
              "parse_tiers", "summary"}


def test_the_examples_in_the_docstring_hold():
    result = doctest.testmod(grading.rankings)
    assert result.attempted >= 4 and result.failed == 0


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


def test_ranks_skip_past_ties_and_give_back_the_same_tiers():
    tiers = (("b",), ("a", "c"), ("d",))
    assert ranks_from_tiers(tiers) == {"b": 1, "a": 2, "c": 2, "d": 4}
    assert tiers_from_ranks(ranks_from_tiers(tiers)) == (tiers, ())


def test_a_valid_ranking_comes_back_as_tuples():
    assert validate_ranking([["b"], ["a", "c"]], ["a", "b", "c"], {"c": ["debug_leftovers"]}) == (
        ("b",), ("a", "c"))


@pytest.mark.parametrize(("tiers", "flags", "message"), [
    ([["a"], ["a"]], {}, "ranked more than once: a; passing but not ranked: b"),
    ([["a", "b", "x"]], {}, "not a passing trajectory of this group: x"),
    ([["a"], [], ["b"]], {}, "a tier is empty"),
    ([["a", "b"]], {"x": []}, "flags for an id that is not ranked: x"),
    ([["a", "b"]], {"a": ["sloppy"]}, "unknown flags for a: sloppy (allowed: reward_hacking, "),
])
def test_an_invalid_ranking_says_every_problem(tiers, flags, message):
    with pytest.raises(InvalidRanking) as error:
        validate_ranking(tiers, ["a", "b"], flags)
    assert str(error.value).startswith(message)


def test_the_vocabulary_imports_nothing_from_grading():
    tree = ast.parse(Path(grading.rankings.__file__).read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "." for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.startswith(("grading", "."))]


def test_every_module_takes_the_vocabulary_from_grading_rankings():
    """No other grading module re-exports it, so there is one place to read and change it."""
    offenders = []
    for folder in ("grading", "webapp", "workers", "tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            offenders += [f"{path.relative_to(ROOT)}: from {node.module} import {alias.name}"
                          for node in ast.walk(ast.parse(path.read_text()))
                          if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grading")
                          and node.module != "grading.rankings"
                          for alias in node.names if alias.name in VOCABULARY]
    assert offenders == []
