"""The interdiff compares two changes, not two patch texts (what patchutils' interdiff does)."""

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

from grading.diffs import parse_patch
from grading.interdiff import interdiff
from tests.grading.test_diffs import FIX, big_patch, hunk, section


def git_diff(path, old, new, context=3):
    """A ``git diff`` of one file from lines `old` to `new` (empty `old`: a new file)."""
    body = list(difflib.unified_diff([line + "\n" for line in old], [line + "\n" for line in new],
                                     "/dev/null" if not old else f"a/{path}", f"b/{path}", n=context))
    head = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if not old else "")
    return head + "".join(body) if body else ""


def apply(lines, hunks):
    """`lines` with `hunks` applied, checking that each hunk's old lines are where
    its old numbers say and its new lines land where its new numbers say."""
    out, at = [], 1
    for h in hunks:
        old = [text for kind, text in h.lines if kind != "+"]
        new = [text for kind, text in h.lines if kind != "-"]
        numbers = h.line_numbers()
        first_old = next((o for o, _ in numbers if o is not None), None)
        first_new = next((n for _, n in numbers if n is not None), None)
        start = first_old if first_old is not None else h.source_start
        out += lines[at - 1:start - 1]
        assert lines[start - 1:start - 1 + len(old)] == old, h.header
        assert first_new in (None, len(out) + 1), h.header
        out += new
        at = start + len(old)
    return out + lines[at - 1:]


BASE = [f"line {i}" for i in range(400)]


def changed(lines, at, text):
    return lines[:at - 1] + [text] + lines[at:]


def test_statuses_per_file():
    a = FIX + section("pkg/only_a.py", hunk("+a = 1")) + section("pkg/shared.py", hunk("+s = 1"))
    b = (section("pkg/core.py", hunk("     a = 1", "-    return a", "+    return a * 2", "     # end"))
         + section("pkg/only_b.py", hunk("+b = 1")) + section("pkg/shared.py", hunk("+s = 1")))

    result = interdiff(a, b)

    assert [(d.path, d.status) for d in result] == [
        ("pkg/core.py", "differs"), ("pkg/only_a.py", "only_a"),
        ("pkg/only_b.py", "only_b"), ("pkg/shared.py", "same")]
    core, only_a, only_b, shared = result
    (h,) = core.hunks
    assert h.lines == ((" ", "    a = 1"), ("-", "    return a + 1"), ("+", "    return a * 2"), (" ", "    # end"))
    assert (h.source_start, h.target_start) == (10, 10)
    assert core.lines[:3] == ("--- A/pkg/core.py", "+++ B/pkg/core.py", "@@ -10,3 +10,3 @@")
    assert only_a.lines == ("@@ -0,0 +10,1 @@ def f():", "+a = 1")
    assert only_b.lines == ("@@ -0,0 +10,1 @@ def f():", "+b = 1")
    assert shared.hunks == () and not any(d.truncated for d in result)
    assert interdiff(a, b) == result


def test_two_fixes_in_different_places_show_only_the_changes():
    fix_a = changed(BASE, 20, "line 19 fixed")
    fix_b = changed(BASE, 310, "line 309 fixed")

    (d,) = interdiff(git_diff("m.py", BASE, fix_a), git_diff("m.py", BASE, fix_b))

    assert d.status == "differs"
    assert not any(text.startswith("@@") for h in d.hunks for _, text in h.lines)
    assert [(kind, text) for h in d.hunks for kind, text in h.lines if kind != " "] == [
        ("-", "line 19 fixed"), ("+", "line 19"), ("-", "line 309"), ("+", "line 309 fixed")]
    assert [h.header for h in d.hunks] == ["@@ -17,7 +17,7 @@", "@@ -307,7 +307,7 @@"]
    assert apply(fix_a, d.hunks) == fix_b


def test_line_numbers_follow_each_side_past_the_other_sides_earlier_changes():
    a = BASE[:10] + ["added by A"] * 4 + BASE[10:]
    b = BASE[:200] + BASE[203:]
    b = changed(b, 250, "B's fix")

    (d,) = interdiff(git_diff("m.py", BASE, a), git_diff("m.py", BASE, b))

    undo_a, b_deletes, b_fixes = d.hunks
    assert (undo_a.source_start, undo_a.target_start) == (8, 8)
    assert (b_deletes.source_start, b_deletes.target_start) == (202, 198)  # A's file is 4 lines longer
    assert b_fixes.line_numbers()[3] == (257, None) and b_fixes.line_numbers()[4] == (None, 250)
    assert apply(a, d.hunks) == b


def test_the_same_change_in_different_patch_text_is_the_same():
    fixed = changed(BASE, 50, "fixed")

    (d,) = interdiff(git_diff("m.py", BASE, fixed, context=3), git_diff("m.py", BASE, fixed, context=1))

    assert (d.status, d.hunks) == ("same", ())


def test_two_new_files_compare_their_contents():
    (d,) = interdiff(git_diff("new.py", [], ["a", "b", "c"]), git_diff("new.py", [], ["a", "B", "c", "d"]))

    assert d.status == "differs"
    (h,) = d.hunks
    assert h.lines == ((" ", "a"), ("-", "b"), ("+", "B"), (" ", "c"), ("+", "d"))
    assert h.line_numbers() == [(1, 1), (2, None), (None, 2), (3, 3), (None, 4)]


def test_a_deletion_against_a_change_says_how_the_kinds_differ():
    deleted = ("diff --git a/m.py b/m.py\ndeleted file mode 100644\n--- a/m.py\n+++ /dev/null\n"
               "@@ -1,3 +0,0 @@\n-x = 1\n-y = 2\n-z = 3\n")
    modified = git_diff("m.py", ["x = 1", "y = 2", "z = 3"], ["x = 1", "y = 20", "z = 3"])

    (d,) = interdiff(deleted, modified)

    assert d.status == "differs" and d.note == "A: deleted (from m.py); B: modified (from m.py)"
    assert [kind + text for h in d.hunks for kind, text in h.lines] == ["+x = 1", "+y = 20", "+z = 3"]


def test_patches_made_against_different_files_cannot_be_reconciled():
    a = git_diff("m.py", BASE, changed(BASE, 50, "fixed"))
    other_base = changed(BASE, 51, "someone else's line 50")
    b = git_diff("m.py", other_base, changed(other_base, 52, "also fixed"))

    (d,) = interdiff(a, b)

    assert d.status == "unreconciled" and d.hunks == ()
    assert d.note == ("cannot compare the changes: the patches were not made against the same file: "
                      "line 51 of the original reads differently in each")


def test_a_patch_whose_hunks_overlap_cannot_be_reconciled():
    overlapping = section("pkg/core.py", hunk(" a", "-b", "+c", start=10), hunk(" b", "-c", "+d", start=11))

    (d,) = interdiff(overlapping, FIX)

    assert d.status == "unreconciled" and "hunks of one patch overlap at line 11" in d.note


def test_the_interdiff_is_bounded_and_says_when_it_truncates():
    a = parse_patch(big_patch(files=3, hunks=5, pairs=40))
    b = parse_patch(big_patch(files=5, hunks=5, pairs=40).replace("new_", "newer_"))

    result = interdiff(a, b, max_file_lines=50, max_total_lines=100)

    assert [(d.status, sum(len(h.lines) for h in d.hunks)) for d in result] == [
        ("differs", 50), ("differs", 50), ("differs", 0), ("only_b", 0), ("only_b", 0)]
    assert all(d.truncated for d in result)
    assert result[2].note == "not compared: the interdiff is at its length limit"


def test_binary_files_are_never_called_the_same():
    binary = ("diff --git a/logo.png b/logo.png\nindex 1111111..2222222 100644\n"
              "Binary files a/logo.png and b/logo.png differ\n")

    (d,) = interdiff(binary, binary)

    assert d.status == "differs" and d.note == "binary file: contents cannot be compared"


# --- properties ------------------------------------------------------------------------

# What happens at each base line: kept, dropped or changed, after 0-2 new lines.
STEPS = [("keep", 0)] * 12 + [("drop", 0), ("change", 0), ("keep", 1), ("keep", 2), ("drop", 1), ("change", 1)]


def edits(base):
    """`base` with lines kept, dropped or replaced, and new lines put in between."""
    def build(steps):
        out = []
        for i, ((action, inserted), line) in enumerate(zip(steps, [*base, None], strict=True)):
            out += [f"new {i}.{j}" for j in range(inserted)]
            if line is not None:
                out += {"keep": [line], "drop": [], "change": [f"{line} changed"]}[action]
        return out
    return st.lists(st.sampled_from(STEPS), min_size=len(base) + 1, max_size=len(base) + 1).map(build)


two_changes = st.integers(1, 40).map(lambda n: [f"line {i}" for i in range(n)]).flatmap(
    lambda base: st.tuples(st.just(base), edits(base), edits(base)))


@settings(max_examples=300, deadline=None)
@given(two_changes, st.integers(0, 4))
def test_applying_the_interdiff_to_a_gives_b(change, context):
    base, a, b = change
    patch_a, patch_b = git_diff("m.py", base, a, context), git_diff("m.py", base, b, context)
    if not (patch_a and patch_b):
        return  # a patch that changes nothing has no file to compare

    (d,) = interdiff(patch_a, patch_b, max_file_lines=10**6, max_total_lines=10**6)

    assert apply(a, d.hunks) == b
    assert (d.status == "same") == (a == b)


@settings(max_examples=200, deadline=None)
@given(two_changes)
def test_a_patch_against_itself_has_no_interdiff(change):
    base, a, _ = change
    patch = git_diff("m.py", base, a) + git_diff("n.py", base, a)

    result = interdiff(patch, patch)

    assert all(d.status == "same" and d.hunks == () for d in result)
