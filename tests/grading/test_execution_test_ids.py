"""A reward's test names as pytest node ids (grading.execution.test_ids)."""

from grading.execution.test_ids import defined_tests, is_node_id, pytest_node_ids

SOURCE = '''
import pytest

def helper():
    pass

def test_col_insert():
    def test_inner():  # not collected: nested in a function
        pass

class TestMatrix:
    def test_shape(self):
        pass

    class TestNested:
        async def test_deep(self):
            pass
'''


def test_functions_are_named_by_their_place_in_the_file():
    found = defined_tests(SOURCE)
    assert found["test_col_insert"] == ["test_col_insert"]
    assert found["test_shape"] == ["TestMatrix::test_shape"]
    assert found["test_deep"] == ["TestMatrix::TestNested::test_deep"]
    assert "test_inner" not in found
    assert defined_tests("def broken(:\n") == {}


def test_node_ids_are_kept_and_bare_names_found_in_the_files():
    files = {"pkg/tests/test_a.py": SOURCE,
             "pkg/tests/test_b.py": "def test_col_insert():\n    pass\n"}
    ids, missing = pytest_node_ids(
        ["test_col_insert", "test_shape", "test_shape[2]", "pkg/tests/test_c.py::test_x",
         "test_nowhere", "test_col_insert"], files)
    assert ids == ["pkg/tests/test_a.py::test_col_insert", "pkg/tests/test_b.py::test_col_insert",
                   "pkg/tests/test_a.py::TestMatrix::test_shape",
                   "pkg/tests/test_a.py::TestMatrix::test_shape[2]", "pkg/tests/test_c.py::test_x"]
    assert missing == ["test_nowhere"]


def test_a_parameter_cut_at_a_space_runs_the_whole_function():
    ids, missing = pytest_node_ids(["t/test_m.py::TestK::test_sel[xxx", "t/test_m.py::test_ok[1-2]",
                                    "test_shape[a"], {"t/test_a.py": SOURCE})
    assert ids == ["t/test_m.py::TestK::test_sel", "t/test_m.py::test_ok[1-2]",
                   "t/test_a.py::TestMatrix::test_shape"]
    assert missing == []


def test_what_names_a_file():
    assert is_node_id("tests/test_x.py::test_y")
    assert is_node_id("test_requests.py::RequestsTestCase::test_get")
    assert is_node_id("tests/test_x.py")
    assert not is_node_id("test_col_insert")
    assert not is_node_id("test_x[a/b.py]")  # a parameter may hold anything
