"""The candidate x test matrix of one group, and the outcome of one run, as stored.

A run's outcome (`RunOutcome`) is what a cache keeps under the run's key: its status,
the status of each test it reported, its duration, the tail of its log and the host
command line that runs it again. The matrix joins the plan's runs to their outcomes:
the status of a candidate on a test is the one its run reported for that test; where
the run reported none, the run's own status when it did not conclude (timeout, error,
refused), else `missing` (the tests ran and did not include it: a file that did not
collect, a test the candidate's code does not have).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from grading.execution.examples import Example
from grading.execution.plan import REFERENCE, Plan, Skipped
from grading.execution.probes import Probe

PASS, FAIL, ERROR, TIMEOUT, REFUSED, MISSING = "pass", "fail", "error", "timeout", "refused", "missing"
RUN_STATUSES = (PASS, FAIL, ERROR, TIMEOUT, REFUSED)
TEST_STATUSES = (PASS, FAIL, ERROR, TIMEOUT)
UNCONCLUDED = (ERROR, TIMEOUT, REFUSED)
LOG_TAIL_CHARS = 4000


@dataclass(frozen=True)
class RunOutcome:
    """What one run came to. `status`: `pass`/`fail` (the command's exit code; for a pytest
    report, pytest's own verdict as its referee recorded it), `timeout` (killed at the wall
    clock), `error` (killed at a memory or output limit, a failed setup, a sandbox that
    could not start it: `reason` says which) or `refused` (the patch was never applied:
    `reason` is the sandbox's). `tests`: each reported test's status. `command`: the host
    command line that runs it again ("" when refused). `tampering`: what the run did to the
    test runner, each in words (reports.read_referee)."""

    status: str
    tests: Mapping[str, str]
    duration: float
    log_tail: str
    command: str
    reason: str = ""
    tampering: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ValueError(f"run status {self.status!r}: not one of {', '.join(RUN_STATUSES)}")
        wrong = {test: status for test, status in self.tests.items() if status not in TEST_STATUSES}
        if wrong:
            raise ValueError(f"test statuses not one of {', '.join(TEST_STATUSES)}: {wrong}")

    def to_dict(self) -> dict:
        return {"status": self.status, "tests": dict(self.tests), "duration": self.duration,
                "log_tail": self.log_tail, "command": self.command, "reason": self.reason,
                "tampering": list(self.tampering)}

    @classmethod
    def from_dict(cls, data: Mapping) -> RunOutcome:
        # Outcomes stored before the referee have no "tampering": none was looked for.
        return cls(str(data["status"]), {str(t): str(s) for t, s in data["tests"].items()},
                   float(data["duration"]), str(data["log_tail"]), str(data["command"]),
                   str(data["reason"]), tuple(str(t) for t in data.get("tampering", ())))


@dataclass(frozen=True)
class MatrixRun:
    """A planned run with its outcome: `tests` are the tests it was given."""

    key: str
    suite: str
    candidates: tuple[str, ...]
    tests: tuple[str, ...]
    outcome: RunOutcome


@dataclass(frozen=True)
class Matrix:
    """`passed`: the reward's verdict per candidate; `runs`: the runs done; `skipped`:
    those not done, with the reason. The task's reference fix, when it ran as a control, is
    the candidate `REFERENCE` of its runs and skips, never one of `passed`. `probes`: each
    probed candidate's probe (`REFERENCE`, `BASE` and passing candidates; plan.py), and `examples`
    the statement's examples they ran, in their order."""

    passed: Mapping[str, bool]
    runs: tuple[MatrixRun, ...]
    skipped: tuple[Skipped, ...] = ()
    probes: Mapping[str, Probe] = field(default_factory=dict)
    examples: tuple[Example, ...] = ()

    @classmethod
    def build(cls, plan: Plan, outcomes: Mapping[str, RunOutcome],
              skipped: tuple[Skipped, ...] = (), probes: Mapping[str, Probe] | None = None) -> Matrix:
        """The matrix of `plan`, from the outcomes and the probes by key and the runs and probes
        `run_planned` skipped. ValueError for a run with neither an outcome nor a reason to have none."""
        all_skipped = (*plan.skipped, *skipped)
        left = {(s.suite, s.candidates) for s in all_skipped}
        runs = []
        for run in plan.runs:
            if run.key in outcomes:
                runs.append(MatrixRun(run.key, run.suite, run.candidates, run.tests,
                                      outcomes[run.key]))
            elif (run.suite, run.candidates) not in left:
                raise ValueError(f"run {run.key} ({run.suite}, {', '.join(run.candidates)}): "
                                 "no outcome, and not skipped")
        probes = probes or {}
        by_candidate = {candidate: probes[planned.key] for planned in plan.probes if planned.key in probes
                        for candidate in planned.candidates}
        return cls(dict(plan.passed), tuple(runs), all_skipped, by_candidate, plan.examples)

    @cached_property
    def _by_cell(self) -> dict[tuple[str, str], MatrixRun]:
        return {(candidate, run.suite): run for run in self.runs for candidate in run.candidates}

    @cached_property
    def reference(self) -> bool:
        """Whether the task's reference fix was planned as a control (it ran, or its runs
        were skipped with the reason)."""
        return any(REFERENCE in entry.candidates for entry in (*self.runs, *self.skipped))

    def suites(self) -> list[str]:
        return list(dict.fromkeys(run.suite for run in self.runs))

    def tests(self, suite: str) -> list[str]:
        """The tests any run of `suite` reported, sorted."""
        return sorted({test for run in self.runs if run.suite == suite for test in run.outcome.tests})

    def run_of(self, candidate: str, suite: str) -> MatrixRun | None:
        return self._by_cell.get((candidate, suite))

    def status(self, candidate: str, suite: str, test: str) -> str | None:
        """The candidate's status on one test of `suite`; None when it has no run there."""
        run = self.run_of(candidate, suite)
        if run is None:
            return None
        if test in run.outcome.tests:
            return run.outcome.tests[test]
        return run.outcome.status if run.outcome.status in UNCONCLUDED else MISSING

    def to_dict(self) -> dict:
        """JSON-safe: what a group stores."""
        return {
            "passed": dict(self.passed),
            "runs": [{"key": run.key, "suite": run.suite, "candidates": list(run.candidates),
                      "tests": list(run.tests), "outcome": run.outcome.to_dict()}
                     for run in self.runs],
            "skipped": [s.to_dict() for s in self.skipped],
            "probes": {candidate: probe.to_dict() for candidate, probe in self.probes.items()},
            "examples": [{"source": e.source, "session": e.session} for e in self.examples],
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Matrix:
        runs = tuple(MatrixRun(str(run["key"]), str(run["suite"]), tuple(run["candidates"]),
                               tuple(run["tests"]), RunOutcome.from_dict(run["outcome"]))
                     for run in data["runs"])
        # Matrices stored before the probes have no "probes" nor "examples": none were made.
        return cls({str(c): bool(p) for c, p in data["passed"].items()}, runs,
                   tuple(Skipped.from_dict(s) for s in data["skipped"]),
                   {str(c): Probe.from_dict(p) for c, p in data.get("probes", {}).items()},
                   tuple(Example(str(e["source"]), bool(e["session"])) for e in data.get("examples", ())))
