"""Run a group's plan through the sandbox, one run at a time, within the group's time.

Each run gets a fresh copy of the codebase with its patch (`prepare_workdir`), a setup
run when the environment has setup commands, then the test command; its outcome goes to
`on_result` at once, so that the caller can store it before the next run starts. A
worker killed midway loses at most the run in progress: called again with the stored
keys as `done`, this picks up where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Set
from pathlib import Path

from grading.execution.environment import PYTEST, Environment
from grading.execution.matrix import ERROR, FAIL, LOG_TAIL_CHARS, PASS, REFUSED, TIMEOUT, RunOutcome
from grading.execution.plan import Plan, PlannedRun, Skipped
from grading.execution.reports import parse_pytest_summary
from grading.sandbox import (
    CommandSandbox,
    Limits,
    PatchRefused,
    RunResult,
    Sandbox,
    SandboxConfigError,
    prepare_workdir,
    remove_tree,
)
from grading.sandbox import limits as sandbox_status

_STATUS = {sandbox_status.PASSED: PASS, sandbox_status.FAILED: FAIL,
           sandbox_status.TIMEOUT: TIMEOUT, sandbox_status.KILLED_OUTPUT: ERROR,
           sandbox_status.KILLED_MEMORY: ERROR, sandbox_status.ERROR: ERROR}
_REASON = {sandbox_status.KILLED_OUTPUT: "killed at the output limit",
           sandbox_status.KILLED_MEMORY: "killed at the memory limit",
           sandbox_status.ERROR: "the sandbox could not start the command"}


class OutOfTime(Exception):
    """The group's time ran out during a run: it was cut short, and has no outcome."""


def run_planned(plan: Plan, *, codebase: Path, sandbox: Sandbox, workroot: Path,
                environment: Environment, on_result: Callable[[PlannedRun, RunOutcome], None],
                seconds: float, done: Set[str] = frozenset()) -> list[Skipped]:
    """Run `plan`'s runs in order, except those whose key is in `done`, and hand each
    outcome to `on_result`; runs that share a key run once. `seconds` is the group's
    time left: a run that has not started by then, or is still running then, is skipped,
    and the skipped runs are returned with the reason.

    Each run's copy is made at `workroot`/<key> (a folder the sandbox's user may enter)
    and removed after. A patch the sandbox refuses is a `refused` outcome, never run.
    Raises SandboxConfigError when the environment names an image the sandbox does not run.
    """
    _check_image(sandbox, environment)
    deadline = time.monotonic() + seconds
    outcomes: dict[str, RunOutcome] = {}
    skipped: list[Skipped] = []
    for run in plan.runs:
        if run.key in done:
            continue
        if run.key not in outcomes:
            if time.monotonic() >= deadline:
                skipped.append(Skipped(run.suite, run.candidates,
                                       f"the group's time ({seconds:g} s) ran out before it started"))
                continue
            try:
                outcomes[run.key] = _run_one(run, codebase, sandbox, workroot / run.key,
                                             environment, deadline)
            except OutOfTime:
                skipped.append(Skipped(run.suite, run.candidates,
                                       f"the group's time ({seconds:g} s) ran out during the run"))
                continue
        on_result(run, outcomes[run.key])
    return skipped


def _check_image(sandbox: Sandbox, environment: Environment) -> None:
    if environment.image is None:
        return
    if not isinstance(sandbox, CommandSandbox) or sandbox.image != environment.image:
        raise SandboxConfigError(f"the environment runs in the image {environment.image!r}: "
                                 f"the sandbox {sandbox!r} does not")


def _run_one(run: PlannedRun, codebase: Path, sandbox: Sandbox, workdir: Path,
             environment: Environment, deadline: float) -> RunOutcome:
    if workdir.exists():
        remove_tree(workdir)  # left by a worker killed during this run
    try:
        prepare_workdir(codebase, run.patch, into=workdir)
    except PatchRefused as refused:
        return RunOutcome(REFUSED, {}, 0.0, "", "", str(refused))
    try:
        setup_script = environment.setup_script()
        setup_seconds = 0.0
        if setup_script is not None:
            setup = _sandboxed(sandbox, workdir, setup_script, environment, deadline)
            if setup.status != sandbox_status.PASSED:
                reason = f"setup {setup.status}" + (f" (exit code {setup.exit_code})"
                                                     if setup.exit_code is not None else "")
                return RunOutcome(ERROR, {}, setup.duration, _tail(setup.output), setup.command, reason)
            setup_seconds = setup.duration
        result = _sandboxed(sandbox, workdir, environment.test_script(run.tests), environment, deadline)
    finally:
        remove_tree(workdir)
    status = _STATUS[result.status]
    if environment.report == PYTEST:
        tests = parse_pytest_summary(result.output)
    else:
        tests = {" ".join(run.tests): status}
    return RunOutcome(status, tests, setup_seconds + result.duration, _tail(result.output),
                      result.command, _REASON.get(result.status, ""))


def _sandboxed(sandbox: Sandbox, workdir: Path, script: str, environment: Environment,
               deadline: float) -> RunResult:
    """One sandboxed run, its wall clock cut to the group's time left; OutOfTime when
    that cut, not the environment's own limit, stopped it."""
    wall_seconds = min(environment.wall_seconds, deadline - time.monotonic())
    if wall_seconds <= 0:
        raise OutOfTime
    result = sandbox.run(workdir, script,
                         Limits(wall_seconds=wall_seconds, memory_bytes=environment.memory_bytes))
    if result.status == sandbox_status.TIMEOUT and wall_seconds < environment.wall_seconds:
        raise OutOfTime
    return result


def _tail(output: str) -> str:
    # A NUL is shown, not kept: PostgreSQL's JSON cannot store one.
    return output[-LOG_TAIL_CHARS:].replace("\x00", "\\x00")
