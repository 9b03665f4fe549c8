"""Data for the annotation tests: review groups, gradings written directly, saves."""

from django.utils import timezone

from tests.webapp.reviewdata import import_batch, records
from webapp.advantages.selectors import advantage_rows
from webapp.annotation.services import ranking_save
from webapp.models import AnnotationPolicy, Grading, GradingRun, Group, Trajectory
from webapp.rankings import UNRESTRICTED

# task-N groups from reviewdata.records: t1..t5 pass, t6 fails
PASSING = ("t1", "t2", "t3", "t4", "t5")
GRADER_TIERS = [["t1"], ["t2", "t3"], ["t4"], ["t5"]]


def review_batch(tmp_path, n=1, name="review"):
    recs = [r for i in range(1, n + 1) for r in records(f"task-{i}")]
    return import_batch(tmp_path, recs, name=name)


def grade(group, tiers=GRADER_TIERS, *, status=Grading.Status.DONE, confidence=None, flags=None, rationales=None):
    """A finished (or failed) grading of `group`, as a worker would have left it."""
    now = timezone.now()
    run = GradingRun.objects.create(batch=group.batch, grader="heuristic", queue="cpu", grader_version="test-1")
    done = status == Grading.Status.DONE
    return Grading.objects.create(
        run=run, group=group, status=status, queued_at=now, finished_at=now, grader_version="test-1",
        tiers=tiers if done else None, confidence=confidence,
        flags=flags if flags is not None else ({"t4": ["debug_leftovers"]} if done else {}),
        rationales=rationales if rationales is not None else ({"t1": "smallest clean fix"} if done else {}),
    )


def save(group, user, tiers, based_on=0, **fields):
    return ranking_save(group=group, user=user, tiers=tiers, flags=fields.get("flags", {}),
                        rationales=fields.get("rationales", {}), group_rationale=fields.get("group_rationale", ""),
                        based_on_version=based_on, grading_id=fields.get("grading_id"),
                        verdicts=fields.get("verdicts"))


def set_policy(batch, **fields):
    policy = AnnotationPolicy.of(batch)
    for name, value in fields.items():
        setattr(policy, name, value)
    policy.save()
    batch.refresh_from_db()
    return policy


def pk_of(group: Group, tid: str) -> int:
    return Trajectory.objects.get(group=group, trajectory_id=tid).pk


def group_rows(group: Group) -> dict[str, dict]:
    """The advantage rows of `group`'s trajectories under its batch's config, by trajectory id."""
    return {r["trajectory_id"]: r for r in advantage_rows(group.batch, viewer=UNRESTRICTED)
            if r["group_id"] == group.group_id}
