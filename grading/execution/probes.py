"""One copy of the code probed: its tests traced, and the issue's examples run.

`run_probe` makes a copy of the codebase with a patch (none for the base code; the reference
fix's or a candidate's as the reward applies it, the task's test patch on top), runs the
environment's setup there, then the tests with the tracer (trace.py) when there are functions
to trace, then the issue's examples through their driver (examples.py), traced too, and reads
both records back before the copy goes. One copy for both: a setup may build for minutes.

A probe's outcome depends on what `probe_key` digests, as a run's does on its key (plan.run_key):
a caller may store it by that key and never probe the same again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grading.execution.environment import EXIT_CODE, TESTS, Environment
from grading.execution.examples import (
    DRIVER_SOURCE,
    SECONDS_EACH,
    Example,
    ExampleRuns,
    driver_argv,
    read_examples,
    seat_examples,
)
from grading.execution.machine import MachineError, attempt_folder
from grading.execution.trace import TRACER_SOURCE, Target, TraceRecord, read_trace, seat_tracer, tracer_env
from grading.sandbox import Limits, PatchRefused, RunResult, Sandbox, prepare_workdir
from grading.sandbox import limits as sandbox_status


@dataclass(frozen=True)
class Probe:
    """What came of probing one copy. `trace`: the tracer's record (None: nothing was traced);
    `examples`: the examples' outcomes (None: none were run); `duration`: the runs' seconds,
    setup included; `notes`: why it holds less than was asked (a patch refused, a setup that
    failed, a run killed at a limit), in words."""

    trace: TraceRecord | None
    examples: ExampleRuns | None
    duration: float
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"trace": self.trace and self.trace.to_dict(), "examples": self.examples and self.examples.to_dict(),
                "duration": self.duration, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: dict) -> Probe:
        return cls(data["trace"] and TraceRecord.from_dict(data["trace"]),
                   data["examples"] and ExampleRuns.from_dict(data["examples"]),
                   float(data["duration"]), tuple(map(str, data["notes"])))


def probe_key(codebase_id: str, patch: str, environment: Environment, *, tests: Sequence[str] = (),
              targets: Sequence[Target] = (), examples: Sequence[Example] = ()) -> str:
    """sha256 of what can change a probe's outcome: the codebase, the patch, the environment,
    the tests, the targets, the examples, and the tracer's and the driver's sources."""
    what = [codebase_id, hashlib.sha256(patch.encode()).hexdigest(), environment.fingerprint, list(tests),
            [t.name for t in targets], [[e.source, e.session] for e in examples],
            hashlib.sha256((TRACER_SOURCE + DRIVER_SOURCE).encode()).hexdigest()]
    return hashlib.sha256(json.dumps(what, separators=(",", ":")).encode()).hexdigest()


def run_probe(codebase: Path, patch: str, *, environment: Environment, sandbox: Sandbox, workroot: Path,
              seconds: float, tests: Sequence[str] = (), targets: Sequence[Target] = (),
              examples: Sequence[Example] = (), seconds_each: float = SECONDS_EACH) -> Probe:
    """Probe `codebase` with `patch` applied, in a copy inside `workroot` (a folder the
    sandbox's user may enter), removed after: the test command on `tests` with `targets`
    traced (no tests run without targets), then `examples`, each within `seconds_each`; all
    within `seconds`, each run within the environment's limits. Raises MachineError when the
    machine kept it from running (no copy, a sandbox that could not start)."""
    deadline = time.monotonic() + seconds
    trace_tests = tuple(tests) if targets else ()
    with attempt_folder(workroot, "probe") as workdir:
        try:
            prepare_workdir(codebase, patch, into=workdir)
        except PatchRefused as refused:
            return Probe(None, None, 0.0, (f"the patch was refused: {refused}",))
        except OSError as error:
            raise MachineError("the codebase could not be copied for the probe", str(error)) from error
        duration, notes = 0.0, []
        setup = environment.setup_script()
        if setup is not None:
            result = _run(sandbox, workdir, setup, environment, deadline, "setup")
            duration += result.duration
            if result.status != sandbox_status.PASSED:
                return Probe(None, None, duration, (f"the setup {result.status} (exit code {result.exit_code})",))
        tracer = seat_tracer(workdir, targets) if targets else None
        if trace_tests:
            script = f"{tracer_env(tracer)}\n{environment.test_script(trace_tests)}"
            result = _run(sandbox, workdir, script, environment, deadline, "traced tests")
            duration += result.duration
            notes += _cut("the traced tests", result)
        example_runs = None
        if examples:
            driver = seat_examples(workdir, examples)
            # The environment's interpreter runs the driver as it runs the tests: its folder first on PATH.
            runs_driver = dataclasses.replace(environment, test_command=TESTS, report=EXIT_CODE, setup=())
            script = runs_driver.test_script(driver_argv(driver, tracer=tracer, seconds_each=seconds_each))
            result = _run(sandbox, workdir, script, environment, deadline, "examples")
            duration += result.duration
            notes += _cut("the examples", result)
            example_runs = read_examples(workdir / driver, len(examples))
        trace = read_trace(workdir / tracer, targets) if tracer and (trace_tests or examples) else None
    return Probe(trace, example_runs, duration, tuple(notes))


def _cut(what: str, result: RunResult) -> list[str]:
    if result.status in (sandbox_status.PASSED, sandbox_status.FAILED):
        return []
    return [f"{what} were cut short ({result.status})"]


def _run(sandbox: Sandbox, workdir: Path, script: str, environment: Environment, deadline: float,
         what: str) -> RunResult:
    wall_seconds = min(environment.wall_seconds, deadline - time.monotonic())
    if wall_seconds <= 0:
        return RunResult(sandbox_status.TIMEOUT, None, 0.0, "", "")
    try:
        result = sandbox.run(workdir, script, Limits(wall_seconds=wall_seconds, memory_bytes=environment.memory_bytes))
    except OSError as error:
        raise MachineError(f"the sandbox could not start the {what}", str(error)) from error
    if result.status == sandbox_status.ERROR:  # it never reached the command (grading/sandbox/started.py)
        raise MachineError(f"the sandbox could not start the {what}", f"{result.output.strip()}\n{result.command}")
    return result
