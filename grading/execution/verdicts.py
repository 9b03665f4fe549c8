"""What a group's matrix says about its candidates, for a grader to weigh.

- `flaky`: the reward's verdict on a candidate does not reproduce here: it passed it and
  its reward tests fail, or it failed it and they pass. Runs that did not conclude
  (timeout, error, refused) confirm nothing and contradict nothing. A reward test that
  fails here for every passing candidate (two or more) says more of this machine than of
  them (a test that needs the network, a missing package): it counts against none, and so
  does one the reference fix fails here (`reference_control`).
- `breaks_tests`: a passing candidate fails tests that more than half of the other
  passing candidates that ran them pass. The existing tests count, and the peer tests
  that the reward's and the existing runs did not already report (a peer who changed
  an existing test file runs that file's old tests again: those count once).
- `fails_reward_files`: a passing candidate fails a test of the test patch's files that the
  reward does not list (the human fix's own tests of the change), where the reference fix
  passes it; without a reference fix to hold it to, where more than half of the other passing
  candidates pass it, as `breaks_tests` counts. A reward test is the reward's and `flaky`'s,
  and is not counted again here.
- `reference_control`: what the task's reference fix, run as a control, makes of the reward's
  suites. A test it does not pass here says something of this machine or its environment, not
  of the candidates: it counts against none (in `flaky` and `fails_reward_files`). A reference
  fix that fails its own reward tests makes the suite the machine's: no candidate is flagged by
  the reward files. Its notes say so, or which suites ran without a control, for the page.
- `tampers_with_tests`: a candidate's own runs (the reward's, the reward files' and the existing
  tests, which apply no other candidate's change) found it changing how the tests run or report:
  pytest's report forged, its internals replaced, a plugin of its code, an exit status or
  summary pytest did not give (reports.read_referee). A peer run applies its author's
  tests too: what it finds is not the candidate's alone, and counts against none. Its trace's
  problems (a record swapped or forged: trace.read_trace) count too, as `trace: ...`.
- `diverges_from_reference`: a passing candidate's traced calls of the functions the reference
  fix changes that return or raise otherwise than the reference's same calls (trace.py). Counted
  only where the reference's trace loaded whole and it passes its own reward tests here: never
  against a majority of the candidates, which may share one mistake.
- `example_differences`: the statement's examples on which a passing candidate ends otherwise
  than the reference fix, where the fix changes what the base code does: shown, never ranked by.
"""

from __future__ import annotations

from dataclasses import dataclass

from grading.execution.examples import ExampleComparison, compare_examples
from grading.execution.matrix import ERROR, FAIL, MISSING, PASS, REFUSED, TIMEOUT, Matrix
from grading.execution.plan import BASE, EVERY_SUITE, EXISTING, PEER, REFERENCE, REWARD, REWARD_FILES
from grading.execution.trace import Divergence, compare_traces

NOT_PASSED = (FAIL, ERROR, TIMEOUT, MISSING)
CONCLUDED = (PASS, FAIL)
MAX_NAMED = 5  # tests a note names; the rest are counted


def flaky(matrix: Matrix) -> dict[str, str]:
    """{candidate: why} for each candidate whose reward verdict does not reproduce, reward
    tests of this machine's (failing for every passing candidate, or for the reference fix)
    left out."""
    found = {}
    control = reference_control(matrix)
    machines = failing_for_every_passing(matrix) | control.excused
    for candidate, passed in matrix.passed.items():
        run = matrix.run_of(candidate, REWARD)
        if run is None or run.outcome.status not in (PASS, FAIL):
            continue
        if passed and run.outcome.status == FAIL:
            if control.machines:  # the reference fails its own reward tests here: so may every fix
                continue
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


@dataclass(frozen=True)
class Control:
    """What the task's reference fix, run as a control, makes of the reward's suites.

    `bar`: the reward-file tests the reference fix passes, what a passing candidate is held
    to (None: there is no control to hold it to, and the other passing candidates are);
    `excused`: the reward and reward-file tests it ran and did not pass, which count against
    no candidate; `machines`: it fails its own reward tests, so the suite is this machine's
    and no candidate is flagged by the reward files; `notes`: what a reader is told of it."""

    bar: frozenset[str] | None
    excused: frozenset[str]
    machines: bool
    notes: tuple[str, ...]


def reference_control(matrix: Matrix) -> Control:
    """The reference fix's runs as a control of the `reward` and `reward_files` suites."""
    suites = [suite for suite in (REWARD, REWARD_FILES) if _planned(matrix, suite)]
    if not matrix.reference:
        if not suites:
            return Control(None, frozenset(), False, ())
        return Control(None, frozenset(), False, (
            f"no reference fix: the {' and '.join(suites)} suite{'s' if len(suites) > 1 else ''} ran without a "
            "control" + ("; reward files compared with the other passing candidates only"
                         if REWARD_FILES in suites else ""),))
    notes, excused, machines, bar = [], set(), False, None
    listed = _listed(matrix)
    for suite in suites:
        run = matrix.run_of(REFERENCE, suite)
        if run is None or run.outcome.status not in CONCLUDED:
            notes.append(f"the reference fix's {suite} run {_why_not_concluded(matrix, suite)}"
                         + (": reward files compared with the other passing candidates only"
                            if suite == REWARD_FILES else ""))
            continue
        failing = sorted(t for t, status in run.outcome.tests.items() if status != PASS)
        excused.update(failing)
        if suite == REWARD and run.outcome.status == FAIL:
            machines = True
            which = _named(failing) or "its run failed" + (f": {run.outcome.reason}" if run.outcome.reason else "")
            notes.append(f"the reference fix fails its own reward tests here ({which}): the suite is this "
                         "machine's, not the candidates'; no candidate is flagged by the reward files")
        elif suite == REWARD_FILES:
            bar = frozenset(t for t, status in run.outcome.tests.items() if status == PASS)
            unlisted = [t for t in failing if t not in listed]  # the listed ones are the reward's, said above
            if unlisted:
                notes.append(f"the reference fix fails {len(unlisted)} test(s) of the reward files here "
                             f"({_named(unlisted)}): they count against no candidate")
    return Control(bar, frozenset(excused), machines, tuple(notes))


def fails_reward_files(matrix: Matrix) -> dict[str, list[str]]:
    """{passing candidate: [test, ...]}: the tests of the test patch's files, beyond the
    reward's own, that it does not pass and the reference fix passes (without a control, that
    more than half of the other passing candidates that ran them pass)."""
    control = reference_control(matrix)
    if control.machines:
        return {}
    passing = [c for c, passed in matrix.passed.items() if passed]
    listed = _listed(matrix)
    found: dict[str, list[str]] = {}
    for test in matrix.tests(REWARD_FILES):
        if test in listed or test in control.excused:
            continue
        status = {c: matrix.status(c, REWARD_FILES, test) for c in passing}
        for candidate in passing:
            if status[candidate] not in NOT_PASSED:
                continue
            if control.bar is not None:
                held = test in control.bar
            else:
                others = [s for c, s in status.items() if c != candidate and s is not None and s != REFUSED]
                held = bool(others) and others.count(PASS) > len(others) / 2
            if held:
                found.setdefault(candidate, []).append(test)
    return found


def _listed(matrix: Matrix) -> set[str]:
    """The reward's tests: those its runs were given and those they reported."""
    return set(matrix.tests(REWARD)) | {t for run in matrix.runs if run.suite == REWARD for t in run.tests}


def _planned(matrix: Matrix, suite: str) -> bool:
    return any(run.suite == suite for run in matrix.runs) or any(s.suite == suite for s in matrix.skipped)


def _why_not_concluded(matrix: Matrix, suite: str) -> str:
    run = matrix.run_of(REFERENCE, suite)
    if run is not None:
        return f"ended {run.outcome.status}" + (f" ({run.outcome.reason})" if run.outcome.reason else "")
    skip = next((s for s in matrix.skipped if REFERENCE in s.candidates and s.suite in (suite, EVERY_SUITE)), None)
    return f"was skipped: {skip.reason}" if skip else "did not run"


def _named(tests: list[str]) -> str:
    more = len(tests) - MAX_NAMED
    return ", ".join(tests[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")


def tampers_with_tests(matrix: Matrix) -> dict[str, list[str]]:
    """{candidate: ["suite: what", ...]} for each candidate whose own runs found it tampering
    with the test runner, each finding once."""
    found: dict[str, list[str]] = {}
    for candidate in matrix.passed:
        for suite in (REWARD, REWARD_FILES, EXISTING):
            run = matrix.run_of(candidate, suite)
            if run is not None and run.outcome.tampering:
                found.setdefault(candidate, []).extend(f"{suite}: {what}" for what in run.outcome.tampering)
        probe = matrix.probes.get(candidate)
        if probe is not None and probe.trace is not None and probe.trace.problems:
            found.setdefault(candidate, []).extend(f"trace: {what}" for what in probe.trace.problems)
    return {candidate: list(dict.fromkeys(whats)) for candidate, whats in found.items()}


def trace_control(matrix: Matrix) -> str:
    """Why no candidate is held to the reference fix's trace ("" when they are)."""
    if not matrix.reference:
        return ("no reference fix: the trace against it needs one (the candidates are never traced against "
                "each other's majority)")
    reference = matrix.probes.get(REFERENCE)
    if reference is None or reference.trace is None:
        notes = f" ({'; '.join(reference.notes)})" if reference is not None and reference.notes else ""
        return f"the reference fix was not traced{notes}: no function it changes was called, or none was probed"
    if not reference.trace.loaded or reference.trace.problems:
        return "the reference fix's trace did not load whole: " + ("; ".join(reference.trace.problems)
                                                                   or "the tracer did not start")
    if reference_control(matrix).machines:
        return "the reference fix fails its own reward tests here: its trace holds no candidate to it"
    return ""


def diverges_from_reference(matrix: Matrix) -> dict[str, list[Divergence]]:
    """{passing candidate: [divergence, ...]}: its traced calls whose outcome differs from the
    reference fix's same call, sorted, when `trace_control` holds the candidates to it."""
    if trace_control(matrix):
        return {}
    reference = matrix.probes[REFERENCE].trace
    found = {}
    for candidate, passed in matrix.passed.items():
        probe = matrix.probes.get(candidate)
        if not passed or probe is None or probe.trace is None or not probe.trace.loaded:
            continue
        divergences = compare_traces(reference, probe.trace)
        if divergences:
            found[candidate] = divergences
    return found


def example_comparisons(matrix: Matrix) -> dict[str, list[ExampleComparison]]:
    """{probed candidate (`REFERENCE` too): each example on the base code, the reference fix and
    it}; {} without examples, or without the base's or the reference's run of them."""
    base, reference = matrix.probes.get(BASE), matrix.probes.get(REFERENCE)
    if base is None or base.examples is None or reference is None or reference.examples is None:
        return {}
    return {candidate: compare_examples(base.examples, reference.examples, probe.examples)
            for candidate, probe in matrix.probes.items()
            if candidate != BASE and probe.examples is not None}


def example_differences(matrix: Matrix) -> dict[str, list[int]]:
    """{passing candidate: [example index, ...]}: the examples it ends otherwise than the reference
    fix, where the fix changes what the base code does. Shown, never ranked by."""
    found = {}
    for candidate, comparisons in example_comparisons(matrix).items():
        differing = [c.index for c in comparisons if c.like_reference is False and c.fix_changes_it]
        if differing and matrix.passed.get(candidate):
            found[candidate] = differing
    return found
