"""What to run for one group: each candidate's patch against four suites of tests.

1. `reward`: the reward's own tests, on the candidate's patch with the task's test patch
   on top (the candidate's changes to the files the test patch touches are dropped first,
   as SWE-bench's harness resets them, and so are its changes to the test runner's
   configuration and its conftest.py files: the runner runs as the codebase has it). For
   every candidate, passing or not, so that a verdict that does not reproduce shows
   either way.
2. `reward_files`: every test of the files the test patch touches, whole files (the human
   fix's own tests beside the reward's listed ones), on each passing candidate's patch as
   the reward applies it.
3. `existing`: the codebase's tests of the modules the passing candidates touch, chosen by
   a rule (`selection.named_after_touched_modules` by default) and capped by the budget, on each
   passing candidate's code part (its test changes left out, so that an edited test
   cannot hide what the code breaks).
4. `peer:<author>`: the test files a candidate added or changed, on each passing
   candidate's code part; identical test parts are one suite, named after their first
   author. The author runs its own tests too: the majority that `verdicts.breaks_tests`
   counts needs every passing candidate's answer.

The task's reference fix, when it has one, runs `reward` and `reward_files` too, as a control:
under the candidate id `REFERENCE`, out of `Plan.passed`, so that no grader ranks it.

Beside the runs, probes (probes.py): the reference fix with the functions it changes traced
through the test patch's files (the reward's tests without one), then the base code (the
candidate id `BASE`) on the statement's examples alone, then each passing candidate as the
reward applies it, traced like the reference and on the examples. A probe speaks for every
candidate with the same key (`probe_key`). No reference fix: no trace, only the examples.

A run's key is a digest of the codebase, the applied patch, the selected tests and the
environment: two candidates with the same change share one run, and a run done once
(for this group or another) is never done again.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from grading.execution.environment import Environment
from grading.execution.examples import Example
from grading.execution.probes import probe_key
from grading.execution.selection import (
    PatchSplitError,
    file_patches,
    join_patches,
    machinery_paths,
    named_after_touched_modules,
    runnable_test_files,
    split_patch,
    without_files,
)
from grading.execution.trace import Target

REWARD, REWARD_FILES, EXISTING, PEER = "reward", "reward_files", "existing", "peer"
EVERY_SUITE = "*"
# The task's reference fix, run as a control beside the candidates. A trajectory id holds no
# control character (the rollout format refuses them, grading/jsonl.py), so no trajectory is
# ever this one; `plan_runs` refuses a candidate that claims it all the same.
REFERENCE = "\x1freference"
BASE = "\x1fbase"  # the base code, probed on the statement's examples: what the fix changes
PROBE = "probe"  # the suite a skipped probe is named by

ExistingTestsRule = Callable[[Sequence[str], Sequence[str]], list[str]]


@dataclass(frozen=True)
class Candidate:
    """One trajectory of the group: its id, its patch, and the reward's verdict on it."""

    id: str
    patch: str
    passed: bool


@dataclass(frozen=True)
class GroupBudget:
    """What one group may cost: `existing_test_files` of the codebase's tests at most,
    `runs` runs at most (the rest skipped, in plan order), and `seconds` of wall clock
    for all its runs together (`runner.run_planned` stops there)."""

    existing_test_files: int = 20
    runs: int = 200
    seconds: float = 1800.0

    def __post_init__(self) -> None:
        if self.existing_test_files < 0 or self.runs < 0:
            raise ValueError(f"a group's budget counts no fewer than 0 files and runs: {self}")
        if not (math.isfinite(self.seconds) and self.seconds > 0):
            raise ValueError(f"a group's budget of seconds must be above 0 and finite: {self}")


@dataclass(frozen=True)
class PlannedRun:
    """One run: `patch` applied to the codebase, then the test command on `tests`.
    `suite` is `reward`, `reward_files`, `existing` or `peer:<author>`; `candidates` are those
    the run speaks for (the same applied patch; `REFERENCE` for the task's reference fix);
    `key` identifies its outcome in any cache."""

    key: str
    suite: str
    candidates: tuple[str, ...]
    patch: str
    tests: tuple[str, ...]


@dataclass(frozen=True)
class PlannedProbe:
    """One probe: `patch` applied to the codebase, `tests` run with `targets` traced, then
    `examples`. `candidates`: those it speaks for (`REFERENCE`, `BASE`, or candidates with the
    same applied patch); `key`: its `probe_key`."""

    key: str
    candidates: tuple[str, ...]
    patch: str
    tests: tuple[str, ...]
    targets: tuple[Target, ...]
    examples: tuple[Example, ...]


@dataclass(frozen=True)
class Skipped:
    """Runs left out, and why: `suite` is the one skipped (`*`: every one)."""

    suite: str
    candidates: tuple[str, ...]
    reason: str

    def to_dict(self) -> dict:
        return {"suite": self.suite, "candidates": list(self.candidates), "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping) -> Skipped:
        return cls(str(data["suite"]), tuple(data["candidates"]), str(data["reason"]))


@dataclass(frozen=True)
class Plan:
    runs: tuple[PlannedRun, ...]
    skipped: tuple[Skipped, ...]
    passed: Mapping[str, bool]  # the reward's verdict, per candidate: never the reference fix
    probes: tuple[PlannedProbe, ...] = ()
    examples: tuple[Example, ...] = ()  # the statement's, as the probes run them


def run_key(codebase_id: str, patch: str, tests: Sequence[str], environment: Environment) -> str:
    """sha256 of (codebase, sha256 of the applied patch, the selected tests, environment)."""
    what = [codebase_id, hashlib.sha256(patch.encode()).hexdigest(), list(tests),
            environment.fingerprint]
    return hashlib.sha256(json.dumps(what, separators=(",", ":")).encode()).hexdigest()


def applied_patch(patch: str, test_patch: str) -> str:
    """`patch` as the reward applies it: its changes to the test patch's files and to the test
    runner's configuration dropped (SWE-bench's harness resets them), the test patch on top."""
    reset = [*(f.path for f in file_patches(test_patch)), *machinery_paths(patch)]
    return join_patches(without_files(patch, reset), test_patch)


def plan_runs(candidates: Sequence[Candidate], *, codebase_id: str,
              codebase_files: Sequence[str], environment: Environment,
              reward_tests: Sequence[str], test_patch: str = "", reference_patch: str | None = None,
              targets: Sequence[Target] = (), calling_tests: Sequence[str] = (),
              examples: Sequence[Example] = (), existing_tests_rule: ExistingTestsRule = named_after_touched_modules,
              budget: GroupBudget = GroupBudget()) -> Plan:
    """The runs of one group, best first: the passing candidates' reward runs, the
    reference fix's reward and reward-files runs, the passing candidates' reward-files runs,
    their existing tests, their peer tests, then the failing candidates' reward runs.

    `codebase_files` lists the codebase's files (for `existing_tests_rule`); no reward
    runs without `reward_tests`, no reward-files runs without a test file in `test_patch`.
    `reference_patch` is the task's own fix ("" or None: it has none); `targets`, the functions
    it changes (trace.traced_functions), are traced on it and on each passing candidate while
    the test patch's files and `calling_tests` (the codebase's test files that call them:
    trace.calling_tests) run, and `examples`, the statement's (examples.statement_examples),
    run on those and on the base code: `Plan.probes`. A candidate whose patch cannot be cut by
    file is skipped whole, and so is such a reference fix. Raises ValueError for repeated candidate ids or one that is
    `REFERENCE` or `BASE`, PatchSplitError for a test patch that cannot be cut by file."""
    ids = [c.id for c in candidates]
    if len(set(ids)) != len(ids):
        raise ValueError(f"candidate ids repeat: {sorted(i for i, n in Counter(ids).items() if n > 1)}")
    for reserved, what in ((REFERENCE, "the task's reference fix"), (BASE, "the base code")):
        if reserved in ids:
            raise ValueError(f"a candidate's id is {reserved!r}, which names {what}")
    reward_files = runnable_test_files(test_patch)
    skipped: list[Skipped] = []
    parts: dict[str, tuple[str, str]] = {}  # candidate -> (code part, test part)
    for c in candidates:
        try:
            parts[c.id] = split_patch(c.patch)
        except PatchSplitError as error:
            skipped.append(Skipped(EVERY_SUITE, (c.id,), str(error)))
    passing = [c for c in candidates if c.passed and c.id in parts]
    failing = [c for c in candidates if not c.passed and c.id in parts]
    reference: list[Candidate] = []  # the reference fix, run as the candidate REFERENCE
    if reference_patch:
        try:
            split_patch(reference_patch)
            reference = [Candidate(REFERENCE, reference_patch, True)]
        except PatchSplitError as error:
            skipped.append(Skipped(EVERY_SUITE, (REFERENCE,), f"the reference fix: {error}"))
    runs = _Runs(codebase_id, environment)

    def as_the_reward_applies(c: Candidate) -> str:
        return applied_patch(c.patch, test_patch)

    def add_reward_runs(group: list[Candidate]) -> None:
        if reward_tests:
            for c in group:
                runs.add(REWARD, c.id, as_the_reward_applies(c), reward_tests)

    def add_reward_files_runs(group: list[Candidate]) -> None:
        if reward_files:
            for c in group:
                runs.add(REWARD_FILES, c.id, as_the_reward_applies(c), reward_files)

    add_reward_runs(passing)
    add_reward_runs(reference)
    add_reward_files_runs(reference)
    add_reward_files_runs(passing)
    touched = Counter(f.path for c in passing for f in file_patches(parts[c.id][0]))
    existing = existing_tests_rule(sorted(touched, key=lambda path: (-touched[path], path)),
                                   codebase_files)
    if len(existing) > budget.existing_test_files:
        left_out = existing[budget.existing_test_files:]
        skipped.append(Skipped(EXISTING, tuple(c.id for c in passing),
                               f"{len(left_out)} existing test files over the group's budget of "
                               f"{budget.existing_test_files}: {', '.join(left_out)}"))
        existing = existing[:budget.existing_test_files]
    if existing:
        for c in passing:
            runs.add(EXISTING, c.id, parts[c.id][0], existing)
    first_author: dict[str, str] = {}  # test part -> the first candidate that wrote it
    for c in passing + failing:
        first_author.setdefault(parts[c.id][1], c.id)
    for test_part, author in first_author.items():
        selection = runnable_test_files(test_part)
        if selection:
            for c in passing:
                runs.add(f"{PEER}:{author}", c.id, join_patches(parts[c.id][0], test_part), selection)
    add_reward_runs(failing)

    planned = list(runs.runs.values())
    for run in planned[budget.runs:]:
        skipped.append(Skipped(run.suite, run.candidates,
                               f"over the group's budget of {budget.runs} runs"))
    traced = tuple(targets) if reference else ()
    probes = _Probes(codebase_id, environment)
    trace_tests = tuple(dict.fromkeys([*(reward_files or reward_tests), *calling_tests])) if traced else ()
    if reference and (traced or examples):
        probes.add(REFERENCE, as_the_reward_applies(reference[0]), trace_tests, traced, examples)
    if examples:
        probes.add(BASE, "", (), (), examples)
    if traced or examples:
        for c in passing:
            probes.add(c.id, as_the_reward_applies(c), trace_tests, traced, examples)
    return Plan(tuple(planned[:budget.runs]), tuple(skipped), {c.id: c.passed for c in candidates},
                tuple(probes.probes.values()), tuple(examples) if probes.probes else ())


class _Runs:
    """Planned runs, one per (suite, key), each naming every candidate it speaks for."""

    def __init__(self, codebase_id: str, environment: Environment) -> None:
        self.codebase_id = codebase_id
        self.environment = environment
        self.runs: dict[tuple[str, str], PlannedRun] = {}

    def add(self, suite: str, candidate: str, patch: str, tests: Sequence[str]) -> None:
        key = run_key(self.codebase_id, patch, tests, self.environment)
        run = self.runs.get((suite, key))
        candidates = (*run.candidates, candidate) if run else (candidate,)
        self.runs[suite, key] = PlannedRun(key, suite, candidates, patch, tuple(tests))


class _Probes:
    """Planned probes, one per key, each naming every candidate it speaks for."""

    def __init__(self, codebase_id: str, environment: Environment) -> None:
        self.codebase_id = codebase_id
        self.environment = environment
        self.probes: dict[str, PlannedProbe] = {}

    def add(self, candidate: str, patch: str, tests: Sequence[str], targets: Sequence[Target],
            examples: Sequence[Example]) -> None:
        key = probe_key(self.codebase_id, patch, self.environment, tests=tests, targets=targets, examples=examples)
        probe = self.probes.get(key)
        candidates = (*probe.candidates, candidate) if probe else (candidate,)
        self.probes[key] = PlannedProbe(key, candidates, patch, tuple(tests), tuple(targets), tuple(examples))
