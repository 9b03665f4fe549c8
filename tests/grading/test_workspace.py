"""The grader's workspace: anonymised labels, capped tools, submissions, action schemas."""

import json

import pytest

from grading.actions import action_char_bound, action_schema, submission_schema, weak_orders
from grading.graders.agentic import schema_errors
from grading.penalties import assess
from grading.rankings import FLAGS, InvalidRanking
from grading.tool_limits import Caps, cap
from grading.workspace import SUBMIT, Workspace, make_labels, render_prompt, render_submission
from tests.grading.agentic_fixtures import make_group, patch

DEBUG_PATCH = patch("pkg/mod.py", "return x", "print(x); return x", line=7) + (
    "diff --git a/repro.py b/repro.py\nnew file mode 100644\n--- /dev/null\n+++ b/repro.py\n"
    "@@ -0,0 +1,2 @@\n+from pkg.mod import f\n+print(f(1))\n")


def test_labels_are_a_seeded_shuffle_with_a_stored_mapping():
    group = make_group(passed=(True,) * 6)
    first, again = Workspace(group, seed=11), Workspace(group, seed=11)
    assert first.mapping == again.mapping
    assert first.labels == ("A", "B", "C", "D", "E", "F")
    assert sorted(first.mapping.values()) == [f"t{i}" for i in range(1, 7)]
    orders = {tuple(Workspace(group, seed=s).mapping.values()) for s in range(20)}
    assert len(orders) > 10
    assert all(first.label_of(tid) == lab for lab, tid in first.mapping.items())


def test_labels_beyond_z_stay_short_and_unique():
    labels = make_labels(60)
    assert labels[:3] == ["A", "B", "C"] and labels[26:28] == ["AA", "AB"]
    assert len(set(labels)) == 60


def test_ids_never_reach_the_agent():
    group = make_group(passed=(True, True, False))
    text = json.dumps(render_prompt(group, seed=3))
    assert not any(f'"{t.trajectory_id}' in text or f" {t.trajectory_id} " in text
                   for t in group.trajectories)


def test_render_prompt_is_what_the_workspace_shows():
    group = make_group()
    workspace = Workspace(group, seed=5)
    messages = render_prompt(group, seed=5, max_turns=7)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert workspace.list_trajectories() in messages[1]["content"]
    assert "You have 7 turns" in messages[1]["content"]
    assert messages == render_prompt(group, seed=5, max_turns=7)


def test_list_trajectories_shows_pass_fail_stats_and_markers():
    group = make_group(passed=(True, True), patches=[patch("pkg/mod.py", "a", "b"), DEBUG_PATCH])
    workspace = Workspace(group, seed=0)
    text = workspace.list_trajectories()
    debug = workspace.label_of("t2")
    line = next(row for row in text.splitlines() if row.startswith(f"{debug}: PASS"))
    assert "files=2 +3 -1" in line
    assert "leaves debug output in" in text and "leftover file" in text
    assert "repro.py (only here)" in text


def test_view_patch_numbers_new_lines_and_marks_debug_output():
    group = make_group(passed=(True, True), patches=[DEBUG_PATCH, DEBUG_PATCH])
    workspace = Workspace(group, seed=0)
    text = workspace.view_patch("A", "pkg/mod.py")
    assert "=== A: pkg/mod.py (modified, +1 -1) ===" in text
    assert "    7 +print(x); return x   <- leaves debug output in" in text
    assert "repro.py" not in text
    assert "repro.py" in workspace.view_patch("A")


def test_view_patch_of_a_file_it_does_not_touch_says_which_it_does():
    workspace = Workspace(make_group(), seed=0)
    assert workspace.run({"tool": "view_patch", "label": "A", "path": "nope.py"}) == (
        "error: A does not change 'nope.py'; it changes: pkg/mod.py")


def test_long_outputs_are_cut_with_an_explicit_note():
    big = patch("pkg/mod.py", "x", "y" * 5000)
    workspace = Workspace(make_group(patches=[big] * 3), seed=0, caps=Caps(output_chars=1000))
    text = workspace.view_patch("A")
    assert len(text) < 1200
    assert text.endswith("pass a path to see one file]")
    assert "[truncated: showed 1000 of " in text


def test_cap_prefers_a_line_end():
    text = "\n".join(["x" * 50] * 10)
    assert cap(text, 120, "hint").startswith("x" * 50 + "\n" + "x" * 50 + "\n[truncated: showed 101")
    assert cap("short", 120, "hint") == "short"


def test_view_transcript_slices_turns_and_caps_each():
    turns = [{"role": "user", "content": "task"}] + [
        {"role": "assistant", "content": f"step {i} " + "z" * 3000} for i in range(40)]
    workspace = Workspace(make_group(messages=[turns] * 3), seed=0,
                          caps=Caps(turn_chars=100, turns_per_view=5, output_chars=100000))
    text = workspace.view_transcript("B", 3, 30)
    assert text.splitlines()[0] == "B transcript, turns 3..7 of 0..40"
    assert "#3 assistant: step 2 " in text and "#8" not in text
    assert "[showing at most 5 turns a call]" in text
    assert "[turns 8..40 not shown]" in text
    assert text.count("[truncated: showed") == 5
    assert workspace.view_transcript("B", 99, 120).startswith("B: no turns in that range")


def test_view_transcript_renders_tool_calls():
    text = Workspace(make_group(), seed=0).view_transcript("A", 0, 3)
    assert '[call bash: {"command": "ls"}]' in text
    assert "#2 tool: pkg" in text


def test_search_is_literal_case_insensitive_and_says_where():
    group = make_group(passed=(True, True), patches=[DEBUG_PATCH, patch("pkg/mod.py", "a", "b")])
    workspace = Workspace(group, seed=0)
    debug = workspace.label_of("t1")
    text = workspace.search("PRINT(")
    assert f"{debug} pkg/mod.py:7: +print(x); return x" in text
    assert f"{debug} repro.py:2: +print(f(1))" in text
    assert text.startswith("search 'PRINT(': 2 hits")
    assert workspace.search("attempt 2", labels=[workspace.label_of("t2")]).count("#1 assistant") == 1


def test_search_caps_hits_with_a_note():
    lines = "".join(f"+hit {i}\n" for i in range(50))
    big = "diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -0,0 +1,50 @@\n" + lines
    workspace = Workspace(make_group(patches=[big] * 3), seed=0, caps=Caps(search_hits=10))
    text = workspace.search("hit", labels=["A"])
    assert text.startswith("search 'hit': 50 hits (A=50)")
    assert "[truncated: 40 more hits not shown; narrow the pattern or the labels]" in text


def test_compare_uses_interdiff_under_the_agents_labels():
    group = make_group(passed=(True, True),
                       patches=[patch("pkg/mod.py", "return x", "return x + 1"), DEBUG_PATCH])
    workspace = Workspace(group, seed=0)
    a, b = workspace.label_of("t1"), workspace.label_of("t2")
    text = workspace.compare(a, b)
    assert text.splitlines()[0] == f"How {b}'s change differs from {a}'s, file by file:"
    assert "== pkg/mod.py: differs" in text
    assert f"--- {a}/pkg/mod.py" in text and f"+++ {b}/pkg/mod.py" in text
    assert f"== repro.py: only in {b}" in text
    assert workspace.run({"tool": "compare", "a": a, "b": a}).startswith("error: compare needs")


def test_view_tests_shows_results_and_the_log_tail():
    workspace = Workspace(make_group(), seed=0, caps=Caps(log_chars=8))
    failing = next(lab for lab in workspace.labels if lab not in workspace.passing_labels)
    text = workspace.view_tests(failing)
    assert text.splitlines()[:3] == [f"{failing}: FAIL reward=0", "passed (0): ",
                                     "failed (1): tests/test_mod.py::test_f"]
    assert "[truncated: showing the last 8 of 25 characters]\n1 failed" in text


def test_unknown_labels_and_tools_come_back_as_errors():
    workspace = Workspace(make_group(), seed=0)
    assert workspace.run({"tool": "view_tests", "label": "Q"}) == (
        "error: no trajectory 'Q'; labels: A, B, C")
    assert workspace.run({"tool": "rm", "label": "A"}).startswith("error: unknown tool 'rm'")
    assert workspace.run({"tool": "view_tests"}).startswith("error: bad arguments for view_tests")


def test_a_valid_submission_maps_labels_back_to_ids():
    workspace = Workspace(make_group(passed=(True, True, True, False)), seed=4)
    a, b, c = workspace.passing_labels
    tiers, rationales, flags = workspace.submission({
        "tool": SUBMIT, "ranking": [[b], [a, c]],
        "rationales": {a: "ok", b: "best, pkg/mod.py:1", c: "ok"},
        "flags": {a: [], b: [], c: ["debug_leftovers"]}})
    to_id = workspace.mapping
    assert tiers == ((to_id[b],), (to_id[a], to_id[c]))
    assert rationales[to_id[b]] == "best, pkg/mod.py:1"
    assert flags == {to_id[c]: ("debug_leftovers",)}


@pytest.mark.parametrize(("ranking", "rationales", "flags", "message"), [
    ([["A"], ["A"]], {"A": "x", "C": "y"}, {}, "ranked more than once: A; passing but not ranked: C"),
    ([["A", "B", "C"]], {"A": "x", "C": "y"}, {}, "not a passing trajectory of this group: B"),
    ([["A", "C"]], {"A": "x", "C": "  "}, {}, "no rationale for: C"),
    ([["A", "C"]], {"A": "x", "C": "y"}, {"A": ["sloppy"]}, "unknown flags for A: sloppy"),
    ("A,C", {"A": "x", "C": "y"}, {}, "ranking must be a list of tiers"),
])
def test_invalid_submissions_say_what_is_wrong_in_labels(ranking, rationales, flags, message):
    workspace = Workspace(make_group(passed=(True, False, True)), seed=4)
    assert workspace.passing_labels == ("A", "C")
    with pytest.raises(InvalidRanking, match=message):
        workspace.submission({"tool": SUBMIT, "ranking": ranking, "rationales": rationales,
                              "flags": flags})


def test_render_submission_round_trips_through_the_workspace():
    workspace = Workspace(make_group(passed=(True, True, True)), seed=9)
    text = render_submission(workspace, [["t3"], ["t1", "t2"]],
                             {"t1": "a", "t2": "b", "t3": "c"}, {"t1": ["incomplete"]})
    action = json.loads(text)
    assert schema_errors(action, action_schema(workspace, 40)) == []
    tiers, rationales, flags = workspace.submission(action)
    assert tiers == (("t3",), ("t1", "t2")) and flags == {"t1": ("incomplete",)}


def test_weak_orders_count_every_ranking_with_ties():
    assert [len(weak_orders("ABCDE"[:n])) for n in range(6)] == [1, 1, 3, 13, 75, 541]


def test_small_groups_get_every_valid_ranking_enumerated():
    small = Workspace(make_group(passed=(True,) * 3), seed=0)
    ranking = submission_schema(small, 40)["properties"]["ranking"]
    assert len(ranking["enum"]) == 13
    large = Workspace(make_group(passed=(True,) * 5), seed=0)
    assert submission_schema(large, 40)["properties"]["ranking"]["type"] == "array"


def test_schema_rejects_what_validation_must_catch():
    workspace = Workspace(make_group(passed=(True,) * 5), seed=0)
    schema = action_schema(workspace, 20)
    base = {"tool": SUBMIT, "rationales": {lab: "fine" for lab in workspace.labels},
            "flags": {lab: [] for lab in workspace.labels}}
    assert schema_errors({**base, "ranking": [["A", "A"]]}, schema) == []  # uniqueness: later
    assert schema_errors({**base, "ranking": [["A"]], "rationales": {
        **base["rationales"], "A": "x" * 21}}, schema)
    assert schema_errors({**base, "ranking": [["A"]], "flags": {
        **base["flags"], "A": ["nope"]}}, schema)
    assert schema_errors({"tool": "view_transcript", "label": "A", "start": -1, "end": 2}, schema)
    assert schema_errors({"tool": "search", "pattern": 'say "hi"', "labels": []}, schema)
    assert schema_errors({"tool": "view_tests", "label": "A"}, schema) == []


def test_the_char_bound_covers_the_longest_submission():
    workspace = Workspace(make_group(passed=(True,) * 7), seed=0)
    longest = {"tool": SUBMIT, "ranking": [[lab] for lab in workspace.labels],
               "rationales": {lab: "r" * 30 for lab in workspace.labels},
               "flags": {lab: sorted(FLAGS, key=len)[-3:] for lab in workspace.labels}}
    assert schema_errors(longest, submission_schema(workspace, 30)) == []
    assert len(json.dumps(longest)) == action_char_bound(workspace, 30, submit_only=True)


def test_actions_doctests_run():
    import doctest

    from grading import actions

    result = doctest.testmod(actions)
    assert result.attempted and not result.failed


# --- the heuristic's evidence as tools ---------------------------------------------------

def hunk(path: str, old: list[str], new: list[str], *, added_file: bool = False) -> str:
    """A one-hunk diff of `path` replacing the lines `old` with `new`."""
    head = (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            if added_file else f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n")
    body = "".join(f"-{line}\n" for line in old) + "".join(f"+{line}\n" for line in new)
    return head + f"@@ -{0 if added_file else 1},{len(old)} +1,{len(new)} @@\n" + body


EVIDENCE_GROUP = make_group(passed=(True, True, True, True, False), patches=[
    hunk("pkg/mod.py", ["return x"], ["return x.strip(',')"]),                       # t1: lean
    hunk("pkg/mod.py", ["return x"], ["return  x.strip(',')"]),                      # t2: t1 up to spaces
    hunk("pkg/mod.py", ["return x"], ["print(x)", "return x.upper()"])                # t3: debug, stray,
    + hunk("tests/test_mod.py", ["assert f('a,') == 'a'"], ["assert f('a,')"])       # test edit
    + hunk("repro.py", [], ["from pkg.mod import f", "f('a,')"], added_file=True),
    hunk("pkg/mod.py", ["return x"], ["x = x.rstrip()", "return x.strip(',')"])
    + hunk("pkg/other.py", ["A = 1"], ["A = 2"]),                                   # t4: bigger, 2 files
    hunk("pkg/mod.py", ["return x"], ["return None"]),                               # t5: fails
])


def evidence_lines(text: str, workspace: Workspace) -> dict[str, str]:
    """Each passing trajectory's line of an evidence tool's output, by trajectory id."""
    rows = {line.split(":", 1)[0]: line for line in text.splitlines()}
    return {workspace.mapping[lab]: rows[lab] for lab in workspace.passing_labels}


def test_evidence_consensus_shows_the_heuristics_shares_and_same_changes_by_label():
    workspace = Workspace(EVIDENCE_GROUP, seed=2)
    features = assess(EVIDENCE_GROUP).features
    text = workspace.run({"tool": "evidence_consensus"})
    label = workspace.label_of
    assert f"Same change: {'='.join(sorted([label('t1'), label('t2')]))}" in text
    rows = evidence_lines(text, workspace)
    for tid in ("t1", "t2", "t3", "t4"):
        shared = 1 - features[tid].unshared_added
        assert f"{len(features[tid].added_lines)} added line(s), {shared:.0%} shared" in rows[tid]
    # t1 shares its one line with t4 but none with t3: the mean over the 2 other changes is 50%
    assert rows["t1"].endswith(f"other distinct change(s) ({label('t3')} 0%, {label('t4')} 100%)") or \
        rows["t1"].endswith(f"other distinct change(s) ({label('t4')} 100%, {label('t3')} 0%)")
    assert "50% shared on average with the 2 other" in rows["t1"]
    assert label("t5") not in rows and not any(f" t{i}" in text for i in range(1, 6))


def test_evidence_integrity_lists_the_heuristics_markers_with_their_points():
    workspace = Workspace(EVIDENCE_GROUP, seed=2)
    terms = assess(EVIDENCE_GROUP).terms
    rows = evidence_lines(workspace.run({"tool": "evidence_integrity"}), workspace)
    by_feature = {t.feature: t for t in terms["t3"]}
    for feature in ("test_edits", "stray_files", "debug_output"):
        term = by_feature[feature]
        assert f"{term.text} [{term.points:.2f}]" in rows["t3"]
    assert "edits tests (tests/test_mod.py)" in rows["t3"] and "repro.py" in rows["t3"]
    assert all(rows[tid].endswith(": none found") for tid in ("t1", "t2", "t4"))


def test_evidence_minimality_measures_against_the_leanest():
    workspace = Workspace(EVIDENCE_GROUP, seed=2)
    text = workspace.run({"tool": "evidence_minimality"})
    assert "Leanest fix: 2 line(s); fewest files: 1." in text
    rows = evidence_lines(text, workspace)
    assert "fix 2 line(s) (leanest), files 1, hunks 1, +1 -1" in rows["t1"]
    assert ("fix 5 line(s) (2.5x the leanest), files 2 (+1 over the fewest), hunks 2, +3 -2; "
            "files no other passing fix needed: pkg/other.py") in rows["t4"]


def test_evidence_tools_are_actions_the_schema_allows_and_are_capped():
    workspace = Workspace(EVIDENCE_GROUP, seed=2, caps=Caps(output_chars=200))
    schema = action_schema(workspace, 20)
    for tool in ("evidence_consensus", "evidence_integrity", "evidence_minimality"):
        assert schema_errors({"tool": tool}, schema) == []
        assert schema_errors({"tool": tool, "label": "A"}, schema)
        assert "[truncated: showed" in workspace.run({"tool": tool})
        assert workspace.run({"tool": tool, "label": "A"}).startswith(f"error: bad arguments for {tool}")
    assert "evidence_consensus" in render_prompt(EVIDENCE_GROUP, seed=2)[0]["content"]


@pytest.mark.parametrize("start, problem", [
    ("three", "start must be a whole number, not 'three'"),
    (float("nan"), "start must be a whole number, not nan"),
    (float("inf"), "start must be a whole number, not inf"),  # JSON's 1e400
    (True, "start must be a whole number, not True"),
    (2.5, "start must be a whole number, not 2.5"),
], ids=["word", "NaN", "infinite", "bool", "fraction"])
def test_a_bad_turn_number_is_answered_and_the_conversation_goes_on(start, problem):
    workspace = Workspace(make_group(), seed=0)
    assert workspace.run({"tool": "view_transcript", "label": "A", "start": start, "end": 2}) == f"error: {problem}"
    assert workspace.run({"tool": "view_transcript", "label": "A", "start": 0, "end": 1}).startswith(
        "A transcript, turns 0..0")


def test_a_huge_turn_number_shows_no_turns():
    workspace = Workspace(make_group(), seed=0)
    assert workspace.run({"tool": "view_transcript", "label": "A", "start": 10 ** 30, "end": 1e300}).startswith(
        "A: no turns in that range")


def test_arguments_of_the_wrong_kind_are_answered():
    workspace = Workspace(make_group(), seed=0)
    assert workspace.run({"tool": "search", "pattern": 5}) == "error: pattern must be a string, not 5"
    assert workspace.run({"tool": "search", "pattern": "x" * 5000}) == (
        "error: pattern is 5000 characters long; at most 4096")
    unhashable = workspace.run({"tool": "view_tests", "label": ["A"] * 50})
    assert unhashable.startswith("error: no trajectory ['A', 'A', ")
    assert unhashable.endswith("... (250 characters); labels: A, B, C")
