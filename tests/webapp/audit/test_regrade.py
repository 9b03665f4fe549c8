"""Re-grading the gold set: a launch restricted to the batch's gold groups, by auditors and
researchers, that a real worker grades and whose version then shows on the drift chart."""

import pytest
from django.core.cache import cache
from django.urls import reverse

from grading.graders import heuristic
from tests.django_fixtures import make_user
from tests.webapp.annotationdata import GRADER_TIERS, review_batch, save
from tests.workers.conftest import wait_until
from webapp.audit import figures
from webapp.audit.services import gold_mark
from webapp.models import Grading, Group
from webapp.roles import ANNOTATOR, AUDITOR, RESEARCHER


def gold_batch(tmp_path, annotator, auditor, *, n=4, gold=2):
    batch = review_batch(tmp_path, n=n, name="regrade")
    groups = list(Group.objects.filter(batch=batch).order_by("pk"))
    for group in groups[:gold]:
        save(group, annotator, GRADER_TIERS)
        gold_mark(group=group, user=auditor)
    return batch, groups


@pytest.mark.django_db
@pytest.mark.parametrize("role", [AUDITOR, RESEARCHER])
def test_the_launch_grades_only_the_gold_groups(tmp_path, client, annotator, auditor, role):
    batch, groups = gold_batch(tmp_path, annotator, auditor)
    client.force_login(make_user(f"user-{role}", role))
    response = client.post(reverse("gold_regrade", args=[batch.pk]), {"grader": "heuristic"})
    assert response.status_code == 302 and response["Location"] == reverse("grading_panel", args=[batch.pk])
    assert set(Grading.objects.values_list("group_id", flat=True)) == {groups[0].pk, groups[1].pk}
    assert Grading.objects.get(group=groups[0]).run.created_by.username == f"user-{role}"


@pytest.mark.django_db
def test_a_batch_without_gold_or_a_bad_grader_is_refused_and_annotators_get_403(tmp_path, client, annotator,
                                                                                  auditor):
    batch, _ = gold_batch(tmp_path, annotator, auditor, gold=0)
    client.force_login(auditor)
    response = client.post(reverse("gold_regrade", args=[batch.pk]), {"grader": "heuristic"})
    assert response.status_code == 400 and "no gold group to re-grade" in response.content.decode()
    response = client.post(reverse("gold_regrade", args=[batch.pk]), {"grader": "nope"})
    assert response.status_code == 400 and "grader:" in response.content.decode()
    client.force_login(make_user("anna2", ANNOTATOR))
    assert client.post(reverse("gold_regrade", args=[batch.pk]), {"grader": "heuristic"}).status_code == 403
    assert not Grading.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_regrades_the_gold_set_and_its_version_joins_the_drift_chart(
        tmp_path, client, annotator, auditor, redis_broker, workers):
    cache.clear()
    batch, groups = gold_batch(tmp_path, annotator, auditor, n=5, gold=3)
    workers(redis_broker)
    client.force_login(auditor)
    assert 'id="table-drift"' in client.get(reverse("audit_dashboard"), {"batch": batch.pk}).content.decode()
    assert client.post(reverse("gold_regrade", args=[batch.pk]), {"grader": "heuristic"}).status_code == 302
    panel = client.get(reverse("grading_panel", args=[batch.pk])).content.decode()
    assert "heuristic" in panel and "of 3" in panel  # the panel's progress of the run

    wait_until(lambda: Grading.objects.filter(status=Grading.Status.DONE).count() == 3, timeout=30,
               message=str(list(Grading.objects.values_list("status", "error"))))
    assert set(Grading.objects.values_list("group_id", flat=True)) == {g.pk for g in groups[:3]}
    drift = figures.gold_drift(batch, figures.grader_versions(batch))
    assert [p.version.version for p in drift.points] == [heuristic.VERSION]
    assert drift.points[0].agreement.kendall_tau.n == 3
    html = client.get(reverse("audit_dashboard"), {"batch": batch.pk}).content.decode()
    assert f"<title>{heuristic.VERSION}\n" in html.split('id="section-drift"')[1]
