"""Who may audit: auditors and researchers; an annotator without the auditor role gets 403, and
so does an auditor who also annotates, on the figures and reports over rankings that the
visibility rule hides from them."""

import pytest
from django.urls import reverse

from tests.django_fixtures import make_user
from tests.webapp.annotationdata import set_policy
from tests.webapp.audit.auditdata import graded_batch, make_set
from webapp.audit.services import verdict_save
from webapp.models import AuditVerdict
from webapp.roles import ANNOTATOR, AUDITOR, RESEARCHER

pytestmark = pytest.mark.django_db


@pytest.fixture
def urls(tmp_path, auditor):
    audit_set = make_set(auditor, graded_batch(tmp_path, n=3), size=2)
    item = audit_set.items.first()
    return {
        "get": [reverse("audit_sets"), reverse("audit_set", args=[audit_set.pk]),
                reverse("audit_item", args=[item.pk]), reverse("gold_list", args=[audit_set.batch_id])],
        "post": [reverse("audit_verdict", args=[item.pk]), reverse("gold_mark", args=[item.group_id]),
                 reverse("gold_unmark", args=[item.group_id]), reverse("audit_sets")],
    }


@pytest.mark.parametrize("role", [AUDITOR, RESEARCHER])
def test_auditors_and_researchers_audit(client, urls, role):
    client.force_login(make_user(f"user-{role}", role))
    for url in urls["get"]:
        assert client.get(url).status_code == 200, url
    # empty posts: the form's or the service's refusal, never a 403
    assert [client.post(url).status_code for url in urls["post"]] == [400, 400, 302, 400]


def test_an_annotator_without_the_auditor_role_gets_403(client, urls):
    client.force_login(make_user("anna", ANNOTATOR))
    for url in urls["get"]:
        assert client.get(url).status_code == 403, url
    for url in urls["post"]:
        assert client.post(url, {"verdict": "correct"}).status_code == 403, url
    assert not AuditVerdict.objects.exists()


def test_an_auditor_who_annotates_still_sees_the_figures_and_report_under_blind_review(client, tmp_path, auditor):
    """Auditors always see the grader (docs/annotation.md), annotating or not; an annotator who
    is not an auditor never reaches these pages (above)."""
    audit_set = make_set(auditor, graded_batch(tmp_path, n=3), size=2)
    uma = make_user("uma", AUDITOR, ANNOTATOR)
    for item in audit_set.items.all():  # both judged every item: the report is theirs to read
        for user in (uma, auditor):
            verdict_save(item=item, auditor=user, verdict="correct", categories=[], notes="")
    batch = {"batch": audit_set.batch_id}
    urls = [(reverse("audit_dashboard"), {}), (reverse("audit_dashboard"), batch),
            (reverse("audit_dashboard_csv", args=["cost"]), batch), (reverse("audit_dashboard_progress"), batch),
            (reverse("audit_report", args=[audit_set.pk]), {}), (reverse("audit_report_json", args=[audit_set.pk]), {})]
    set_policy(audit_set.batch, blind=True, overlap=2)
    for user in (uma, auditor):
        client.force_login(user)
        assert [client.get(url, query).status_code for url, query in urls] == [200] * 6, user
