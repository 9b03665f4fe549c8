"""A reward's test names as pytest node ids.

SWE-bench names most tests by pytest's node id (`tests/test_x.py::TestA::test_b[1]`), but
a repository whose own runner names tests otherwise keeps that runner's names: sympy's
`bin/test` prints the bare function name (`test_col_insert`). A test command given a bare
name takes it for a path. `pytest_node_ids` finds each bare name in the test files the
reward ran (SWE-bench runs the files its test patch touches) and names it by its node id
there, so that pytest runs exactly the reward's tests and its `-rA` summary reports them.

SWE-bench's logs are read word by word, so a parameter with a space is cut there
(`test_x[a and b]` is `test_x[a`): pytest finds no such test and runs none of the others.
Such a name (a `[` never closed) runs as its function, every parameter set
(`unparametrized`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping


def is_node_id(test: str) -> bool:
    """Whether `test` already names its file (`path.py::test`, `path/to/test_x.py`)."""
    name = test.partition("[")[0]  # a parameter may hold anything
    return "::" in name or "/" in name or name.endswith(".py")


def unparametrized(test: str) -> str:
    """`test` less a parameter part that was cut short (`path::test_x[a` -> `path::test_x`)."""
    head, bracket, _ = test.partition("[")
    return head if bracket and not test.endswith("]") else test


def defined_tests(source: str) -> dict[str, list[str]]:
    """{function name: [its node id's part after the file, ...]} for the test functions a
    pytest run of `source` could collect: module-level functions (`test_x`) and methods of
    classes, nested classes included (`TestA::test_x`, `TestA::TestB::test_x`). {} when the
    source does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, list[str]] = {}

    def visit(body: Iterable[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.setdefault(node.name, []).append(prefix + node.name)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}::")

    visit(tree.body, "")
    return found


def pytest_node_ids(tests: Iterable[str], files: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(node ids, names found nowhere): each test of `tests` that is already a node id as
    it is; each bare name (`test_x`, or `test_x[param]`) as `path::test_x[param]` for every
    file of `files` ({path: source}, in the order given) that defines it, at module level
    or in a class. A parameter part cut short is dropped (`unparametrized`). A name
    defined in several files runs in each, as the runner that named it ran them all. The
    node ids are in the order of `tests`, each once."""
    defined = {path: defined_tests(source) for path, source in files.items()}
    ids: dict[str, None] = {}
    missing: list[str] = []
    for test in map(unparametrized, tests):
        if is_node_id(test):
            ids.setdefault(test)
            continue
        name, bracket, parameters = test.partition("[")
        found = [f"{path}::{where}{bracket}{parameters}"
                 for path, functions in defined.items() for where in functions.get(name, ())]
        if not found:
            missing.append(test)
        for node_id in found:
            ids.setdefault(node_id)
    return list(ids), missing
