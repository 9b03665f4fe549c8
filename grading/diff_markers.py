"""Integrity markers: cheap, explainable signals in a patch.

Which paths are tests or stray leftovers, and which added lines are debug
output, commented-out code or reach into the test runner; ``analyse_hunk``
gives a hunk's markers and the lines that carry them, ``configures_runner``
whether a file's change configures the test runner. ``grading.diffs``
attaches them to parsed patches.
"""

from __future__ import annotations

import ast
import keyword
import re
from functools import lru_cache

EDITS_TESTS = "edits_tests"
DELETES_TESTS = "deletes_tests"
STRAY_FILE = "stray_file"
DEBUG_OUTPUT = "debug_output"
COMMENTED_CODE = "commented_code"
WHITESPACE_ONLY = "whitespace_only"
BINARY = "binary"
LARGE_FILE = "large_file"
TAMPERS_WITH_TESTS = "tampers_with_tests"

LARGE_FILE_LINES = 1000

MARKER_LABELS = {
    EDITS_TESTS: "touches test files",
    DELETES_TESTS: "removes or disables tests",
    STRAY_FILE: "adds a leftover file (script, log, backup, build output)",
    DEBUG_OUTPUT: "leaves debug output in",
    COMMENTED_CODE: "adds commented-out code",
    WHITESPACE_ONLY: "whitespace-only change",
    BINARY: "changes a binary file",
    LARGE_FILE: f"changes more than {LARGE_FILE_LINES} lines of one file",
    TAMPERS_WITH_TESTS: "changes how the tests run or report: the runner's configuration, "
                        "its plugins or internals, a forged summary",
}


# --- path classification ---------------------------------------------------

_TEST_DIRS = frozenset({"tests", "test", "testing", "__tests__", "spec", "specs"})
_TEST_NAME_RE = re.compile(
    r"test_.*\.py|.*_tests?\.py|tests?\.py|conftest\.py|pytest\.ini"
    r"|.*[._-](?:test|spec)\.[cm]?[jt]sx?|.*_test\.go|.*Tests?\.(?:java|kt|swift|cs)"
    r"|.*_spec\.rb"
)
_STRAY_NAME_RE = re.compile(
    r"(?:repro|debug|tmp|temp)(?:[_\-.\d].*)?|scratch.*|.*(?:reproduc|replicat).*"
    r"|.*\.(?:orig|rej|bak|swp|pyc|tmp|db|sqlite3?)|.*~",
    re.IGNORECASE,
)
_STRAY_DIR_RE = re.compile(
    r"repro(?:[_\-.\d].*)?|scratch.*|.*(?:reproduc|replicat).*", re.IGNORECASE
)
# Fixture-like extensions that are leftovers outside test dirs only.
_STRAY_DATA_RE = re.compile(r".*\.(?:log|patch|diff)", re.IGNORECASE)
_ARTEFACT_ROOTS = frozenset({"build", "dist", ".tox", ".venv", "venv", ".eggs", ".pytest_cache"})
_ROOT_PY_FILES = frozenset({
    "setup.py", "conftest.py", "noxfile.py", "manage.py", "fabfile.py", "tasks.py",
    "dodo.py", "versioneer.py", "__init__.py", "__main__.py",
})

_PY_EXT = frozenset({"py", "pyi", "pyx"})
_SLASH_COMMENT_EXT = frozenset({
    "js", "jsx", "ts", "tsx", "mjs", "cjs", "go", "rs", "java", "kt", "scala",
    "c", "h", "cc", "cpp", "hpp", "cs", "swift", "php",
})
CODE_EXTENSIONS = _PY_EXT | _SLASH_COMMENT_EXT | {"rb", "sh", "bash", "pl", "lua", "r"}
_INDENT_EXT = _PY_EXT | {"yaml", "yml", "coffee", "pug", "sass", "haml"}


def extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def is_test_path(path: str) -> bool:
    """True for files under a test dir or named like a test (any language)."""
    *dirs, name = path.split("/")
    return _TEST_NAME_RE.fullmatch(name) is not None or any(d in _TEST_DIRS for d in dirs)


def is_stray_path(path: str, *, binary: bool = False) -> bool:
    """True if a NEW file at ``path`` looks like a leftover rather than a change."""
    *dirs, name = path.split("/")
    if _STRAY_NAME_RE.fullmatch(name):
        return True
    if _STRAY_DATA_RE.fullmatch(name) and not any(d in _TEST_DIRS for d in dirs):
        return True
    if dirs and (dirs[0] in _ARTEFACT_ROOTS or any(
            d in ("__pycache__", "node_modules") or d.endswith(".egg-info")
            or _STRAY_DIR_RE.fullmatch(d) for d in dirs)):
        return True
    return not dirs and (binary or (name.endswith(".py") and name not in _ROOT_PY_FILES))


# --- the test runner -----------------------------------------------------------

# Files that only configure pytest, and files that configure it among other tools (only
# their pytest sections count).
_RUNNER_CONFIG_NAMES = frozenset({"pytest.ini", ".pytest.ini"})
_SHARED_CONFIG_NAMES = frozenset({"tox.ini", "setup.cfg", "pyproject.toml"})
_SECTION_RE = re.compile(r"\s*\[[^\[\],=]+\]\s*(?:[#;].*)?")
_PYTEST_SECTION_RE = re.compile(r"\s*\[\s*(?:pytest|tool:pytest|tool\.pytest(?:\.ini_options)?)\s*\]")
# The options that choose what pytest loads, collects or counts as a pass.
_PYTEST_OPTION_RE = re.compile(
    r"\s*[\"']?(?:addopts|(?:required_)?plugins|python_(?:files|classes|functions)|testpaths"
    r"|norecursedirs|pythonpath|usefixtures|xfail_strict|confcutdir)[\"']?\s*=|\s*[\"']?-p[\s\"']"
)
# The runner's own source (pytest, pluggy, a pytest plugin's package): its code reaches
# into the runner by right.
_RUNNER_SOURCE_DIR_RE = re.compile(r"_?pytest(?:[_-]\w*)?|pluggy")
# What code outside the runner has no business with: pytest's internals, the hooks that
# decide or report an outcome, pytest's report, a printed summary.
_RUNNER_REACH_RE = re.compile(
    r"\b(?:_pytest|pluggy)\b|\bTestReport\b|short test summary info"
    r"|\bdef\s+pytest_(?:runtest_\w+|pyfunc_call|pycollect_makeitem|make_collect_report|report_\w+"
    r"|terminal_summary|sessionfinish|unconfigure)\b"
)
# In a test file, pytest's internals may serve a test (`from _pytest.pytester import ...`):
# only the outcome hooks, the report and a summary count there.
_TEST_REACH_RE = re.compile(
    r"\bTestReport\b|short test summary info"
    r"|\bdef\s+pytest_(?:runtest_\w+|pyfunc_call|pycollect_makeitem|make_collect_report|report_\w+"
    r"|terminal_summary|sessionfinish|unconfigure)\b"
)
_HARD_EXIT_RE = re.compile(r"\bos\._exit\s*\(")
_ATEXIT_RE = re.compile(r"\batexit\b")


def is_runner_source(path: str) -> bool:
    """True for a file of the test runner itself (under `_pytest/`, `pytest/`, `pluggy/`,
    a `pytest_*` plugin's package or module): a codebase that is the runner changes it by right."""
    *dirs, name = path.split("/")
    return any(_RUNNER_SOURCE_DIR_RE.fullmatch(part) for part in [*dirs, name.rsplit(".", 1)[0]])


def configures_runner(path: str, hunks: list[list[tuple[str, str]]]) -> bool:
    """True when a change to `path`, its hunks' (kind, text) lines, configures the test
    runner: pytest.ini, a pytest section or option of tox.ini, setup.cfg or pyproject.toml,
    or a package's `pytest11` entry points (a plugin pytest loads by itself)."""
    name = path.rsplit("/", 1)[-1]
    if name in _RUNNER_CONFIG_NAMES:
        return True
    if name == "entry_points.txt":
        return any("pytest11" in text for lines in hunks for _, text in lines)
    return name in _SHARED_CONFIG_NAMES and any(_changes_pytest_section(lines) for lines in hunks)


def _changes_pytest_section(lines: list[tuple[str, str]]) -> bool:
    """Whether a hunk of an ini or toml file changes a line of a pytest section, or, before
    the hunk shows which section it is in, a line that names a pytest option."""
    in_pytest = None  # no section header seen yet
    for kind, text in lines:
        if _SECTION_RE.fullmatch(text):
            in_pytest = _PYTEST_SECTION_RE.match(text) is not None
        if kind != " " and (in_pytest or (in_pytest is None and _PYTEST_OPTION_RE.match(text))):
            return True
    return False


def _reaches_into_runner(texts: list[str], is_test: bool) -> list[int]:
    """The indexes of `texts` (added code lines of one hunk) that reach into the test runner:
    its internals, outcome hooks or report, a forged summary, or an exit at interpreter exit
    (`atexit` and `os._exit` in the same hunk) that skips pytest's own exit status."""
    pattern = _TEST_REACH_RE if is_test else _RUNNER_REACH_RE
    found = [i for i, text in enumerate(texts) if pattern.search(text)]
    if any(_ATEXIT_RE.search(text) for text in texts) and any(_HARD_EXIT_RE.search(text) for text in texts):
        found += [i for i, text in enumerate(texts) if _HARD_EXIT_RE.search(text) or _ATEXIT_RE.search(text)]
    return sorted(set(found))


# --- line-level detectors ----------------------------------------------------

_DEBUG_RE = re.compile(
    r"(?<![\w.])(?<!def )print\s*\(|\bbreakpoint\s*\(\s*\)|\b(?:i?pdb|pudb)\.set_trace\s*\("
    r"|^\s*import\s+i?pdb\b|\bconsole\.(?:log|debug|trace)\s*\(|\blogging\.debug\s*\("
    r"|\bsys\.stderr\.write\s*\(|\bdebugger\s*;|\bdbg!\s*\("
)
# A literal-only pre-check: 20x cheaper than _DEBUG_RE on the lines that miss.
_DEBUG_HINT_RE = re.compile(r"print|breakpoint|pu?db|console\.|logging|stderr|debugger|dbg!")
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_TEST_DEF_RE = re.compile(
    r"\s*(?:(?:async\s+)?def\s+test|class\s+Test|func\s+Test|(?:it|test|describe)\s*\(|@Test\b)"
)
_ASSERT_RE = re.compile(r"\bassert|\bexpect\s*\(|\.raises\s*\(|\bself\.fail\b|\bt\.Fatal")
_SKIP_RE = re.compile(
    r"@pytest\.mark\.(?:skip|xfail)\b|@unittest\.(?:skip|expectedFailure)\b"
    r"|\bpytest\.(?:skip|xfail)\s*\(|\bself\.skipTest\s*\(|\b(?:it|test|describe)\.skip\s*\("
    r"|\bx(?:it|describe)\s*\(|\bt\.Skip(?:Now|f)?\s*\("
)
_PY_CLAUSE_RE = re.compile(r"(?:else|finally|try)\s*:|(?:elif|except)\b.*:")
_PY_HINT_RE = re.compile(
    r"[(=:\[]|^(?:return|import|from|raise|pass|break|continue|del|yield|assert)\b"
)
_PY_PRAGMA_RE = re.compile(
    r"(?:type|noqa|pylint|pyright|mypy|fmt|isort|pragma|flake8|ruff|nosec|coding)\b"
)
_PY_TOKEN_RE = re.compile(r"[^\W\d]\w*|\d[\w.]*|\S")
_PY_KEYWORDS = frozenset(keyword.kwlist + keyword.softkwlist)
_PY_OPEN_CALL_RE = re.compile(r"[\w.]+\s*(?:=\s*[\w.]+\s*)?\(.*[(,]")
_SLASH_CODE_RE = re.compile(
    r"(?:return\b.*|(?:const|let|var)\s+\w+\s*=.*|[\w.$\[\]]+\s*\(.*\)|[\w.$\[\]]+\s*[-+*/]?=[^=].*);"
    r"|(?:if|for|while|switch)\s*\(.*\)\s*\{?|\}\s*(?:else\b.*)?"
)


def _adjacent_operands(code: str) -> bool:
    """Two names/numbers in a row with no keyword between: prose, never Python."""
    previous = False
    for token in _PY_TOKEN_RE.findall(_STRING_RE.sub('""', code)):
        operand = (token[0].isalnum() or token[0] == "_") and token not in _PY_KEYWORDS
        if operand and previous:
            return True
        previous = operand
    return False


def _python_comment_verdict(body: str) -> bool | None:
    """The cheap part of the commented-code test: True/False, or None when
    only a parse can tell."""
    if _PY_CLAUSE_RE.fullmatch(body):
        return True
    if (len(body) > 200 or "\\" in body or _PY_PRAGMA_RE.match(body)
            or not _PY_HINT_RE.search(body) or _adjacent_operands(body)):
        return False
    return None


@lru_cache(maxsize=4096)  # vendored code repeats its comment lines
def _parses_as_statement(body: str) -> bool:
    try:
        tree = ast.parse(body + "\n    pass" if body.endswith(":") else body)
    except Exception:  # SyntaxError, or ValueError/RecursionError on odd input
        return _PY_OPEN_CALL_RE.fullmatch(body) is not None
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr):  # a bare name or sum is prose ("# well-known")
        return isinstance(first.value, ast.Call | ast.Await | ast.Yield | ast.YieldFrom)
    if isinstance(first, ast.AnnAssign):  # "# Note: this is slow"
        return first.value is not None
    return first is not None


class Budget:
    """Checking a comment costs up to ~15 us (a tokenise, maybe an ast.parse):
    cap the comments checked per patch so that a hostile patch of 100k
    code-like comments still parses fast. Comments past the cap are not flagged."""

    def __init__(self, comments: int = 5_000) -> None:
        self.comments = comments


def _commented_code(stripped: str, ext: str, budget: Budget) -> bool:
    if ext in _PY_EXT and stripped.startswith("#") and not stripped.startswith("#!"):
        body = stripped.lstrip("#").strip()
        if not body or budget.comments <= 0:
            return False
        budget.comments -= 1
        verdict = _python_comment_verdict(body)
        return _parses_as_statement(body) if verdict is None else verdict
    if ext in _SLASH_COMMENT_EXT and stripped.startswith("//") and not stripped.startswith("///"):
        body = stripped[2:].strip()
        return bool(body) and _SLASH_CODE_RE.fullmatch(body) is not None
    return False


def _debug_output(text: str, ext: str) -> bool:
    if not _DEBUG_HINT_RE.search(text) or not _DEBUG_RE.search(text):
        return False
    code = _STRING_RE.sub('""', text)
    code = code.split("#", 1)[0] if ext in _PY_EXT else code.split("//", 1)[0]
    return _DEBUG_RE.search(code) is not None


def _same_modulo_whitespace(a: list[str], b: list[str], keep_indent: bool) -> bool:
    if keep_indent:
        if sum(1 for line in a if line.strip()) != sum(1 for line in b if line.strip()):
            return False
        return normalise_whitespace("\n".join(a)) == normalise_whitespace("\n".join(b))
    return " ".join(a).split() == " ".join(b).split()  # also ignores re-wrapping


def normalise_whitespace(text: str, *, keep_indent: bool = True) -> str:
    """Drop blank lines and line-ending/trailing whitespace, collapse runs of
    inner whitespace; leading indentation is kept unless ``keep_indent`` is
    false (it is meaningful in Python).

    >>> normalise_whitespace("if x:\\r\\n    y  =  1   \\n\\n")
    'if x:\\n    y = 1'
    """
    out = []
    for line in text.replace("\r\n", "\n").split("\n"):
        body = " ".join(line.split())
        if body:
            out.append(line[: len(line) - len(line.lstrip())] + body if keep_indent else body)
    return "\n".join(out)


def analyse_hunk(lines: list[tuple[str, str]], ext: str, is_test: bool, check_code: bool,
                  is_new: bool, budget: Budget, check_runner: bool = False) -> tuple[frozenset[str], tuple]:
    """Hunk-level markers and (line index, marker) pairs for one hunk. `check_runner`: look
    for lines that reach into the test runner (a Python file, not the runner's own)."""
    markers: set[str] = set()
    flagged: list[tuple[int, str]] = []
    runner_lines: list[tuple[int, str]] = []  # added code lines, for _reaches_into_runner
    python = ext in _PY_EXT
    # Inside a triple-quoted string on the post-image side. A hunk that starts
    # inside a docstring gets this backwards; it then misses flags, never adds.
    in_string = False
    tests = asserts = 0  # added minus removed, in test files
    for i, (kind, text) in enumerate(lines):
        stripped = text.strip()
        if is_test and kind != " " and not stripped.startswith(("#", "//")):
            sign = -1 if kind == "-" else 1
            tests += sign * (_TEST_DEF_RE.match(text) is not None)
            asserts += sign * (_ASSERT_RE.search(text) is not None)
            if kind == "+" and not is_new and _SKIP_RE.search(text):
                markers.add(DELETES_TESTS)
        if kind == "-":
            continue
        quoted = in_string
        if python and ('"""' in text or "'''" in text):
            if (text.count('"""') + text.count("'''")) % 2:
                in_string = not in_string
                quoted = True
        # A string in code may be a forged summary or a conftest written out; in a test, a
        # string is what a test of pytest itself feeds pytester.
        if kind == "+" and check_runner and not stripped.startswith("#") and not (quoted and is_test):
            runner_lines.append((i, text))
        if kind != "+" or quoted or not check_code:
            continue
        if _commented_code(stripped, ext, budget):
            flagged.append((i, COMMENTED_CODE))
        elif not is_test and _debug_output(text, ext):
            flagged.append((i, DEBUG_OUTPUT))
    reaching = {runner_lines[j][0] for j in _reaches_into_runner([t for _, t in runner_lines], is_test)}
    if reaching:  # the line's stronger marker: a forged summary printed is not debug output
        flagged = sorted([(i, m) for i, m in flagged if i not in reaching]
                         + [(i, TAMPERS_WITH_TESTS) for i in reaching])
    if tests < 0 or asserts < 0:
        markers.add(DELETES_TESTS)
    removed = [t for k, t in lines if k == "-"]
    added = [t for k, t in lines if k == "+"]
    if _same_modulo_whitespace(removed, added, keep_indent=ext in _INDENT_EXT):
        markers.add(WHITESPACE_ONLY)
    markers.update(m for _, m in flagged)
    return frozenset(markers), tuple(flagged)
