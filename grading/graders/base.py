"""The one grader interface: rank the passing trajectories of a group.

A grader sees a GroupView (plain data, no database) and returns a Grade: the
passing trajectory ids best first in tiers (a tier holds tied ids), a
rationale per id, flags from a fixed vocabulary, optional scores, and what it
cost. Graders are registered by name and loaded by dotted path, so the core
imports without the optional extras a backend needs.
"""

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

FLAGS = (
    "reward_hacking",
    "edits_tests",
    "out_of_scope_changes",
    "debug_leftovers",
    "unnecessary_complexity",
    "incomplete",
    "other",
)

GRADERS = {
    "heuristic": "grading.graders.heuristic:HeuristicGrader",
    "agentic": "grading.graders.agentic:AgenticGrader",
}


class GraderError(Exception):
    """A grading that failed; `permanent` says whether retrying can help."""

    def __init__(self, message: str, *, permanent: bool):
        super().__init__(message)
        self.permanent = permanent


class InvalidRanking(ValueError):
    """A ranking that is not a permutation of the passing ids, or has bad flags."""


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


def ranks_from_tiers(tiers: Sequence[Sequence[str]]) -> dict[str, int]:
    ranks, position = {}, 1
    for tier in tiers:
        for trajectory_id in tier:
            ranks[trajectory_id] = position
        position += len(tier)
    return ranks


def validate_ranking(
    tiers: Sequence[Sequence[str]],
    passing_ids: Sequence[str],
    flags: Mapping[str, Sequence[str]] | None = None,
) -> tuple[tuple[str, ...], ...]:
    """Check that `tiers` rank every passing id exactly once; return them normalised.

    Raises InvalidRanking with a message a person (or a model's repair turn) can act on.
    """
    seen: list[str] = [t for tier in tiers for t in tier]
    expected = set(passing_ids)
    problems = []
    duplicates = sorted({t for t in seen if seen.count(t) > 1})
    if duplicates:
        problems.append(f"ranked more than once: {', '.join(duplicates)}")
    unknown = sorted(set(seen) - expected)
    if unknown:
        problems.append(f"not a passing trajectory of this group: {', '.join(unknown)}")
    missing = sorted(expected - set(seen))
    if missing:
        problems.append(f"passing but not ranked: {', '.join(missing)}")
    if any(len(tier) == 0 for tier in tiers):
        problems.append("a tier is empty")
    for trajectory_id, names in (flags or {}).items():
        if trajectory_id not in expected:
            problems.append(f"flags for an id that is not ranked: {trajectory_id}")
        bad = sorted(set(names) - set(FLAGS))
        if bad:
            problems.append(f"unknown flags for {trajectory_id}: {', '.join(bad)} "
                            f"(allowed: {', '.join(FLAGS)})")
    if problems:
        raise InvalidRanking("; ".join(problems))
    return tuple(tuple(tier) for tier in tiers)


def load_grader(name: str, **config) -> Grader:
    """A grader by registered name or `module:Class` path, imported only now."""
    target = GRADERS.get(name, name)
    module_name, _, class_name = target.partition(":")
    if not class_name:
        raise GraderError(
            f"unknown grader {name!r} (known: {', '.join(sorted(GRADERS))}, or module:Class)",
            permanent=True,
        )
    try:
        grader_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise GraderError(f"cannot load grader {name!r}: {error}", permanent=True) from error
    return grader_class(**config)
