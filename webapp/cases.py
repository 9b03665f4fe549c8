"""Groups as a grader is given them (grading.cases.GroupCase), read from the database: the one
builder, for the worker, the grading page, the SFT export and the evaluation command alike.

A group's trajectories come in trajectory id order: the order the agentic grader's seeded
labels are drawn from, so that an SFT example shows the model what the worker showed it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from grading.cases import GroupCase, TrajectoryCase
from webapp.models import Group, Trajectory, Transcript

# (pk, group pk, trajectory id, passed, reward, patch, metrics[, tests]): what `cases` reads of a
# trajectory, JSON columns decoded.
TRAJECTORY_COLUMNS = ("pk", "group_id", "trajectory_id", "passed", "reward", "patch", "metrics")


def group_cases(group_pks: Iterable[int], *, messages: bool = False, tests: bool = False) -> dict[int, GroupCase]:
    """The groups `group_pks` by pk, with every trajectory; their transcripts and test evidence
    only when asked (a grader that reads them)."""
    pks = list(group_pks)
    groups = Group.objects.filter(pk__in=pks).values_list("pk", "group_id", "statement", "repo")
    columns = (*TRAJECTORY_COLUMNS, "tests") if tests else TRAJECTORY_COLUMNS
    rows = Trajectory.objects.filter(group_id__in=pks).order_by("group_id", "trajectory_id").values_list(*columns)
    return cases_from_rows(groups, rows, messages=messages)


def cases_from_rows(groups: Iterable[tuple[int, str, str, str]], rows: Iterable[tuple], *,
          messages: bool) -> dict[int, GroupCase]:
    """GroupCases by pk from `groups` (pk, group id, statement, repo) and their trajectories'
    `rows` (TRAJECTORY_COLUMNS, then tests if read), in the order the rows come."""
    rows = list(rows)
    transcripts = {}
    if messages:
        transcripts = dict(Transcript.objects.filter(trajectory_id__in=[r[0] for r in rows])
                           .values_list("trajectory_id", "messages"))
    members: dict[int, list[TrajectoryCase]] = defaultdict(list)
    for pk, group_pk, tid, passed, reward, patch, metrics, *rest in rows:
        members[group_pk].append(TrajectoryCase(
            trajectory_id=tid, passed=bool(passed), reward=reward, patch=patch, messages=transcripts.get(pk),
            tests=rest[0] if rest else None, metrics=metrics or {}))
    return {pk: GroupCase(group_id=group_id, statement=statement, repo=repo, trajectories=tuple(members[pk]))
            for pk, group_id, statement, repo in groups}
