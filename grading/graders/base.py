"""The one grader interface: rank the passing trajectories of a group.

A grader sees a GroupView (plain data, no database) and returns a Grade: the
passing trajectory ids best first in tiers (a tier holds tied ids), a
rationale per id, flags from `grading.rankings.FLAGS`, optional scores, and what
it cost. Graders are registered by name and loaded by dotted path, so the core
imports without the optional extras a backend needs.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from grading.loading import LoadError, load_object
from grading.rankings import ranks_from_tiers

GRADERS = {
    "heuristic": "grading.graders.heuristic:HeuristicGrader",
    "agentic": "grading.graders.agentic:AgenticGrader",
    "hybrid": "grading.graders.hybrid:HybridGrader",
}


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
class TrajectoryView:
    trajectory_id: str
    passed: bool
    reward: float
    patch: str
    messages: list[dict] | None = None
    tests: dict | None = None
    metrics: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class GroupView:
    group_id: str
    statement: str
    trajectories: tuple[TrajectoryView, ...]
    repo: str = ""

    @property
    def passing(self) -> tuple[TrajectoryView, ...]:
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


class Grader:
    """Base class: subclasses set `name` and `version` and implement `rank`."""

    name: str = ""
    version: str = ""
    uses_messages: bool = True
    """Whether `rank` reads transcripts (TrajectoryView.messages). A grader that sets it
    False may get None there: the worker then does not load them from the database."""
    uses_tests: bool = True
    """Whether `rank` reads test evidence (TrajectoryView.tests); False as above."""

    def rank(self, group: GroupView) -> Grade:
        raise NotImplementedError

    def rank_many(self, groups: Sequence[GroupView]) -> list[Grade | GraderError]:
        """Grade several groups; one group's failure does not stop the others."""
        results: list[Grade | GraderError] = []
        for group in groups:
            try:
                results.append(self.rank(group))
            except GraderError as error:
                results.append(error)
        return results


def load_grader(name: str, /, **config) -> Grader:
    """A grader by registered name or `module:Class` path, imported only now."""
    try:
        grader_class = load_object(name, GRADERS, what="grader")
    except LoadError as error:
        raise GraderError(str(error), permanent=True) from error
    return grader_class(**config)
