"""The grading page of a heuristic grading: its ranking, each trajectory's score, flags and
reasons, and every term of every penalty, recomputed by the grader version that ranked."""

import pytest
from django.urls import reverse

from tests.webapp.review.test_safety import audit
from tests.webapp.reviewdata import hostile_records, import_batch
from webapp.grading.services import grading_launch
from webapp.grading.worker import gradings_process
from webapp.models import Grading

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    # gradings_process below is the worker's own code, run in the test's process
    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)


def graded(batch, group):
    run = grading_launch(batch=batch, grader="heuristic").run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    return Grading.objects.get(run=run, group=group)


def test_it_shows_the_ranking_scores_reasons_and_penalty_terms(client, researcher, sample_batch):
    group = sample_batch.groups.filter(label="mixed").order_by("group_id").first()
    grading = graded(sample_batch, group)
    client.force_login(researcher)
    response = client.get(reverse("grading_detail", args=[grading.pk]))
    html = response.content.decode()
    verdicts = response.context["verdicts"]
    assert [v["trajectory"] for v in verdicts] == [t for tier in grading.tiers for t in tier]
    assert [v["score"] for v in verdicts] == [grading.scores[v["trajectory"]] for v in verdicts]
    assert all(v["rationale"] == grading.rationales[v["trajectory"]] for v in verdicts)
    assert any(v["terms"] for v in verdicts)
    for v in verdicts:
        assert sum(t["points"] for t in v["terms"]) == pytest.approx(-v["score"], abs=1e-3)
        assert f'<tr data-tid="{v["trajectory"]}">' in html
    assert 'id="grading-verdicts"' in html and "penalty-terms" in html
    term = next(t for v in verdicts for t in v["terms"])
    assert term["feature"] in html
    assert response.context["entries"] == []  # the penalty terms are not a conversation
    assert "its ranking above is all it did" in html


def test_what_the_patches_say_is_escaped(client, researcher, tmp_path):
    batch = import_batch(tmp_path, hostile_records(), name="hostile")
    group = batch.groups.get()
    grading = graded(batch, group)
    client.force_login(researcher)
    response = client.get(reverse("grading_detail", args=[grading.pk]))
    assert any("<img" in t["text"] for v in response.context["verdicts"] for t in v["terms"])  # a payload is there
    assert audit(response.content.decode()) == []


def test_a_grading_by_another_heuristic_version_shows_its_record_without_recomputing(client, researcher,
                                                                                      sample_batch):
    group = sample_batch.groups.filter(label="mixed").order_by("group_id").first()
    grading = graded(sample_batch, group)
    Grading.objects.filter(pk=grading.pk).update(grader_version="heuristic-0-old")
    client.force_login(researcher)
    response = client.get(reverse("grading_detail", args=[grading.pk]))
    assert response.context["explained"] is False
    assert [v["terms"] for v in response.context["verdicts"]] == [()] * len(response.context["verdicts"])
    assert grading.rationales[grading.tiers[0][0]] in response.content.decode()
