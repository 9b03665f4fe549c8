"""What a task says about running its code (the rollout format's task keys, version 2).

- `environment`: how to run its tests (environment.py); else the codebase store's for the
  task's repo; else there is no evidence to gather.
- `reward_tests`: the tests whose verdict is the reward; else SWE-bench's `FAIL_TO_PASS`
  and `PASS_TO_PASS` (lists, or the JSON text of lists, as the dataset has them); else the
  tests the trajectories' own `tests` name.
- `test_patch`: the tests the reward ran, applied before running them ("" when none).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from grading.execution.codebases import NoCodebase
from grading.execution.environment import Environment

SWE_BENCH_TESTS = ("FAIL_TO_PASS", "PASS_TO_PASS")


@dataclass(frozen=True)
class TaskExecution:
    environment: Environment
    reward_tests: tuple[str, ...]
    test_patch: str


def task_execution(task: Mapping, *, store_environment: Mapping | None = None,
                   trajectory_tests: Iterable[Mapping | None] = ()) -> TaskExecution:
    """The execution inputs of a task (its keys beyond id, statement, repo, base commit and
    reference fix). Raises NoCodebase, with the reason, when it cannot be run."""
    data = task.get("environment") or store_environment
    if data is None:
        raise NoCodebase("the task has no environment (task.environment, or the codebase store's "
                         "environments.json for its repo)")
    try:
        environment = Environment.from_dict(data)
    except ValueError as error:
        raise NoCodebase(f"task.{error}") from None
    test_patch = task.get("test_patch") or ""
    if not isinstance(test_patch, str):
        raise NoCodebase("task.test_patch: must be a string")
    return TaskExecution(environment, reward_tests(task, trajectory_tests), test_patch)


def reward_tests(task: Mapping, trajectory_tests: Iterable[Mapping | None] = ()) -> tuple[str, ...]:
    """The reward's tests, in the order the task gives them, each once."""
    named = task.get("reward_tests")
    if named is None and any(key in task for key in SWE_BENCH_TESTS):
        named = [test for key in SWE_BENCH_TESTS for test in _test_list(task.get(key), key)]
    if named is None:
        named = sorted({str(test) for tests in trajectory_tests if isinstance(tests, Mapping)
                        for key in ("passed", "failed") for test in tests.get(key) or ()})
    return tuple(dict.fromkeys(str(test) for test in named))


def _test_list(value, key: str) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise NoCodebase(f"task.{key}: neither a list nor the JSON text of one") from None
    if not isinstance(value, list) or not all(isinstance(test, str) for test in value):
        raise NoCodebase(f"task.{key}: must be a list of test names")
    return value
