"""Data for the audit tests: a batch of review groups, each graded directly as a worker would."""

from tests.webapp.annotationdata import GRADER_TIERS, grade, review_batch
from webapp.audit.sampling import Source, audit_plan
from webapp.audit.services import audit_set_create
from webapp.models import Group


def graded_batch(tmp_path, n=12, name="audit"):
    """`n` mixed groups task-1..task-n, each graded once with confidence (i % 4) / 4 + i / 1000."""
    batch = review_batch(tmp_path, n=n, name=name)
    for group in Group.objects.filter(batch=batch).order_by("pk"):
        i = int(group.group_id.split("-")[1])
        grade(group, GRADER_TIERS, confidence=(i % 4) / 4 + i / 1000)
    return batch


def make_set(user, batch, name="set", *, size=5, stratify_by=None, seed=0, bins=4):
    plan = audit_plan(source=Source(batch=batch), stratify_by=stratify_by, bins=bins, seed=seed, size=size,
                      half_width=None, confidence=0.95)
    return audit_set_create(name=name, plan=plan, user=user)
