"""Loading graders and backends by registered name or `module:Class`, and the errors that say why not."""

import doctest
import json
import sys

import pytest

import grading.loading
from grading.backends import load_backend
from grading.cases import GraderError
from grading.graders.base import load_grader
from grading.graders.heuristic import HeuristicGrader
from grading.loading import ImportFailed, LoadError, load_object, resolve

REGISTRY = {"decoder": "json:JSONDecoder"}
EXTRAS = "(extras: 'llm' installs transformers and xgrammar, 'gpu' installs vllm)"


def test_the_examples_in_the_docstrings_hold():
    result = doctest.testmod(grading.loading)
    assert result.attempted >= 2 and result.failed == 0


def test_a_registered_name_and_a_dotted_path_load_the_same_class():
    assert load_object("decoder", REGISTRY, what="decoder") is json.JSONDecoder
    assert load_object("json:JSONDecoder", REGISTRY, what="decoder") is json.JSONDecoder


@pytest.mark.parametrize("name", ["yaml", "json:", ":JSONDecoder", ""])
def test_a_name_that_is_neither_registered_nor_module_class_is_unknown(name):
    with pytest.raises(LoadError) as error:
        resolve(name, REGISTRY, what="decoder")
    assert str(error.value) == f"unknown decoder {name!r} (known: decoder, or module:Class)"


def test_resolving_imports_nothing():
    assert resolve("gagar_nowhere:Thing", REGISTRY, what="decoder") == ("gagar_nowhere", "Thing")
    assert "gagar_nowhere" not in sys.modules


def test_a_module_that_does_not_import_says_so():
    with pytest.raises(ImportFailed) as error:
        load_object("gagar_nowhere:Thing", REGISTRY, what="decoder")
    assert str(error.value) == "cannot load decoder 'gagar_nowhere:Thing': No module named 'gagar_nowhere'"


def test_a_module_without_the_class_says_so_and_is_no_import_failure():
    with pytest.raises(LoadError) as error:
        load_object("json:Missing", REGISTRY, what="decoder")
    assert not isinstance(error.value, ImportFailed)
    assert str(error.value) == "cannot load decoder 'json:Missing': module 'json' has no attribute 'Missing'"


def test_graders_load_by_name_or_path_and_fail_permanently_with_the_reason():
    assert isinstance(load_grader("grading.graders.heuristic:HeuristicGrader"), HeuristicGrader)
    with pytest.raises(GraderError, match=r"^unknown grader 'llm' \(known: agentic, heuristic, hybrid, "
                                          r"or module:Class\)$") as unknown:
        load_grader("llm")
    with pytest.raises(GraderError, match="^cannot load grader 'grading.graders.heuristic:Missing': "
                                          "module 'grading.graders.heuristic' has no attribute") as missing:
        load_grader("grading.graders.heuristic:Missing")
    assert unknown.value.permanent and missing.value.permanent


def test_a_backend_that_does_not_import_points_at_the_extras_and_an_unknown_one_does_not():
    with pytest.raises(GraderError) as missing:
        load_backend("gagar_nowhere:Backend")
    assert str(missing.value) == ("cannot load backend 'gagar_nowhere:Backend': "
                                  f"No module named 'gagar_nowhere' {EXTRAS}")
    with pytest.raises(GraderError) as unknown:
        load_backend("tgi")
    assert str(unknown.value) == "unknown backend 'tgi' (known: openai, transformers, vllm, or module:Class)"
    assert missing.value.permanent and unknown.value.permanent
