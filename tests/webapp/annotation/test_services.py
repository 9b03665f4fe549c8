"""Human rankings as services: saves are kept, stale saves refused (by the check and by
the database), reverts and acceptances add versions, and final rankings follow them."""

import json
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from tests.webapp.annotationdata import GRADER_TIERS, grade, group_rows, review_batch, save, set_policy
from webapp.annotation import services as annotations
from webapp.annotation.services import (
    Conflict,
    InvalidAnnotation,
    NotAllowed,
    ranking_revert,
)
from webapp.models import Annotation, Group
from webapp.rankings import UNRESTRICTED, final_rankings

pytestmark = pytest.mark.django_db

MINE = [["t5"], ["t1", "t2"], ["t3"], ["t4"]]


@pytest.fixture
def group(tmp_path):
    return Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")


def test_a_save_is_version_one_and_decides_the_final_ranking(group, annotator):
    grading = grade(group)
    annotation = save(group, annotator, MINE, flags={"t4": ["debug_leftovers", "other"]},
                      rationales={"t5": "smallest diff"}, group_rationale="t5 is minimal", grading_id=grading.pk)
    assert (annotation.version, annotation.based_on_version, annotation.kind) == (1, 0, "ranking")
    assert annotation.grading == grading and annotation.independent is False
    final = final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk]
    assert (final.source, final.version, final.author) == ("human", 1, "anna")
    assert final.tiers == (("t5",), ("t1", "t2"), ("t3",), ("t4",))
    assert final.flags == {"t4": ("debug_leftovers", "other")} and final.rationales == {"t5": "smallest diff"}


def test_advantages_follow_the_human_ranking(group, annotator):
    grade(group)
    before = group_rows(group)
    assert before["t1"]["source"] == "grader" and before["t1"]["rank"] == 1
    save(group, annotator, MINE)
    after = group_rows(group)
    assert {r["source"] for r in after.values() if r["passed"]} == {"human"}
    assert (after["t5"]["rank"], after["t1"]["rank"], after["t2"]["rank"]) == (1, 2, 2)
    assert after["t5"]["advantage"] > after["t5"]["grpo_advantage"] > after["t4"]["advantage"]
    assert after["t6"]["advantage"] == before["t6"]["advantage"]
    passing = [r for r in after.values() if r["passed"]]
    assert sum(r["advantage"] for r in passing) == pytest.approx(sum(r["grpo_advantage"] for r in passing))


def test_manage_py_advantages_reports_source_human(group, annotator):
    save(group, annotator, MINE)
    out = StringIO()
    call_command("advantages", batch="review", stdout=out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {r["source"] for r in rows if r["passed"]} == {"human"}
    assert {r["trajectory_id"]: r["rank"] for r in rows if r["passed"]} == {"t5": 1, "t1": 2, "t2": 2, "t3": 4,
                                                                             "t4": 5}


def test_a_stale_save_is_a_conflict_carrying_the_newer_ranking(group, annotator, researcher):
    save(group, annotator, MINE)
    with pytest.raises(Conflict) as caught:
        save(group, researcher, GRADER_TIERS, based_on=0)
    assert caught.value.newer.version == 1 and caught.value.newer.user == annotator
    assert "anna saved version 1" in str(caught.value) and "Nothing was overwritten" in str(caught.value)
    assert caught.value.status == 409
    assert Annotation.objects.count() == 1
    assert save(group, researcher, GRADER_TIERS, based_on=1).version == 2


def test_the_database_refuses_a_second_row_of_the_same_version(group, annotator, researcher):
    Annotation.objects.create(group=group, user=annotator, version=1, based_on_version=0, tiers=MINE)
    with pytest.raises(IntegrityError), transaction.atomic():
        Annotation.objects.create(group=group, user=researcher, version=1, based_on_version=0, tiers=MINE,
                                  independent=True)


def test_the_database_refuses_two_final_saves_based_on_the_same_version(group, annotator, researcher):
    Annotation.objects.create(group=group, user=annotator, version=1, based_on_version=0, tiers=MINE)
    with pytest.raises(IntegrityError), transaction.atomic():
        Annotation.objects.create(group=group, user=researcher, version=2, based_on_version=0, tiers=MINE)


def test_a_race_past_the_check_still_ends_in_a_conflict(group, annotator, researcher, monkeypatch):
    """Two saves based on version 0 that both passed the check (as two requests at the
    same instant would): the constraint refuses the second, which becomes a Conflict."""
    save(group, annotator, MINE)
    real = annotations._check_base
    calls = []

    def blind_first_check(head, based_on_version):
        calls.append(head)
        if len(calls) > 1:
            real(head, based_on_version)

    monkeypatch.setattr(annotations, "_check_base", blind_first_check)
    with pytest.raises(Conflict) as caught:
        save(group, researcher, GRADER_TIERS, based_on=0)
    assert caught.value.newer.version == 1
    assert list(Annotation.objects.values_list("version", "user__username")) == [(1, "anna")]


def test_annotations_are_immutable(group, annotator):
    annotation = save(group, annotator, MINE)
    annotation.group_rationale = "changed"
    with pytest.raises(ValueError, match="immutable"):
        annotation.save()


@pytest.mark.parametrize("tiers, message", [
    ([["t1"], ["t2"], ["t3"], ["t4"]], "passing but not ranked: t5"),
    ([["t1"], ["t1", "t2"], ["t3"], ["t4"], ["t5"]], "ranked more than once: t1"),
    ([["t1", "t6"], ["t2"], ["t3"], ["t4"], ["t5"]], "not a passing trajectory of this group: t6"),
    ([["t1"], [], ["t2", "t3", "t4", "t5"]], "a tier is empty"),
])
def test_a_ranking_that_is_not_a_permutation_of_the_passing_ids_is_refused(group, annotator, tiers, message):
    with pytest.raises(InvalidAnnotation, match=message):
        save(group, annotator, tiers)
    assert not Annotation.objects.exists()


def test_unknown_flags_are_refused(group, annotator):
    with pytest.raises(InvalidAnnotation, match="unknown flags for t1: sloppy"):
        save(group, annotator, MINE, flags={"t1": ["sloppy"]})
    assert not Annotation.objects.exists()


def test_a_rationale_over_the_limit_is_refused(group, annotator):
    with pytest.raises(InvalidAnnotation, match="4001 characters; the limit is 4000"):
        save(group, annotator, MINE, rationales={"t1": "x" * 4001})
    with pytest.raises(InvalidAnnotation, match="the group's rationale has 4001"):
        save(group, annotator, MINE, group_rationale="y" * 4001)
    assert save(group, annotator, MINE, rationales={"t1": "x" * 4000}).rationales["t1"] == "x" * 4000


def test_a_grading_of_another_group_is_refused(group, annotator, tmp_path):
    other = Group.objects.create(batch=group.batch, group_id="other")
    with pytest.raises(InvalidAnnotation, match="not a grading of this group"):
        save(group, annotator, MINE, grading_id=grade(other).pk)


def test_a_role_that_may_not_annotate_cannot_save(group, auditor, outsider):
    for user in (auditor, outsider):
        with pytest.raises(NotAllowed):
            save(group, user, MINE)
    assert not Annotation.objects.exists()


def test_a_researcher_reverts_by_adding_a_version(group, annotator, researcher):
    grade(group)
    save(group, annotator, MINE)
    save(group, annotator, GRADER_TIERS, based_on=1)
    revert = ranking_revert(group=group, user=researcher, to_version=1, based_on_version=2)
    assert (revert.version, revert.kind, revert.reverted_to, revert.tiers) == (3, "revert", 1, MINE)
    assert final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk].version == 3
    back = ranking_revert(group=group, user=researcher, to_version=0, based_on_version=3)
    assert back.tiers is None
    assert final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk].source == "grader"
    assert Annotation.objects.count() == 4


def test_revert_is_for_researchers_and_checks_its_base(group, annotator, researcher):
    save(group, annotator, MINE)
    with pytest.raises(NotAllowed):
        ranking_revert(group=group, user=annotator, to_version=0, based_on_version=1)
    with pytest.raises(Conflict):
        ranking_revert(group=group, user=researcher, to_version=0, based_on_version=0)
    with pytest.raises(InvalidAnnotation, match="no version 7"):
        ranking_revert(group=group, user=researcher, to_version=7, based_on_version=1)
    with pytest.raises(InvalidAnnotation, match="final ranking already"):
        ranking_revert(group=group, user=researcher, to_version=1, based_on_version=1)


def test_with_overlap_each_annotator_ranks_independently(group, annotator, researcher):
    set_policy(group.batch, overlap=2)
    group.refresh_from_db()
    bob = annotator.__class__.objects.create_user("bob")
    bob.groups.set(annotator.groups.all())
    first = save(group, annotator, MINE)
    second = save(group, bob, GRADER_TIERS)  # based on his own (empty) chain: no conflict
    assert (first.version, second.version) == (1, 2)
    assert first.independent and second.independent
    assert save(group, annotator, GRADER_TIERS, based_on=1).version == 3
    with pytest.raises(Conflict):
        save(group, bob, MINE, based_on=0)
    assert group.pk not in final_rankings([group.pk], viewer=UNRESTRICTED)  # not final until accepted
    accepted = ranking_revert(group=group, user=researcher, to_version=2, based_on_version=0)
    assert (accepted.kind, accepted.independent, accepted.tiers) == ("accept", False, GRADER_TIERS)
    final = final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk]
    assert (final.source, final.version) == ("human", 4)


@pytest.mark.django_db(transaction=True)
def test_two_saves_at_the_same_instant_store_one_and_refuse_the_other(tmp_path, annotator, researcher):
    group = Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")
    barrier = threading.Barrier(2)
    outcomes = []

    def attempt(user, tiers):
        try:
            barrier.wait()
            outcomes.append(save(group, user, tiers).version)
        except Conflict as conflict:
            outcomes.append(f"conflict with v{conflict.newer.version}")
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=args) for args in ((annotator, MINE), (researcher, GRADER_TIERS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes, key=str) == [1, "conflict with v1"]
    assert Annotation.objects.count() == 1
