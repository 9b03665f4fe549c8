"""A batch whose dashboard figures cannot be computed fails alone: the other batches' figures
are computed in the same recompute, its parts say why, the dashboard shows the reason and
does not ask for them again until their data changes; and a large group among small ones
is measured in memory bounded by its own size."""

import tracemalloc

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.webapp.annotationdata import GRADER_TIERS, review_batch
from webapp.audit import figures, ranking, refresh
from webapp.audit.services import figures_refresh
from webapp.models import AuditFigures, Grading, GradingRun, Group, Trajectory
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db

TOO_BIG = "Unable to allocate 6.13 TiB for an array with shape (337, 50000, 50000) and data type int64"


def graded(batch, tiers=GRADER_TIERS, version="v1"):
    now = timezone.now()
    run = GradingRun.objects.create(batch=batch, grader="heuristic", queue="cpu", grader_version=version)
    for group in Group.objects.filter(batch=batch):
        Grading.objects.create(run=run, group=group, status=Grading.Status.DONE, queued_at=now, finished_at=now,
                               grader_version=version, tiers=tiers)


@pytest.fixture
def two_batches(tmp_path):
    huge, small = review_batch(tmp_path, n=2, name="huge"), review_batch(tmp_path, n=2, name="small")
    graded(huge)
    graded(small)
    return huge, small


@pytest.fixture
def huge_fails(monkeypatch, two_batches):
    """Computing the figures of "huge" runs out of memory, as a (G, K, K) array over a batch did."""
    huge, _ = two_batches
    real = ranking.grading_figures

    def grading_figures(batch, versions):
        if batch is not None and batch.pk == huge.pk:
            raise MemoryError(TOO_BIG)
        return real(batch, versions)

    monkeypatch.setattr(figures, "grading_figures", grading_figures)
    return two_batches


def shown(batch):
    versions = figures.grader_versions(batch)
    return figures.dashboard(batch, versions, all_versions=versions, viewer=UNRESTRICTED)


def test_a_batch_that_cannot_be_measured_fails_alone(huge_fails):
    huge, small = huge_fails
    shown(huge), shown(small)  # first views: every part of both queued
    figures_refresh()
    assert not AuditFigures.objects.exclude(requested_at=None).exists()  # nothing left to send again
    done = shown(small)
    assert done.computing == [] and done.failed == [] and done.versions[0].ranking.graded == 2
    failed = AuditFigures.objects.get(key=refresh.part_key("gradings", huge.pk, "v1"))
    assert refresh.failure(failed.payload) == f"MemoryError: {TOO_BIG}"
    # the parts computed before the failure keep their figures
    agreement = AuditFigures.objects.get(key=refresh.part_key("agreement", huge.pk, "v1"))
    assert refresh.failure(agreement.payload) is None and agreement.payload is not None


def test_the_dashboard_says_why_and_does_not_ask_again_until_the_data_changes(huge_fails, client, researcher):
    huge, _ = huge_fails
    shown(huge)
    figures_refresh()
    again = shown(huge)
    assert again.failed == [("v1", f"MemoryError: {TOO_BIG}")] and again.computing == [] and again.versions == []
    assert not AuditFigures.objects.exclude(requested_at=None).exists()
    client.force_login(researcher)
    page = client.get(reverse("audit_dashboard"), {"batch": huge.pk}).content.decode()
    assert "Could not be computed" in page and "Unable to allocate 6.13 TiB" in page

    graded(huge, version="v1")  # new data: asked for again, and counted once it can be
    shown(huge)
    assert AuditFigures.objects.exclude(requested_at=None).filter(batch=huge).exists()


def test_a_failed_part_is_computed_again_when_current_figures_are_asked_for(huge_fails, monkeypatch):
    huge, _ = huge_fails
    shown(huge)
    figures_refresh()
    monkeypatch.setattr(figures, "grading_figures", ranking.grading_figures)  # the cause is gone
    assert figures.ranking_figures(huge, ["v1"])["v1"].graded == 2


def test_a_large_group_among_small_ones_is_measured_in_memory_for_itself(tmp_path):
    """Bias and agreement of one group of 600 passing trajectories among 40 small groups: padded
    to the batch's widest and compared pairwise, (41, 600, 600) arrays would be 110 MiB each."""
    batch = review_batch(tmp_path, n=40, name="wide")
    group = Group.objects.filter(batch=batch).order_by("pk").first()
    Trajectory.objects.bulk_create(Trajectory(batch=batch, group=group, trajectory_id=f"w{i:04d}", reward=1.0,
                                              passed=True, content_hash=f"{i:064d}") for i in range(600))
    passing = list(group.trajectories.filter(passed=True).order_by("trajectory_id")
                   .values_list("trajectory_id", flat=True))
    graded(batch)
    Grading.objects.filter(group=group).update(tiers=[[tid] for tid in passing])
    tracemalloc.start()
    try:
        measured = ranking.grading_figures(batch, ["v1"])["v1"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert measured.graded == 40 and measured.bias["shown"].n == 40
    assert peak < 64 * 2**20
