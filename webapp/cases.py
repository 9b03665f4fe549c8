"""Groups as a grader is given them (grading.cases.GroupCase), read from the database: the one
builder, for the worker, the grading page, the SFT export and the evaluation command alike.

A group's trajectories come in trajectory id order: the order the agentic grader's seeded
labels are drawn from, so that an SFT example shows the model what the worker showed it.
Each group comes with its execution evidence (webapp/evidence), or the reason it has none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.conf import settings
from django.db.models import Q

from grading.cases import GroupCase, TrajectoryCase
from grading.execution.matrix import Matrix
from webapp.models import Group, GroupEvidence, Trajectory, Transcript

# (pk, group pk, trajectory id, passed, reward, patch, metrics[, tests]): what `cases` reads of a
# trajectory, JSON columns decoded.
# Groups whose task names its code: a repository at a commit, or a snapshot.
NAMES_CODEBASE = (Q(repo__gt="") & Q(base_commit__gt="")) | Q(task_extra__has_key="snapshot")
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
    groups = list(groups)
    evidence = execution_evidence([pk for pk, *_ in groups])
    return {pk: GroupCase(group_id=group_id, statement=statement, repo=repo, trajectories=tuple(members[pk]),
                          execution=evidence[pk][0], no_execution=evidence[pk][1])
            for pk, group_id, statement, repo in groups}


def execution_evidence(group_pks: Iterable[int]) -> dict[int, tuple[Matrix | None, str]]:
    """(matrix, "") per group pk whose evidence pass is done, else (None, why there is none)."""
    pks = list(group_pks)
    rows = {pk: row for pk, *row in GroupEvidence.objects.filter(group_id__in=pks).values_list(*EVIDENCE_COLUMNS)}
    missing = [pk for pk in pks if pk not in rows]
    named = set(Group.objects.filter(NAMES_CODEBASE, pk__in=missing).values_list("pk", flat=True)
                if missing and settings.GAGAR_CODEBASES else ())
    return {pk: evidence_of(rows.get(pk), names_codebase=pk in named) for pk in pks}


# What `evidence_of` reads of a GroupEvidence row, after its pk.
EVIDENCE_COLUMNS = ("pk", "status", "reason", "error", "matrix")


def evidence_of(row, *, names_codebase: bool) -> tuple[Matrix | None, str]:
    """(matrix, "") from a done pass's row (EVIDENCE_COLUMNS less the pk), else (None, why there is
    none); `row` None for a group that has had no pass, whose task `names_codebase` or not."""
    if row is None:
        if not settings.GAGAR_CODEBASES:
            return None, "no codebase store is configured (GAGAR_CODEBASES)"
        if not names_codebase:
            return None, "the task names no codebase (task.repo and task.base_commit, or task.snapshot)"
        return None, "not gathered yet: it is, when the group is graded"
    status, reason, error, matrix = row
    if status == GroupEvidence.Status.DONE and matrix is not None:
        return Matrix.from_dict(matrix), ""
    if status == GroupEvidence.Status.NONE:
        return None, reason
    if status == GroupEvidence.Status.FAILED:
        return None, f"the evidence pass failed: {error}"
    return None, "it is being gathered"
