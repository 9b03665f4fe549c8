"""Audit sets: drawn reproducibly under a seed, quotas met exactly, sized for a target width,
and features computed from what the database holds."""

import pytest
from django.urls import reverse

from grading.audit_sampling import size_for_interval
from tests.webapp.annotationdata import grade, review_batch
from tests.webapp.audit.auditdata import graded_batch, make_set
from webapp.audit.sampling import Source, SourceError, audit_plan, features, population
from webapp.models import AuditItem, AuditSet, Group

pytestmark = pytest.mark.django_db


def drawn(audit_set):
    return list(AuditItem.objects.filter(audit_set=audit_set).order_by("position")
                .values_list("group__group_id", flat=True))


def test_a_stratified_set_is_the_same_under_the_same_seed_and_meets_its_quotas(tmp_path, auditor):
    batch = graded_batch(tmp_path, n=12)
    first = make_set(auditor, batch, "first", size=6, stratify_by="confidence", seed=7)
    again = make_set(auditor, batch, "again", size=6, stratify_by="confidence", seed=7)
    assert drawn(first) == drawn(again) and len(drawn(first)) == 6 == first.size
    # confidence (i % 4) / 4 + i / 1000: four strata of three groups, quotas 2, 2, 1, 1 (largest remainder)
    quotas = first.design["quotas"]
    assert [(q["population"], q["quota"]) for q in quotas] == [(3, 2), (3, 2), (3, 1), (3, 1)]
    confidence = {g.group_id: g.gradings.get().confidence for g in Group.objects.filter(batch=batch)}
    for q in quotas:
        inside = [gid for gid in drawn(first) if q["low"] <= confidence[gid] <= q["high"]]
        assert len(inside) == q["quota"], q
    others = {tuple(drawn(make_set(auditor, batch, f"seed-{seed}", size=6, stratify_by="confidence", seed=seed)))
              for seed in range(1, 5)}
    assert len(others | {tuple(drawn(first))}) > 1  # the seed matters
    assert first.design["stratify_by"] == "confidence" and first.design["seed"] == 7
    assert set(first.items.values_list("grading__run__batch", flat=True)) == {batch.pk}


def test_the_size_comes_from_a_target_width(tmp_path):
    batch = graded_batch(tmp_path, n=12)
    plan = audit_plan(source=Source(batch=batch), stratify_by=None, bins=4, seed=0, size=None, half_width=0.2,
                      confidence=0.95)
    assert plan.size == size_for_interval(0.2, confidence=0.95, population=12) == 9
    assert [(s.label, s.population, s.quota) for s in plan.strata] == [("all", 12, 9)]
    assert plan.design()["half_width"] == 0.2 and plan.design()["population"] == 12


def test_the_form_previews_the_quotas_then_makes_the_set(client, tmp_path, auditor):
    batch = graded_batch(tmp_path, n=12)
    client.force_login(auditor)
    form = {"name": "by width", "source": f"batch:{batch.pk}", "stratify_by": "confidence", "bins": 4, "seed": 1,
            "half_width": "0.2", "confidence": "0.95"}
    preview = client.post(reverse("audit_sets"), {**form, "action": "preview"})
    assert preview.status_code == 200 and not AuditSet.objects.exists()
    html = preview.content.decode()
    assert "9 of 12 graded groups" in html and 'id="audit-quotas"' in html
    made = client.post(reverse("audit_sets"), {**form, "action": "create"})
    audit_set = AuditSet.objects.get()
    assert made.status_code == 302 and made["Location"] == reverse("audit_set", args=[audit_set.pk])
    assert audit_set.size == 9 == audit_set.items.count() and audit_set.created_by == auditor
    assert sum(q["quota"] for q in audit_set.design["quotas"]) == 9
    page = client.get(made["Location"]).content.decode()
    assert "You: <b>0</b> of 9" in page and "stratified by grader confidence" in page


def test_the_form_refuses_bad_input_and_says_why(client, tmp_path, auditor):
    batch = graded_batch(tmp_path, n=3)
    client.force_login(auditor)
    base = {"name": "x", "source": f"batch:{batch.pk}", "bins": 4, "seed": 0, "confidence": "0.95",
            "action": "create"}
    both = client.post(reverse("audit_sets"), {**base, "size": 2, "half_width": "0.1"})
    assert both.status_code == 400 and "give either a size or a target ± half-width, not both" in both.content.decode()
    neither = client.post(reverse("audit_sets"), {**base}).content.decode()
    assert "give a size, or a target ± half-width to size the set for" in neither and "not both" not in neither
    too_many = client.post(reverse("audit_sets"), {**base, "size": 5})
    assert too_many.status_code == 400 and "only 3 candidates" in too_many.content.decode()
    unknown = client.post(reverse("audit_sets"), {**base, "size": 1, "source": "run:999"})
    assert unknown.status_code == 400 and "run:999" in unknown.content.decode()
    make_set(auditor, batch, "x", size=1)
    taken = client.post(reverse("audit_sets"), {**base, "size": 1})
    assert taken.status_code == 400 and "exists already" in taken.content.decode()
    assert AuditSet.objects.count() == 1


def test_a_batch_without_gradings_has_nothing_to_audit(tmp_path):
    batch = review_batch(tmp_path, n=2)
    with pytest.raises(SourceError, match="no finished gradings"):
        audit_plan(source=Source(batch=batch), stratify_by=None, bins=4, seed=0, size=1, half_width=None,
                   confidence=0.95)


def test_a_run_audits_its_own_gradings_and_a_batch_the_latest(tmp_path, auditor):
    batch = review_batch(tmp_path, n=2)
    groups = list(Group.objects.filter(batch=batch).order_by("pk"))
    old = [grade(g) for g in groups]
    new = [grade(g, [["t5"], ["t1"], ["t2"], ["t3"], ["t4"]]) for g in groups]
    by_run = population(Source(batch=batch, run=old[0].run))
    assert [a.grading_pk for a in by_run] == [old[0].pk]
    assert [a.grading_pk for a in population(Source(batch=batch))] == [g.pk for g in new]
    assert Source.parse(f"run:{old[0].run.pk}").run == old[0].run


def test_features_come_from_scores_other_graders_patches_and_pass_rates(tmp_path):
    batch = review_batch(tmp_path, n=1)
    group = Group.objects.get(batch=batch)
    mine = grade(group, [["t1"], ["t2", "t3"], ["t4"], ["t5"]], confidence=0.8)
    mine.scores = {"t1": 0.9, "t2": 0.5, "t3": 0.5, "t4": 0.1, "t5": 0.0}
    mine.save()
    audited = population(Source(batch=batch))
    assert features(audited, "margin") == {group.pk: pytest.approx(0.4)}
    assert features(audited, "confidence") == {group.pk: 0.8}
    assert features(audited, "pass_rate") == {group.pk: pytest.approx(5 / 6)}
    assert features(audited, "disagreement") == {group.pk: None}  # one grader only
    other = grade(group, [["t5"], ["t4"], ["t3", "t2"], ["t1"]])
    other.run.grader = "tiny-cpu"
    other.run.save()
    audited = population(Source(run=mine.run, batch=batch))
    assert features(audited, "disagreement") == {group.pk: pytest.approx(2.0)}  # exactly reversed: tau -1
    # changed lines of the passing patches: t1, t2, t3 two each, t4 (a debug print) three, t5 (a stray script) four
    assert features(audited, "patch_size") == {group.pk: pytest.approx((2 + 2 + 2 + 3 + 4) / 5)}
