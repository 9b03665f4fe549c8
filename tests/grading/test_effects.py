import pytest

from grading.diffs import parse_patch
from grading.effects import no_effect, removed_behaviour
from tests.grading.test_diffs import hunk, section


def effect(path, *lines, start=10):
    """`no_effect` of a one-hunk patch of `path`."""
    return no_effect(parse_patch(section(path, hunk(*lines, start=start))))


def removed(path, *lines):
    """The removed lines `removed_behaviour` names in a one-hunk patch of `path`, as strings."""
    return [str(line) for line in removed_behaviour(parse_patch(section(path, hunk(*lines))))]


# --- no effect ----------------------------------------------------------------------------


@pytest.mark.parametrize("lines", [
    (" def f(x):", "-    # the old comment", "+    # a better comment", "     return x"),
    (" def f(x):", "-    return x", "+    return x  # the sum", "+", " "),
    (" def f(x):", "-    return x   ", "+    return x"),
    (" def f(x):", '-    """Return x."""', '+    """Return x, unchanged."""', "     return x"),
    (" def f(x):", '-    """Return', "-    x.", '-    """', '+    """Return x."""', "     return x"),
    (" def f(x):", "+    '''Return x.'''", "     return x"),
    (" def f(x):", "     return f(", "-        x, 1)", "+        x,", "+        1", "+    )"),
], ids=["comment", "trailing-comment-and-blank", "trailing-space", "docstring", "docstring-rewrapped",
        "docstring-added", "call-rewrapped"])
def test_comments_docstrings_and_whitespace_in_python_have_no_effect(lines):
    expected = "changes no behaviour: only comments, docstrings and whitespace in pkg/mod.py"
    assert effect("pkg/mod.py", *lines) == expected


def test_a_module_docstring_has_no_effect_only_at_the_start_of_the_module():
    docstring = ('-"""The old summary."""', '+"""The new summary."""', " import os")
    assert effect("pkg/mod.py", *docstring, start=1) is not None
    assert effect("pkg/mod.py", *docstring, start=40) is None


def test_a_hunk_that_starts_deep_and_ends_shallow_still_reads_as_python():
    lines = ("             y = x", "-            # old", "+            # new", "         return y", " ",
             "     def g(self):", "         pass")
    assert effect("pkg/mod.py", *lines) is not None


@pytest.mark.parametrize("lines", [
    (" def f(x):", "-    return x", "+    return x + 1"),
    (" def f(x):", "-    return 'a'", "+    return 'b'"),
    (" def f(x):", "-    return 'a  b'", "+    return 'a b'"),
    (" def f(x):", "     if x:", "         x = 1", "-        return x", "+    return x"),
    (" def f(x):", "     x = 1", "-    'not a docstring'", "+    'still not a docstring, but read as code'"),
], ids=["expression", "string", "whitespace-in-a-string", "dedent", "string-statement-after-code"])
def test_changes_to_python_code_have_an_effect(lines):
    assert effect("pkg/mod.py", *lines) is None


def test_a_hunk_that_starts_inside_a_bracket_counts_as_an_effect():
    lines = ("                 dtype=int)", " ", "-    # old", "+    # new", "     return x")
    assert effect("pkg/mod.py", *lines) is None


def test_a_hunk_that_starts_inside_a_docstring_counts_as_an_effect():
    # read from the hunk's first line, the code between the two """ looks like a string
    lines = ("     end of the docstring of f", '     """', "-    return x", "+    return x + 1", " ",
             "     def g():", '         """')
    assert effect("pkg/mod.py", *lines) is None


@pytest.mark.parametrize(("path", "lines", "expected"), [
    ("web/app.js", (" function f(x) {", "-  // old", "+  // new", "-    return x;", "+  return x;"), True),
    ("src/lib.c", (" int f(int x) {", "-    return x;  ", "+    return x;"), True),
    ("src/lib.c", (" int f(int x) {", "-#define N 1", "+#define N 2"), False),
    ("conf/app.yaml", (" server:", "-  port: 80", "+    port: 80"), False),
    ("conf/app.yaml", (" server:", "-  # old", "+  # new", "   port: 80"), True),
    ("docs/index.md", (" # Title", "-old words", "+new words"), False),
])
def test_other_files_have_no_effect_only_through_their_comments_and_whitespace(path, lines, expected):
    verdict = effect(path, *lines)
    assert (verdict == f"changes no behaviour: only comments and whitespace in {path}") is expected
    assert (verdict is None) is not expected


def test_a_patch_of_only_tests_and_leftovers_or_no_change_at_all_has_no_effect():
    tests_only = section("tests/test_mod.py", hunk("-    assert f(1) == 2", "+    assert f(1) > 0"))
    leftover = section("reproduce.py", hunk("+print(f(1))"), new=True)
    assert no_effect(parse_patch(tests_only + leftover)) == (
        "changes no behaviour: it changes only tests and leftover files (tests/test_mod.py, reproduce.py)")
    assert no_effect(parse_patch("")) == "changes no behaviour: the patch is empty"


def test_new_deleted_renamed_files_and_unreadable_patches_are_not_called_ineffective():
    comment = hunk("+# nothing but a comment")
    assert no_effect(parse_patch(section("pkg/__init__.py", comment, new=True))) is None
    assert no_effect(parse_patch(section("pkg/old.py", hunk("-# a comment"), deleted=True))) is None
    assert no_effect(parse_patch(section("pkg/new.py", hunk("-# a", "+# b"), old_path="pkg/old.py"))) is None
    assert no_effect(parse_patch("this is not a diff")) is None


def test_one_change_with_an_effect_is_enough():
    comments = hunk("-    # old", "+    # new")
    code = hunk("-    return x", "+    return x + 1", start=40)
    assert no_effect(parse_patch(section("pkg/mod.py", comments, code))) is None
    assert no_effect(parse_patch(section("pkg/mod.py", comments) + section("pkg/b.py", code))) is None


# --- removed behaviour -------------------------------------------------------------------


@pytest.mark.parametrize(("lines", "expected"), [
    ((" def f(x):", "-    return x"), ["pkg/mod.py:11 `return x`"]),
    ((" def f(x):", "-    if x < 0:", "-        raise ValueError(x)"), ["pkg/mod.py:12 `raise ValueError(x)`"]),
    ((" def f(x):", "-    yield x", "+    pass"), ["pkg/mod.py:11 `yield x`"]),
    ((" def f(x):", "-    self.cache.clear()", "+    self.cache = None"), ["pkg/mod.py:11 `self.cache.clear()`"]),
    ((" def f(x):", "-    x = normalise(x).strip()", "+    x = x.strip()"),
     ["pkg/mod.py:11 `x = normalise(x).strip()`"]),
])
def test_a_deleted_return_raise_yield_or_call_the_hunk_does_not_write_again_is_named(lines, expected):
    assert removed("pkg/mod.py", *lines) == expected


@pytest.mark.parametrize("lines", [
    (" def f(x):", "-    return x", "+    return x + 1"),
    (" def f(x):", "-    return x", "+    if x is None:", "+        return 0", "+    return x"),
    (" def f(x):", "-    log(x)", "-    return x", "+    return x", "+    log(x)"),
    (" def f(x):", "-    self.save()", "+    obj.save(force=True)"),
    (" def f(x):", "-def g(x):", "+def h(x):"),
    (" def f(x):", "-    # return x", "-    y = 'call(x)'", "+    y = 1"),
    (" def f(x):", '     """', "-    Return x.", "-    f(x) is x", '     """'),
], ids=["rewritten", "moved-under-a-condition", "reordered", "same-name-other-object", "definition",
        "comment-and-string", "docstring"])
def test_refactors_comments_strings_and_docstrings_remove_no_behaviour(lines):
    assert removed("pkg/mod.py", *lines) == []


@pytest.mark.parametrize("path", ["tests/test_mod.py", "README.md"])
def test_tests_and_non_code_files_remove_no_behaviour(path):
    assert removed(path, " def f(x):", "-    return x") == []
