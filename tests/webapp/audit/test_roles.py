"""Who may audit: auditors and researchers; an annotator without the auditor role gets 403."""

import pytest
from django.urls import reverse

from tests.django_fixtures import make_user
from tests.webapp.audit.auditdata import graded_batch, make_set
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
