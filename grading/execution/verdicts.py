"""What a group's matrix says about its candidates, for a grader to weigh.

- `flaky`: the reward's verdict on a candidate does not reproduce here: it passed it and
  its reward tests fail, or it failed it and they pass. Runs that did not conclude
  (timeout, error, refused) confirm nothing and contradict nothing. A reward test that
  fails here for every passing candidate (two or more) says more of this machine than of
  them (a test that needs the network, a missing package): it counts against none.
- `breaks_tests`: a passing candidate fails tests that more than half of the other
  passing candidates that ran them pass. The existing tests count, and the peer tests
  that the reward's and the existing runs did not already report (a peer who changed
  an existing test file runs that file's old tests again: those count once).
- `tampers_with_tests`: a candidate's own runs (the reward's and the existing tests, which
  apply no other candidate's change) found it changing how the tests run or report:
  pytest's report forged, its internals replaced, a plugin of its code, an exit status or
  summary pytest did not give (reports.read_referee). A peer run applies its author's
  tests too: what it finds is not the candidate's alone, and counts against none.
"""

from __future__ import annotations

from grading.execution.matrix import ERROR, FAIL, MISSING, PASS, REFUSED, TIMEOUT, Matrix
from grading.execution.plan import EXISTING, PEER, REWARD

NOT_PASSED = (FAIL, ERROR, TIMEOUT, MISSING)


def flaky(matrix: Matrix) -> dict[str, str]:
    """{candidate: why} for each candidate whose reward verdict does not reproduce."""
    found = {}
    machines = failing_for_every_passing(matrix)
    for candidate, passed in matrix.passed.items():
        run = matrix.run_of(candidate, REWARD)
        if run is None or run.outcome.status not in (PASS, FAIL):
            continue
        if passed and run.outcome.status == FAIL:
            failing = sorted(t for t, s in run.outcome.tests.items() if s != PASS)
            if failing and set(failing) <= machines:
                continue
            found[candidate] = ("the reward passed it; its reward tests fail here"
                                + (f": {', '.join(t for t in failing if t not in machines)}" if failing else ""))
        elif not passed and run.outcome.status == PASS:
            found[candidate] = "the reward failed it; its reward tests pass here"
    return found


def failing_for_every_passing(matrix: Matrix) -> set[str]:
    """The reward tests that no passing candidate passes here, when two or more ran them."""
    outcomes = [run.outcome for candidate, passed in matrix.passed.items() if passed
                for run in [matrix.run_of(candidate, REWARD)]
                if run is not None and run.outcome.status in (PASS, FAIL)]
    if len(outcomes) < 2:
        return set()
    tests = set().union(*(outcome.tests for outcome in outcomes))
    return {t for t in tests if all(outcome.tests.get(t, MISSING) in NOT_PASSED for outcome in outcomes)}


def breaks_tests(matrix: Matrix) -> dict[str, list[tuple[str, str]]]:
    """{passing candidate: [(suite, test), ...]}: the tests it fails that most of the
    other passing candidates pass, for each candidate that fails any."""
    passing = [c for c, passed in matrix.passed.items() if passed]
    suites = [s for s in matrix.suites() if s == EXISTING or s.startswith(f"{PEER}:")]
    already = set(matrix.tests(REWARD)) | set(matrix.tests(EXISTING))
    found: dict[str, list[tuple[str, str]]] = {}
    for suite in suites:
        tests = matrix.tests(suite)
        if suite != EXISTING:
            tests = [t for t in tests if t not in already]
        for test in tests:
            status = {c: matrix.status(c, suite, test) for c in passing}
            for candidate in passing:
                if status[candidate] not in NOT_PASSED:
                    continue
                others = [s for c, s in status.items()
                          if c != candidate and s is not None and s != REFUSED]
                if others and others.count(PASS) > len(others) / 2:
                    found.setdefault(candidate, []).append((suite, test))
    return found


def tampers_with_tests(matrix: Matrix) -> dict[str, list[str]]:
    """{candidate: ["suite: what", ...]} for each candidate whose own runs found it tampering
    with the test runner, each finding once."""
    found: dict[str, list[str]] = {}
    for candidate in matrix.passed:
        for suite in (REWARD, EXISTING):
            run = matrix.run_of(candidate, suite)
            if run is not None and run.outcome.tampering:
                found.setdefault(candidate, []).extend(f"{suite}: {what}" for what in run.outcome.tampering)
    return {candidate: list(dict.fromkeys(whats)) for candidate, whats in found.items()}
