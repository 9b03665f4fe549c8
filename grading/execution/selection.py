"""Which files of a patch are tests, and which of the codebase's tests a change concerns.

A file is a test by the rule the heuristic grader and the review pages use
(`diff_markers.is_test_path`, through `diffs.parse_patch`): under a test folder, or named
like a test. A change that configures the test runner (`diff_markers.configures_runner`:
pytest.ini, a pytest section of tox.ini...) is neither code nor a test: test machinery,
which no run applies, so that the runner runs as the codebase configures it. A patch
splits at its `diff --git` lines, one section per file, each a patch that applies on its own.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from grading.diff_markers import CODE_EXTENSIONS, extension, is_test_path
from grading.diffs import DELETED, parse_patch

_FILE_START = re.compile(r"^(?=diff --git )", re.MULTILINE)
_TEST_PREFIX = "test_"
_TEST_SUFFIXES = ("_tests", "_test", "_spec", ".test", ".spec", "Tests", "Test")
# Test files that hold no tests of their own: pytest reads them, a selection never names them.
_CONFTEST = "conftest.py"
_NOT_RUN = frozenset({_CONFTEST, "__init__.py"})


class PatchSplitError(ValueError):
    """A patch that cannot be cut into one patch per file: a plain diff of several files
    (no `diff --git` lines to cut at), or a file section that does not parse."""

    permanent = True


@dataclass(frozen=True)
class FilePatch:
    """One file's section of a patch: its path (the new one; the old one when deleted),
    whether it is a test file, whether the patch deletes it, its text, and whether it
    configures the test runner."""

    path: str
    is_test: bool
    deleted: bool
    text: str
    configures_runner: bool = False

    @property
    def is_machinery(self) -> bool:
        """The runner's configuration, or a conftest.py: a plugin pytest loads by itself."""
        return self.configures_runner or posixpath.basename(self.path) == _CONFTEST


def file_patches(patch: str) -> list[FilePatch]:
    """The sections of `patch`, one per file, in order. Text before the first file (a
    commit message) is left out, as `git apply` leaves it. Raises PatchSplitError."""
    if not patch.strip():
        return []
    preamble, *sections = _FILE_START.split(patch)
    if not sections:
        sections = [preamble]  # a plain unified diff: one file, or PatchSplitError below
    elif parse_patch(preamble).files:
        raise PatchSplitError("a file's diff comes before the first 'diff --git' line")
    files = []
    for text in sections:
        parsed = parse_patch(text)
        if parsed.error is not None or len(parsed.files) != 1:
            reason = parsed.error or f"{len(parsed.files)} files in one section"
            raise PatchSplitError(f"cannot cut the patch by file: {reason}")
        diff = parsed.files[0]
        files.append(FilePatch(diff.path, diff.is_test, diff.status == DELETED, text, diff.configures_runner))
    return files


def split_patch(patch: str) -> tuple[str, str]:
    """(code part, test part): the patch's non-test files and its test files, each a patch
    of its own ("" when there is none), neither with its changes to the runner's
    configuration. Raises PatchSplitError."""
    files = [f for f in file_patches(patch) if not f.configures_runner]
    return (join_patches(*(f.text for f in files if not f.is_test)),
            join_patches(*(f.text for f in files if f.is_test)))


def machinery_paths(patch: str) -> list[str]:
    """The files of `patch` that configure the test runner or are conftest.py files: what a
    run of the reward's tests leaves out, as it leaves out the test patch's files. Raises
    PatchSplitError."""
    return [f.path for f in file_patches(patch) if f.is_machinery]


def without_files(patch: str, paths: Iterable[str]) -> str:
    """`patch` less its sections for `paths`: what SWE-bench's harness does when it resets
    the test files its test patch touches before applying it. Raises PatchSplitError."""
    dropped = set(paths)
    return join_patches(*(f.text for f in file_patches(patch) if f.path not in dropped))


def join_patches(*patches: str) -> str:
    """One patch of several whose files differ, each section ending its last line."""
    return "".join(text if text.endswith("\n") else text + "\n" for text in patches if text.strip())


def runnable_test_files(test_part: str) -> list[str]:
    """The test files of `test_part` a test command can be given: added or changed, of a
    programming language, not a conftest."""
    return [f.path for f in file_patches(test_part)
            if f.is_test and not f.deleted and runnable_test_path(f.path)]


def runnable_test_path(path: str) -> bool:
    """Whether a test command can be given the file `path`: a test file of a programming
    language that holds tests of its own (not a conftest or a package's `__init__`)."""
    return (is_test_path(path) and extension(path) in CODE_EXTENSIONS
            and posixpath.basename(path) not in _NOT_RUN)


def named_after_touched_modules(touched: Sequence[str], codebase_files: Sequence[str]) -> list[str]:
    """The default rule for a change's existing tests: the test files of the codebase
    named after a module the change touches (`calc.py` -> `test_calc.py`,
    `tests/test_calc.py`, `pkg/tests/test_calc.py`, `calc_test.go`, `calc.test.js`...), in
    the order of `touched`, each once. A package's `__init__.py` is named after its folder.

    A rule is any function of (touched code paths, most touched first; the codebase's
    files) to test files, best first: the planner keeps as many as the budget allows."""
    by_module: dict[str, list[str]] = {}
    for path in codebase_files:
        module = _tested_module(path)
        if module and is_test_path(path):
            by_module.setdefault(module, []).append(path)
    selected: dict[str, None] = {}
    for path in touched:
        for test in sorted(by_module.get(_module_name(path), ())):
            selected.setdefault(test)
    return list(selected)


def _module_name(path: str) -> str:
    folder, name = posixpath.split(path)
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return posixpath.basename(folder) if stem == "__init__" and folder else stem


def _tested_module(test_path: str) -> str | None:
    """The module a test file is named after (`test_calc.py`, `calc_test.go`,
    `CalcTest.java` -> `calc`, `Calc`); None for a file named after no module."""
    name = posixpath.basename(test_path)
    stem = name.rsplit(".", 1)[0] if "." in name else name
    if stem.startswith(_TEST_PREFIX):
        return stem.removeprefix(_TEST_PREFIX) or None
    suffix = next((s for s in _TEST_SUFFIXES if stem.endswith(s)), None)
    if suffix is None:
        return None
    return stem.removesuffix(suffix) or None
