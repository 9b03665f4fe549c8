"""The batch page's grading panel reads its figures and its progress as the panel's worker
stored them while they are current and nothing is queued or running; else it counts."""

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.webapp.runs.rundata import make_run
from webapp.grading.selectors import batch_grading_status, graded_share
from webapp.grading.services import panel_refresh
from webapp.models import Grading, GradingPanel
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db


def test_current_figures_give_the_progress_and_a_request_has_it_counted(client, researcher, tmp_path):
    batch, _ = make_run(tmp_path, "r", steps=1)[0]
    panel_refresh(batch.pk)
    mixed = batch.groups.filter(label="mixed").count()
    assert graded_share(batch) == {"mixed": mixed, "graded": mixed}
    # A change the figures were not told of (here, behind the services' back) does not show...
    Grading.objects.filter(run__batch=batch).update(status=Grading.Status.FAILED, error="a <b>bad</b> day")
    [run] = batch_grading_status(batch, viewer=UNRESTRICTED)
    assert run.counts["done"] == mixed and run.failures == []
    # ...until the figures are requested again, as every write that changes them does: counted then.
    GradingPanel.objects.filter(batch=batch).update(requested_at=timezone.now())
    [run] = batch_grading_status(batch, viewer=UNRESTRICTED)
    assert run.counts["failed"] == mixed and run.failures[0]["error"] == "a <b>bad</b> day"
    assert graded_share(batch) == {"mixed": mixed, "graded": 0}
    client.force_login(researcher)
    body = client.get(reverse("grading_panel", args=[batch.pk])).content.decode()
    assert "a &lt;b&gt;bad&lt;/b&gt; day" in body and "Every grading failed" in body
