"""Cancelling a grading run: queued gradings are cancelled, running ones finish but are never
retried or queued again, and neither a worker nor the sweep takes a cancelled one up."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.cases import GraderError
from grading.graders.heuristic import HeuristicGrader
from tests.workers.conftest import make_batch
from webapp.grading.selectors import batch_grading_status
from webapp.grading.services import grading_launch, grading_run_cancel, gradings_sweep, panel_refresh
from webapp.grading.worker import gradings_process
from webapp.models import Grading, GradingRun
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db

QUEUED, RUNNING, DONE, CANCELLED = (Grading.Status.QUEUED, Grading.Status.RUNNING, Grading.Status.DONE,
                                    Grading.Status.CANCELLED)
CANCELS_MIDWAY = "tests.webapp.grading.test_cancel:CancelsMidway"


class CancelsMidway(HeuristicGrader):
    """Cancels the run it grades for while grading, as a researcher would from the panel, then
    grades (`then="grade"`) or fails as a busy backend does (`then="busy"`)."""

    def __init__(self, *, canceller: str, then: str):
        self.canceller, self.then = canceller, then

    def rank(self, group):
        from django.contrib.auth.models import User

        run = GradingRun.objects.get(gradings__group__group_id=group.group_id, gradings__status=RUNNING)
        grading_run_cancel(run=run, user=User.objects.get(username=self.canceller))
        if self.then == "busy":
            raise GraderError("backend busy", permanent=False)
        return super().rank(group)


@pytest.fixture
def sent(monkeypatch):
    """The grading ids sent to the broker, instead of a broker."""
    ids = []
    monkeypatch.setattr("webapp.work.enqueue", lambda work, pks, queue, **kw: ids.extend(pks))
    return ids


def test_cancelling_a_run_cancels_its_queued_gradings_at_once(tmp_path, sent, researcher):
    batch = make_batch(tmp_path, "b", 3)
    run = grading_launch(batch=batch, grader="heuristic").run
    assert grading_run_cancel(run=run, user=researcher) == 3
    run.refresh_from_db()
    assert run.cancelled_by == researcher and run.cancelled_at is not None
    assert set(run.gradings.values_list("status", "error")) == {(CANCELLED, "cancelled by rita")}
    assert not run.gradings.filter(finished_at=None).exists()
    [status] = batch_grading_status(batch, viewer=UNRESTRICTED)
    assert status.state == "cancelled" and status.counts[CANCELLED] == 3 and not status.active


def test_a_second_cancel_changes_nothing_and_keeps_who_cancelled(tmp_path, sent, researcher, django_user_model):
    batch = make_batch(tmp_path, "b", 2)
    run = grading_launch(batch=batch, grader="heuristic").run
    grading_run_cancel(run=run, user=researcher)
    first = GradingRun.objects.get(pk=run.pk).cancelled_at
    other = django_user_model.objects.create_user("ruth")
    assert grading_run_cancel(run=run, user=other) == 0
    run.refresh_from_db()
    assert (run.cancelled_by, run.cancelled_at) == (researcher, first)


def test_a_worker_claims_no_cancelled_grading(tmp_path, sent, researcher):
    batch = make_batch(tmp_path, "b", 3)
    run = grading_launch(batch=batch, grader="heuristic").run
    grading_run_cancel(run=run, user=researcher)
    processed = gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    assert processed.claimed == [] and not run.gradings.exclude(status=CANCELLED).exists()
    assert not run.gradings.filter(attempts__gt=0).exists()


def test_the_sweep_never_sends_a_cancelled_grading_again(tmp_path, sent, researcher,
                                                          django_capture_on_commit_callbacks):
    batch = make_batch(tmp_path, "b", 3)
    with django_capture_on_commit_callbacks(execute=True):
        run = grading_launch(batch=batch, grader="heuristic").run
    assert len(sent) == 3
    grading_run_cancel(run=run, user=researcher)
    # Unsent and long overdue: what the sweep would send if these were still queued.
    run.gradings.update(sent_at=None)
    sweep = gradings_sweep(resend_after=0)
    assert sweep.sent == 0 and len(sent) == 3


def test_a_running_grading_whose_worker_is_lost_is_cancelled_not_queued_again(tmp_path, sent, researcher):
    batch = make_batch(tmp_path, "b", 2)
    run = grading_launch(batch=batch, grader="heuristic").run
    lost = run.gradings.order_by("pk").first()
    past = timezone.now() - timedelta(minutes=5)
    run.gradings.filter(pk=lost.pk).update(status=RUNNING, claim_token="gone", attempts=1, lease_expires_at=past)
    assert grading_run_cancel(run=run, user=researcher) == 1  # the queued one; the running one is left to finish
    assert run.gradings.get(pk=lost.pk).status == RUNNING
    [status] = batch_grading_status(batch, viewer=UNRESTRICTED)
    assert status.state == "cancelling" and status.active
    sweep = gradings_sweep()
    lost.refresh_from_db()
    assert (sweep.requeued, lost.status, lost.claim_token) == (0, CANCELLED, "gone")
    assert lost.error == "its run was cancelled and its attempt 1 lost its worker" and lost.lease_expires_at is None
    assert batch_grading_status(batch, viewer=UNRESTRICTED)[0].state == "cancelled"


def test_a_grading_running_when_its_run_is_cancelled_finishes_and_keeps_its_ranking(tmp_path, sent, researcher):
    batch = make_batch(tmp_path, "b", 1)
    run = grading_launch(batch=batch, grader=CANCELS_MIDWAY, config={"canceller": "rita", "then": "grade"}).run
    processed = gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    grading = run.gradings.get()
    assert processed.done == [grading.pk] and grading.status == DONE and grading.tiers
    assert batch_grading_status(batch, viewer=UNRESTRICTED)[0].state == "cancelled"


def test_a_transient_failure_after_the_cancel_is_cancelled_not_retried(tmp_path, sent, researcher,
                                                                       django_capture_on_commit_callbacks):
    batch = make_batch(tmp_path, "b", 1)
    run = grading_launch(batch=batch, grader=CANCELS_MIDWAY, config={"canceller": "rita", "then": "busy"}).run
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        processed = gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    grading = run.gradings.get()
    assert processed.cancelled == [grading.pk] and processed.retrying == []
    assert grading.status == CANCELLED
    assert grading.error == "its run was cancelled and its attempt 1 failed: backend busy"
    assert sent == []


# --- the panel ------------------------------------------------------------------------


def test_a_researcher_cancels_a_run_from_the_panel(client, tmp_path, sent, researcher):
    batch = make_batch(tmp_path, "b", 2)
    run = grading_launch(batch=batch, grader="heuristic").run
    panel_refresh(batch.pk)  # what the panel's worker does once the launch commits
    client.force_login(researcher)
    panel = client.get(reverse("grading_panel", args=[batch.pk])).content.decode()
    assert f'name="run" value="{run.pk}"' in panel and "Cancel run" in panel
    response = client.post(reverse("grading_cancel", args=[batch.pk]), {"run": run.pk}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and f"Cancelled run #{run.pk}: 2 queued gradings will not be graded." in body
    assert 'class="run-state run-state-cancelled">cancelled</span>' in body
    assert "Cancelled by rita at" in body and "2 gradings not graded" in body
    assert "Cancel run" not in body and 'hx-trigger="every 2s"' not in body
    again = client.post(reverse("grading_cancel", args=[batch.pk]), {"run": run.pk}, HTTP_HX_REQUEST="true")
    assert f"Run #{run.pk} was already cancelled." in again.content.decode()


def test_only_researchers_cancel_and_only_runs_of_that_batch(client, tmp_path, sent, researcher, annotator):
    batch = make_batch(tmp_path, "b", 1)
    other = make_batch(tmp_path, "c", 1)
    run = grading_launch(batch=batch, grader="heuristic").run
    url = reverse("grading_cancel", args=[batch.pk])
    client.force_login(annotator)
    assert "Cancel run" not in client.get(reverse("grading_panel", args=[batch.pk])).content.decode()
    assert client.post(url, {"run": run.pk}).status_code == 403
    client.force_login(researcher)
    assert client.post(reverse("grading_cancel", args=[other.pk]), {"run": run.pk}).status_code == 404
    bad = client.post(url, {"run": "x"})
    assert bad.status_code == 400 and bad.content.decode() == "run: Enter a whole number."
    assert not run.gradings.filter(status=CANCELLED).exists()
