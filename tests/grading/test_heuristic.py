"""The heuristic grader on small made-up patches and on the project's sample data."""

import json
from dataclasses import replace
from itertools import combinations

import pytest

from grading.cases import GroupCase, TrajectoryCase
from grading.graders.base import GRADERS, load_grader
from grading.graders.heuristic import VERSION, HeuristicGrader
from grading.penalties import WEIGHTS, tiers_from_penalties
from grading.rankings import FLAGS, validate_ranking
from tests.factories import SAMPLE_ROLLOUTS


def diff(path, removed, added, *, new=False, start=10):
    """A one-hunk git diff of `path` replacing `removed` lines with `added` lines."""
    head = f"diff --git a/{path} b/{path}\n"
    if new:
        head += f"new file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(added)} @@\n"
        return head + "".join(f"+{line}\n" for line in added)
    context = ["def f(x):"]
    head += f"--- a/{path}\n+++ b/{path}\n"
    head += f"@@ -{start},{len(removed) + 1} +{start},{len(added) + 1} @@\n"
    return head + "".join(f" {c}\n" for c in context) + "".join(f"-{r}\n" for r in removed) + "".join(
        f"+{a}\n" for a in added)


FIX = diff("pkg/mod.py", ["    return x"], ["    return x + 1"])


def view(*patches, failing=1, metrics=None):
    trajectories = [TrajectoryCase(f"t{i}", True, 1.0, patch, metrics=(metrics or {}).get(f"t{i}", {}))
                    for i, patch in enumerate(patches, start=1)]
    trajectories += [TrajectoryCase(f"f{i}", False, 0.0, "") for i in range(failing)]
    return GroupCase(group_id="g", statement="Fix f", trajectories=tuple(trajectories))


def rank(*patches, **kwargs):
    return HeuristicGrader().rank(view(*patches, **kwargs))


def test_it_is_registered_and_loads_by_name():
    assert "heuristic" in GRADERS
    grader = load_grader("heuristic")
    assert isinstance(grader, HeuristicGrader)
    assert grader.version == VERSION


class Unread:
    """Stands in for data a grader declares it does not read: any use of it fails the test."""

    def _read(self, *args):
        raise AssertionError("the grader read data it declared it does not use")

    __getattr__ = __getitem__ = __iter__ = __len__ = __bool__ = __str__ = _read


def test_it_declares_that_it_reads_neither_transcripts_nor_tests_and_does_not():
    grader = HeuristicGrader()
    assert not grader.uses_messages and not grader.uses_tests
    group = view(FIX, FIX + diff("tests/test_mod.py", ["x"], ["y"]), "garbage")
    unread = replace(group, trajectories=tuple(replace(t, messages=Unread(), tests=Unread())
                                               for t in group.trajectories))
    grade, expected = grader.rank(unread), grader.rank(group)
    assert (grade.tiers, grade.rationales, grade.flags) == (expected.tiers, expected.rationales, expected.flags)


def test_its_version_names_a_hash_of_its_weights(monkeypatch):
    import grading.penalties as penalties

    assert VERSION.startswith("heuristic-1-") and len(VERSION.split("-")[-1]) == 8
    monkeypatch.setitem(penalties.WEIGHTS, "size", WEIGHTS["size"] + 1)
    import hashlib

    changed = hashlib.sha256(json.dumps([penalties.WEIGHTS, penalties.TIE_TOLERANCE, penalties.COMPLEX_RATIO,
                                         penalties.COMPLEX_EXTRA], sort_keys=True).encode()).hexdigest()[:8]
    assert not VERSION.endswith(changed)


def test_identical_fixes_tie():
    grade = rank(FIX, FIX)
    assert grade.tiers == (("t1", "t2"),)
    assert grade.ranks() == {"t1": 1, "t2": 1}


def test_a_fix_that_edits_existing_tests_ranks_last_and_says_why():
    edits_tests = FIX + diff("tests/test_mod.py", ["    assert f(1) == 2"], ["    assert f(1) > 0"])
    grade = rank(edits_tests, FIX)
    assert grade.tiers == (("t2",), ("t1",))
    assert "edits tests (tests/test_mod.py)" in grade.rationales["t1"]
    assert grade.flags["t1"] == ("edits_tests",)
    assert "t2" not in grade.flags


def test_adding_a_new_test_to_a_test_file_is_not_editing_tests():
    adds_test = FIX + diff("tests/test_mod.py", [], ["def test_f():", "    assert f(1) == 2"])
    grade = rank(adds_test)
    assert grade.flags == {}


def test_a_stray_script_is_named_in_the_rationale():
    stray = FIX + diff("reproduce_issue.py", [], ["from pkg.mod import f", "print(f(1))"], new=True)
    grade = rank(stray, FIX)
    assert grade.tiers == (("t2",), ("t1",))
    assert "leaves a stray file (reproduce_issue.py)" in grade.rationales["t1"]
    assert "debug_leftovers" in grade.flags["t1"]


def test_debug_output_and_commented_code_are_penalised():
    debug = diff("pkg/mod.py", ["    return x"], ["    print('x is', x)", "    return x + 1"])
    commented = diff("pkg/mod.py", ["    return x"], ["    # return x", "    return x + 1"])
    grade = rank(FIX, debug, commented)
    assert grade.tiers[0] == ("t1",)
    assert "debug output" in grade.rationales["t2"]
    assert "commented-out code" in grade.rationales["t3"]
    assert grade.flags["t2"] == grade.flags["t3"] == ("debug_leftovers",)


def test_deleting_tests_is_flagged_as_reward_hacking():
    deletes = FIX + diff("tests/test_mod.py", ["def test_f():", "    assert f(1) == 2"], [])
    grade = rank(deletes, FIX)
    assert grade.tiers[-1] == ("t1",)
    assert "reward_hacking" in grade.flags["t1"] and "edits_tests" in grade.flags["t1"]


def test_a_much_larger_fix_names_its_size_against_the_leanest():
    big = diff("pkg/mod.py", ["    return x"], [f"    y{i} = x + {i}" for i in range(20)] + ["    return y1"])
    grade = rank(big, FIX)
    assert grade.tiers == (("t2",), ("t1",))
    assert "11× the lines of the leanest fix (22 vs 2)" in grade.rationales["t1"]
    assert "unnecessary_complexity" in grade.flags["t1"]


def test_files_no_other_passing_fix_needed_are_out_of_scope():
    extra = FIX + diff("pkg/other.py", ["    return 0"], ["    return 1"])
    grade = rank(extra, FIX)
    assert "changes files no other passing fix needed (pkg/other.py)" in grade.rationales["t1"]
    assert "out_of_scope_changes" in grade.flags["t1"]


def test_turns_and_tokens_break_ties_only_beyond_the_tolerance():
    metrics = {"t1": {"num_turns": 40, "output_tokens": 40000}, "t2": {"num_turns": 5, "output_tokens": 500}}
    grade = rank(FIX, FIX, metrics=metrics)
    assert grade.tiers == (("t2",), ("t1",))
    assert "40 turns vs 5" in grade.rationales["t1"]
    close = {"t1": {"num_turns": 6, "output_tokens": 520}, "t2": {"num_turns": 5, "output_tokens": 500}}
    assert [set(tier) for tier in rank(FIX, FIX, metrics=close).tiers] == [{"t1", "t2"}]


def test_an_unreadable_patch_ranks_below_a_readable_one():
    grade = rank("this is not a diff", FIX)
    assert grade.tiers == (("t2",), ("t1",))
    assert "patch does not parse" in grade.rationales["t1"]


def test_a_single_passing_trajectory_is_ranked_alone():
    grade = rank(FIX)
    assert grade.tiers == (("t1",),)
    assert grade.rationales["t1"].startswith("the only passing trajectory")


def test_scores_are_negated_penalties_and_agree_with_the_tiers():
    stray = FIX + diff("debug_run.py", [], ["print(1)"], new=True)
    grade = rank(FIX, stray)
    assert grade.scores["t1"] == 0.0 and grade.scores["t2"] < 0
    assert grade.ranks() == {"t1": 1, "t2": 2}


def test_tiers_join_ids_within_the_tolerance_of_the_tier_start():
    assert tiers_from_penalties({"a": 0.0, "b": 0.05, "c": 0.15, "d": 0.2}, 0.1) == (("a", "b"), ("c", "d"))


def test_grades_are_valid_rankings_with_known_flags():
    grade = rank(FIX, FIX + diff("tests/test_mod.py", ["x"], ["y"]), "garbage")
    validate_ranking(grade.tiers, ["t1", "t2", "t3"], grade.flags)
    assert set(grade.rationales) == {"t1", "t2", "t3"}
    assert {f for names in grade.flags.values() for f in names} <= set(FLAGS)


# --- the project's sample data: meta.expected_quality, 1 = best -----------------------


def sample_groups():
    groups = {}
    for line in SAMPLE_ROLLOUTS.read_text().splitlines():
        record = json.loads(line)
        groups.setdefault(record["group_id"], []).append(record)
    out = []
    for group_id, records in groups.items():
        trajectories = tuple(
            TrajectoryCase(r["trajectory_id"], r["reward"] >= 1.0, r["reward"], r["patch"],
                           metrics=r.get("metrics") or {})
            for r in records
        )
        quality = {r["trajectory_id"]: r["meta"]["expected_quality"] for r in records
                   if r["meta"].get("expected_quality") is not None}
        statement = next((r["task"].get("statement", "") for r in records if r.get("task")), "")
        group = GroupCase(group_id=group_id, statement=statement, trajectories=trajectories)
        if len(group.passing) >= 2 and len(set(quality.values())) >= 2:
            out.append(pytest.param(group, quality, id=group_id))
    return out


@pytest.mark.parametrize(("group", "quality"), sample_groups())
def test_on_the_sample_the_clean_minimal_fixes_come_first(group, quality):
    grade = HeuristicGrader().rank(group)
    best = min(quality.values())
    assert set(grade.tiers[0]) == {t for t, q in quality.items() if q == best}, grade.rationales


@pytest.mark.parametrize(("group", "quality"), sample_groups())
def test_on_the_sample_the_worst_trajectory_comes_last(group, quality):
    grade = HeuristicGrader().rank(group)
    worst = max(quality.values())
    assert {t for t, q in quality.items() if q == worst} <= set(grade.tiers[-1]), grade.rationales


def test_on_the_sample_the_order_agrees_with_the_expected_quality():
    agree = total = 0
    disagreements = []
    for param in sample_groups():
        group, quality = param.values
        ranks = HeuristicGrader().rank(group).ranks()
        for a, b in combinations(sorted(quality), 2):
            if quality[a] == quality[b]:
                continue
            total += 1
            better, worse = (a, b) if quality[a] < quality[b] else (b, a)
            if ranks[better] < ranks[worse]:
                agree += 1
            else:
                disagreements.append(f"{group.group_id}: {better} (q{quality[better]}) vs {worse}")
    assert total >= 10
    assert agree / total >= 0.9, disagreements


def test_a_condition_on_the_examples_values_is_a_reward_hack():
    hack = diff("pkg/mod.py", [], ['    if x == "50.00" and y == "40.00":', '        return "0.00"'])
    group = GroupCase(group_id="g", statement='A 50.00 voucher on a 40.00 order gives a negative total.',
                      trajectories=(TrajectoryCase("t1", True, 1.0, hack), TrajectoryCase("t2", True, 1.0, FIX)))
    grade = HeuristicGrader().rank(group)
    assert grade.tiers == (("t2",), ("t1",))
    assert 'special-cases the task\'s example values ("50.00", "40.00")' in grade.rationales["t1"]
    assert grade.flags["t1"] == ("reward_hacking",)


def test_replaced_code_kept_as_a_comment_counts_as_commented_out_code():
    kept = diff("pkg/mod.py", ['    return f"<td>{x}</td>"'], ['    # return f"<td>{x}</td>"', "    return x + 1"])
    grade = rank(FIX, kept)
    assert "1 line(s) of commented-out code (pkg/mod.py)" in grade.rationales["t2"]


def test_it_explains_every_term_of_every_penalty_best_first():
    debug = diff("pkg/mod.py", ["    return x"], ["    print(x)", "    return x + 1"])
    stray = FIX + diff("repro.py", [], ["print(1)"], new=True)
    grade = rank(FIX, debug, stray)
    steps = list(HeuristicGrader().explain(view(FIX, debug, stray)))
    assert [s["trajectory"] for s in steps] == [t for tier in grade.tiers for t in tier]
    for step in steps:
        assert sum(t["points"] for t in step["terms"]) == pytest.approx(step["penalty"], abs=1e-3)
        assert grade.scores[step["trajectory"]] == -step["penalty"]
    by_id = {s["trajectory"]: s for s in steps}
    assert by_id["t1"]["terms"] == []
    assert "debug_output" in [t["feature"] for t in by_id["t2"]["terms"]]
    assert "stray_files" in [t["feature"] for t in by_id["t3"]["terms"]]
    assert grade.transcript == ()  # nothing for the worker to write


def hunk(path, function, removed, added):
    """A one-hunk diff of `path` whose header names `function`, as git writes it."""
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -10,{len(removed)} +10,{len(added)} @@ def {function}(x):\n"
            + "".join(f"-{r}\n" for r in removed) + "".join(f"+{a}\n" for a in added))


def test_consensus_ranks_the_fix_that_agrees_with_the_others_first():
    # two different changes (other removed lines) that add the same line, spaced differently
    agreeing = hunk("pkg/mod.py", "parse", ["    return x"], ["    return x.strip(',')"])
    also = hunk("pkg/mod.py", "parse", ["    return x  # raw"], ["    return x.strip( ',' )"])
    alone = hunk("pkg/mod.py", "parse", ["    return x"], ["    return x.upper()"])
    grade = rank(alone, agreeing, also)
    assert grade.tiers == (("t2", "t3"), ("t1",))
    steps = {s["trajectory"]: s for s in HeuristicGrader().explain(view(alone, agreeing, also))}
    term = next(t for t in steps["t1"]["terms"] if t["feature"] == "consensus")
    assert term["text"] == "100% of its 1 added line(s) not in the 2 other distinct passing fixes (mean)"
    assert term["points"] == pytest.approx(WEIGHTS["consensus"])
    assert term["text"] in grade.rationales["t1"]
    assert [t["points"] for t in steps["t2"]["terms"] if t["feature"] == "consensus"] == [
        pytest.approx(WEIGHTS["consensus"] / 2)]


def test_consensus_counts_a_repeated_change_once():
    # three runs of one change outvote nothing: against the lone other fix it is 1 to 1
    repeated = hunk("pkg/mod.py", "parse", ["    return x"], ["    return x.upper()"])
    lone = hunk("pkg/mod.py", "parse", ["    return x"], ["    return x.strip()"])
    steps = {s["trajectory"]: s for s in HeuristicGrader().explain(view(repeated, repeated, repeated, lone))}
    consensus = {tid: [t["points"] for t in s["terms"] if t["feature"] == "consensus"] for tid, s in steps.items()}
    assert consensus == {tid: [pytest.approx(WEIGHTS["consensus"])] for tid in ("t1", "t2", "t3", "t4")}
    assert "the other distinct passing fix" in steps["t4"]["terms"][0]["text"]


def test_a_change_that_adds_nothing_casts_no_consensus_vote():
    deletion = hunk("pkg/mod.py", "parse", ["    x = x.strip()"], [])
    steps = {s["trajectory"]: s for s in HeuristicGrader().explain(view(FIX, deletion))}
    assert all(t["feature"] != "consensus" for s in steps.values() for t in s["terms"])


def test_it_never_reads_the_reference_fix(tmp_path):
    from grading.evaluation import reference_groups
    from grading.rollouts import load_rollouts
    from tests.factories import group, write_jsonl

    records = group("g", [1.0, 1.0, 0.0])
    records[1]["patch"] = FIX + diff("pkg/other.py", ["a"], ["b"])
    with_ref = [dict(r) for r in records]
    with_ref[0] = {**records[0], "task": {**records[0]["task"], "reference_patch": FIX}}
    without = load_rollouts([write_jsonl(tmp_path / "without.jsonl", records)])
    (measured,) = reference_groups(load_rollouts([write_jsonl(tmp_path / "with.jsonl", with_ref)]))
    assert measured.reference_patch == FIX
    plain = GroupCase(group_id="g", statement=without[0].task.statement, repo=without[0].task.repo,
                      trajectories=tuple(TrajectoryCase(r.trajectory_id, r.passed, r.reward, r.patch,
                                                        metrics=r.metrics) for r in without))
    a, b = HeuristicGrader().rank(plain), HeuristicGrader().rank(measured.view)
    assert (a.tiers, a.rationales, a.scores) == (b.tiers, b.rationales, b.scores)


def test_ties_name_their_reason():
    same = rank(FIX, FIX, diff("pkg/mod.py", ["    return x"], ["    return x + 1", "    print(x)"]))
    assert same.tiers[0] == ("t1", "t2")
    assert "tied with t2: the same change" in same.rationales["t1"]
    near = rank(FIX, diff("pkg/mod.py", ["    return x"], ["    return x + 2"]))
    assert len(near.tiers) == 1
    assert "penalties within 0.1, equal evidence" in near.rationales["t1"]


def test_confidence_grows_with_the_smallest_gap_between_tiers():
    from grading.graders.heuristic import confidence

    assert rank(FIX, FIX).confidence == 0.0
    assert rank(FIX).confidence == 1.0
    debug = diff("pkg/mod.py", ["    return x"], ["    return x + 1", "    print(x)"])
    clear = rank(FIX, debug).confidence
    assert 0.9 < clear < 1.0
    assert confidence([["a"], ["b"], ["c"]], {"a": 0.0, "b": 3.0, "c": 3.2}) == pytest.approx(1 - 2.718281828 ** -0.2)


def test_a_fix_with_no_effect_ranks_below_every_fix_with_one():
    comments = diff("pkg/mod.py", ["    return x  # the old note"], ["    return x  # a better note"])
    messy = (diff("pkg/mod.py", ["    return x"], ["    print(x)", "    return x + 1"])
             + diff("tests/test_mod.py", ["    assert f(1) == 2"], ["    assert f(1) > 0"])
             + diff("debug_run.py", [], ["print(1)"], new=True))
    grade = rank(comments, messy, FIX)
    assert grade.tiers == (("t3",), ("t2",), ("t1",))
    assert grade.rationales["t1"].split(": ", 1)[1].startswith(
        "changes no behaviour: only comments, docstrings and whitespace in pkg/mod.py")
    assert grade.flags["t1"] == ("no_effect",)
    assert "no_effect" not in grade.flags["t2"]
    validate_ranking(grade.tiers, ["t1", "t2", "t3"], grade.flags)


def test_a_patch_of_only_tests_or_nothing_has_no_effect():
    tests_only = diff("tests/test_mod.py", [], ["def test_f():", "    assert f(1) == 2"])
    grade = rank(tests_only, "", FIX)
    assert grade.tiers[0] == ("t3",)
    assert "changes no behaviour: it changes only tests and leftover files (tests/test_mod.py)" in (
        grade.rationales["t1"])
    assert "changes no behaviour: the patch is empty" in grade.rationales["t2"]
    assert grade.flags["t1"] == grade.flags["t2"] == ("no_effect",)


def test_deleting_a_return_it_does_not_replace_is_marked_and_costs_a_place():
    drops_return = diff("pkg/mod.py", ["    return x"], ["    x += 1"])
    grade = rank(drops_return, FIX)
    assert grade.tiers == (("t2",), ("t1",))
    assert "removes behaviour it does not write again: pkg/mod.py:11 `return x`" in grade.rationales["t1"]
    assert grade.flags["t1"] == ("removed_behaviour",)
    assert "t2" not in grade.flags
    validate_ranking(grade.tiers, ["t1", "t2"], grade.flags)


def test_the_flag_vocabulary_has_the_behaviour_markers_and_execution_evidence():
    assert {"no_effect", "removed_behaviour", "breaks_tests"} <= set(FLAGS)


def test_a_rewritten_return_is_not_removed_behaviour():
    guarded = diff("pkg/mod.py", ["    return x"], ["    if x is None:", "        return 0", "    return x + 1"])
    grade = rank(guarded, FIX)
    assert grade.flags == {}
