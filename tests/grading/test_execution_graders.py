"""Graders read the execution evidence: the heuristic ranks a candidate that breaks tests or
whose reward verdict does not reproduce below the rest, naming the tests; the agent's workspace
shows the matrix by label."""

from dataclasses import replace

from grading.actions import action_schema
from grading.cases import GroupCase, TrajectoryCase
from grading.execution import REFERENCE, Matrix
from grading.graders.agentic import schema_errors
from grading.graders.heuristic import HeuristicGrader
from grading.rankings import validate_ranking
from grading.workspace import Workspace

X, Y, MORE = "tests/test_ops.py::test_x", "tests/test_ops.py::test_y", "tests/test_more.py::test_more"


def fix(lines: int) -> str:
    added = "".join(f"+    y{i} = x\n" for i in range(lines))
    return (f"diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
            f"@@ -1,2 +1,{2 + lines} @@\n def f(x):\n{added}     return x\n")


# The leanest fix is the one that breaks a test; the next leanest does not reproduce.
CASE = GroupCase("g", "Fix f.", tuple(TrajectoryCase(tid, passed, float(passed), fix(n)) for tid, passed, n in (
    ("lean_breaks", True, 1), ("unreproduced", True, 2), ("good", True, 3), ("also_good", True, 4),
    ("failing", False, 1))))


def run(suite, candidates, status, tests):
    return {"key": f"{suite}-{'-'.join(candidates)}", "suite": suite, "candidates": list(candidates),
            "tests": sorted(tests), "outcome": {"status": status, "tests": tests, "duration": 1.0,
                                                "log_tail": "...", "command": "bwrap ...", "reason": ""}}


MATRIX = Matrix.from_dict({
    "passed": {t.trajectory_id: t.passed for t in CASE.trajectories},
    "runs": [run("reward", ["lean_breaks", "good", "also_good"], "pass", {X: "pass"}),
             run("reward", ["unreproduced"], "fail", {X: "fail"}),
             run("reward", ["failing"], "fail", {X: "fail"}),
             *(run("existing", [c], "pass", {X: "pass", Y: "pass"}) for c in ("unreproduced", "good", "also_good")),
             run("existing", ["lean_breaks"], "fail", {X: "pass", Y: "fail"}),
             *(run("peer:good", [c], "pass", {MORE: "pass"}) for c in ("unreproduced", "good", "also_good")),
             run("peer:good", ["lean_breaks"], "fail", {MORE: "fail"})],
    "skipped": [{"suite": "existing", "candidates": ["good"], "reason": "1 existing test files over the budget"}],
})
WITH_EVIDENCE = replace(CASE, execution=MATRIX)


def test_without_evidence_the_leanest_fix_ranks_first():
    assert HeuristicGrader().rank(CASE).tiers[0] == ("lean_breaks",)


def test_a_fix_that_breaks_tests_others_pass_ranks_last_with_the_tests_named():
    grade = HeuristicGrader().rank(WITH_EVIDENCE)
    validate_ranking(grade.tiers, [t.trajectory_id for t in CASE.passing], grade.flags)
    order = [tid for tier in grade.tiers for tid in tier]
    assert order[:2] == ["good", "also_good"]
    assert set(order[2:]) == {"lean_breaks", "unreproduced"}
    assert grade.flags["lean_breaks"] == ("breaks_tests",)
    assert f"fails 2 test(s) that most other passing fixes pass: existing: {Y}, peer:good: {MORE}" in \
        grade.rationales["lean_breaks"]
    assert grade.flags["unreproduced"] == ("other",)
    assert f"not reproduced: the reward passed it; its reward tests fail here: {X}" in \
        grade.rationales["unreproduced"]
    assert "good" not in grade.flags


def test_the_heuristics_explanation_holds_the_execution_terms():
    steps = {step["trajectory"]: step for step in HeuristicGrader().explain(WITH_EVIDENCE)}
    assert [t["feature"] for t in steps["lean_breaks"]["terms"]][0] == "breaks_tests"
    assert steps["lean_breaks"]["penalty"] > steps["also_good"]["penalty"]


def test_the_workspace_shows_the_matrix_by_label_never_by_id():
    workspace = Workspace(WITH_EVIDENCE, seed=3)
    assert schema_errors({"tool": "evidence_execution"}, action_schema(workspace, 20)) == []
    text = workspace.run({"tool": "evidence_execution"})
    for tid in ("lean_breaks", "unreproduced", "good", "also_good", "failing"):
        assert tid not in text
    breaks, good, unreproduced = (workspace.label_of(t) for t in ("lean_breaks", "good", "unreproduced"))
    assert f"{breaks} (PASS): reward 1/1 pass; existing 1/2 pass; not passing: {Y} [fail]" in text
    assert f"peer:{good} 0/1 pass" in text
    assert f"Fails tests most other passing candidates pass: {breaks} (existing: {Y}, peer:{good}: {MORE})" in text
    assert f"Reward verdicts that do not reproduce: {unreproduced}: the reward passed it" in text
    assert f"Skipped existing for {good}: 1 existing test files over the budget" in text


def test_without_evidence_the_workspace_says_why():
    text = Workspace(replace(CASE, no_execution="no codebase store is configured"), seed=1).evidence_execution()
    assert text == "No execution evidence: no codebase store is configured."


EDGE = "tests/test_x.py::test_edge"  # a test of the test patch's file that the reward does not list
WITH_REFERENCE = replace(CASE, execution=Matrix.from_dict({**MATRIX.to_dict(), "runs": [
    *MATRIX.to_dict()["runs"],
    run("reward", [REFERENCE], "pass", {X: "pass"}),
    run("reward_files", [REFERENCE, "lean_breaks", "unreproduced"], "pass", {X: "pass", EDGE: "pass"}),
    run("reward_files", ["good", "also_good"], "fail", {X: "pass", EDGE: "fail"})]}))


def test_the_workspace_shows_the_reference_fix_as_the_control_and_what_fails_the_test_patchs_files():
    workspace = Workspace(WITH_REFERENCE, seed=3)
    text = workspace.run({"tool": "evidence_execution"})
    good, also_good = workspace.label_of("good"), workspace.label_of("also_good")
    assert "the reference fix (the control, not ranked): reward 1/1 pass; reward_files 2/2 pass" in text
    # Held to the reference: two of four passing candidates fail the edge, both are named.
    assert (f"Fails tests of the test patch's files, beyond the reward's, that the reference fix passes: "
            f"{min(good, also_good)} ({EDGE}); {max(good, also_good)} ({EDGE})") in text
    assert REFERENCE not in text and not any(tid in text for tid in ("lean_breaks", "good", "unreproduced"))
    integrity = workspace.run({"tool": "evidence_integrity"})
    assert f"of the test patch's files, beyond the reward's, that the reference fix passes: {EDGE}" in integrity
