"""The audit dashboard's figures through a real worker: a grading run's completion queues the
recompute of the figures it stales, and the sweep sends it again when its message was lost."""

import pytest
from django.utils import timezone

from tests.django_fixtures import make_user
from tests.webapp.annotationdata import save
from tests.workers.conftest import make_batch, wait_until
from webapp.audit import figures
from webapp.audit.refresh import request
from webapp.derived import AUDIT_FIGURES, sweep_derived
from webapp.grading.services import grading_launch
from webapp.models import AuditFigures, Grading
from webapp.rankings import UNRESTRICTED
from webapp.roles import ANNOTATOR

pytestmark = pytest.mark.django_db(transaction=True)


def finished(run):
    return lambda: not run.gradings.exclude(status__in=[Grading.Status.DONE, Grading.Status.FAILED]).exists()


def settled() -> bool:
    """Every stored part computed and no recompute pending."""
    return not AuditFigures.objects.filter(payload=None).exists() and not AuditFigures.objects.exclude(
        requested_at=None).exists()


def test_a_grading_runs_completion_leads_to_fresh_figures(tmp_path, filesystem_broker, workers):
    batch = make_batch(tmp_path, "dash", 6)
    workers(filesystem_broker)
    first = grading_launch(batch=batch, grader="heuristic")
    wait_until(finished(first.run), timeout=30, message="first run")
    annotator = make_user("anna", ANNOTATOR)
    for group in batch.groups.filter(label="mixed").order_by("pk")[:3]:
        save(group, annotator, [[t] for t in group.trajectories.filter(passed=True).order_by("-trajectory_id")
                                .values_list("trajectory_id", flat=True)])
    versions = figures.grader_versions(batch)
    # the first view queues every part
    shown = figures.dashboard(batch, versions, all_versions=versions, viewer=UNRESTRICTED)
    assert shown.computing and not shown.versions
    wait_until(settled, timeout=30, message=str(list(AuditFigures.objects.values_list("key", "requested_at"))))
    shown = figures.dashboard(batch, versions, all_versions=versions, viewer=UNRESTRICTED)
    assert shown.computing == [] and shown.updating is None and shown.versions[0].ranking.graded == 6
    computed_at = dict(AuditFigures.objects.values_list("key", "computed_at"))

    again = grading_launch(batch=batch, grader="heuristic", regrade=True)  # no page view from here on
    wait_until(finished(again.run), timeout=30, message="second run")
    wait_until(lambda: settled() and all(AuditFigures.objects.get(key=key).computed_at > at
                                         for key, at in computed_at.items() if ":gradings:" in key),
               timeout=30, message="the worker's recompute after the run")
    shown = figures.dashboard(batch, versions, all_versions=versions, viewer=UNRESTRICTED)
    assert shown.updating is None and shown.computing == []
    assert shown.versions[0].ranking.failure.n == 12  # both runs' gradings counted
    assert shown.versions[0].ranking == figures.ranking_figures(batch, [versions[0].version])[versions[0].version]


def test_the_sweep_sends_the_recompute_again_when_its_message_was_lost(tmp_path, filesystem_broker, workers):
    batch = make_batch(tmp_path, "lost", 3)
    first = grading_launch(batch=batch, grader="heuristic")
    from webapp.grading.worker import gradings_process

    gradings_process(grading_ids=list(first.run.gradings.values_list("pk", flat=True)))  # here, no worker yet
    version = figures.grader_versions(batch)[0].version
    request([("gradings", batch.pk, version)], stored=set())  # its message: sent into a broker no worker reads yet...
    AuditFigures.objects.update(requested_at=timezone.now() - timezone.timedelta(minutes=2))
    for path in (tmp_path / "broker" / "queue").iterdir():  # ...and lost
        path.unlink()
    workers(filesystem_broker)
    assert sweep_derived(AUDIT_FIGURES) == 1
    wait_until(settled, timeout=30, message="the recompute the sweep sent")
    assert AuditFigures.objects.get(kind="gradings").payload["graded"] == 3
