"""The gold set: a group is marked once a human ranking is its final ranking, by an auditor or a
researcher, with the version verified; a batch lists its gold groups."""

import pytest
from django.urls import reverse

from tests.webapp.annotationdata import GRADER_TIERS, grade, review_batch, save
from tests.webapp.audit.auditdata import graded_batch, make_set
from webapp.audit.services import AuditError, gold_mark
from webapp.models import GoldGroup, Group

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(tmp_path):
    group = Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")
    grade(group)
    return group


def test_a_group_without_a_human_ranking_cannot_be_gold(group, auditor):
    with pytest.raises(AuditError, match="no human ranking to verify"):
        gold_mark(group=group, user=auditor)
    assert not GoldGroup.objects.exists()


def test_gold_records_the_human_version_and_the_list_shows_when_it_moved_on(client, group, annotator, auditor):
    first = save(group, annotator, GRADER_TIERS)
    client.force_login(auditor)
    response = client.post(reverse("gold_mark", args=[group.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("gold_list", args=[group.batch_id])
    gold = GoldGroup.objects.get()
    assert (gold.group, gold.annotation_version, gold.marked_by) == (group, first.version, auditor)
    listing = client.get(reverse("gold_list", args=[group.batch_id])).content.decode()
    assert "task-1" in listing and f"version {first.version}" in listing and "changed since" not in listing
    save(group, annotator, [["t5"], ["t1"], ["t2", "t3"], ["t4"]], based_on=first.version)
    assert "changed since" in client.get(reverse("gold_list", args=[group.batch_id])).content.decode()
    client.post(reverse("gold_unmark", args=[group.pk]))
    assert not GoldGroup.objects.exists()


def test_a_refused_mark_says_why(client, group, researcher):
    client.force_login(researcher)
    response = client.post(reverse("gold_mark", args=[group.pk]))
    assert response.status_code == 400 and "no human ranking to verify" in response.content.decode()


def test_the_auditors_page_offers_gold_once_a_human_ranking_decides(client, tmp_path, annotator, auditor):
    item = make_set(auditor, graded_batch(tmp_path, n=2, name="gold"), size=1).items.get()
    client.force_login(auditor)
    url = reverse("audit_item", args=[item.pk])
    assert 'id="gold-mark"' not in client.get(url).content.decode()
    human = save(item.group, annotator, GRADER_TIERS)
    assert f"Mark as gold: verify human version {human.version}" in client.get(url).content.decode()
    client.post(reverse("gold_mark", args=[item.group_id]), {"next": url})
    html = client.get(url).content.decode()
    assert 'class="badge gold-badge"' in html and 'id="gold-mark"' not in html
