"""The annotation queue: policy, soft leases, k-way overlap, progress and the batch filter."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.django_fixtures import make_user
from tests.webapp.annotationdata import GRADER_TIERS, grade, review_batch, save, set_policy
from webapp.annotation.selectors import queue_groups
from webapp.annotation.services import NotAllowed, lease_next_group, lease_release
from webapp.models import Grading, Group, Lease
from webapp.rankings import UNRESTRICTED
from webapp.roles import ANNOTATOR

pytestmark = pytest.mark.django_db


@pytest.fixture
def batch(tmp_path):
    return review_batch(tmp_path, n=4)


@pytest.fixture
def bob(db):
    return make_user("bob", ANNOTATOR)


def group_ids(queryset):
    return [g.group_id for g in queryset]


def test_two_annotators_get_different_groups(batch, annotator, bob):
    first = lease_next_group(user=annotator, batch=batch)
    second = lease_next_group(user=bob, batch=batch)
    assert (first.group.group_id, second.group.group_id) == ("task-1", "task-2")
    assert Lease.objects.count() == 2


def test_asking_again_returns_the_group_already_held(batch, annotator):
    first = lease_next_group(user=annotator, batch=batch)
    again = lease_next_group(user=annotator, batch=batch)
    assert again.group == first.group and again.resumed
    assert Lease.objects.count() == 1


def test_an_expired_lease_frees_the_group(batch, annotator, bob):
    first = lease_next_group(user=annotator, batch=batch)
    Lease.objects.filter(pk=first.lease.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    taken = lease_next_group(user=bob, batch=batch)
    assert taken.group == first.group
    assert Lease.objects.get(group=first.group).user == bob
    assert lease_next_group(user=annotator, batch=batch).group.group_id == "task-2"


def test_a_ranked_group_leaves_the_queue_for_everyone_and_its_lease_is_kept(batch, annotator, bob):
    first = lease_next_group(user=annotator, batch=batch)
    save(first.group, annotator, GRADER_TIERS)
    lease = Lease.objects.get(group=first.group)
    assert lease.completed_at is not None
    Lease.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(days=1))
    assert "task-1" not in group_ids(queue_groups(user=bob, batch=batch))
    assert lease_next_group(user=annotator, batch=batch).group.group_id == "task-2"


def test_a_ranking_made_outside_the_queue_counts_too(batch, annotator, bob):
    save(Group.objects.get(batch=batch, group_id="task-1"), annotator, GRADER_TIERS)
    assert lease_next_group(user=bob, batch=batch).group.group_id == "task-2"


def test_with_overlap_k_annotators_get_the_same_group_and_no_more(batch, annotator, bob):
    set_policy(batch, overlap=2)
    carol = make_user("carol", ANNOTATOR)
    assert lease_next_group(user=annotator, batch=batch).group.group_id == "task-1"
    assert lease_next_group(user=bob, batch=batch).group.group_id == "task-1"
    assert lease_next_group(user=carol, batch=batch).group.group_id == "task-2"
    assert sorted(Lease.objects.filter(group__group_id="task-1").values_list("slot", flat=True)) == [0, 1]


def test_a_released_lease_goes_back_to_the_queue(batch, annotator, bob):
    first = lease_next_group(user=annotator, batch=batch)
    assert lease_release(group=first.group, user=annotator)
    assert not lease_release(group=first.group, user=annotator)
    assert lease_next_group(user=bob, batch=batch).group == first.group


def test_skip_gives_the_group_back_and_moves_on(client, batch, annotator):
    client.force_login(annotator)
    url = reverse("queue_next", args=[batch.pk])
    response = client.post(url)
    task1 = Group.objects.get(batch=batch, group_id="task-1")
    assert response.status_code == 302 and response["Location"] == f"/groups/{task1.pk}/#ranking"
    response = client.post(url, {"skip": task1.pk})
    task2 = Group.objects.get(batch=batch, group_id="task-2")
    assert response["Location"] == f"/groups/{task2.pk}/#ranking"
    assert list(Lease.objects.values_list("group__group_id", flat=True)) == ["task-2"]


def test_only_mixed_groups_enter_the_queue(tmp_path, annotator):
    from tests.factories import group as group_records
    from tests.webapp.reviewdata import import_batch, records
    batch = import_batch(tmp_path, records("task-1") + group_records("all-good", [1, 1]), name="mixed-only")
    assert group_ids(queue_groups(user=annotator, batch=batch)) == ["task-1"]


def test_policy_criteria_choose_the_groups(batch, annotator):
    groups = {g.group_id: g for g in Group.objects.filter(batch=batch)}
    grade(groups["task-1"], confidence=0.9)
    grade(groups["task-2"], confidence=0.2)
    grade(groups["task-3"], status=Grading.Status.FAILED)
    set_policy(batch, criteria=["ungraded"])
    assert group_ids(queue_groups(user=annotator, batch=batch)) == ["task-3", "task-4"]
    set_policy(batch, criteria=["failed"])
    assert group_ids(queue_groups(user=annotator, batch=batch)) == ["task-3"]
    set_policy(batch, criteria=["low_confidence"], confidence_below=0.5)
    assert group_ids(queue_groups(user=annotator, batch=batch)) == ["task-2"]
    set_policy(batch, criteria=["failed", "low_confidence"])
    assert group_ids(queue_groups(user=annotator, batch=batch)) == ["task-2", "task-3"]
    set_policy(batch, criteria=["unreviewed", "failed"])
    assert len(group_ids(queue_groups(user=annotator, batch=batch))) == 4


def test_the_random_sample_is_reproducible_by_seed(batch, annotator):
    def sample(rate, seed):
        set_policy(batch, criteria=["sample"], sample_rate=rate, sample_seed=seed)
        return group_ids(queue_groups(user=annotator, batch=batch))

    assert sample(0.0, 1) == [] and len(sample(1.0, 1)) == 4
    assert sample(0.5, 7) == sample(0.5, 7)
    drawn = {tuple(sample(0.5, seed)) for seed in range(12)}
    assert len(drawn) > 2  # the seed changes which groups are drawn


def test_the_queue_is_for_annotators_and_researchers(batch, auditor):
    with pytest.raises(NotAllowed):
        lease_next_group(user=auditor, batch=batch)


def test_the_queue_page_shows_what_waits_and_what_is_held(client, batch, annotator):
    client.force_login(annotator)
    url = reverse("annotation_queue", args=[batch.pk])
    html = client.get(url).content.decode()
    assert "4 groups waiting for you" in html and 'id="queue-next"' in html
    client.post(reverse("queue_next", args=[batch.pk]))
    html = client.get(url).content.decode()
    assert "You hold" in html and "task-1" in html and "Give it back" in html
    group = Group.objects.get(batch=batch, group_id="task-1")
    page = client.get(reverse("group", args=[group.pk])).content.decode()
    assert "yours until" in page and 'id="queue-skip"' in page


def test_others_see_who_holds_a_group(client, batch, annotator, bob):
    held = lease_next_group(user=bob, batch=batch)
    client.force_login(annotator)
    html = client.get(reverse("group", args=[held.group.pk])).content.decode()
    assert "held by bob until" in html


def test_an_empty_queue_says_so(client, batch, annotator):
    set_policy(batch, criteria=["failed"])
    client.force_login(annotator)
    response = client.post(reverse("queue_next", args=[batch.pk]), follow=True)
    assert "Nothing left for you in this queue." in response.content.decode()


def test_progress_per_batch_and_annotator_on_the_batches_page(client, batch, annotator, bob, researcher):
    groups = {g.group_id: g for g in Group.objects.filter(batch=batch)}
    for name in ("task-1", "task-2"):
        grade(groups[name])
        save(groups[name], annotator, GRADER_TIERS, based_on=0)
    save(groups["task-3"], bob, GRADER_TIERS)
    client.force_login(researcher)
    html = client.get(reverse("index")).content.decode()
    assert "3 / 4" in html and "anna <b>2</b>" in html and "bob <b>1</b>" in html
    panel = client.get(reverse("annotation_panel", args=[batch.pk]), headers={"HX-Request": "true"})
    review = panel.context["review"]
    assert (review.mixed, review.reviewed, review.overridden) == (4, 3, 3)
    anna = review.annotators[0]
    assert (anna.username, anna.groups, anna.vs_grader.value, anna.vs_grader.n) == ("anna", 2, 1.0, 2)


def test_the_overridden_filter_lists_groups_with_a_human_final_ranking(client, batch, annotator, researcher):
    from webapp.annotation.services import ranking_revert
    groups = {g.group_id: g for g in Group.objects.filter(batch=batch)}
    grade(groups["task-1"])
    save(groups["task-1"], annotator, GRADER_TIERS)
    save(groups["task-2"], annotator, GRADER_TIERS)
    ranking_revert(group=groups["task-2"], user=researcher, to_version=0, based_on_version=1)
    client.force_login(researcher)
    url = reverse("batch", args=[batch.pk])
    assert group_ids(client.get(url, {"review": "overridden"}).context["page"].groups) == ["task-1"]
    assert group_ids(client.get(url, {"review": "reviewed"}).context["page"].groups) == ["task-1", "task-2"]
    assert group_ids(client.get(url, {"review": "unreviewed"}).context["page"].groups) == ["task-3", "task-4"]


def test_a_researcher_sets_the_policy_and_others_may_not(client, batch, researcher, annotator):
    url = reverse("annotation_policy", args=[batch.pk])
    data = {"criteria": ["ungraded", "sample"], "confidence_below": 0.4, "sample_rate": 0.25, "sample_seed": 3,
            "blind": "on", "overlap": 3, "lease_minutes": 15}
    client.force_login(annotator)
    assert client.post(url, data).status_code == 403
    client.force_login(researcher)
    response = client.post(url, data, headers={"HX-Request": "true"})
    assert response.status_code == 200 and "Annotation policy saved." in response.content.decode()
    batch.refresh_from_db()
    policy = batch.annotation_policy
    assert (policy.criteria, policy.blind, policy.overlap, policy.lease_minutes, policy.updated_by) == (
        ["ungraded", "sample"], True, 3, 15, researcher)
    bad = client.post(url, {**data, "overlap": 0, "criteria": ["bogus"]})
    assert bad.status_code == 400
    assert "Ensure this value is greater than or equal to 1" in bad.content.decode()
    batch.refresh_from_db()
    assert batch.annotation_policy.overlap == 3


def test_the_batch_page_links_the_queue_and_loads_the_panel(client, batch, annotator, auditor):
    client.force_login(annotator)
    html = client.get(reverse("batch", args=[batch.pk])).content.decode()
    assert f'href="/batches/{batch.pk}/queue/"' in html and f'hx-get="/batches/{batch.pk}/annotation/"' in html
    client.force_login(auditor)
    html = client.get(reverse("batch", args=[batch.pk])).content.decode()
    assert 'id="open-queue"' not in html
    panel = client.get(reverse("annotation_panel", args=[batch.pk])).content.decode()
    assert "Save annotation policy" not in panel and "Open the annotation queue" not in panel


def test_an_annotator_works_through_the_sample_queue(client, sample_batch, annotator):
    """The issue's "done when": a new annotator ranks every mixed group of the sample data
    from the queue, each save is kept, and advantages follow (source human)."""
    from webapp.advantages.selectors import advantage_rows
    from webapp.models import Annotation, Trajectory

    client.force_login(annotator)
    for group in Group.objects.filter(batch=sample_batch):
        html = client.get(reverse("group", args=[group.pk])).content.decode()
        # every group has the editor: even where nothing passed, a human may mark a fail as passing
        assert 'id="ranking-form"' in html, group.group_id
    ranked = []
    while True:
        response = client.post(reverse("queue_next", args=[sample_batch.pk]))
        if response["Location"].endswith("/queue/"):
            break
        group = Group.objects.get(pk=int(response["Location"].split("/")[2]))
        passing = sorted(Trajectory.objects.filter(group=group, passed=True).values_list("trajectory_id", flat=True))
        saved = client.post(reverse("ranking_save", args=[group.pk]),
                            {"tiers": json.dumps([[t] for t in reversed(passing)]), "based_on_version": 0})
        assert saved.status_code == 302, saved.content.decode()[:500]
        ranked.append(group.group_id)
    mixed = list(Group.objects.filter(batch=sample_batch, label="mixed").order_by("group_id")
                 .values_list("group_id", flat=True))
    assert ranked == mixed and Annotation.objects.count() == len(mixed)
    rows = advantage_rows(sample_batch, viewer=UNRESTRICTED)
    assert {r["source"] for r in rows if r["label"] == "mixed" and r["passed"]} == {"human"}
