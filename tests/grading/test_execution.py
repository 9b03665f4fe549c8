"""The execution-evidence pass without a sandbox: the environment a task names, the split of
a patch into code and tests, the plan of a group's runs, pytest's summary, the matrix
and its verdicts, and the runner's folders, locks and machine errors with a stand-in
sandbox. tests/grading/test_execution_sandbox.py runs a plan for real."""

import json
import stat
import threading
import time

import pytest

from grading.execution import (
    Candidate,
    Environment,
    GroupBudget,
    Matrix,
    PatchSplitError,
    RunOutcome,
    Skipped,
    breaks_tests,
    failing_for_every_passing,
    flaky,
    named_after_touched_modules,
    parse_pytest_summary,
    plan_runs,
    split_patch,
)
from grading.execution.runner import MachineError, run_planned
from grading.execution.selection import join_patches, runnable_test_files, without_files
from grading.sandbox import RunResult, prepare_workdir

PYTEST_ENV = Environment.from_dict({"test_command": "python -m pytest -rA {tests}", "report": "pytest"})


def edit(path, old, new):
    return (f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n"
            f"+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n")


def new_file(path, *lines):
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..3333333\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}")


def deleted_file(path, *lines):
    body = "".join(f"-{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\ndeleted file mode 100644\nindex 3333333..0000000\n"
            f"--- a/{path}\n+++ /dev/null\n@@ -1,{len(lines)} +0,0 @@\n{body}")


CODE = edit("calc/ops.py", "X = 1", "X = 2")
OTHER_CODE = edit("calc/ops.py", "X = 1", "X = 3")
TESTS = new_file("tests/test_more.py", "def test_more():", "    assert True")
TEST_EDIT = edit("tests/test_ops.py", "Y = 1", "Y = 2")
FILES = ["calc/__init__.py", "calc/ops.py", "tests/test_ops.py", "tests/test_other.py"]


def plan(candidates, **options):
    arguments = {"codebase_id": "repo@abc", "codebase_files": FILES, "environment": PYTEST_ENV,
                 "reward_tests": ["tests/test_ops.py::test_x"], **options}
    return plan_runs(candidates, **arguments)


# --- the environment -------------------------------------------------------------------

def test_an_environment_reads_every_field_and_gives_it_back():
    data = {"image": "team/task:1", "python": "/opt/env/bin/python", "setup": ["make"],
            "test_command": "python -m pytest -rA {tests}", "report": "pytest",
            "wall_seconds": 120.0, "memory_mb": 2048}
    env = Environment.from_dict(data)
    assert env.to_dict() == data
    assert env.memory_bytes == 2048 * 1024**2


def test_an_environment_needs_only_a_test_command_and_has_bounded_defaults():
    env = Environment.from_dict({"test_command": "make test TESTS={tests}"})
    assert (env.image, env.python, env.setup, env.report) == (None, None, (), "exit_code")
    assert (env.wall_seconds, env.memory_mb) == (300.0, 4096)


@pytest.mark.parametrize("data, message", [
    ([], "environment: must be an object"),
    ({}, r"environment.test_command: required"),
    ({"test_command": "pytest"}, r"environment.test_command: has no \{tests\} placeholder"),
    ({"test_command": 3}, r"environment.test_command: must be a string"),
    ({"test_command": "t {tests}", "timeout": 5}, r"environment.timeout: unknown field"),
    ({"test_command": "t {tests}", "wall_seconds": 0}, r"environment.wall_seconds: must be above 0"),
    ({"test_command": "t {tests}", "wall_seconds": 86400}, r"wall_seconds: must be above 0 and at most 3600"),
    ({"test_command": "t {tests}", "wall_seconds": "60"}, r"environment.wall_seconds: must be a number"),
    ({"test_command": "t {tests}", "wall_seconds": True}, r"environment.wall_seconds: must be a number"),
    ({"test_command": "t {tests}", "memory_mb": 10.5}, r"environment.memory_mb: must be a whole number"),
    ({"test_command": "t {tests}", "memory_mb": 1}, r"environment.memory_mb: must be between 64"),
    ({"test_command": "t {tests}", "python": "venv/bin/python"}, r"environment.python: must be an absolute"),
    ({"test_command": "t {tests}", "setup": "make"}, r"environment.setup: must be a list"),
    ({"test_command": "t {tests}", "setup": ["make", 3]}, r"environment.setup\[1\]: must be a string"),
    ({"test_command": "t {tests}", "setup": [" "]}, r"environment.setup\[0\]: must not be empty"),
    ({"test_command": "t {tests}", "report": "junit"}, r"environment.report: 'junit' is not one of"),
    ({"test_command": "pytest {tests}", "report": "pytest"}, r"report 'pytest' reads .* add -rA"),
    ({"test_command": "pytest -rA 'x {tests}", "report": "pytest"}, r"test_command: No closing quotation"),
])
def test_a_bad_environment_is_refused_naming_the_field_and_the_reason(data, message):
    with pytest.raises(ValueError, match=message):
        Environment.from_dict(data)


def test_the_test_script_quotes_the_tests_and_puts_the_interpreter_first_on_path():
    env = Environment(test_command="python -m pytest -rA {tests}", report="pytest",
                      python="/opt/my env/bin/python")
    script = env.test_script(["tests/test_a.py::test_x[a b]", "tests/test_b.py"])
    assert script.splitlines() == [
        "set -e",
        "PATH='/opt/my env/bin':\"$PATH\"; export PATH",
        "python -m pytest -rA 'tests/test_a.py::test_x[a b]' tests/test_b.py",
    ]
    assert env.setup_script() is None


def test_the_fingerprint_changes_with_anything_that_changes_an_outcome():
    base = Environment(test_command="pytest -rA {tests}")
    others = [Environment(test_command="pytest -rA -x {tests}"),
              Environment(test_command="pytest -rA {tests}", wall_seconds=60),
              Environment(test_command="pytest -rA {tests}", setup=("make",)),
              Environment(test_command="pytest -rA {tests}", python="/usr/bin/python3")]
    assert len({base.fingerprint, *(env.fingerprint for env in others)}) == 5
    assert base.fingerprint == Environment(test_command="pytest -rA {tests}").fingerprint


# --- splitting a patch ------------------------------------------------------------------

def test_a_patch_splits_into_its_code_and_its_tests_each_a_patch_that_applies(tmp_path):
    codebase = tmp_path / "codebase"
    (codebase / "calc").mkdir(parents=True)
    (codebase / "tests").mkdir()
    (codebase / "calc/ops.py").write_text("X = 1\n")
    (codebase / "tests/test_ops.py").write_text("Y = 1\n")
    code, tests = split_patch("From: someone\nSubject: fix\n\n" + TEST_EDIT + CODE + TESTS)
    assert (code, tests) == (CODE, TEST_EDIT + TESTS)
    work = prepare_workdir(codebase, code, into=tmp_path / "code")
    assert (work / "calc/ops.py").read_text() == "X = 2\n"
    assert (work / "tests/test_ops.py").read_text() == "Y = 1\n"
    work = prepare_workdir(codebase, tests, into=tmp_path / "tests")
    assert (work / "calc/ops.py").read_text() == "X = 1\n"
    assert (work / "tests/test_more.py").exists()


def test_an_empty_patch_splits_into_nothing_and_a_plain_one_file_diff_splits_too():
    assert split_patch("") == ("", "")
    plain = "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n"
    assert split_patch(plain) == (plain, "")


@pytest.mark.parametrize("patch", [
    "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n"
    "--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n@@ -1 +1 @@\n-Y = 1\n+Y = 2\n",
    "this is not a patch\n",
    "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n short\n",
])
def test_a_patch_that_cannot_be_cut_by_file_is_an_error(patch):
    with pytest.raises(PatchSplitError, match="cannot cut the patch by file"):
        split_patch(patch)


def test_a_patch_less_some_files_and_joined_patches_end_their_lines():
    assert without_files(CODE + TEST_EDIT, ["tests/test_ops.py"]) == CODE
    assert join_patches(CODE.rstrip("\n"), "", TESTS) == CODE + TESTS


def test_the_runnable_test_files_are_the_test_files_added_or_changed_not_helpers_deleted_or_data():
    part = (TESTS + TEST_EDIT + deleted_file("tests/test_gone.py", "x = 1")
            + new_file("tests/conftest.py", "x = 1") + new_file("tests/data/case.json", "{}"))
    assert runnable_test_files(part) == ["tests/test_more.py", "tests/test_ops.py"]


def test_the_existing_tests_are_those_named_after_the_touched_modules_most_touched_first():
    files = ["calc/ops.py", "calc/tests/test_ops.py", "tests/test_ops.py", "tests/test_calc.py",
             "tests/test_io.py", "tests/helpers.py", "web/ops.test.js", "web/IoTest.java",
             "docs/test_ops.md", "tests/conftest.py"]
    touched = ["calc/io.py", "calc/ops.py", "calc/__init__.py", "calc/helpers.py"]
    assert named_after_touched_modules(touched, files) == [
        "tests/test_io.py", "calc/tests/test_ops.py", "tests/test_ops.py", "web/ops.test.js",
        "tests/test_calc.py"]


# --- the plan ---------------------------------------------------------------------------

def test_five_identical_candidates_make_one_run_of_each_kind():
    candidates = [Candidate(f"c{i}", CODE + TESTS, True) for i in range(5)]
    runs = plan(candidates).runs
    assert [(run.suite, run.candidates) for run in runs] == [
        ("reward", ("c0", "c1", "c2", "c3", "c4")),
        ("existing", ("c0", "c1", "c2", "c3", "c4")),
        ("peer:c0", ("c0", "c1", "c2", "c3", "c4"))]
    assert [run.tests for run in runs] == [
        ("tests/test_ops.py::test_x",), ("tests/test_ops.py",), ("tests/test_more.py",)]


def test_the_reward_runs_the_test_patch_over_the_candidates_own_version_of_its_files():
    test_patch = edit("tests/test_ops.py", "Y = 1", "Y = 9")
    reward, reward_files, existing, peer = plan([Candidate("a", CODE + TEST_EDIT, True)], test_patch=test_patch).runs
    assert reward.patch == reward_files.patch == CODE + test_patch
    assert (reward.tests, reward_files.tests) == (("tests/test_ops.py::test_x",), ("tests/test_ops.py",))
    assert existing.patch == CODE
    assert peer.patch == CODE + TEST_EDIT


def test_peer_tests_come_from_every_candidate_and_run_on_every_passing_one():
    candidates = [Candidate("a", CODE, True), Candidate("b", OTHER_CODE + TESTS, True),
                  Candidate("f", CODE + TEST_EDIT, False)]
    runs = plan(candidates).runs
    peers = [(run.suite, run.candidates, run.patch) for run in runs if run.suite.startswith("peer")]
    assert peers == [("peer:b", ("a",), CODE + TESTS), ("peer:b", ("b",), OTHER_CODE + TESTS),
                     ("peer:f", ("a",), CODE + TEST_EDIT), ("peer:f", ("b",), OTHER_CODE + TEST_EDIT)]
    assert [(run.suite, run.candidates) for run in runs][-1] == ("reward", ("f",))


def test_the_budget_caps_the_existing_tests_and_the_runs_and_says_what_it_left_out():
    candidates = [Candidate("a", CODE + TESTS, True), Candidate("b", OTHER_CODE, True)]
    result = plan(candidates, codebase_files=FILES + ["calc/tests/test_ops.py"],
                  budget=GroupBudget(existing_test_files=1, runs=4))
    assert [(run.suite, run.candidates, run.tests) for run in result.runs] == [
        ("reward", ("a",), ("tests/test_ops.py::test_x",)),
        ("reward", ("b",), ("tests/test_ops.py::test_x",)),
        ("existing", ("a",), ("calc/tests/test_ops.py",)),
        ("existing", ("b",), ("calc/tests/test_ops.py",))]
    assert result.skipped == (
        Skipped("existing", ("a", "b"),
                "1 existing test files over the group's budget of 1: tests/test_ops.py"),
        Skipped("peer:a", ("a",), "over the group's budget of 4 runs"),
        Skipped("peer:a", ("b",), "over the group's budget of 4 runs"))


@pytest.mark.parametrize("budget", [{"existing_test_files": -1}, {"runs": -1}, {"seconds": 0},
                                    {"seconds": float("nan")}, {"seconds": float("inf")}])
def test_a_budget_below_nothing_or_without_end_is_refused(budget):
    with pytest.raises(ValueError, match="a group's budget"):
        GroupBudget(**budget)


def test_a_candidate_whose_patch_cannot_be_cut_is_skipped_whole_and_the_others_run():
    bad = "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n" * 2
    result = plan([Candidate("bad", bad, True), Candidate("a", CODE, True)])
    assert {run.candidates for run in result.runs} == {("a",)}
    assert [(s.suite, s.candidates) for s in result.skipped] == [("*", ("bad",))]
    assert result.passed == {"bad": True, "a": True}


def test_without_reward_tests_there_are_no_reward_runs():
    suites = [run.suite for run in plan([Candidate("a", CODE, True)], reward_tests=[]).runs]
    assert suites == ["existing"]


def test_repeated_candidate_ids_are_refused():
    with pytest.raises(ValueError, match=r"candidate ids repeat: \['a'\]"):
        plan([Candidate("a", CODE, True), Candidate("a", OTHER_CODE, True)])


def test_a_runs_key_is_stable_and_changes_with_the_codebase_the_patch_and_the_environment():
    def reward_key(candidate=Candidate("a", CODE, True), **options):
        return plan([candidate], **options).runs[0].key

    assert reward_key() == reward_key()
    other_env = Environment(test_command="python -m pytest -rA -x {tests}", report="pytest")
    assert len({reward_key(), reward_key(codebase_id="repo@def"), reward_key(Candidate("a", OTHER_CODE, True)),
                reward_key(environment=other_env), reward_key(reward_tests=["tests/test_ops.py"])}) == 5


# --- pytest's summary -------------------------------------------------------------------

SUMMARY = """\
PASSED tests/test_fake.py::printed_by_a_test
============================= test session starts ==============================
tests/test_ops.py .F.xE                                                  [100%]
=========================== short test summary info ============================
PASSED tests/test_ops.py::test_add
PASSED tests/test_ops.py::test_teardown
PASSED tests/test_ops.py::test_case[a b - c]
FAILED tests/test_ops.py::test_sub - AssertionError: assert 8 == 2
XFAIL tests/test_ops.py::test_later - not yet
XPASS tests/test_ops.py::test_lucky
SKIPPED [1] tests/test_ops.py:20: no network
ERROR tests/test_ops.py::test_teardown - RuntimeError: teardown broke
ERROR tests/test_io.py - ModuleNotFoundError: No module named 'calc.io'
============== 1 failed, 4 passed, 1 xfailed, 2 errors in 0.05s ===============
"""


def test_pytest_summary_gives_each_tests_outcome_after_the_last_header():
    assert parse_pytest_summary(SUMMARY) == {
        "tests/test_ops.py::test_add": "pass",
        "tests/test_ops.py::test_teardown": "error",
        "tests/test_ops.py::test_case[a b": "pass",
        "tests/test_ops.py::test_sub": "fail",
        "tests/test_ops.py::test_later": "pass",
        "tests/test_ops.py::test_lucky": "pass",
        "tests/test_io.py": "error",
    }


def test_output_without_a_summary_names_no_test():
    assert parse_pytest_summary("PASSED tests/test_ops.py::test_add\nKilled\n") == {}


# --- the matrix and its verdicts --------------------------------------------------------

X, Y, MORE = "tests/test_ops.py::test_x", "tests/test_ops.py::test_y", "tests/test_more.py::test_more"
CANDIDATES = {"a": CODE + TESTS, "b": OTHER_CODE, "c": edit("calc/ops.py", "X = 1", "X = 4"),
              "d": edit("calc/ops.py", "X = 1", "X = 5")}


def outcome(status, tests=()):
    return RunOutcome(status, dict(tests), 1.5, "log", "bwrap ... pytest")


def matrix_of(passed, results):
    """The matrix of CANDIDATES with the reward's verdicts `passed`, each run's outcome
    given as {(suite, its first candidate): outcome}."""
    group = plan([Candidate(c, CANDIDATES[c], verdict) for c, verdict in passed.items()])
    return Matrix.build(group, {run.key: results[run.suite, run.candidates[0]] for run in group.runs})


def test_flaky_names_verdicts_that_do_not_reproduce_either_way_and_only_concluded_ones():
    passed = {"a": True, "b": True, "c": False, "d": False}
    results = {("reward", "a"): outcome("pass", {X: "pass"}), ("reward", "b"): outcome("fail", {X: "fail"}),
               ("reward", "c"): outcome("pass", {X: "pass"}), ("reward", "d"): outcome("timeout")}
    results |= {("existing", c): outcome("pass", {X: "pass"}) for c in "ab"}
    results |= {("peer:a", c): outcome("pass", {MORE: "pass"}) for c in "ab"}
    assert flaky(matrix_of(passed, results)) == {
        "b": f"the reward passed it; its reward tests fail here: {X}",
        "c": "the reward failed it; its reward tests pass here"}


def test_a_reward_test_that_fails_for_every_passing_candidate_counts_against_none():
    # As a test that needs the network fails in the sandbox: the machine's, not theirs.
    passed = {"a": True, "b": True, "c": True, "d": False}
    results = {("reward", c): outcome("fail", {X: "fail", Y: "pass"}) for c in "ab"}
    results["reward", "c"] = outcome("fail", {X: "error", Y: "fail"})
    results["reward", "d"] = outcome("fail", {X: "fail", Y: "fail"})
    results |= {("existing", c): outcome("pass", {X: "pass"}) for c in "abcd"}
    results |= {("peer:a", c): outcome("pass", {MORE: "pass"}) for c in "abcd"}
    matrix = matrix_of(passed, results)
    assert failing_for_every_passing(matrix) == {X}
    assert flaky(matrix) == {"c": f"the reward passed it; its reward tests fail here: {Y}"}


def test_breaks_tests_names_what_most_other_passing_candidates_pass_counting_each_test_once():
    results = {("reward", c): outcome("pass", {X: "pass"}) for c in "abcd"}
    results |= {("existing", c): outcome("pass", {X: "pass", Y: "pass"}) for c in "abd"}
    results["existing", "c"] = outcome("fail", {X: "pass", Y: "fail"})
    # The peer's changed file holds the existing tests too: c fails test_y once, under existing.
    results |= {("peer:a", c): outcome("pass", {MORE: "pass", Y: "pass"}) for c in "ab"}
    results["peer:a", "c"] = outcome("fail", {Y: "fail"})
    results["peer:a", "d"] = outcome("timeout")
    assert breaks_tests(matrix_of(dict.fromkeys("abcd", True), results)) == {
        "c": [("existing", Y), ("peer:a", MORE)],
        "d": [("peer:a", MORE)]}


def test_a_test_half_the_others_fail_too_is_nobodys_breakage_and_refused_runs_do_not_vote():
    results = {("reward", c): outcome("pass", {X: "pass"}) for c in "abcd"}
    results |= {("existing", "a"): outcome("pass", {X: "pass", Y: "pass"}),
                ("existing", "b"): outcome("fail", {X: "pass", Y: "fail"}),
                ("existing", "c"): outcome("fail", {X: "pass", Y: "fail"}),
                ("existing", "d"): outcome("refused")}
    results |= {("peer:a", c): outcome("pass", {MORE: "pass"}) for c in "abcd"}
    assert breaks_tests(matrix_of(dict.fromkeys("abcd", True), results)) == {}


def test_a_test_a_run_did_not_report_reads_as_how_the_run_ended():
    results = {("reward", "a"): outcome("fail", {"tests/test_ops.py": "error"}),
               ("reward", "b"): outcome("timeout"), ("reward", "c"): outcome("refused")}
    results |= {("existing", c): outcome("pass", {X: "pass"}) for c in "abc"}
    results |= {("peer:a", c): outcome("pass", {MORE: "pass"}) for c in "abc"}
    matrix = matrix_of(dict.fromkeys("abc", True), results)
    assert [matrix.status(c, "reward", X) for c in "abc"] == ["missing", "timeout", "refused"]
    assert matrix.status("a", "reward", "tests/test_ops.py") == "error"
    assert matrix.status("a", "peer:b", X) is None


def test_the_matrix_goes_through_json_and_back_unchanged():
    results = {("reward", "a"): outcome("pass", {X: "pass"}), ("reward", "b"): outcome("fail", {X: "fail"}),
               ("existing", "a"): outcome("error"), ("peer:a", "a"): outcome("pass", {MORE: "pass"})}
    matrix = matrix_of({"a": True, "b": False}, results)
    stored = json.loads(json.dumps(matrix.to_dict()))
    assert Matrix.from_dict(stored) == matrix
    assert stored["runs"][0] == {
        "key": matrix.runs[0].key, "suite": "reward", "candidates": ["a"], "tests": [X],
        "outcome": {"status": "pass", "tests": {X: "pass"}, "duration": 1.5, "log_tail": "log",
                    "command": "bwrap ... pytest", "reason": "", "tampering": []}}


def test_a_run_with_no_outcome_must_have_been_skipped():
    group = plan([Candidate("a", CODE, True)])
    with pytest.raises(ValueError, match="no outcome, and not skipped"):
        Matrix.build(group, {})
    skipped = tuple(Skipped(run.suite, run.candidates, "time ran out") for run in group.runs)
    assert Matrix.build(group, {}, skipped) == Matrix({"a": True}, (), skipped)


def test_an_outcome_with_an_unknown_status_is_refused():
    with pytest.raises(ValueError, match="run status 'passed'"):
        RunOutcome("passed", {}, 1.0, "", "")
    with pytest.raises(ValueError, match="test statuses not one of"):
        RunOutcome("pass", {"t": "skipped"}, 1.0, "", "")


# --- the runner: a folder per attempt, a key held by one worker, the machine's errors --------


class StandIn:
    """A sandbox that runs nothing: it answers `status` to a run's script (after `gate`, when
    given), and notes each script's workdir and the mode of the folder around it."""

    def __init__(self, status="passed", gate=None):
        self.status, self.gate, self.runs = status, gate, []

    def check(self):
        pass

    def run(self, workdir, command, limits):
        self.runs.append((workdir, stat.S_IMODE(workdir.parent.stat().st_mode)))
        if self.gate is not None:
            self.gate.wait(30)
        if self.status == "error":  # as bwrap answers when its user cannot reach the workdir
            return RunResult("error", None, 0.01, "bwrap exited with 1 before the command ran: bwrap: Can't "
                                                  f"find source path {workdir}: Permission denied", "bwrap ...")
        if self.status == "failed":  # a candidate's code may print what bwrap prints
            return RunResult("failed", 1, 0.01, f"bwrap: Can't find source path {workdir}: Permission denied",
                             f"bwrap --bind {workdir} /work")
        return RunResult(self.status, 0, 0.01, "1 passed", f"stand-in --bind {workdir} /work")


@pytest.fixture
def calc(tmp_path):
    """A plain codebase that CODE applies to, and a work root."""
    (tmp_path / "calc" / "calc").mkdir(parents=True)
    (tmp_path / "calc" / "calc" / "ops.py").write_text("X = 1\n")
    (tmp_path / "work").mkdir()
    return tmp_path / "calc", tmp_path / "work"


# The stand-in prints no pytest report: its runs are read by their exit code.
PLAIN_ENV = Environment.from_dict({"test_command": "python -m pytest {tests}"})


def run_one(codebase, workroot, sandbox, *, patch=CODE, environment=PLAIN_ENV, seconds=30, store=None):
    """A one-run plan of `patch`, run as a worker whose outcomes go to `store` (shared with other
    workers): (the outcomes handed over, the runs skipped, the run's key)."""
    store = {} if store is None else store
    outcomes = []

    def keep(run, outcome):
        store.setdefault(run.key, outcome)
        outcomes.append(outcome)

    group = plan([Candidate("a", patch, True)], codebase_files=["calc/ops.py"], reward_tests=[X],
                 environment=environment)
    skipped = run_planned(group, codebase=codebase, sandbox=sandbox, workroot=workroot, environment=environment,
                          seconds=seconds, on_result=keep, stored=store.get)
    return outcomes, skipped, group.runs[0].key


def test_each_attempt_at_a_run_works_in_a_folder_of_its_own_that_the_sandbox_user_enters(calc):
    codebase, workroot = calc
    sandbox = StandIn()
    _, _, key = run_one(codebase, workroot, sandbox)
    run_one(codebase, workroot, sandbox)
    (first, first_mode), (second, second_mode) = sandbox.runs
    assert first != second and first.name == second.name == "work"
    assert first.parent.parent == second.parent.parent == workroot
    assert first.parent.name.startswith(f"{key}-") and second.parent.name.startswith(f"{key}-")
    assert first_mode == second_mode == 0o755
    assert list(workroot.iterdir()) == []  # each attempt's folder and the key's lock are gone


def in_thread(function, *args, **kwargs):
    """Start `function` in a thread of its own: (the thread, where its answer goes)."""
    answer = {}
    thread = threading.Thread(target=lambda: answer.setdefault("value", function(*args, **kwargs)))
    thread.start()
    return thread, answer


def started(sandbox):
    deadline = time.monotonic() + 10
    while not sandbox.runs:
        assert time.monotonic() < deadline, "the first worker's run did not start"
        time.sleep(0.01)


def test_a_key_another_worker_runs_is_waited_for_and_its_stored_outcome_taken_not_run_again(calc):
    codebase, workroot = calc
    gate = threading.Event()
    sandbox, store = StandIn(gate=gate), {}
    first, _ = in_thread(run_one, codebase, workroot, sandbox, store=store)
    started(sandbox)
    second, answer = in_thread(run_one, codebase, workroot, sandbox, store=store)
    time.sleep(0.5)
    assert len(sandbox.runs) == 1 and "value" not in answer  # the second worker waits for the key
    gate.set()
    first.join(10)
    second.join(10)
    outcomes, skipped, key = answer["value"]
    assert len(sandbox.runs) == 1 and skipped == []
    assert outcomes == [store[key]] and store[key].status == "pass"


def test_a_worker_that_waits_for_a_key_past_the_groups_time_skips_it_saying_why(calc):
    codebase, workroot = calc
    gate = threading.Event()
    sandbox = StandIn(gate=gate)
    first, _ = in_thread(run_one, codebase, workroot, sandbox)
    started(sandbox)
    try:
        outcomes, skipped, _ = run_one(codebase, workroot, sandbox, seconds=0.5)
    finally:
        gate.set()
        first.join(10)
    assert outcomes == [] and len(sandbox.runs) == 1
    assert [s.reason for s in skipped] == ["the group's time (0.5 s) ran out while another worker ran it"]


@pytest.mark.parametrize("setup", [(), ("pip install -e .",)])
def test_a_run_the_sandbox_cannot_start_is_the_machines_error_never_an_outcome(calc, setup):
    codebase, workroot = calc
    environment = Environment.from_dict({**PLAIN_ENV.to_dict(), "setup": list(setup)})
    with pytest.raises(MachineError) as broke:
        run_one(codebase, workroot, StandIn("error"), environment=environment)
    assert str(broke.value) == f"the sandbox could not start the {'setup' if setup else 'test command'}"
    assert str(workroot) not in str(broke.value)  # what every role sees names no folder of the machine's
    assert "bwrap" in broke.value.detail  # the worker's log has it all
    assert list(workroot.iterdir()) == []


def test_a_failed_run_is_the_candidates_whatever_it_prints(calc):
    """The candidate's code may print what bwrap prints when it cannot start: the sandbox, not
    the output, says whether the command started (grading/sandbox/started.py)."""
    codebase, workroot = calc
    outcomes, _, _ = run_one(codebase, workroot, StandIn("failed"))
    assert [o.status for o in outcomes] == ["fail"] and "Can't find source path" in outcomes[0].log_tail


def test_a_copy_that_cannot_be_made_is_the_machines_error(calc):
    codebase, workroot = calc
    sandbox = StandIn()
    with pytest.raises(MachineError, match="^the codebase could not be copied for the run$") as broke:
        run_one(codebase.parent / "gone", workroot, sandbox)
    assert "gone" in broke.value.detail
    assert sandbox.runs == [] and list(workroot.iterdir()) == []


def test_git_dying_is_the_machines_error_and_a_patch_git_cannot_apply_the_candidates_refusal(calc):
    codebase, workroot = calc
    sandbox = StandIn()
    outcomes, _, _ = run_one(codebase, workroot, sandbox, patch=edit("calc/ops.py", "X = 7", "X = 8"))
    assert [(o.status, o.reason) for o in outcomes] == [
        ("refused", "does not apply: error: patch failed: calc/ops.py:1\nerror: calc/ops.py: patch does not apply")]
    (codebase / ".git").write_text("gitdir: /nowhere\n")  # git cannot work in the copy: not the patch's doing
    with pytest.raises(MachineError, match="^git could not apply the patch$") as broke:
        run_one(codebase, workroot, sandbox)
    assert "fatal: not a git repository: /nowhere" in broke.value.detail
    assert sandbox.runs == [] and list(workroot.iterdir()) == []
