"""The test patch's whole files (`reward_files`) and the task's reference fix as their control:
what is planned, what the verdicts make of a matrix, and a group run for real in the bwrap
sandbox, where a candidate that passes the reward's listed tests and fails the human fix's own
test beside them is flagged and ranked below the correct ones."""

import shutil
import tempfile
from pathlib import Path

import pytest

from grading.cases import GroupCase, TrajectoryCase
from grading.execution import (
    REFERENCE,
    Candidate,
    Environment,
    GroupBudget,
    Matrix,
    RunOutcome,
    Skipped,
    breaks_tests,
    fails_reward_files,
    flaky,
    plan_runs,
    reference_control,
    run_planned,
)
from grading.graders.heuristic import HeuristicGrader
from grading.sandbox import BwrapSandbox, SandboxConfig, check_backend
from grading.sandbox.bwrap import SYSTEM_PATHS
from tests import evidencedata

PYTEST_ENV = Environment.from_dict({"test_command": "python -m pytest -rA {tests}", "report": "pytest"})
FILES = ["calc/__init__.py", "calc/ops.py", "tests/test_ops.py"]
X = "tests/test_clamp.py::test_x"  # the reward's listed test
EDGE, OTHER_EDGE = "tests/test_clamp.py::test_edge", "tests/test_clamp.py::test_other_edge"
NETWORK = "tests/test_clamp.py::test_needs_network"


def edit(path, old, new):
    return (f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n"
            f"+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n")


TEST_PATCH = ("diff --git a/tests/test_clamp.py b/tests/test_clamp.py\nnew file mode 100644\nindex 0000000..3333333\n"
              "--- /dev/null\n+++ b/tests/test_clamp.py\n@@ -0,0 +1,2 @@\n+def test_x():\n+    assert True\n")
PATCHES = {c: edit("calc/ops.py", "X = 1", f"X = {n}") for n, c in enumerate("abcd", start=2)}


def plan(candidates, **options):
    arguments = {"codebase_id": "repo@abc", "codebase_files": FILES, "environment": PYTEST_ENV,
                 "reward_tests": [X], "test_patch": TEST_PATCH, **options}
    return plan_runs(candidates, **arguments)


# --- the plan ---------------------------------------------------------------------------

def test_the_reference_fix_runs_the_reward_and_its_files_as_a_control_sharing_runs_and_never_ranked():
    candidates = [Candidate("a", PATCHES["a"], True), Candidate("b", PATCHES["a"], True),
                  Candidate("f", PATCHES["d"], False)]
    result = plan(candidates, reference_patch=PATCHES["d"])
    assert [(run.suite, run.candidates, run.tests) for run in result.runs] == [
        ("reward", ("a", "b"), (X,)),
        ("reward", (REFERENCE, "f"), (X,)),  # the failing candidate made the reference's change: one run
        ("reward_files", (REFERENCE,), ("tests/test_clamp.py",)),
        ("reward_files", ("a", "b"), ("tests/test_clamp.py",)),
        ("existing", ("a", "b"), ("tests/test_ops.py",))]
    reward, _, _, reward_files, _ = result.runs
    assert reward.patch == reward_files.patch == PATCHES["a"] + TEST_PATCH
    assert result.passed == {"a": True, "b": True, "f": False}


def test_without_a_reference_or_a_test_file_in_the_test_patch_nothing_more_is_planned():
    candidates = [Candidate("a", PATCHES["a"], True)]
    assert [run.suite for run in plan(candidates, reference_patch="").runs] == ["reward", "reward_files", "existing"]
    assert [run.suite for run in plan(candidates, test_patch="").runs] == ["reward", "existing"]


def test_a_reference_fix_that_cannot_be_cut_is_skipped_saying_so_and_no_candidate_may_take_its_id():
    bad = "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n" * 2
    result = plan([Candidate("a", PATCHES["a"], True)], reference_patch=bad)
    assert all(REFERENCE not in run.candidates for run in result.runs)
    assert [(s.suite, s.candidates, s.reason[:35]) for s in result.skipped] == [
        ("*", (REFERENCE,), "the reference fix: cannot cut the p")]
    with pytest.raises(ValueError, match="which names the task's reference fix"):
        plan([Candidate(REFERENCE, PATCHES["a"], True)])


# --- the verdicts -----------------------------------------------------------------------

def outcome(status, tests=()):
    return RunOutcome(status, dict(tests), 1.0, "log", "bwrap ... pytest")


def matrix_of(results, *, reference=True, passed=None, skipped=()):
    """The matrix of candidates a, b and c (passing unless `passed` says otherwise), with d the
    reference fix when `reference`; each run's outcome is results[suite, its first candidate],
    else a pass of nothing; a run named in `skipped` has none."""
    passed = passed or dict.fromkeys("abc", True)
    group = plan([Candidate(c, PATCHES[c], verdict) for c, verdict in passed.items()],
                 reference_patch=PATCHES["d"] if reference else None)
    left = {(s.suite, s.candidates) for s in skipped}
    outcomes = {run.key: results.get((run.suite, run.candidates[0]), outcome("pass")) for run in group.runs
                if (run.suite, run.candidates) not in left}
    return Matrix.build(group, outcomes, tuple(skipped))


def files(x, edge, other_edge, network="pass"):
    return outcome("pass" if {x, edge, other_edge, network} == {"pass"} else "fail",
                   {X: x, EDGE: edge, OTHER_EDGE: other_edge, NETWORK: network})


def test_a_test_of_the_reward_files_the_reference_passes_counts_against_each_passing_candidate_that_fails_it():
    results = {("reward_files", REFERENCE): files("pass", "pass", "pass", network="fail"),
               ("reward_files", "a"): files("pass", "fail", "pass", network="fail"),
               ("reward_files", "b"): files("pass", "fail", "pass", network="fail"),
               # c fails a listed reward test here: the reward's and flaky's to judge, not counted again
               ("reward_files", "c"): files("fail", "pass", "fail", network="pass")}
    matrix = matrix_of(results)
    # Held to the reference, not to a majority: two of three fail the edge, and are both flagged.
    assert fails_reward_files(matrix) == {"a": [EDGE], "b": [EDGE], "c": [OTHER_EDGE]}
    control = reference_control(matrix)
    assert control.bar == {X, EDGE, OTHER_EDGE} and control.excused == {NETWORK} and not control.machines
    assert control.notes == (f"the reference fix fails 1 test(s) of the reward files here ({NETWORK}): "
                             "they count against no candidate",)
    assert matrix.reference and REFERENCE not in matrix.passed
    assert Matrix.from_dict(matrix.to_dict()) == matrix and Matrix.from_dict(matrix.to_dict()).reference


def test_without_a_reference_a_reward_file_test_counts_where_most_other_passing_candidates_pass_it_saying_so():
    results = {("reward_files", "a"): files("pass", "fail", "fail"),
               ("reward_files", "b"): files("pass", "fail", "pass"),
               ("reward_files", "c"): files("pass", "pass", "pass")}
    matrix = matrix_of(results, reference=False)
    assert fails_reward_files(matrix) == {"a": [OTHER_EDGE]}  # half the others fail the edge: nobody's
    assert not matrix.reference
    assert reference_control(matrix).notes == (
        "no reference fix: the reward and reward_files suites ran without a control; reward files compared "
        "with the other passing candidates only",)


def test_a_reference_that_fails_its_own_reward_tests_makes_the_suite_the_machines_and_flags_nobody():
    results = {("reward", REFERENCE): outcome("fail", {X: "fail"}),
               ("reward", "b"): outcome("fail", {X: "fail"}),  # passed by the reward, fails here as the reference does
               ("reward_files", REFERENCE): files("fail", "pass", "pass"),
               ("reward_files", "a"): files("pass", "fail", "pass")}
    matrix = matrix_of(results)
    control = reference_control(matrix)
    assert control.machines and control.excused == {X}
    assert control.notes == (f"the reference fix fails its own reward tests here ({X}): the suite is this "
                             "machine's, not the candidates'; no candidate is flagged by the reward files",)
    assert fails_reward_files(matrix) == {}
    assert flaky(matrix) == {}


def test_a_reward_run_that_reports_no_test_is_nobodys_when_the_references_reports_none_either():
    # A test id that names nothing here: every run fails with no test reported, the reference's too.
    results = {("reward", REFERENCE): outcome("fail"), ("reward", "a"): outcome("fail"),
               ("reward", "b"): outcome("fail"), ("reward", "c"): outcome("fail")}
    matrix = matrix_of(results, passed={"a": True, "b": True, "c": False})
    assert reference_control(matrix).machines
    assert flaky(matrix) == {}


def test_a_reference_whose_reward_files_run_was_skipped_leaves_the_other_candidates_as_the_bar_saying_why():
    results = {("reward_files", "a"): files("pass", "fail", "pass"),
               ("reward_files", "b"): files("pass", "pass", "pass"),
               ("reward_files", "c"): files("pass", "pass", "pass")}
    skipped = (Skipped("reward_files", (REFERENCE,), "over the group's budget of 4 runs"),)
    matrix = matrix_of(results, skipped=skipped)
    assert matrix.reference and matrix.run_of(REFERENCE, "reward_files") is None
    assert reference_control(matrix).notes == (
        "the reference fix's reward_files run was skipped: over the group's budget of 4 runs: reward files "
        "compared with the other passing candidates only",)
    assert fails_reward_files(matrix) == {"a": [EDGE]}


# --- for real, in the sandbox -----------------------------------------------------------

SANDBOXED = {"good": evidencedata.FIXED, "also_good": evidencedata.FIXED_IFS,
             "misses_inside": evidencedata.MISSES_INSIDE}
# Passed by a flaky reward: it changes a comment; its reward tests fail here.
COMMENT = "# clamp is fine\n" + evidencedata.OPS


@pytest.fixture(scope="module")
def sandboxed(sandbox_python, tmp_path_factory):
    """A worker's means: the codebase, the bwrap sandbox, its environment and a work root."""
    check_backend(SandboxConfig("bwrap"))  # scripts/sandbox.sh installs it
    environment = Environment.from_dict(evidencedata.environment(sandbox_python))
    sandbox = BwrapSandbox(readonly_paths=(*SYSTEM_PATHS, str(sandbox_python.parents[1])))
    codebase = evidencedata.store(tmp_path_factory.mktemp("store")) / "calc"
    workroot = Path(tempfile.mkdtemp(prefix="gagar-reward-files-"))
    workroot.chmod(0o755)
    yield codebase, sandbox, environment, workroot
    shutil.rmtree(workroot)


def gathered(sandboxed, scratch, candidates, reference):
    """The matrix of `candidates` ({id: (passed, the text of calc/ops.py)}) run for real, with
    `reference` (the text of calc/ops.py) the task's reference fix; the group as a grader sees it."""
    codebase, sandbox, environment, workroot = sandboxed
    patches = {c: evidencedata.diff({"calc/ops.py": ops}, scratch / c) for c, (_, ops) in candidates.items()}
    group = plan_runs([Candidate(c, patches[c], passed) for c, (passed, _) in candidates.items()],
                      codebase_id="calc@test", codebase_files=list(evidencedata.CODEBASE), environment=environment,
                      reward_tests=evidencedata.REWARD_TESTS, budget=GroupBudget(),
                      test_patch=evidencedata.diff({"tests/test_clamp.py": evidencedata.TEST_CLAMP}, scratch / "tests"),
                      reference_patch=evidencedata.diff({"calc/ops.py": reference}, scratch / "reference"))
    outcomes = {}
    skipped = run_planned(group, codebase=codebase, sandbox=sandbox, workroot=workroot, environment=environment,
                          seconds=300, on_result=lambda run, outcome: outcomes.setdefault(run.key, outcome))
    matrix = Matrix.build(group, outcomes, tuple(skipped))
    trajectories = tuple(TrajectoryCase(c, passed, float(passed), patches[c]) for c, (passed, _) in candidates.items())
    case = GroupCase("calc-1", "clamp(x, low, high) returns x unchanged: clamp it.", trajectories, execution=matrix)
    return matrix, case


def test_a_passing_candidate_that_fails_the_human_fixs_own_test_is_flagged_and_ranked_below_the_correct_ones(
        sandboxed, tmp_path):
    matrix, case = gathered(sandboxed, tmp_path, {c: (True, ops) for c, ops in SANDBOXED.items()},
                            reference=evidencedata.FIXED)
    inside = evidencedata.INSIDE_TEST
    assert [matrix.status(c, "reward", t) for c in SANDBOXED for t in evidencedata.REWARD_TESTS] == ["pass"] * 6
    assert {c: matrix.status(c, "reward_files", inside) for c in (REFERENCE, *SANDBOXED)} == {
        REFERENCE: "pass", "good": "pass", "also_good": "pass", "misses_inside": "fail"}
    assert fails_reward_files(matrix) == {"misses_inside": [inside]}
    assert (flaky(matrix), breaks_tests(matrix), reference_control(matrix).notes) == ({}, {}, ())
    # The reference made good's change: their runs are one.
    assert matrix.run_of(REFERENCE, "reward_files") is matrix.run_of("good", "reward_files")

    grade = HeuristicGrader().rank(case)
    assert grade.tiers[-1] == ("misses_inside",)
    assert grade.flags["misses_inside"] == ("fails_reward_files",)
    assert (f"fails 1 test(s) of the test patch's files, beyond the reward's, that the reference fix passes: "
            f"{inside}") in grade.rationales["misses_inside"]
    assert "good" not in grade.flags and "also_good" not in grade.flags


def test_a_reference_fix_that_fails_its_own_reward_tests_here_leaves_every_candidate_unflagged(sandboxed, tmp_path):
    candidates = {**{c: (True, ops) for c, ops in SANDBOXED.items()}, "comment": (True, COMMENT)}
    matrix, case = gathered(sandboxed, tmp_path, candidates, reference=COMMENT)
    control = reference_control(matrix)
    assert control.machines
    assert control.notes[0].startswith("the reference fix fails its own reward tests here (")
    # The comment's reward tests fail as the reference's do: this machine's, not the comment's.
    assert matrix.status("comment", "reward", evidencedata.REWARD_TESTS[0]) == "fail"
    assert (flaky(matrix), fails_reward_files(matrix)) == ({}, {})
    assert "misses_inside" not in HeuristicGrader().rank(case).flags
