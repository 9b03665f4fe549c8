"""Where a match lies in a patch, and the snippet that shows it."""

import pytest

from webapp.search.snippets import PatchPlace, locate, matches, patch_place, snippet

PATCH = ("diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x\n-y\n+y2\n"
         "@@ -10,2 +10,2 @@ def g():\n z\n-old_name\n+get_prep_value\n"
         "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-q\n+os.path.join\n")


def place(query: str, text: str = PATCH) -> PatchPlace:
    return patch_place(text, matches(text, query)[0].start())


def test_a_match_is_placed_in_its_file_and_hunk_with_the_hunks_first_row():
    assert place("get_prep_value") == PatchPlace("a.py", 1, "@@ -10,2 +10,2 @@ def g():", 4)
    assert place("y2") == PatchPlace("a.py", 0, "@@ -1,2 +1,2 @@", 0)
    assert place("def g") == PatchPlace("a.py", 1, "@@ -10,2 +10,2 @@ def g():", 4)  # in a hunk header
    assert place("os.path") == PatchPlace("b.py", 0, "@@ -1,1 +1,1 @@", 0)


def test_a_match_in_a_file_header_or_outside_any_file_has_no_hunk():
    assert place("+++ b/b.py") == PatchPlace("b.py", None, "", 0)
    assert place("diff --git a/b") == PatchPlace("b.py", None, "", 0)
    assert place("notes", "some notes, not a diff\n") == PatchPlace("", None, "", 0)


def test_a_snippet_is_the_matching_line_cut_around_the_match_and_escaped():
    text = "first line\n" + "<b>" * 100 + " needle " + "x" * 300 + "\nlast"
    found = matches(text, "NEEDLE")[0]
    html = snippet(text, found.start(), found.end(), "NEEDLE")
    assert html.startswith("…") and html.endswith("x…") and "&lt;b&gt;" in html
    assert "<mark>needle</mark>" in html and "<b>" not in html and "first" not in html and "last" not in html
    assert snippet("a needle b needle", 2, 8, "needle") == "a <mark>needle</mark> b <mark>needle</mark>"


@pytest.mark.parametrize("text, query", [
    ("x = os.path.join(a)\nOS.PATH.JOIN os.path.join", "Os.Path.Join"),
    ("aaaa", "aa"),  # occurrences do not overlap
    ("nothing here", "needle"),
    ("\u212a = 1; k = 2; K = 3", "k"),  # the Kelvin sign matches "k" in a regular expression
    ("self.value", "\u017felf"),  # and the long s matches "s"
    ("é€𝄞 ÉCOLE école", "école"),
    ("\u0130stanbul needle", "NEEDLE"),  # str.lower makes two characters of the dotted I
])
def test_locate_finds_the_first_match_and_the_count_that_matches_gives(text, query):
    found = matches(text, query)
    expected = (found[0].start(), found[0].end(), len(found)) if found else (0, 0, 0)
    assert locate(text, query) == expected
