"""What a grader is given and what it answers: the core's types, on its ground floor.

A grader is given a GroupCase (plain data, no database): the task's statement and
every trajectory of the group with its patch, test verdict and, when the grader
reads them, its transcript and test evidence; and the group's execution evidence, the
candidate x test matrix of its candidates' code run in the sandbox (grading/execution),
or why there is none; for a grader that reads it, the worker adds the candidates' code to
read and run (grading/code_access.py). It answers a Grade (the passing
trajectory ids best first in tiers, a tier holding tied ids) or raises a
GraderError. Graders, backends, the workspace and the app all import these from
here, and this module imports nothing of theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from grading.code_access import CodeAccess
from grading.execution.matrix import Matrix
from grading.rankings import ranks_from_tiers


class GraderError(Exception):
    """A grading that failed; `permanent` says whether retrying can help. A grader that
    got as far as running a model says what that cost (`usage`) and what it did
    (`transcript`), as a Grade does."""

    def __init__(self, message: str, *, permanent: bool, transcript=(), usage=None):
        super().__init__(message)
        self.permanent = permanent
        self.transcript: tuple[dict, ...] = tuple(transcript)
        self.usage: dict[str, int] = dict(usage or {})


@dataclass(frozen=True)
class TrajectoryCase:
    trajectory_id: str
    passed: bool
    reward: float
    patch: str
    messages: list[dict] | None = None
    tests: dict | None = None
    metrics: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class GroupCase:
    group_id: str
    statement: str
    trajectories: tuple[TrajectoryCase, ...]
    repo: str = ""
    execution: Matrix | None = None  # the execution evidence, keyed by trajectory id
    no_execution: str = ""  # why there is none, when `execution` is None
    # The candidates' code, given to a grader that `uses_code` for a group with execution evidence.
    code: CodeAccess | None = field(default=None, compare=False, repr=False)
    no_code: str = ""  # why there is none, when the group has execution evidence and `code` is None

    @property
    def passing(self) -> tuple[TrajectoryCase, ...]:
        return tuple(t for t in self.trajectories if t.passed)


@dataclass(frozen=True)
class Grade:
    tiers: tuple[tuple[str, ...], ...]
    rationales: Mapping[str, str]
    grader: str
    version: str
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    scores: Mapping[str, float] | None = None
    confidence: float | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    transcript: tuple[dict, ...] = ()

    def ranks(self) -> dict[str, int]:
        """Standard competition ranks: tied ids share a rank, the next tier skips (1, 2, 2, 4)."""
        return ranks_from_tiers(self.tiers)
