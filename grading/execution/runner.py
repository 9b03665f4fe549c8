"""Run a group's plan through the sandbox, one run at a time, within the group's time.

Each run gets a fresh copy of the codebase with its patch (`prepare_workdir`) in a folder of
its own, a setup run when the environment has setup commands, then the test command; its
outcome goes to `on_result` at once, so that the caller can store it before the next run
starts. A worker killed midway loses at most the run in progress: called again with the
stored keys as `done`, this picks up where it stopped.

Workers share the work root, and groups share runs (the same key is the same outcome): one
worker at a time holds a key (a lock file in the work root), and a worker that waited for it
takes the outcome the other one stored (`stored`) instead of running it again. A run that
never reached its test command because of the machine (no copy, git or the sandbox unable to
start) says nothing about the candidate: it is a MachineError, never an outcome.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator, Set
from contextlib import contextmanager
from pathlib import Path

from grading.execution.environment import PYTEST, Environment
from grading.execution.machine import MachineError, attempt_folder
from grading.execution.matrix import ERROR, FAIL, LOG_TAIL_CHARS, PASS, REFUSED, TIMEOUT, RunOutcome
from grading.execution.plan import PROBE, Plan, PlannedProbe, PlannedRun, Skipped
from grading.execution.probes import Probe, run_probe
from grading.execution.reports import read_referee, seat_referee
from grading.sandbox import (
    CommandSandbox,
    Limits,
    PatchRefused,
    RunResult,
    Sandbox,
    SandboxConfigError,
    prepare_workdir,
)
from grading.sandbox import limits as sandbox_status

_STATUS = {sandbox_status.PASSED: PASS, sandbox_status.FAILED: FAIL,
           sandbox_status.TIMEOUT: TIMEOUT, sandbox_status.KILLED_OUTPUT: ERROR,
           sandbox_status.KILLED_MEMORY: ERROR}
_REASON = {sandbox_status.KILLED_OUTPUT: "killed at the output limit",
           sandbox_status.KILLED_MEMORY: "killed at the memory limit"}
LOCK_POLL_SECONDS = 0.2


class OutOfTime(Exception):
    """The group's time ran out during a run: it was cut short, and has no outcome."""


def run_planned(plan: Plan, *, codebase: Path, sandbox: Sandbox, workroot: Path,
                environment: Environment, on_result: Callable[[PlannedRun, RunOutcome], None],
                seconds: float, done: Set[str] = frozenset(),
                stored: Callable[[str], RunOutcome | None] = lambda key: None,
                on_probe: Callable[[PlannedProbe, Probe], None] | None = None,
                stored_probe: Callable[[str], Probe | None] = lambda key: None) -> list[Skipped]:
    """Run `plan`'s runs in order, except those whose key is in `done`, and hand each
    outcome to `on_result`; runs that share a key run once. `seconds` is the group's
    time left: a run that has not started by then, or is still running then, is skipped,
    and the skipped runs are returned with the reason.

    A key is held while it runs and its outcome is handed over, against every worker that
    shares `workroot`; `stored(key)`, asked once it is held, is the outcome another worker
    stored meanwhile (None: run it here). Each run's copy is made in a folder of its own,
    `workroot`/<key>-<random> (`workroot` a folder the sandbox's user may enter), removed
    after. A patch the sandbox refuses is a `refused` outcome, never run.
    Raises SandboxConfigError when the environment names an image the sandbox does not run,
    MachineError when the machine kept a run from its test command (nothing handed over for it).

    Then `plan.probes`, alike: each probe's outcome to `on_probe` (`stored_probe` another
    worker's), a key in `done` not probed again, a probe the group's time cut short skipped.
    ValueError for a plan with probes and no `on_probe`.
    """
    if plan.probes and on_probe is None:
        raise ValueError("the plan has probes: run_planned needs on_probe to hand their outcomes to")
    _check_image(sandbox, environment)
    deadline = time.monotonic() + seconds
    skipped: list[Skipped] = []

    def each_key_once(planned, suite_of, hand, stored_of, do, done_as: tuple[str, str]) -> None:
        """Hand each of `planned` its outcome, each key worked out once (`do`) unless it is in
        `done` or another worker stored it (`stored_of`), held against other workers meanwhile.
        `done_as`: how the reasons of a skip say it was worked (a verb, a noun)."""
        outcomes = {}

        def skip(item, when: str) -> None:
            skipped.append(Skipped(suite_of(item), item.candidates, f"the group's time ({seconds:g} s) ran out {when}"))

        for item in planned:
            if item.key in done:
                continue
            if item.key in outcomes:
                hand(item, outcomes[item.key])
                continue
            if time.monotonic() >= deadline:
                skip(item, "before it started")
                continue
            with _key_held(workroot, item.key, deadline) as held:
                if not held:
                    skip(item, f"while another worker {done_as[0]} it")
                    continue
                outcome = stored_of(item.key)
                if outcome is None:
                    try:
                        outcome = do(item)
                    except OutOfTime:
                        skip(item, f"during the {done_as[1]}")
                        continue
                outcomes[item.key] = outcome
                hand(item, outcome)

    def probe(planned: PlannedProbe) -> Probe:
        outcome = run_probe(codebase, planned.patch, environment=environment, sandbox=sandbox, workroot=workroot,
                            seconds=deadline - time.monotonic(), tests=planned.tests, targets=planned.targets,
                            examples=planned.examples)
        if outcome.notes and time.monotonic() >= deadline:  # cut by the group's time: no outcome to keep
            raise OutOfTime
        return outcome

    each_key_once(plan.runs, lambda run: run.suite, on_result, stored,
                  lambda run: _run_one(run, codebase, sandbox, workroot, environment, deadline), ("ran", "run"))
    each_key_once(plan.probes, lambda planned: PROBE, on_probe, stored_probe, probe, ("probed", "probe"))
    return skipped


def _check_image(sandbox: Sandbox, environment: Environment) -> None:
    if environment.image is None:
        return
    if not isinstance(sandbox, CommandSandbox) or sandbox.image != environment.image:
        raise SandboxConfigError(f"the environment runs in the image {environment.image!r}: "
                                 f"the sandbox {sandbox!r} does not")


def _run_one(run: PlannedRun, codebase: Path, sandbox: Sandbox, workroot: Path,
             environment: Environment, deadline: float) -> RunOutcome:
    with attempt_folder(workroot, run.key) as workdir:
        try:
            prepare_workdir(codebase, run.patch, into=workdir)
        except PatchRefused as refused:
            if _git_failed(refused):
                raise MachineError("git could not apply the patch", str(refused)) from None
            return RunOutcome(REFUSED, {}, 0.0, "", "", str(refused))
        except OSError as error:
            raise MachineError("the codebase could not be copied for the run", str(error)) from error
        setup_script = environment.setup_script()
        setup_seconds = 0.0
        if setup_script is not None:
            setup = _sandboxed(sandbox, workdir, setup_script, environment, deadline, "setup")
            if setup.status != sandbox_status.PASSED:
                reason = f"setup {setup.status}" + (f" (exit code {setup.exit_code})"
                                                     if setup.exit_code is not None else "")
                return RunOutcome(ERROR, {}, setup.duration, _tail(setup.output), setup.command, reason)
            setup_seconds = setup.duration
        # A pytest run is read from its referee's record, not from what the tests print: seated
        # after the setup (which runs the candidate's code too), read before the copy goes.
        referee = seat_referee(workdir) if environment.report == PYTEST else None
        result = _sandboxed(sandbox, workdir, environment.test_script(run.tests, referee=referee),
                            environment, deadline, "test command")
        refereed = read_referee(workdir / referee, result, run.patch) if referee else None
    status = _STATUS[result.status]
    tests, reason, tampering = {" ".join(run.tests): status}, _REASON.get(result.status, ""), ()
    if refereed is not None:
        tests, tampering = refereed.tests, refereed.tampering
        if refereed.status is not None:
            status, reason = refereed.status, refereed.reason
    return RunOutcome(status, tests, setup_seconds + result.duration, _tail(result.output),
                      result.command, reason, tampering)


def _git_failed(refused: PatchRefused) -> bool:
    """Whether git itself failed (its folder gone, a disk full, a broken repository), not the
    patch: git says `error:` of a patch it cannot apply, and dies with `fatal:` otherwise."""
    words = refused.reason.removeprefix("does not apply: ")
    return words != refused.reason and any(line.startswith("fatal:") for line in words.splitlines())


def _sandboxed(sandbox: Sandbox, workdir: Path, script: str, environment: Environment,
               deadline: float, what: str) -> RunResult:
    """One sandboxed run, its wall clock cut to the group's time left; OutOfTime when
    that cut, not the environment's own limit, stopped it; MachineError when the sandbox
    could not start it."""
    wall_seconds = min(environment.wall_seconds, deadline - time.monotonic())
    if wall_seconds <= 0:
        raise OutOfTime
    try:
        result = sandbox.run(workdir, script,
                             Limits(wall_seconds=wall_seconds, memory_bytes=environment.memory_bytes))
    except OSError as error:
        raise MachineError(f"the sandbox could not start the {what}", str(error)) from error
    if result.status == sandbox_status.ERROR:  # it never reached the command (grading/sandbox/started.py)
        raise MachineError(f"the sandbox could not start the {what}", f"{result.output.strip()}\n{result.command}")
    if result.status == sandbox_status.TIMEOUT and wall_seconds < environment.wall_seconds:
        raise OutOfTime
    return result


@contextmanager
def _key_held(workroot: Path, key: str, deadline: float) -> Iterator[bool]:
    """Hold `key` against every worker that shares `workroot`, waiting for it until `deadline`;
    yields whether it is held. The lock is `workroot`/<key>.lock, removed by its holder as it
    lets go, so that no lock file outlives its run."""
    path = workroot / f"{key}.lock"
    try:
        fd = _lock(path, deadline)
    except OSError as error:
        raise MachineError("the run's lock could not be taken", str(error)) from error
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def _lock(path: Path, deadline: float) -> int | None:
    """An open descriptor of `path`, locked; None when `deadline` passed first."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                return None
            time.sleep(LOCK_POLL_SECONDS)
            continue
        # The holder before removed the file it held: a waiter that got that one holds a file
        # nobody else will find, and takes the one now at `path` instead.
        try:
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            return fd
        os.close(fd)


def _tail(output: str) -> str:
    # A NUL is shown, not kept: PostgreSQL's JSON cannot store one.
    return output[-LOG_TAIL_CHARS:].replace("\x00", "\\x00")
