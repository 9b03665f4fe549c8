"""Version 2 of the rollout format: what running a task's code needs (snapshot, test patch,
reward tests, environment), checked on import and kept with the task; version 1 files read
and hash as before; SWE-bench task files carry the reward's tests."""

import json

import pytest

from grading.execution import task_execution
from grading.formats import ImportNotes, Inputs, read_rollouts_from
from grading.jsonl import ErrorLog
from grading.rollouts import RolloutFormatError, load_rollouts
from tests.factories import SAMPLE_ROLLOUTS, rollout, write_jsonl

ENVIRONMENT = {"python": "/usr/bin/python3", "setup": ["pip --version"], "report": "pytest",
               "test_command": "python3 -m pytest -rA {tests}", "wall_seconds": 60, "memory_mb": 1024}
TASK = {"statement": "Fix it.", "repo": "acme/calc", "base_commit": "abc123", "snapshot": "snaps/calc.tar.gz",
        "test_patch": "diff --git a/tests/t.py b/tests/t.py\n", "reward_tests": ["tests/t.py::test_a"],
        "environment": ENVIRONMENT}


def test_a_task_with_what_running_it_needs_is_kept_whole(tmp_path):
    [read] = load_rollouts(write_jsonl(tmp_path / "v2.jsonl", [rollout(task=TASK)]))
    assert read.task.extra == {key: TASK[key] for key in ("snapshot", "test_patch", "reward_tests", "environment")}
    execution = task_execution(read.task.extra)
    assert execution.reward_tests == ("tests/t.py::test_a",)
    assert execution.environment.wall_seconds == 60 and execution.test_patch == TASK["test_patch"]


@pytest.mark.parametrize(("task", "message"), [
    ({"environment": {"test_command": "pytest"}},
     "task.environment.test_command: has no {tests} placeholder"),
    ({"environment": {"test_command": "pytest {tests}", "timeout": 3}}, "task.environment.timeout: unknown field"),
    ({"environment": "python3"}, "task.environment: must be an object, got str"),
    ({"environment": {"test_command": "pytest {tests}", "image": "--privileged"}},
     "task.environment.image: '--privileged' is not an image reference"),
    ({"snapshot": "/srv/calc.tar"}, "task.snapshot: must be a path inside the codebase store"),
    ({"snapshot": "a/../../calc.tar"}, "task.snapshot: must be a path inside the codebase store"),
    ({"reward_tests": ["a", 3]}, "task.reward_tests[1]: must be a string, got 3"),
    ({"test_patch": 7}, "task.test_patch: must be a string, got 7"),
])
def test_a_wrong_key_is_an_error_naming_it(tmp_path, task, message):
    with pytest.raises(RolloutFormatError) as refused:
        load_rollouts(write_jsonl(tmp_path / "bad.jsonl", [rollout(task={"statement": "s", **task})]))
    assert message in str(refused.value)


def test_version_1_files_read_and_hash_as_before():
    rollouts = load_rollouts([SAMPLE_ROLLOUTS])
    assert len(rollouts) > 0
    # The hash of a line covers its task as given: no key of version 2 is added to a version 1 task.
    line = json.loads(SAMPLE_ROLLOUTS.read_text().splitlines()[0])
    assert set(rollouts[0].task.extra) == set(line["task"]) - {"id", "statement", "repo", "base_commit",
                                                                  "reference_patch"}


def test_a_swe_bench_task_file_gives_the_reward_its_tests_and_test_patch(tmp_path):
    instance = {"instance_id": "acme__calc-1", "problem_statement": "Fix add.", "repo": "acme/calc",
                "base_commit": "abc123", "patch": "diff --git a/calc.py b/calc.py\n",
                "test_patch": "diff --git a/tests/test_calc.py b/tests/test_calc.py\n",
                "FAIL_TO_PASS": '["tests/test_calc.py::test_add"]', "PASS_TO_PASS": '["tests/test_calc.py::test_sub"]'}
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [instance])
    preds = write_jsonl(tmp_path / "preds.jsonl", [{"instance_id": "acme__calc-1", "model_name_or_path": "m",
                                                    "model_patch": "diff --git a/calc.py b/calc.py\n"}])
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"resolved_ids": ["acme__calc-1"], "unresolved_ids": []}))
    errors = ErrorLog()
    [read] = read_rollouts_from("swebench", Inputs([preds], [report], [tasks]), errors=errors, notes=ImportNotes(),
                                pass_threshold=1.0)
    assert not errors
    assert (read.task.repo, read.task.base_commit) == ("acme/calc", "abc123")
    execution = task_execution({**read.task.extra, "environment": {"test_command": "pytest {tests}"}})
    assert execution.reward_tests == ("tests/test_calc.py::test_add", "tests/test_calc.py::test_sub")
    assert execution.test_patch == instance["test_patch"]
