import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grading import diff_markers, diffs
from grading.diff_markers import Budget
from grading.diffs import (
    BINARY,
    COMMENTED_CODE,
    DEBUG_OUTPUT,
    DELETES_TESTS,
    EDITS_TESTS,
    LARGE_FILE,
    MARKER_LABELS,
    STRAY_FILE,
    TAMPERS_WITH_TESTS,
    WHITESPACE_ONLY,
    align_files,
    equivalence_classes,
    is_stray_path,
    is_test_path,
    normalise_whitespace,
    parse_patch,
    patch_stats,
    unique_files,
)
from grading.interdiff import interdiff


def hunk(*lines, start=10):
    """A hunk from lines that start with " ", "+" or "-", counts filled in."""
    old = sum(1 for line in lines if line[0] != "+")
    new = sum(1 for line in lines if line[0] != "-")
    head = f"@@ -{start if old else 0},{old} +{start if new else 0},{new} @@ def f():\n"
    return head + "".join(line + "\n" for line in lines)


def section(path, *hunks, old_path=None, new=False, deleted=False):
    """One file of a ``git diff``."""
    old_path = old_path or path
    head = f"diff --git a/{old_path} b/{path}\n"
    if new:
        head += "new file mode 100644\nindex 0000000..1111111\n--- /dev/null\n"
    elif deleted:
        head += "deleted file mode 100644\nindex 1111111..0000000\n"
    else:
        if old_path != path:
            head += f"similarity index 90%\nrename from {old_path}\nrename to {path}\n"
        head += "index 1111111..2222222 100644\n"
    if not new:
        head += f"--- a/{old_path}\n"
    head += "+++ /dev/null\n" if deleted else f"+++ b/{path}\n"
    return head + "".join(hunks)


def one_file(path, *lines, new=False):
    return parse_patch(section(path, hunk(*lines), new=new)).files[0]


FIX = section("pkg/core.py", hunk("     a = 1", "-    return a", "+    return a + 1", "     # end"))


# --- parsing ----------------------------------------------------------------------


def test_it_parses_a_modified_file():
    parsed = parse_patch(FIX)

    assert parsed.error is None
    (f,) = parsed.files
    assert (f.path, f.old_path, f.status, f.added, f.removed) == (
        "pkg/core.py", "pkg/core.py", "modified", 1, 1)
    (h,) = f.hunks
    assert h.header == "@@ -10,3 +10,3 @@ def f():"
    assert (h.source_start, h.target_start, h.added, h.removed) == (10, 10, 1, 1)
    assert h.lines == ((" ", "    a = 1"), ("-", "    return a"), ("+", "    return a + 1"),
                       (" ", "    # end"))
    assert (parsed.added, parsed.removed) == (1, 1)
    assert parsed.file("pkg/core.py") is f
    assert parsed.file("nope.py") is None


def test_it_parses_new_deleted_and_renamed_files():
    text = (
        section("pkg/new.py", hunk("+x = 1", "+y = 2"), new=True)
        + section("pkg/old.py", hunk("-gone = True"), deleted=True)
        + section("pkg/after.py", hunk(" a", "-b", "+c"), old_path="pkg/before.py")
    )

    new, gone, moved = parse_patch(text).files

    assert (new.path, new.old_path, new.status, new.added) == ("pkg/new.py", None, "added", 2)
    assert (gone.path, gone.old_path, gone.status, gone.removed) == (
        "pkg/old.py", "pkg/old.py", "deleted", 1)
    assert (moved.path, moved.old_path, moved.status) == (
        "pkg/after.py", "pkg/before.py", "renamed")


def test_a_pure_rename_has_no_hunks():
    text = ("diff --git a/x.py b/y.py\nsimilarity index 100%\n"
            "rename from x.py\nrename to y.py\n")

    (f,) = parse_patch(text).files

    assert (f.path, f.old_path, f.status, f.hunks) == ("y.py", "x.py", "renamed", ())


def test_a_binary_change_is_a_binary_file():
    text = ("diff --git a/img/logo.png b/img/logo.png\nindex 1111111..2222222 100644\n"
            "Binary files a/img/logo.png and b/img/logo.png differ\n") + FIX

    parsed = parse_patch(text)

    logo = parsed.file("img/logo.png")
    assert (logo.status, logo.old_path, logo.hunks) == ("binary", "img/logo.png", ())
    assert BINARY in logo.markers and BINARY in parsed.markers
    assert parsed.file("pkg/core.py").status == "modified"


def test_the_no_newline_marker_is_not_a_line():
    text = section("a.txt", hunk("-old", "+new")) + "\\ No newline at end of file\n"

    (h,) = parse_patch(text).files[0].hunks

    assert h.lines == (("-", "old"), ("+", "new"))


def test_crlf_content_lines_lose_only_their_line_ending():
    text = section("win.txt", hunk(" keep\r", "-old\r", "+new\r"))

    (h,) = parse_patch(text).files[0].hunks

    assert h.lines == ((" ", "keep"), ("-", "old"), ("+", "new"))


def test_a_patch_saved_with_crlf_throughout_parses():
    parsed = parse_patch(FIX.replace("\n", "\r\n"))

    assert parsed.error is None
    assert parsed.files[0].path == "pkg/core.py"
    assert parsed.files[0].hunks[0].lines[2] == ("+", "    return a + 1")


def test_non_ascii_content_and_quoted_paths():
    text = ('diff --git "a/docs/caf\\303\\251.md" "b/docs/caf\\303\\251.md"\n'
            "index 1111111..2222222 100644\n"
            '--- "a/docs/caf\\303\\251.md"\n+++ "b/docs/caf\\303\\251.md"\n'
            + hunk("-Привет", "+你好 ✓"))

    (f,) = parse_patch(text).files

    assert f.path == "docs/café.md"
    assert f.hunks[0].lines == (("-", "Привет"), ("+", "你好 ✓"))


def test_a_form_feed_in_content_does_not_split_lines():
    (f,) = parse_patch(section("a.py", hunk("-x = 1\x0c", "+x = 2\u2028"))).files

    assert f.hunks[0].lines == (("-", "x = 1\x0c"), ("+", "x = 2\u2028"))


@pytest.mark.parametrize("text", ["", "\n", "   \n\n"])
def test_an_empty_patch_has_no_files_and_no_error(text):
    parsed = parse_patch(text)

    assert (parsed.files, parsed.error, parsed.added, parsed.markers) == ((), None, 0, frozenset())


def test_text_that_is_not_a_diff_sets_error():
    parsed = parse_patch("I fixed the bug, see above.\n")

    assert parsed.files == ()
    assert parsed.error


def test_a_malformed_section_keeps_the_files_that_parsed():
    broken = section("pkg/broken.py").rstrip("\n") + "\n@@ -1,5 +1,5 @@\n-only one line\n"
    text = FIX + broken + section("pkg/later.py", hunk("+ok = True"))

    parsed = parse_patch(text)

    assert parsed.error.startswith("file section at line 10: ")
    assert [f.path for f in parsed.files] == ["pkg/core.py", "pkg/later.py"]


def test_a_truncated_patch_sets_error():
    parsed = parse_patch(FIX[: len(FIX) - 30])

    assert parsed.error
    assert parsed.files == ()


def test_non_text_input_sets_error():
    assert parse_patch(None).error
    assert parse_patch(FIX.encode()).files[0].path == "pkg/core.py"


def test_line_numbers_are_old_for_removed_new_for_added_and_both_for_context():
    text = ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -173,7 +177,8 @@ def f():\n"
            " a\n b\n c\n-d\n+e\n+f\n g\n h\n i\n")
    (h,) = parse_patch(text).files[0].hunks

    assert h.line_numbers() == [(173, 177), (174, 178), (175, 179), (176, None), (None, 180), (None, 181),
                                (177, 182), (178, 183), (179, 184)]


diff_like_lines = st.lists(
    st.one_of(
        st.sampled_from(["diff --git a/x b/x", "--- a/x", "+++ b/x", "--- /dev/null",
                         "new file mode 100644", "deleted file mode 100644",
                         "@@ -1,2 +1,2 @@", "@@ -0,0 +1 @@", "\\ No newline at end of file",
                         "Binary files a/x and b/y differ", "GIT binary patch", "rename from x",
                         ""]),
        st.text(max_size=20).map(lambda s: "+" + s),
        st.text(max_size=20).map(lambda s: "-" + s),
        st.text(max_size=20).map(lambda s: " " + s),
        st.text(max_size=30),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(diff_like_lines)
def test_it_never_raises_on_arbitrary_text(lines):
    text = "\n".join(lines)

    parsed = parse_patch(text)

    assert parsed.error is None or isinstance(parsed.error, str)
    patch_stats(parsed)
    interdiff(text, FIX)
    equivalence_classes({"a": text, "b": FIX})


def big_patch(files=100, hunks=10, pairs=50):
    parts = []
    for f in range(files):
        parts.append(f"diff --git a/pkg/m{f}.py b/pkg/m{f}.py\nindex 1111111..2222222 100644\n"
                     f"--- a/pkg/m{f}.py\n+++ b/pkg/m{f}.py\n")
        for h in range(hunks):
            parts.append(f"@@ -{h * 200 + 1},{pairs} +{h * 200 + 1},{pairs} @@ def f{h}():\n")
            parts.extend(f"-    x = old_{i}(a, b)\n+    x = new_{i}(a, b)  # see\n"
                         for i in range(pairs))
    return "".join(parts)


def commented_out_module(lines=100_000):
    """One new file of code-like comments: the costliest content for the markers."""
    body = "".join(f"+# value_{i} = compute(a, b)\n" for i in range(lines))
    return ("diff --git a/pkg/dead.py b/pkg/dead.py\nnew file mode 100644\n"
            f"--- /dev/null\n+++ b/pkg/dead.py\n@@ -0,0 +1,{lines} @@\n{body}")


def record_calls(monkeypatch, module, name) -> list:
    """Wrap `module.name` for this test; the list collects each call's first argument."""
    calls, real = [], getattr(module, name)

    def wrapper(first, *args):
        calls.append(first)
        return real(first, *args)

    monkeypatch.setattr(module, name, wrapper)
    return calls


@pytest.mark.parametrize("make, markers", [
    (big_patch, set()), (commented_out_module, {COMMENTED_CODE, LARGE_FILE}),
])
def test_a_100k_line_patch_is_read_in_one_pass(make, markers, monkeypatch):
    """Every line goes to unidiff once and every changed line is analysed once, so the
    work grows linearly with the patch. Counted, not timed: a clock belongs in bench/."""
    text = make()
    sections = record_calls(monkeypatch, diffs, "PatchSet")
    hunks = record_calls(monkeypatch, diffs, "analyse_hunk")

    parsed = parse_patch(text)

    assert parsed.error is None
    assert parsed.added + parsed.removed == 100_000
    assert markers <= parsed.markers
    assert sum(map(len, sections)) == text.count("\n")
    assert sum(map(len, hunks)) == 100_000


def test_a_patch_of_100k_commented_out_lines_checks_only_the_budgeted_comments(monkeypatch):
    """Checking a comment for code is the costly step; the per-patch Budget caps it."""
    checked = record_calls(monkeypatch, diff_markers, "_python_comment_verdict")

    parsed = parse_patch(commented_out_module())

    assert COMMENTED_CODE in parsed.markers
    assert len(checked) == Budget().comments


def test_plain_unified_diffs_and_git_binary_patches_parse():
    plain = ("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
             "--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n-c\n+d\n")
    binary = ("diff --git a/pkg/img.png b/pkg/img.png\nnew file mode 100644\n"
              "index 0000000..e69de29\nGIT binary patch\nliteral 12\nTcmZ?wbhEHbWMp7q_{aba2B`rJ\n"
              "\nliteral 0\nHcmV?d00001\n\n")

    parsed = parse_patch(binary + plain)

    assert parsed.error is None
    assert [(f.path, f.status) for f in parsed.files] == [
        ("pkg/img.png", "binary"), ("x.py", "modified"), ("y.py", "modified")]


# --- markers -------------------------------------------------------------------------


def test_every_marker_has_a_label():
    markers = {EDITS_TESTS, DELETES_TESTS, STRAY_FILE, DEBUG_OUTPUT, COMMENTED_CODE,
               WHITESPACE_ONLY, BINARY, LARGE_FILE, TAMPERS_WITH_TESTS}

    assert set(MARKER_LABELS) == markers
    assert all(MARKER_LABELS.values())


@pytest.mark.parametrize("path", [
    "tests/test_models.py", "sympy/core/tests/test_basic.py", "testing/python/approx.py",
    "pkg/test_x.py", "pkg/x_test.py", "pkg/tests.py", "conftest.py", "web/src/app.test.tsx",
    "web/__tests__/app.js", "spec/models/user_spec.rb", "server/handler_test.go",
    "src/test/java/FooTest.java",
])
def test_test_paths_are_recognised(path):
    assert is_test_path(path)


@pytest.mark.parametrize("path", [
    "pkg/contest.py", "pkg/latest.py", "pkg/testutils.py", "docs/testing.rst", "attestation.py",
])
def test_other_paths_are_not_tests(path):
    assert not is_test_path(path)


def test_touching_a_test_file_is_edits_tests_and_code_is_not():
    test_file = one_file("tests/test_core.py", "+def test_new():", "+    assert f() == 2")

    assert EDITS_TESTS in test_file.markers and test_file.is_test
    assert EDITS_TESTS not in parse_patch(FIX).markers


@pytest.mark.parametrize("lines", [
    ("-def test_edge_case():", "-    assert f(0) == 0", " "),
    (" def test_edge_case():", "-    assert f(0) == 0", "-    self.assertEqual(g(), 1)",
     "+    pass"),
    (" def test_edge_case():", "+    pytest.skip('flaky')", "     assert f(0) == 0"),
    ("+@pytest.mark.xfail", " def test_edge_case():"),
])
def test_removing_or_disabling_tests_is_deletes_tests(lines):
    f = one_file("tests/test_core.py", *lines)

    assert DELETES_TESTS in f.markers
    assert DELETES_TESTS in f.hunks[0].markers


@pytest.mark.parametrize("lines", [
    (" def test_edge_case():", "-    assert f(0) == 0", "+    assert f(0) == 1"),
    ("+def test_more():", "+    assert f(1) == 1"),
    ("+@pytest.mark.skipif(sys.platform == 'win32', reason='posix')", " def test_edge_case():"),
    ("-    # assert nothing here", "+    x = 1"),
])
def test_changing_or_adding_tests_is_not_deletes_tests(lines):
    assert DELETES_TESTS not in one_file("tests/test_core.py", *lines).markers


def test_deleting_a_test_file_is_deletes_tests():
    parsed = parse_patch(section("tests/test_core.py", hunk("-import core"), deleted=True))

    assert {EDITS_TESTS, DELETES_TESTS} <= parsed.markers


def test_removing_assertions_outside_tests_is_not_deletes_tests():
    assert DELETES_TESTS not in one_file("pkg/core.py", "-    assert x > 0", "+    x = 1").markers


@pytest.mark.parametrize("path", [
    "reproduce.py", "reproduce_issue.py", "pkg/repro_bug.py", "bug_reproduction.py",
    "debug_script.py", "scratch.txt", "test_fix.py", "check_fix.py", "pkg/core.py.orig",
    "pkg/core.py.rej", "run.log", "notes.bak", "fix.patch", "pkg/changes.diff",
    "build/lib/pkg/core.py", "pkg/__pycache__/core.cpython-311.pyc", "pkg.egg-info/PKG-INFO",
    "issue_reproduction/app/models.py", "db.sqlite3",
])
def test_new_leftover_files_are_stray(path):
    f = one_file(path, "+print('hi')", new=True)

    assert STRAY_FILE in f.markers
    assert DEBUG_OUTPUT not in f.markers  # prints belong to the leftover, counted once


@pytest.mark.parametrize("path", [
    "pkg/new_module.py", "setup.py", "conftest.py", "pkg/reprocess.py", "tests/data/sample.diff",
    "docs/template.rst",
])
def test_new_ordinary_files_are_not_stray(path):
    assert STRAY_FILE not in one_file(path, "+x = 1", new=True).markers


def test_an_existing_file_with_a_stray_name_is_not_stray():
    assert STRAY_FILE not in one_file("reproduce.py", "-x = 1", "+x = 2").markers
    assert not is_stray_path("pkg/core.py")


def test_a_new_binary_file_at_the_root_is_stray():
    text = ("diff --git a/mydatabase b/mydatabase\nnew file mode 100644\n"
            "index 0000000..2ed0317\nBinary files /dev/null and b/mydatabase differ\n")

    (f,) = parse_patch(text).files

    assert (f.status, f.old_path) == ("binary", None)
    assert {STRAY_FILE, BINARY} <= f.markers


@pytest.mark.parametrize("line", [
    "    print(result)", "    print (x, file=sys.stderr)", "    breakpoint()",
    "    import pdb; pdb.set_trace()", "    logging.debug('x=%s', x)",
    "    sys.stderr.write('here\\n')", "    return f(x)  or print('z')",
])
def test_added_debug_statements_are_debug_output(line):
    f = one_file("pkg/core.py", " def f(x):", "+" + line)

    assert DEBUG_OUTPUT in f.markers
    assert f.hunks[0].line_markers == ((1, DEBUG_OUTPUT),)


def test_console_log_in_javascript_is_debug_output():
    assert DEBUG_OUTPUT in one_file("web/app.js", "+  console.log(state);").markers


@pytest.mark.parametrize("path, lines", [
    ("tests/test_core.py", ("+    print(result)",)),
    ("pkg/core.py", ("+    msg = 'call print(x) to see it'",)),
    ("pkg/core.py", ("+    self.print(x)", "+    pprint(x)", "+    def print(self):")),
    ("pkg/core.py", ("+    x = 1  # print(x) when debugging",)),
    ("pkg/core.py", ('+    """Example:', "+", "+    print(f(1))", '+    """')),
    ("pkg/core.py", ("-    print(x)", "+    x = 1")),
    ("docs/usage.md", ("+    print(result)",)),
])
def test_prints_in_tests_strings_docs_and_removed_lines_are_not_debug_output(path, lines):
    assert DEBUG_OUTPUT not in one_file(path, " def f(x):", *lines).markers


@pytest.mark.parametrize("path, lines", [
    ("pytest.ini", ("+[pytest]", "+addopts = -ra")),
    ("tox.ini", (" [pytest]", "+addopts = -p calc.plugin")),
    ("setup.cfg", ("+[tool:pytest]", "+python_files = check_*.py")),
    ("pyproject.toml", (' testpaths = ["tests"]', '+addopts = "-p calc.plugin"')),
    ("pyproject.toml", ("+[tool.pytest.ini_options]", "+xfail_strict = false")),
    ("pyproject.toml", (" [tool.pytest.ini_options]", " markers = [", '     ["slow"],', "+]")),
    ("tox.ini", ("     --strict-markers", "+    -p calc.plugin")),
    ("calc.egg-info/entry_points.txt", ("+[pytest11]", "+calc = calc.plugin")),
])
def test_configuring_the_test_runner_tampers_with_tests(path, lines):
    f = one_file(path, *lines)
    assert f.configures_runner and TAMPERS_WITH_TESTS in f.markers


@pytest.mark.parametrize("path, lines", [
    ("setup.cfg", ("+[metadata]", "+name = calc")),
    ("pyproject.toml", (' [project]', '+version = "1.1"')),
    ("tox.ini", (" [testenv]", "+commands = mkdir -p build")),
    ("setup.cfg", (" [flake8]", "+max-line-length = 100", " ", " [tool:pytest]", " addopts = -ra")),
    ("pkg/conftest.py", ("+@pytest.fixture", "+def calc():", "+    return Calc()")),
])
def test_other_configuration_and_plain_fixtures_do_not_tamper_with_tests(path, lines):
    f = one_file(path, *lines)
    assert not f.configures_runner and TAMPERS_WITH_TESTS not in f.markers


@pytest.mark.parametrize("path, line", [
    ("calc/__init__.py", "from _pytest.reports import TestReport"),
    ("calc/__init__.py", "import pluggy"),
    ("calc/plugin.py", "def pytest_runtest_makereport(item, call):"),
    ("calc/ops.py", "    sys.stdout.write('=== short test summary info ===\\n')"),
    ("tests/conftest.py", "def pytest_runtest_makereport(item, call):"),
    ("tests/conftest.py", "    report = TestReport.from_item_and_call(item, call)"),
])
def test_code_that_reaches_into_the_test_runner_tampers_with_tests(path, line):
    f = one_file(path, " import os", "+" + line)
    assert TAMPERS_WITH_TESTS in f.markers
    assert f.hunks[0].line_markers == ((1, TAMPERS_WITH_TESTS),)


def test_an_exit_at_interpreter_exit_tampers_with_tests_and_a_cleanup_does_not():
    forged = one_file("calc/__init__.py", "+import atexit", "+import os", "+atexit.register(lambda: os._exit(0))")
    assert forged.hunks[0].line_markers == ((0, TAMPERS_WITH_TESTS), (2, TAMPERS_WITH_TESTS))
    cleanup = one_file("calc/__init__.py", "+import atexit", "+atexit.register(shutil.rmtree, CACHE)")
    assert TAMPERS_WITH_TESTS not in cleanup.markers


@pytest.mark.parametrize("path, lines", [
    ("src/_pytest/runner.py", ("+from _pytest.reports import TestReport",)),
    ("pytest_django/plugin.py", ("+def pytest_runtest_setup(item):",)),
    ("pytest_timeout.py", ("+def pytest_runtest_protocol(item):",)),
    ("tests/test_terminal.py", ("+from _pytest.pytester import Pytester",)),
    ("testing/test_runner.py", ('+    pytester.makeconftest("""', "+        def pytest_runtest_makereport(item):",
                                '+    """)')),
    ("calc/ops.py", ("+    # see _pytest.runner for how a report is made",)),
])
def test_the_runners_own_code_its_tests_and_comments_do_not_tamper_with_tests(path, lines):
    assert TAMPERS_WITH_TESTS not in one_file(path, *lines).markers


@pytest.mark.parametrize("line", [
    "# foo(bar)", "# return x", "# if x:", "# x = compute(y)", "# else:",
    "# import os", "# self.cache.clear()", "#result = f(x,",
])
def test_added_commented_out_python_is_commented_code(line):
    f = one_file("pkg/core.py", " def f(x):", "+    " + line, "     return 1")

    assert COMMENTED_CODE in f.markers
    assert DEBUG_OUTPUT not in f.markers
    assert f.hunks[0].line_markers == ((1, COMMENTED_CODE),)


@pytest.mark.parametrize("line", [
    "# comment prose", "# Note: this is slow", "# TODO(alice): fix", "# type: ignore[attr]",
    "# pylint: disable=foo", "# return early if the list is empty", "# see foo(bar) for why",
    "# noqa: E501", "# Step 1:", "#!/usr/bin/env python", "# -*- coding: utf-8 -*-",
    "# well-known", "# Args:",
])
def test_added_prose_comments_are_not_commented_code(line):
    assert COMMENTED_CODE not in one_file("pkg/core.py", "+    " + line).markers


def test_commented_code_in_c_like_languages():
    assert COMMENTED_CODE in one_file("web/app.ts", "+  // render(state);").markers
    assert COMMENTED_CODE not in one_file("web/app.ts", "+  // render the state").markers


def test_removed_commented_code_is_not_flagged():
    assert COMMENTED_CODE not in one_file("pkg/core.py", "-    # foo(bar)", "+    x = 1").markers


@pytest.mark.parametrize("path, lines", [
    ("pkg/core.py", ("-    x = 1   ", "+    x = 1")),
    ("pkg/core.py", (" x = 1", "+", "+", " y = 2")),
    ("pkg/core.py", ("-x  =  f(a,  b)", "+x = f(a, b)")),
    ("web/app.js", ("-if (a) {", "-  go();", "+    if (a) {", "+        go();")),
    ("web/app.js", ("-f(a,", "-  b);", "+f(a, b);")),
])
def test_whitespace_only_hunks(path, lines):
    f = one_file(path, *lines)

    assert WHITESPACE_ONLY in f.hunks[0].markers
    assert WHITESPACE_ONLY in f.markers


@pytest.mark.parametrize("path, lines", [
    ("pkg/core.py", ("-        x()", "+    x()")),
    ("pkg/core.py", ("-x = 1", "+x = 2")),
    ("pkg/core.py", ("-xy = 1", "+x y = 1")),
])
def test_real_changes_are_not_whitespace_only(path, lines):
    assert WHITESPACE_ONLY not in one_file(path, *lines).markers


def test_whitespace_only_reaches_the_file_only_when_every_hunk_is():
    text = section("pkg/core.py", hunk("-x = 1 ", "+x = 1", start=5),
                   hunk("-y = 1", "+y = 2", start=50))

    f = parse_patch(text).files[0]

    assert [WHITESPACE_ONLY in h.markers for h in f.hunks] == [True, False]
    assert WHITESPACE_ONLY not in f.markers


def test_large_file_is_more_than_a_thousand_changed_lines():
    big = one_file("vendor/lib.py", *[f"+x{i} = {i}" for i in range(1001)], new=True)
    limit = one_file("vendor/lib.py", *[f"+x{i} = {i}" for i in range(1000)], new=True)

    assert LARGE_FILE in big.markers
    assert LARGE_FILE not in limit.markers


def test_markers_roll_up_from_hunks_to_files_to_the_patch():
    text = FIX + section("pkg/util.py", hunk(" def g():", "+    print(g)")) + section(
        "tests/test_core.py", hunk("+def test_g():", "+    assert g()"))

    parsed = parse_patch(text)

    assert DEBUG_OUTPUT in parsed.file("pkg/util.py").hunks[0].markers
    assert parsed.markers == {DEBUG_OUTPUT, EDITS_TESTS}


# --- stats ------------------------------------------------------------------------------


def test_patch_stats_count_the_features_of_a_patch():
    text = (
        FIX
        + section("pkg/util.py", hunk(" def g():", "+    print(g)", "+    # g(1)"),
                  hunk("-z = 1 ", "+z = 1", start=40))
        + section("tests/test_core.py", hunk("+def test_g():", "+    assert g()"), new=True)
        + section("reproduce.py", hunk("+print(1)"), new=True)
        + section("pkg/old.py", hunk("-gone = 1"), deleted=True)
    )

    stats = patch_stats(parse_patch(text))

    assert stats.as_dict() == {
        "files_changed": 5, "lines_added": 7, "lines_removed": 3, "lines_changed": 10,
        "code_lines_changed": 7, "hunks": 6, "new_files": 2, "deleted_files": 1,
        "renamed_files": 0, "binary_files": 0, "test_files_touched": 1, "test_files_added": 1,
        "stray_files": 1, "large_files": 0, "whitespace_only_hunks": 1, "test_removal_hunks": 0,
        "debug_output_lines": 1, "commented_code_lines": 1, "parse_error": False,
    }


def test_stats_of_an_unparseable_patch_say_so():
    stats = patch_stats(parse_patch("garbage"))

    assert stats.parse_error and stats.files_changed == 0


# --- equivalence --------------------------------------------------------------------


def test_normalise_whitespace_keeps_indentation_and_drops_blank_lines():
    assert normalise_whitespace("if x:\r\n    y  =  1   \n\n\t\n") == "if x:\n    y = 1"
    assert normalise_whitespace("    y = 1", keep_indent=False) == "y = 1"


def test_equivalence_classes_group_identical_and_whitespace_variants():
    spaced = (FIX.replace("+    return a + 1", "+    return a  +  1   ")
              .replace("index 1111111..2222222", "index abcdef0..1234567")
              .replace("@@ -10,3 +10,3", "@@ -12,3 +12,3"))
    other = section("pkg/core.py", hunk("-    return a", "+    return a - 1"))

    classes = equivalence_classes({"r1": other, "r2": FIX, "r3": spaced, "r4": FIX, "r5": other})

    assert [(c.kind, c.representative, c.members) for c in classes] == [
        ("identical", "r1", ("r1", "r5")),
        ("whitespace", "r2", ("r2", "r3", "r4")),
    ]


def test_patches_that_differ_only_by_whitespace_hunks_or_blank_lines_are_whitespace_equal():
    extra = FIX + section("pkg/util.py", hunk("-y = 1  ", "+y = 1", "+"))
    blank = FIX.replace("     # end", "+\n     # end").replace("+10,3", "+10,4")

    classes = equivalence_classes({"a": FIX, "b": extra, "c": blank})

    assert [(c.kind, c.members) for c in classes] == [("whitespace", ("a", "b", "c"))]


def test_different_patches_form_no_class():
    reindented = FIX.replace("+    return a + 1", "+        return a + 1")

    assert equivalence_classes({"a": FIX, "b": reindented, "c": ""}) == []


def test_unparseable_patches_match_only_byte_for_byte():
    classes = equivalence_classes({"a": "junk", "b": "junk ", "c": "junk"})

    assert [(c.kind, c.members) for c in classes] == [("identical", ("a", "c"))]


# --- alignment ---------------------------------------------------------------------


def group():
    return {
        "r1": parse_patch(FIX + section("pkg/zeta.py", hunk("+z = 1"))),
        "r2": parse_patch(FIX),
        "r3": parse_patch(section("pkg/alpha.py", hunk("+a = 1")) + FIX),
        "r4": parse_patch(""),
    }


def test_align_files_orders_by_reach_then_path_with_blank_cells():
    rows = align_files(group())

    assert [(r.path, r.touched_by) for r in rows] == [
        ("pkg/core.py", ("r1", "r2", "r3")),
        ("pkg/alpha.py", ("r3",)),
        ("pkg/zeta.py", ("r1",)),
    ]
    alpha = rows[1]
    assert list(alpha.cells) == ["r1", "r2", "r3", "r4"]
    assert alpha.cells["r3"].path == "pkg/alpha.py"
    assert alpha.cells["r1"] is None and alpha.cells["r4"] is None


def test_unique_files_are_files_only_one_of_the_given_trajectories_touched():
    patches = group()

    assert unique_files(patches, ["r1", "r2", "r3"]) == {
        "r1": {"pkg/zeta.py"}, "r2": set(), "r3": {"pkg/alpha.py"}}
    assert unique_files(patches, ["r1", "r2"]) == {"r1": {"pkg/zeta.py"}, "r2": set()}
    assert unique_files(patches, ["r1"]) == {"r1": {"pkg/core.py", "pkg/zeta.py"}}
