"""Word-level marks: which lines are paired, which characters differ, and marks that
nest inside the highlighting and keep everything escaped."""

import html as markup
import re

from grading.diffs import parse_patch
from webapp.html import patches, worddiff
from webapp.html.highlight import highlight
from webapp.html.worddiff import changed_ranges, line_marks, pairs


def test_a_run_of_removed_lines_pairs_with_the_run_of_added_lines_after_it():
    kinds = [" ", "-", "-", "+", "+", "+", " ", "+", "-", " ", "-", "+"]
    assert pairs(kinds) == [(1, 3), (2, 4), (10, 11)]


def test_added_lines_before_removed_ones_and_lone_runs_are_not_paired():
    assert pairs(["+", "-", " "]) == []
    assert pairs(["-", "-", " ", "+"]) == []


def test_the_changed_word_is_the_range_that_differs():
    old, new = "    total = compute(value, 1)", "    total = compute(values, 1)"
    found = changed_ranges(old, new)
    assert found == ([(20, 25)], [(20, 26)])
    assert old[20:25] == "value" and new[20:26] == "values"


def test_an_insertion_marks_only_the_new_line():
    old_ranges, new_ranges = changed_ranges("x = f(a)", "x = f(a, b)")
    assert old_ranges == [] and [("x = f(a, b)"[a:b]) for a, b in new_ranges] == [", b"]


def test_a_rewritten_line_or_a_huge_one_gets_no_marks():
    assert changed_ranges("return cache[key]", "raise NotImplementedError('later')") is None
    long = " ".join(f"w{i}" for i in range(worddiff.MAX_TOKENS))
    assert changed_ranges(long, long + " x") is None


def test_marks_of_a_page_of_a_long_hunk_come_from_pairs_that_reach_into_it():
    kinds = ["-", "+", "-", "+"]
    texts = ["a = 1", "a = 2", "b = 1", "b = 2"]
    assert line_marks(kinds, texts) == {0: [(4, 5)], 1: [(4, 5)], 2: [(4, 5)], 3: [(4, 5)]}
    assert set(line_marks(kinds, texts, within=range(3, 4))) == {2, 3}


def _well_nested(html: str) -> bool:
    stack = []
    for closing, name in re.findall(r"<(/?)(span|mark)\b[^>]*>", html):
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def _text(html: str) -> str:
    return markup.unescape(re.sub(r"<[^>]+>", "", html))


def test_marks_nest_inside_the_highlighting_spans():
    old, new = 'name = "alpha"  # first', 'name = "alpha beta"  # second'
    marks = line_marks(["-", "+"], [old, new])
    html = highlight("m.py", [old, new], marks)
    assert all(_well_nested(line) for line in html)
    assert '<span class="c1"># <mark>second</mark></span>' in html[1]  # the comment's colour kept around the mark
    assert "<mark>" in html[1].split('class="s2"')[1]  # and the string's
    assert [_text(line) for line in html] == [old, new]  # nothing lost, nothing added


def test_markup_in_a_changed_line_stays_escaped_inside_and_outside_the_marks():
    old, new = 'html = "<script>alert(1)</script> &amp;"', 'html = "<script>alert(2)</script> &amp;"'
    path_html = highlight("page.py", [old, new], line_marks(["-", "+"], [old, new]))
    plain_html = highlight("notes.unknown-extension", [old, new], line_marks(["-", "+"], [old, new]))
    for html in (path_html, plain_html):
        assert "<script>" not in "".join(html)
        assert "&lt;script&gt;" in html[1] and "&amp;amp;" in html[1]
        assert "<mark>2</mark>" in html[1] and "<mark>1</mark>" in html[0]
        assert all(_well_nested(line) for line in html)


def test_the_interdiff_view_marks_the_changed_words_too():
    patch = ("diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,3 +1,3 @@\n"
             " a = 1\n-limit = compute(a, 10)\n+limit = compute(a, 20)\n b = 2\n")
    f = parse_patch(patch).files[0]
    html = patches.hunks_html(f.path, f.hunks)
    assert html.count("<mark>") == 2 and '<span class="mi"><mark>20</mark></span>' in html
    assert _well_nested(html)
