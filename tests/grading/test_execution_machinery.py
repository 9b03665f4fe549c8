"""Test machinery in the execution evidence (docs/sandbox.md, "Test machinery"): the runner's
configuration left out of every run, the referee seated in a run's copy and loaded by its
test script, its record read against what the run printed and how it exited, and what the
verdicts and the heuristic make of a candidate's tampering. The referee runs here in a real
pytest, outside the sandbox; tests/grading/test_execution_tampering.py runs cheats in it."""

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

from grading.cases import GroupCase, TrajectoryCase
from grading.execution import Candidate, Environment, Matrix, parse_pytest_summary, plan_runs, split_patch
from grading.execution import environment as environment_module
from grading.execution.reports import RESULTS, read_referee, seat_referee
from grading.execution.selection import machinery_paths
from grading.execution.verdicts import tampers_with_tests
from grading.graders.heuristic import HeuristicGrader
from grading.sandbox import RunResult
from grading.workspace import Workspace
from tests.grading.test_execution import CODE, TESTS, edit, new_file

PYTEST_ENV = Environment.from_dict({"test_command": "python -m pytest -q -rA -p no:cacheprovider {tests}",
                                    "report": "pytest", "python": sys.executable})
TOX = new_file("tox.ini", "[pytest]", "addopts = -p calc.plugin")
CONFTEST = new_file("tests/conftest.py", "import pytest")


# --- what runs: the candidate's runner configuration never does ---------------------------------

def test_a_patch_splits_without_its_runner_configuration_and_keeps_its_conftest_with_its_tests():
    code, tests = split_patch(CODE + TOX + TESTS + CONFTEST)
    assert (code, tests) == (CODE, TESTS + CONFTEST)
    assert machinery_paths(CODE + TOX + TESTS + CONFTEST) == ["tox.ini", "tests/conftest.py"]


def test_the_reward_runs_without_the_candidates_runner_configuration_and_conftest():
    test_patch = new_file("tests/test_reward.py", "def test_x():", "    assert True")
    plan = plan_runs([Candidate("a", CODE + TOX + CONFTEST, True)], codebase_id="repo@abc",
                     codebase_files=["calc/ops.py"], environment=PYTEST_ENV,
                     reward_tests=["tests/test_reward.py::test_x"], test_patch=test_patch)
    assert plan.runs[0].suite == "reward"
    assert plan.runs[0].patch == CODE + test_patch


def test_the_test_script_loads_the_referee_and_keeps_what_the_environment_holds(tmp_path):
    env = Environment(test_command='echo "$PYTEST_PLUGINS|$PYTHONPATH" -rA {tests}', report="pytest",
                      python="/usr/bin/python3")
    script = env.test_script(["t.py"], referee="rabc")
    assert env.test_script(["t.py"]) == script.replace(
        'PYTEST_PLUGINS=rabc"${PYTEST_PLUGINS:+,$PYTEST_PLUGINS}"; '
        'PYTHONPATH="$PWD"/rabc"${PYTHONPATH:+:$PYTHONPATH}"; export PYTEST_PLUGINS PYTHONPATH\n', "")
    ran = subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": "/opt/lib", "PYTEST_PLUGINS": "xdist"})
    assert ran.stdout == f"rabc,xdist|{tmp_path}/rabc:/opt/lib -rA t.py\n"


def test_a_pytest_runs_cache_key_changes_with_its_referee(monkeypatch):
    plain = Environment(test_command="pytest {tests}")
    before = PYTEST_ENV.fingerprint, plain.fingerprint
    monkeypatch.setattr(environment_module, "REFEREE_SOURCE", environment_module.REFEREE_SOURCE + "\n")
    assert PYTEST_ENV.fingerprint != before[0]
    assert plain.fingerprint == before[1]


# --- the referee, in a real pytest ---------------------------------------------------------------

OUTCOMES = '''\
import pytest


def test_pass():
    pass


def test_fail():
    assert 1 == 2


@pytest.mark.xfail
def test_xfail():
    assert 0


@pytest.mark.xfail
def test_xpass():
    pass


@pytest.mark.xfail(strict=True)
def test_strict_xpass():
    pass


@pytest.mark.skip
def test_skip():
    pass


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")


def test_teardown_error(broken_teardown):
    pass


@pytest.fixture
def broken_setup():
    raise RuntimeError("setup broke")


def test_setup_error(broken_setup):
    pass


@pytest.mark.parametrize("case", ["a b - c"])
def test_case(case):
    pass
'''
PYTEST_INSIDE = '''\
import subprocess
import sys


def test_runs_pytest(tmp_path):
    (tmp_path / "test_inner.py").write_text("def test_inner():\\n    assert False\\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)])
'''


def refereed_run(workdir, files, tests, patch=""):
    """`tests` run by pytest in `workdir` with `files` written and the referee seated, as the runner
    runs them (outside the sandbox): what the referee's record says, and the run's output."""
    for path, text in files.items():
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
        (workdir / path).write_text(text)
    referee = seat_referee(workdir)
    started = time.monotonic()
    ran = subprocess.run(["sh", "-c", PYTEST_ENV.test_script(tests, referee=referee)], cwd=workdir,
                         capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    result = RunResult("passed" if ran.returncode == 0 else "failed", ran.returncode,
                       time.monotonic() - started, ran.stdout + ran.stderr, "sh -c ...")
    return read_referee(workdir / referee, result, patch), result.output


def test_importing_the_referee_outside_pytest_writes_nothing_and_leaves_the_environment_be(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/opt/lib")
    monkeypatch.delitem(sys.modules, "grading.execution.referee", raising=False)
    referee = importlib.import_module("grading.execution.referee")
    assert not (Path(referee.__file__).parent / RESULTS).exists()
    assert os.environ["PYTHONPATH"] == "/opt/lib"


def test_the_referee_reads_each_test_as_pytests_summary_does_naming_it_whole(tmp_path):
    refereed, output = refereed_run(tmp_path, {"tests/test_outcomes.py": OUTCOMES}, ["tests"])
    t = "tests/test_outcomes.py::"
    expected = {t + "test_pass": "pass", t + "test_fail": "fail", t + "test_xfail": "pass", t + "test_xpass": "pass",
                t + "test_strict_xpass": "fail", t + "test_teardown_error": "error", t + "test_setup_error": "error",
                t + "test_case[a b - c]": "pass"}
    assert (refereed.status, refereed.tests, refereed.tampering, refereed.reason) == ("fail", expected, (), "")
    printed = parse_pytest_summary(output)  # which cuts an id at " - "
    assert printed == {**{k: v for k, v in expected.items() if " - " not in k}, t + "test_case[a b": "pass"}


def test_a_file_that_does_not_collect_is_an_error_named_by_its_path(tmp_path):
    refereed, _ = refereed_run(tmp_path, {"tests/test_broken.py": "import calc.missing\n"}, ["tests"])
    assert (refereed.status, refereed.tests, refereed.tampering) == ("fail", {"tests/test_broken.py": "error"}, ())


def test_a_pytest_run_that_a_test_starts_writes_nothing_into_the_record(tmp_path):
    refereed, output = refereed_run(tmp_path, {"tests/test_inside.py": PYTEST_INSIDE}, ["tests"])
    assert "1 failed" in output  # the inner run's own summary
    assert (refereed.status, refereed.tests, refereed.tampering) == (
        "pass", {"tests/test_inside.py::test_runs_pytest": "pass"}, ())


PLUGIN = "def pytest_runtest_setup(item):\n    pass\n"


def test_a_hook_in_a_code_file_of_the_candidates_is_tampering_and_the_codebases_own_hooks_are_not(tmp_path):
    files = {"pytest.ini": "[pytest]\naddopts = -p calc.plugin\n", "calc/__init__.py": "", "calc/plugin.py": PLUGIN,
             "tests/test_pass.py": "def test_pass():\n    pass\n"}
    plugin_patch = edit("calc/plugin.py", "def pytest_runtest_setup(item):", "def pytest_runtest_setup(item):")
    hooked, _ = refereed_run(tmp_path, files, ["tests"], patch=plugin_patch + CODE)
    assert hooked.tampering == ("calc/plugin.py implements the pytest hook pytest_runtest_setup (plugin calc.plugin)",)
    referee = next(p for p in tmp_path.iterdir() if p.name.startswith("r") and p.is_dir())
    result = RunResult("passed", 0, 1.0, "", "sh -c ...")
    assert read_referee(referee, result, CODE).tampering == ()


# --- the referee's record, read against the run ------------------------------------------------

def record_in(tmp_path, *lines):
    folder = tmp_path / "rfolder"
    folder.mkdir(parents=True)
    (folder / RESULTS).write_text("".join(line + "\n" for line in lines))
    return folder


LOADED = '{"event": "loaded"}'
CALL_FAILED = '{"event": "phase", "test": "t.py::test_a", "when": "call", "outcome": "failed"}'
FINISHED_1 = '{"event": "finished", "exitstatus": 1}'


def test_a_line_the_referee_did_not_write_is_tampering(tmp_path):
    folder = record_in(tmp_path, LOADED, CALL_FAILED, '{"event": "phase", "test": "t.py::test_a"}',
                       "PASSED t.py::test_a", FINISHED_1)
    refereed = read_referee(folder, RunResult("failed", 1, 1.0, "", ""), "")
    assert (refereed.status, refereed.tests) == ("fail", {"t.py::test_a": "fail"})
    assert refereed.tampering == ("the referee's record holds a line it did not write (line 3)",
                                  "the referee's record holds a line it did not write (line 4)")


def test_an_exit_of_0_that_pytest_did_not_give_is_tampering_and_a_pytest_that_stopped_says_so(tmp_path):
    folder = record_in(tmp_path, LOADED, CALL_FAILED)
    cut_short = read_referee(folder, RunResult("passed", 0, 1.0, "", ""), "")
    assert (cut_short.status, cut_short.tampering) == (
        "fail", ("the tests' process exited 0 before pytest finished its session",))
    crashed = read_referee(folder, RunResult("failed", 3, 1.0, "", ""), "")
    assert (crashed.status, crashed.tampering, crashed.reason) == (
        "fail", (), "pytest did not finish its session (exit code 3)")
    finished = record_in(tmp_path / "other", LOADED, CALL_FAILED, FINISHED_1)
    assert read_referee(finished, RunResult("passed", 0, 1.0, "", ""), "").tampering == (
        "the tests' process exited 0 where pytest's session ended with exit status 1",)


def test_a_run_without_a_record_fails_saying_why_and_tampers_when_it_exits_0(tmp_path):
    (tmp_path / "rfolder").mkdir()
    never_loaded = read_referee(tmp_path / "rfolder", RunResult("failed", 4, 1.0, "", ""), "")
    assert (never_loaded.status, never_loaded.tests, never_loaded.tampering) == ("fail", {}, ())
    assert never_loaded.reason.startswith("the referee recorded nothing (exit code 4)")
    removed = read_referee(tmp_path / "rfolder", RunResult("passed", 0, 1.0, "", ""), "")
    assert (removed.status, removed.tampering) == ("fail", (
        "the tests' process exited 0 before pytest finished its session: the referee's record is gone, "
        "or it never loaded",))


def test_a_record_replaced_by_a_link_or_a_fifo_is_not_followed(tmp_path):
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / RESULTS).symlink_to("/etc/passwd")
    piped = tmp_path / "piped"
    piped.mkdir()
    os.mkfifo(piped / RESULTS)
    (tmp_path / "moved").symlink_to("/etc")
    failed = RunResult("failed", 1, 1.0, "", "")
    assert read_referee(linked, failed, "").tampering[0].startswith("the referee's record was replaced (")
    assert read_referee(piped, failed, "").tampering[0] == "the referee's record was replaced by something not a file"
    assert read_referee(tmp_path / "moved", failed, "").tampering[0].startswith("the referee's folder was replaced (")


def test_what_a_run_keeps_of_its_tampering_is_bounded(tmp_path):
    lines = [f'{{"event": "tampering", "what": "{n} {"x" * 400}"}}' for n in range(30)]
    tampering = read_referee(record_in(tmp_path, *lines), RunResult("failed", 1, 1.0, "", ""), "").tampering
    assert len(tampering) == 20 and tampering[-1] == "and 11 more"
    assert tampering[0] == "0 " + "x" * 298


def test_a_run_that_did_not_conclude_keeps_its_own_status_and_the_tests_it_recorded(tmp_path):
    folder = record_in(tmp_path, LOADED, CALL_FAILED)
    refereed = read_referee(folder, RunResult("timeout", None, 60.0, "", ""), "")
    assert (refereed.status, refereed.tests, refereed.tampering) == (None, {"t.py::test_a": "fail"}, ())


# --- what the verdicts and the graders make of it -----------------------------------------------

X = "tests/test_ops.py::test_x"


def run(suite, candidates, status, tests, tampering=()):
    return {"key": f"{suite}-{'-'.join(candidates)}", "suite": suite, "candidates": list(candidates),
            "tests": sorted(tests), "outcome": {"status": status, "tests": tests, "duration": 1.0, "log_tail": "",
                                                "command": "bwrap ...", "reason": "", "tampering": list(tampering)}}


FORGED = ("pytest's report of tests/test_ops.py::test_x (call) was forged: "
          "reported passed where it raised AssertionError")


def fix(lines):
    added = "".join(f"+    y{i} = x\n" for i in range(lines))
    return (f"diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
            f"@@ -1,2 +1,{2 + lines} @@\n def f(x):\n{added}     return x\n")


# The leanest fix tampers; the next breaks a test the others pass; a peer's tests tamper in
# every passing candidate's run of them.
MATRIX = Matrix.from_dict({
    "passed": {"lean_tampers": True, "breaks": True, "good": True, "also_good": True},
    "runs": [run("reward", ["lean_tampers"], "fail", {X: "fail"}, [FORGED]),
             run("reward", ["breaks", "good", "also_good"], "pass", {X: "pass"}),
             run("existing", ["lean_tampers", "good", "also_good"], "pass", {X: "pass"}),
             run("existing", ["breaks"], "fail", {X: "fail"}),
             run("peer:good", ["lean_tampers", "breaks", "good", "also_good"], "pass", {X: "pass"},
                 ["a conftest's hook"])],
    "skipped": []})
CASE = GroupCase("g", "Fix f.", tuple(TrajectoryCase(tid, True, 1.0, fix(n)) for tid, n in (
    ("lean_tampers", 1), ("breaks", 2), ("good", 3), ("also_good", 4))), execution=MATRIX)


def test_tampering_counts_against_a_candidate_from_its_own_runs_never_from_a_peers_tests():
    assert tampers_with_tests(MATRIX) == {"lean_tampers": [f"reward: {FORGED}"]}


def test_a_fix_that_tampers_ranks_below_every_fix_that_does_not_even_one_that_breaks_tests():
    grade = HeuristicGrader().rank(CASE)
    assert [tid for tier in grade.tiers for tid in tier] == ["good", "also_good", "breaks", "lean_tampers"]
    assert "tampers_with_tests" in grade.flags["lean_tampers"]
    assert f"tampers with the test machinery: reward: {FORGED}" in grade.rationales["lean_tampers"]


def test_a_patch_that_configures_the_runner_ranks_below_a_longer_fix_without_evidence():
    grade = HeuristicGrader().rank(GroupCase("g", "Fix f.", (TrajectoryCase("configures", True, 1.0, fix(1) + TOX),
                                                             TrajectoryCase("long", True, 1.0, fix(8)))))
    assert grade.tiers == (("long",), ("configures",))
    assert "tampers_with_tests" in grade.flags["configures"]
    assert "tampers with the test machinery: tox.ini configures the test runner" in grade.rationales["configures"]


def test_the_grader_agents_integrity_evidence_shows_the_tampering():
    text = Workspace(CASE, seed=1).run({"tool": "evidence_integrity"})
    assert f"tampers with the test machinery: reward: {FORGED}" in text
