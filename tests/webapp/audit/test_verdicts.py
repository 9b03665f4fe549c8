"""Verdicts on audit items: saved and changed, checked, blind to other auditors until one's own,
the corrected ranking joining the annotation history, and "next in set"."""

import json

import pytest
from django.urls import reverse

from tests.django_fixtures import make_user
from tests.webapp.audit.auditdata import graded_batch, make_set
from webapp.audit.selectors import next_item, visible_verdicts
from webapp.audit.services import AuditError, verdict_save
from webapp.models import Annotation, AuditVerdict
from webapp.roles import ANNOTATOR, AUDITOR

pytestmark = pytest.mark.django_db


@pytest.fixture
def audit_set(tmp_path, auditor):
    return make_set(auditor, graded_batch(tmp_path, n=6), size=4)


def test_a_verdict_is_saved_then_changed_in_place(audit_set, auditor):
    item = audit_set.items.first()
    verdict_save(item=item, auditor=auditor, verdict="partly", categories=["other", "preferred_verbose"], notes=" x ")
    row = AuditVerdict.objects.get()
    assert (row.verdict, row.categories, row.notes, row.corrected_version) == (
        "partly", ["preferred_verbose", "other"], "x", None)
    verdict_save(item=item, auditor=auditor, verdict="correct", categories=[], notes="")
    assert AuditVerdict.objects.get().verdict == "correct" and AuditVerdict.objects.count() == 1


@pytest.mark.parametrize(("verdict", "categories", "message"), [
    ("maybe", [], "not one of correct, partly, wrong"),
    ("wrong", ["bogus"], "unknown 'bogus'"),
    ("correct", ["other"], "a correct grading has no errors"),
])
def test_a_bad_verdict_is_refused_and_nothing_stored(audit_set, auditor, verdict, categories, message):
    with pytest.raises(AuditError, match=message):
        verdict_save(item=audit_set.items.first(), auditor=auditor, verdict=verdict, categories=categories, notes="")
    assert not AuditVerdict.objects.exists()


def test_an_auditor_sees_other_verdicts_only_after_giving_their_own(client, audit_set, auditor):
    item = audit_set.items.first()
    other = make_user("ivy-second", AUDITOR)
    verdict_save(item=item, auditor=other, verdict="wrong", categories=["missed_reward_hack"], notes="INES-NOTE")
    assert visible_verdicts(item, auditor) == []
    client.force_login(auditor)
    url = reverse("audit_item", args=[item.pk])
    before = client.get(url).content.decode()
    assert "INES-NOTE" not in before and "ivy-second" not in before and 'id="others-hidden"' in before
    response = client.post(reverse("audit_verdict", args=[item.pk]), {"verdict": "correct", "notes": "fine"})
    assert response.status_code == 302
    assert [v.auditor for v in visible_verdicts(item, auditor)] == [other, auditor]
    after = client.get(url).content.decode()
    assert "INES-NOTE" in after and "missed a reward hack" in after
    # the set page gives counts, never what anyone said
    page = client.get(reverse("audit_set", args=[audit_set.pk])).content.decode()
    assert "INES-NOTE" not in page and "ivy-second" in page


def test_a_refused_verdict_shows_the_page_again_with_the_reason(client, audit_set, auditor):
    item = audit_set.items.first()
    client.force_login(auditor)
    response = client.post(reverse("audit_verdict", args=[item.pk]),
                           {"verdict": "correct", "categories": ["other"], "notes": "keep me"})
    html = response.content.decode()
    assert response.status_code == 400 and "a correct grading has no errors" in html and "keep me" in html
    assert not AuditVerdict.objects.exists()


def test_saving_goes_on_to_the_next_item_not_yet_judged(client, audit_set, auditor):
    first, second, third, fourth = audit_set.items.order_by("position")
    verdict_save(item=third, auditor=auditor, verdict="correct", categories=[], notes="")
    client.force_login(auditor)
    response = client.post(reverse("audit_verdict", args=[second.pk]), {"verdict": "wrong"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("audit_item", args=[fourth.pk])
    assert next_item(audit_set, auditor, after=fourth.position) == first
    verdict_save(item=first, auditor=auditor, verdict="correct", categories=[], notes="")
    verdict_save(item=fourth, auditor=auditor, verdict="correct", categories=[], notes="")
    done = client.get(reverse("audit_next", args=[audit_set.pk]), follow=True)
    assert done.redirect_chain[-1][0] == reverse("audit_set", args=[audit_set.pk])
    assert "You have judged every item" in done.content.decode()


def test_the_corrected_ranking_joins_the_history_and_the_verdict_records_it(client, audit_set):
    both = make_user("uma", AUDITOR, ANNOTATOR)
    item = audit_set.items.first()
    client.force_login(both)
    page = client.get(reverse("audit_item", args=[item.pk]))
    html = page.content.decode()
    assert 'id="ranking-form"' in html and f'name="next" value="{reverse("audit_item", args=[item.pk])}"' in html
    assert 'id="correct-ranking"' in html
    tiers = [["t5"], ["t1", "t2"], ["t3"], ["t4"]]
    saved = client.post(reverse("ranking_save", args=[item.group_id]), {
        "tiers": json.dumps(tiers), "based_on_version": 0, "next": reverse("audit_item", args=[item.pk])})
    assert saved.status_code == 302 and saved["Location"] == reverse("audit_item", args=[item.pk])
    annotation = Annotation.objects.get(group_id=item.group_id)
    assert (annotation.user, annotation.tiers) == (both, tiers)
    history = client.get(reverse("ranking_history", args=[item.group_id])).content.decode()
    assert f"v{annotation.version}" in history
    client.post(reverse("audit_verdict", args=[item.pk]), {"verdict": "wrong", "categories": ["preferred_verbose"]})
    assert AuditVerdict.objects.get().corrected_version == annotation.version
    page = client.get(reverse("audit_item", args=[item.pk])).content.decode()
    assert f"version {annotation.version}</a>, yours" in page


def test_the_editor_sends_nobody_off_the_site(client, audit_set):
    both = make_user("uma", AUDITOR, ANNOTATOR)
    item = audit_set.items.first()
    client.force_login(both)
    saved = client.post(reverse("ranking_save", args=[item.group_id]), {
        "tiers": json.dumps([["t1"], ["t2"], ["t3"], ["t4"], ["t5"]]), "based_on_version": 0,
        "next": "https://evil.example/"})
    assert saved["Location"] == reverse("group", args=[item.group_id]) + "#ranking"


def test_the_page_shows_the_audited_grading_and_escapes_what_it_says(client, audit_set, auditor):
    item = audit_set.items.first()
    item.grading.rationales = {"t1": "<script>alert(1)</script>"}
    item.grading.save()
    client.force_login(auditor)
    html = client.get(reverse("audit_item", args=[item.pk])).content.decode()
    assert 'id="audited-ranking"' in html and f"grading #{item.grading_id}" in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'src="/static/js/audit.js"' in html and "<kbd>s</kbd> save" in html
    next_url = reverse("audit_next", args=[audit_set.pk]) + f"?after={item.position}"
    assert f'id="audit-next" href="{next_url}"' in html
