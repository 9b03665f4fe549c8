"""A group's plan run for real: a small Python codebase in git, six candidate patches,
pytest inside the bwrap sandbox, and the matrix and verdicts that come of it.

The sandbox sees the host's system folders only (and a private /tmp), not this project's
virtual environment; the tests run with a virtual environment of the system's python3
made here, outside /tmp, with pytest copied into it, and named to the sandbox as one of
its read-only folders: what a deployment does with the environment its tasks need.
"""

import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from grading.execution import (
    Candidate,
    Environment,
    Matrix,
    breaks_tests,
    flaky,
    plan_runs,
    run_planned,
)
from grading.sandbox import BwrapSandbox, SandboxConfig, SandboxConfigError, check_backend
from grading.sandbox.bwrap import SYSTEM_PATHS
from tests.evidencedata import INSIDE_TEST, OPS, TEST_CLAMP, TEST_OPS, git, write
from tests.evidencedata import environment as evidence_environment

CLAMP_FIX = ("    return x\n", "    return max(low, min(x, high))\n")
CLAMP_FIX_IFS = ("    return x\n",
                 "    if x < low:\n        return low\n    if x > high:\n        return high\n    return x\n")
SUB_NEGATIVE = "\n\ndef test_sub_negative():\n    assert sub(3, 5) == -2\n"
REWARD_TESTS = ["tests/test_clamp.py::test_clamp_low", "tests/test_clamp.py::test_clamp_high"]
PASSED = {"good": True, "good_copy": True, "also_good": True, "breaks": True, "no_effect": True,
          "hostile": False}


@pytest.fixture(scope="module", autouse=True)
def bwrap_installed():
    check_backend(SandboxConfig("bwrap"))  # scripts/sandbox.sh installs it


@pytest.fixture(scope="module")
def python_env(sandbox_python):
    return sandbox_python.parents[1]


@pytest.fixture(scope="module")
def sandbox(python_env):
    return BwrapSandbox(readonly_paths=(*SYSTEM_PATHS, str(python_env)))


@pytest.fixture(scope="module")
def environment(python_env):
    return Environment.from_dict(evidence_environment(python_env / "bin" / "python"))


def work_folder():
    """Where the runs' copies go: a folder the sandbox's user may enter."""
    folder = Path(tempfile.mkdtemp(prefix="gagar-execution-work-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


workroot = pytest.fixture(work_folder, scope="module", name="workroot")
own_workroot = pytest.fixture(work_folder, name="own_workroot")


@pytest.fixture(scope="module")
def codebase(tmp_path_factory):
    folder = tmp_path_factory.mktemp("codebase")
    write(folder, {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/test_ops.py": TEST_OPS})
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return folder


def diff(codebase, scratch, files):
    """The `git diff` that turns `codebase` into itself with `files` written."""
    shutil.copytree(codebase, scratch)
    write(scratch, files)
    git(scratch, "add", "-A")
    return git(scratch, "diff", "--cached")


@pytest.fixture(scope="module")
def candidates(codebase, tmp_path_factory):
    scratch = tmp_path_factory.mktemp("scratch")
    fixed = OPS.replace(*CLAMP_FIX)
    good = diff(codebase, scratch / "good", {"calc/ops.py": fixed, "tests/test_ops.py": TEST_OPS + SUB_NEGATIVE})
    patches = {
        "good": good,
        "good_copy": good,
        "also_good": diff(codebase, scratch / "also_good", {"calc/ops.py": OPS.replace(*CLAMP_FIX_IFS)}),
        # Right about clamp, which the reward checks; wrong about add and sub, which it does not.
        "breaks": diff(codebase, scratch / "breaks", {"calc/ops.py": fixed.replace(
            "return a + b", "return int(a) + int(b)").replace("return a - b", "return abs(a - b)")}),
        "no_effect": diff(codebase, scratch / "no_effect", {"calc/ops.py": "# clamp is fine\n" + OPS}),
        "hostile": "diff --git a/../outside.py b/../outside.py\nnew file mode 100644\n"
                   "--- /dev/null\n+++ b/../outside.py\n@@ -0,0 +1 @@\n+print('out')\n",
    }
    return [Candidate(name, patch, PASSED[name]) for name, patch in patches.items()]


@pytest.fixture(scope="module")
def reward_test_patch(codebase, tmp_path_factory):
    return diff(codebase, tmp_path_factory.mktemp("scratch") / "tests", {"tests/test_clamp.py": TEST_CLAMP})


@pytest.fixture(scope="module")
def plan(candidates, codebase, environment, reward_test_patch):
    files = git(codebase, "ls-files").split()
    return plan_runs(candidates, codebase_id="calc@base", codebase_files=files,
                     environment=environment, reward_tests=REWARD_TESTS, test_patch=reward_test_patch)


class WorkerKilled(Exception):
    pass


@pytest.fixture(scope="module")
def executed(plan, codebase, sandbox, workroot, environment):
    """The plan run as a worker would: outcomes stored as they come; the worker killed
    after three, its fourth run's folder left behind (the sweep's to remove); then a new
    worker resumes."""
    stored, calls = {}, []

    def store(run, outcome, *, die_after=None):
        calls.append(run.key)
        stored[run.key] = outcome
        if len(stored) == die_after:
            raise WorkerKilled

    options = {"codebase": codebase, "sandbox": sandbox, "workroot": workroot,
               "environment": environment, "seconds": 300}
    with pytest.raises(WorkerKilled):
        run_planned(plan, on_result=lambda run, outcome: store(run, outcome, die_after=3), **options)
    first_call = list(calls)
    leftover = workroot / f"{plan.runs[3].key}-killed"
    (leftover / "work").mkdir(parents=True)
    (leftover / "work" / "half-copied.py").write_text("")
    skipped = run_planned(plan, on_result=store, done=set(stored), **options)
    return {"first": first_call, "second": calls[len(first_call):], "outcomes": stored,
            "skipped": skipped, "leftover": leftover,
            "matrix": Matrix.build(plan, stored, tuple(skipped))}


def test_the_plan_runs_each_distinct_change_once_per_suite(plan):
    assert [(run.suite, run.candidates) for run in plan.runs] == [
        ("reward", ("good", "good_copy")), ("reward", ("also_good",)), ("reward", ("breaks",)),
        ("reward", ("no_effect",)),
        ("reward_files", ("good", "good_copy")), ("reward_files", ("also_good",)), ("reward_files", ("breaks",)),
        ("reward_files", ("no_effect",)),
        ("existing", ("good", "good_copy")), ("existing", ("also_good",)), ("existing", ("breaks",)),
        ("existing", ("no_effect",)),
        ("peer:good", ("good", "good_copy")), ("peer:good", ("also_good",)), ("peer:good", ("breaks",)),
        ("peer:good", ("no_effect",)),
        ("reward", ("hostile",))]
    assert {run.tests for run in plan.runs if run.suite == "reward_files"} == {("tests/test_clamp.py",)}
    assert {run.tests for run in plan.runs if run.suite == "existing"} == {("tests/test_ops.py",)}
    assert {run.tests for run in plan.runs if run.suite == "peer:good"} == {("tests/test_ops.py",)}


def test_a_killed_worker_resumes_where_it_stopped_and_runs_nothing_twice(executed, plan):
    assert len(executed["first"]) == 3
    assert set(executed["first"]).isdisjoint(executed["second"])
    assert sorted(executed["first"] + executed["second"]) == sorted(run.key for run in plan.runs)
    assert executed["skipped"] == []


def test_the_matrix_holds_each_candidates_status_on_each_test(executed):
    matrix = executed["matrix"]
    table = {(c, suite, test): matrix.status(c, suite, test)
             for c in PASSED for suite in matrix.suites() for test in matrix.tests(suite)}
    ops = "tests/test_ops.py::"
    low, high = REWARD_TESTS
    expected = {}
    for c in ("good", "good_copy", "also_good", "breaks"):
        expected |= {(c, "reward_files", low): "pass", (c, "reward_files", high): "pass",
                     (c, "reward_files", INSIDE_TEST): "pass"}
    # The comment leaves clamp returning x: right inside the bounds, wrong at them.
    expected |= {("no_effect", "reward_files", low): "fail", ("no_effect", "reward_files", high): "fail",
                 ("no_effect", "reward_files", INSIDE_TEST): "pass"}
    for c in ("good", "good_copy", "also_good"):
        expected |= {(c, "reward", low): "pass", (c, "reward", high): "pass",
                     (c, "existing", ops + "test_add"): "pass", (c, "existing", ops + "test_sub"): "pass",
                     (c, "peer:good", ops + "test_add"): "pass", (c, "peer:good", ops + "test_sub"): "pass",
                     (c, "peer:good", ops + "test_sub_negative"): "pass"}
    expected |= {("breaks", "reward", low): "pass", ("breaks", "reward", high): "pass",
                 ("breaks", "existing", ops + "test_add"): "fail", ("breaks", "existing", ops + "test_sub"): "pass",
                 ("breaks", "peer:good", ops + "test_add"): "fail", ("breaks", "peer:good", ops + "test_sub"): "pass",
                 ("breaks", "peer:good", ops + "test_sub_negative"): "fail"}
    expected |= {("no_effect", "reward", low): "fail", ("no_effect", "reward", high): "fail",
                 ("no_effect", "existing", ops + "test_add"): "pass",
                 ("no_effect", "existing", ops + "test_sub"): "pass",
                 ("no_effect", "peer:good", ops + "test_add"): "pass",
                 ("no_effect", "peer:good", ops + "test_sub"): "pass",
                 ("no_effect", "peer:good", ops + "test_sub_negative"): "pass"}
    expected |= {("hostile", "reward", low): "refused", ("hostile", "reward", high): "refused"}
    expected |= {("hostile", suite, test): None for suite in ("reward_files", "existing", "peer:good")
                 for test in matrix.tests(suite)}
    assert table == expected


def test_the_verdicts_name_the_unreproduced_pass_and_the_tests_a_candidate_breaks(executed):
    matrix = executed["matrix"]
    assert flaky(matrix) == {"no_effect": "the reward passed it; its reward tests fail here: "
                                          f"{REWARD_TESTS[1]}, {REWARD_TESTS[0]}"}
    assert breaks_tests(matrix) == {"breaks": [("existing", "tests/test_ops.py::test_add"),
                                               ("peer:good", "tests/test_ops.py::test_sub_negative")]}


def test_a_patch_the_sandbox_refuses_is_an_outcome_never_run(executed):
    refused = executed["matrix"].run_of("hostile", "reward").outcome
    assert (refused.status, refused.command, refused.duration, refused.tests) == ("refused", "", 0.0, {})
    assert refused.reason == "../outside.py: '..' in the path leaves the tree"


def test_a_run_keeps_its_log_tail_and_the_command_line_that_runs_it_again(executed, workroot):
    run = executed["matrix"].run_of("breaks", "existing")
    assert run.outcome.status == "fail"
    assert "FAILED tests/test_ops.py::test_add" in run.outcome.log_tail
    assert run.outcome.command.startswith("setpriv") or run.outcome.command.startswith("bwrap")
    assert re.search(rf"{re.escape(str(workroot / run.key))}-\w+/work /work", run.outcome.command)
    assert 0 < run.outcome.duration < 30
    # Every copy removed; the killed worker's folder is the sweep's (webapp/evidence/services.py).
    assert list(workroot.iterdir()) == [executed["leftover"]]


def test_the_matrix_of_real_runs_is_stored_and_read_back(executed):
    matrix = executed["matrix"]
    assert Matrix.from_dict(matrix.to_dict()) == matrix


def one_run_plan(candidates, codebase, environment, reward_test_patch):
    good = [c for c in candidates if c.id == "good"]
    return plan_runs(good, codebase_id="calc@base", codebase_files=[], environment=environment,
                     reward_tests=REWARD_TESTS, test_patch=reward_test_patch)


def test_a_failed_setup_is_an_error_with_its_log_and_the_tests_do_not_run(
        candidates, codebase, sandbox, workroot, environment, reward_test_patch):
    broken = Environment.from_dict({**environment.to_dict(), "setup": ["echo preparing", "exit 3"]})
    plan = one_run_plan(candidates, codebase, broken, reward_test_patch)
    outcomes = {}
    run_planned(plan, codebase=codebase, sandbox=sandbox, workroot=workroot, environment=broken,
                seconds=60, on_result=lambda run, outcome: outcomes.setdefault(run.suite, outcome))
    setup = outcomes["reward"]
    assert (setup.status, setup.reason, setup.log_tail, setup.tests) == (
        "error", "setup failed (exit code 3)", "preparing\n", {})


def test_without_a_pytest_report_the_whole_command_is_one_cell(
        candidates, codebase, sandbox, workroot, environment, reward_test_patch):
    plain = Environment.from_dict({**environment.to_dict(), "report": "exit_code",
                                   "test_command": "python -m pytest -q -p no:cacheprovider {tests}"})
    plan = one_run_plan(candidates, codebase, plain, reward_test_patch)
    outcomes = {}
    run_planned(plan, codebase=codebase, sandbox=sandbox, workroot=workroot, environment=plain,
                seconds=60, on_result=lambda run, outcome: outcomes.setdefault(run.suite, outcome))
    assert outcomes["reward"].tests == {" ".join(REWARD_TESTS): "pass"}


def test_the_groups_time_stops_a_run_midway_and_skips_the_rest_saying_why(
        candidates, codebase, sandbox, workroot, reward_test_patch):
    slow = Environment(test_command="sleep 10; echo {tests}")
    plan = plan_runs(candidates, codebase_id="calc@base", codebase_files=["tests/test_ops.py"],
                     environment=slow, reward_tests=REWARD_TESTS, test_patch=reward_test_patch)
    results = []
    started = time.monotonic()
    skipped = run_planned(plan, codebase=codebase, sandbox=sandbox, workroot=workroot, environment=slow,
                          seconds=1, on_result=lambda run, outcome: results.append(run))
    assert time.monotonic() - started < 10  # killed midway: the command alone sleeps 10 s
    assert results == []
    assert [s.reason for s in skipped] == (["the group's time (1 s) ran out during the run"]
                                           + ["the group's time (1 s) ran out before it started"] * 16)
    assert [(s.suite, s.candidates) for s in skipped] == [(run.suite, run.candidates) for run in plan.runs]


def test_an_environment_in_an_image_needs_a_sandbox_that_runs_that_image(plan, codebase, sandbox, workroot):
    in_image = Environment(test_command="pytest -rA {tests}", report="pytest", image="team/task:1")
    with pytest.raises(SandboxConfigError, match="runs in the image 'team/task:1'"):
        run_planned(plan, codebase=codebase, sandbox=sandbox, workroot=workroot, environment=in_image,
                    seconds=60, on_result=print)


def test_a_nul_in_the_output_is_shown_not_kept(candidates, codebase, sandbox, workroot, reward_test_patch):
    """PostgreSQL's JSON cannot store a NUL: the log tail spells it."""
    nul = Environment(test_command="printf 'a\\000b'; echo {tests} >/dev/null")
    plan = one_run_plan(candidates, codebase, nul, reward_test_patch)
    outcomes = {}
    run_planned(plan, codebase=codebase, sandbox=sandbox, workroot=workroot, environment=nul,
                seconds=60, on_result=lambda run, outcome: outcomes.setdefault(run.suite, outcome))
    assert outcomes["reward"].log_tail == "a\\x00b"


class Counted:
    """`sandbox`, counting the runs of tests and setups."""

    def __init__(self, sandbox):
        self.sandbox, self.runs, self._lock = sandbox, 0, threading.Lock()

    def check(self):
        self.sandbox.check()

    def run(self, workdir, command, limits):
        if command != ["true"]:  # the runner's trial of the sandbox after a failed run aside
            with self._lock:
                self.runs += 1
        return self.sandbox.run(workdir, command, limits)


def test_two_workers_on_the_same_plan_at_once_run_each_key_once_and_agree(
        plan, codebase, sandbox, own_workroot, environment):
    """Two groups with the same candidates share every run: before each attempt had a folder of
    its own, each worker removed the other's copy mid-run (a FileNotFoundError, or git refusing
    a correct fix: "Unable to read current working directory")."""
    counted, store, seen, errors = Counted(sandbox), {}, ({}, {}), []

    def worker(mine):
        def keep(run, outcome):
            store.setdefault(run.key, outcome)
            mine[run.key] = outcome

        try:
            run_planned(plan, codebase=codebase, sandbox=counted, workroot=own_workroot, environment=environment,
                        seconds=300, on_result=keep, stored=store.get)
        except Exception as error:  # a thread's exception would otherwise be printed, not failed
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(mine,)) for mine in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    keys = {run.key for run in plan.runs}
    assert errors == []
    assert seen[0] == seen[1] == store and set(store) == keys
    assert counted.runs == len(keys) - 1  # each key ran once; the hostile patch was refused, never run
    assert [o.status for o in store.values()].count("refused") == 1
    assert list(own_workroot.iterdir()) == []
