"""Reads of a group's execution evidence, for its page: the matrix as a table of tests by
candidate (the task's reference fix first, set apart: the control, never ranked), the verdicts,
the calls that end otherwise than with the reference fix, the statement's examples on the base
code, the reference fix and each candidate, and one run's log and the command that runs it again."""

from __future__ import annotations

from dataclasses import dataclass, field

from grading.execution import (
    BASE,
    REFERENCE,
    Matrix,
    MatrixRun,
    breaks_tests,
    diverges_from_reference,
    example_differences,
    fails_reward_files,
    flaky,
    reference_control,
    tampers_with_tests,
    trace_control,
)
from grading.execution.examples import ExampleOutcome
from grading.execution.trace import Divergence
from webapp.cases import EVIDENCE_COLUMNS, evidence_of
from webapp.models import Group, GroupEvidence

MAX_ROWS = 300  # tests shown; the rest are counted
MAX_CANDIDATES = 60  # columns shown
REFERENCE_NAME = "reference fix"  # how the page names the candidate REFERENCE
BASE_NAME = "base code"  # and the base code, probed on the statement's examples


@dataclass(frozen=True)
class Column:
    """A column of the matrix: a candidate by its trajectory id and the reward's verdict, or the
    task's reference fix (`reference`), which ran as the control."""

    tid: str
    passed: bool
    reference: bool = False

    @property
    def name(self) -> str:
        return REFERENCE_NAME if self.reference else self.tid


@dataclass(frozen=True)
class Cell:
    status: str  # pass, fail, error, timeout, missing, refused; "" where the candidate has no run
    key: str  # the run's key ("" for none): its log and command
    reference: bool = False  # the reference fix's cell, set apart


@dataclass(frozen=True)
class Row:
    suite: str
    test: str
    cells: list[Cell]


@dataclass(frozen=True)
class ExampleRow:
    """One of the statement's examples: its source, then its output on each of the panel's
    `example_columns` ("" where it did not run there); `differs`: per column, whether that
    candidate ends it otherwise than the reference fix where the fix changes it."""

    number: int
    source: str
    outputs: list[str]
    differs: list[bool]

    @property
    def cells(self) -> list[tuple[str, bool]]:
        return list(zip(self.outputs, self.differs, strict=True))


@dataclass
class Panel:
    """What the group page shows of the evidence: `matrix` None with `reason` when there is none."""

    status: str  # a GroupEvidence status, or "" when the group has had no pass
    reason: str
    columns: list[Column] = field(default_factory=list)  # the reference fix's first, when it ran
    candidates: int = 0  # the candidates' columns among them
    reference: bool = False  # the reference fix ran: its column is the first
    rows: list[Row] = field(default_factory=list)
    more_rows: int = 0
    more_candidates: int = 0
    breaks: list[tuple[str, list[str]]] = field(default_factory=list)  # (trajectory id, "suite: test" ...)
    reward_files: list[tuple[str, list[str]]] = field(default_factory=list)  # (trajectory id, tests)
    reward_files_bar: str = ""  # what those tests pass by: the reference fix, or most other candidates
    control: list[str] = field(default_factory=list)  # what the reference fix's runs say of the suites
    flaky: list[tuple[str, str]] = field(default_factory=list)
    tampering: list[tuple[str, list[str]]] = field(default_factory=list)  # (trajectory id, what its runs saw)
    divergences: list[tuple[str, list[Divergence]]] = field(default_factory=list)  # (trajectory id, calls)
    trace_note: str = ""  # why no candidate is held to the reference fix's trace ("" when they are)
    example_columns: list[str] = field(default_factory=list)  # the base code, the reference fix, candidates
    examples: list[ExampleRow] = field(default_factory=list)
    example_differences: list[tuple[str, list[int]]] = field(default_factory=list)  # (trajectory id, numbers)
    skipped: list[str] = field(default_factory=list)
    codebase: str = ""
    lowered: str = ""  # what the deployment lowered of the task's limits per run
    matrix: Matrix | None = None
    whole: bool = False  # every test and candidate: the evidence page, not the group page's panel


def evidence_panel(group: Group, *, whole: bool = False) -> Panel:
    """The group's execution evidence as the group page shows it (the first MAX_ROWS tests on
    MAX_CANDIDATES candidates), or `whole`, as its own page does."""
    try:
        found = group.evidence  # the group page reads it with the group
    except GroupEvidence.DoesNotExist:
        found = None
    row = None if found is None else tuple(getattr(found, name) for name in EVIDENCE_COLUMNS[1:])
    names = bool(group.repo and group.base_commit) or "snapshot" in (group.task_extra or {})
    matrix, reason = evidence_of(row, names_codebase=names)
    panel = Panel(status=found.status if found else "", reason=reason, codebase=found.codebase if found else "",
                  lowered=found.lowered if found else "", matrix=matrix, whole=whole)
    if matrix is None:
        return panel
    ran = [tid for tid in matrix.passed if any(matrix.run_of(tid, suite) for suite in matrix.suites())]
    ran.sort(key=lambda tid: (not matrix.passed[tid], tid))
    most_candidates, most_rows = (None, None) if whole else (MAX_CANDIDATES, MAX_ROWS)
    panel.more_candidates = len(ran[most_candidates:]) if most_candidates else 0
    ran = ran[:most_candidates]
    panel.candidates = len(ran)
    panel.columns = [Column(tid, matrix.passed[tid]) for tid in ran]
    if any(matrix.run_of(REFERENCE, suite) for suite in matrix.suites()):
        panel.reference = True
        panel.columns.insert(0, Column(REFERENCE, True, reference=True))
        ran.insert(0, REFERENCE)
    everything = [(suite, test) for suite in matrix.suites() for test in matrix.tests(suite)]
    panel.more_rows = len(everything[most_rows:]) if most_rows else 0
    for suite, test in everything[:most_rows]:
        cells = []
        for tid in ran:
            run = matrix.run_of(tid, suite)
            cells.append(Cell(matrix.status(tid, suite, test) or "", run.key if run else "", tid == REFERENCE))
        panel.rows.append(Row(suite, test, cells))
    panel.breaks = [(tid, [f"{suite}: {test}" for suite, test in cells])
                    for tid, cells in sorted(breaks_tests(matrix).items())]
    control = reference_control(matrix)
    panel.control = list(control.notes)
    panel.reward_files = sorted(fails_reward_files(matrix).items())
    panel.reward_files_bar = ("the reference fix passes" if control.bar is not None
                              else "most other passing candidates pass")
    panel.flaky = sorted(flaky(matrix).items())
    panel.tampering = sorted(tampers_with_tests(matrix).items())
    panel.divergences = sorted(diverges_from_reference(matrix).items())
    panel.trace_note = trace_control(matrix)
    _examples(panel, matrix, [tid for tid in ran if tid != REFERENCE])
    panel.skipped = [f"{s.suite} for {', '.join(named(c) for c in s.candidates[:5])}"
                     f"{' ...' if len(s.candidates) > 5 else ''}: {s.reason}" for s in matrix.skipped]
    return panel


def _examples(panel: Panel, matrix: Matrix, candidates: list[str]) -> None:
    """The statement's examples by the base code, the reference fix and `candidates` (those of
    them that ran them), and which candidates end one otherwise than the reference fix."""
    if not matrix.examples:
        return
    columns = [tid for tid in (BASE, REFERENCE, *candidates) if tid in matrix.probes
               and matrix.probes[tid].examples is not None]
    differing = example_differences(matrix)
    panel.example_columns = [named(tid) for tid in columns]
    for index, example in enumerate(matrix.examples):
        outcomes = [matrix.probes[tid].examples.outcomes for tid in columns]
        panel.examples.append(ExampleRow(
            index + 1, example.source,
            [_shown(runs[index] if index < len(runs) else None) for runs in outcomes],
            [index in differing.get(tid, ()) for tid in columns]))
    panel.example_differences = [(tid, [i + 1 for i in indices]) for tid, indices in sorted(differing.items())]


def _shown(outcome: ExampleOutcome | None) -> str:
    if outcome is None:
        return ""
    ended = "" if outcome.status == "exit" else f"[{outcome.status}]"
    return "\n".join(part for part in (outcome.output.rstrip("\n"), ended) if part) or "(no output)"


def named(tid: str) -> str:
    """A candidate as the page names it: its trajectory id, the reference fix or the base code."""
    return REFERENCE_NAME if tid == REFERENCE else BASE_NAME if tid == BASE else tid


def evidence_run(panel: Panel, key: str) -> MatrixRun | None:
    """The run of the panel's matrix with `key`, with its outcome; None when it has none."""
    if panel.matrix is None:
        return None
    return next((run for run in panel.matrix.runs if run.key == key), None)
