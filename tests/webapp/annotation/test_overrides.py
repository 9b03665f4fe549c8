"""Reward overrides: a human marks a passing trajectory as not passing (or the reverse) with
a reason, as part of a ranking. Kept in the history, shown on the group page, hidden with
the ranking under k-way overlap, and the advantages are GRPO and redistribution on the
corrected rewards and verdicts."""

import json

import numpy as np
import pytest
from django.urls import reverse

from grading.advantages import gagar_advantages
from tests.django_fixtures import make_user
from tests.webapp.annotationdata import grade, group_rows, pk_of, review_batch, save, set_policy
from tests.webapp.reviewdata import hostile_records, import_batch
from webapp.advantages.config import AdvantageConfig
from webapp.annotation.services import InvalidAnnotation, ranking_revert
from webapp.models import Annotation, Group, Trajectory
from webapp.rankings import UNRESTRICTED, final_rankings
from webapp.roles import ANNOTATOR

pytestmark = pytest.mark.django_db

HACK = {"t1": {"passed": False, "reason": "special-cases the test input"}}
WITHOUT_T1 = [["t2"], ["t3"], ["t4"], ["t5"]]


@pytest.fixture
def group(tmp_path):
    return Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")


def rows_by_id(group):
    return group_rows(group)


# --- the service -----------------------------------------------------------------------


def test_a_ranking_marks_a_pass_as_not_passing_and_ranks_the_rest(group, annotator):
    annotation = save(group, annotator, WITHOUT_T1, verdicts=HACK)
    assert annotation.verdicts == HACK
    final = final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk]
    assert final.verdicts == HACK and final.tiers == (("t2",), ("t3",), ("t4",), ("t5",))


@pytest.mark.parametrize("tiers, verdicts, message", [
    (WITHOUT_T1, {"t1": {"passed": False, "reason": "  "}}, "say why t1 does not pass"),
    (WITHOUT_T1, {"t1": {"passed": False}}, "say why t1 does not pass"),
    (WITHOUT_T1, {"t1": {"reason": "hack"}}, "the verdict of t1 must say whether it passes"),
    (WITHOUT_T1, {"t9": {"passed": False, "reason": "x"}}, "t9, which is not a trajectory of this group"),
    ([["t1"], ["t2"], ["t3"], ["t4"], ["t5"]], {"t1": {"passed": True, "reason": "x"}},
     "t1 passes its tests already"),
    ([["t1"], ["t2"], ["t3"], ["t4"], ["t5"]], HACK, "not a passing trajectory of this group: t1"),
    ([["t1"], ["t2"], ["t3"], ["t4"], ["t5"]], {"t6": {"passed": True, "reason": "flaky test"}},
     "passing but not ranked: t6"),
])
def test_an_override_without_a_reason_or_that_the_ranking_ignores_is_refused(group, annotator, tiers, verdicts,
                                                                              message):
    with pytest.raises(InvalidAnnotation, match=message):
        save(group, annotator, tiers, verdicts=verdicts)
    assert not Annotation.objects.exists()


def test_a_fail_marked_passing_is_ranked_with_the_others(group, annotator):
    lucky = {"t6": {"passed": True, "reason": "the test is flaky; the fix is right"}}
    save(group, annotator, [["t6"], ["t1"], ["t2"], ["t3"], ["t4"], ["t5"]], verdicts=lucky,
         flags={"t6": ["other"]}, rationales={"t6": "best"})
    rows = rows_by_id(group)
    assert rows["t6"]["passed"] is True and rows["t6"]["rank"] == 1 and rows["t6"]["corrected_reward"] == 1.0
    assert rows["t6"]["reward"] == 0.0 and rows["t6"]["flags"] == ["other"]
    # every trajectory passes now: an all-pass group, whose advantages are all zero
    assert {r["label"] for r in rows.values()} == {"all_pass"}
    assert {r["advantage"] for r in rows.values()} == {0.0}


def test_reverts_keep_the_history_of_overrides(group, annotator, researcher):
    grade(group)
    save(group, annotator, WITHOUT_T1, verdicts=HACK)
    back = ranking_revert(group=group, user=researcher, to_version=0, based_on_version=1)
    assert back.verdicts == {} and final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk].source == "grader"
    assert rows_by_id(group)["t1"]["passed"] is True
    again = ranking_revert(group=group, user=researcher, to_version=1, based_on_version=2)
    assert again.verdicts == HACK and final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk].verdicts == HACK
    assert list(Annotation.objects.order_by("version").values_list("verdicts", flat=True)) == [HACK, {}, HACK]


# --- advantages ------------------------------------------------------------------------


@pytest.mark.parametrize("schedule, params", [("linear", {"w_min": 0.2}), ("exponential", {"gamma": 0.5})])
def test_advantages_are_the_cores_on_the_corrected_rewards(group, annotator, schedule, params):
    group.batch.advantage_config = AdvantageConfig(schedule=schedule, params=params).as_dict()
    group.batch.save()
    before = rows_by_id(group)
    save(group, annotator, [["t3"], ["t2", "t5"], ["t4"]], verdicts=HACK)
    rows = rows_by_id(group)
    ids = sorted(rows)
    expected = gagar_advantages(
        rewards=[0.0 if t in ("t1", "t6") else 1.0 for t in ids], group_index=np.zeros(len(ids), dtype=np.intp),
        passed=[t not in ("t1", "t6") for t in ids],
        ranks=[{"t3": 1, "t2": 2, "t5": 2, "t4": 4}.get(t, 0) for t in ids],
        schedule=schedule, params=params)
    assert [rows[t]["advantage"] for t in ids] == pytest.approx(expected.advantages.tolist(), abs=1e-12)
    assert [rows[t]["grpo_advantage"] for t in ids] == pytest.approx(expected.grpo.tolist(), abs=1e-12)
    t1 = rows["t1"]
    assert (t1["reward"], t1["corrected_reward"], t1["passed"], t1["rank"]) == (1.0, 0.0, False, None)
    assert t1["advantage"] < 0 < before["t1"]["advantage"]
    assert {r["corrected_reward"] for t, r in rows.items() if t != "t1"} == {None}
    assert {r["source"] for r in rows.values()} == {"human"}


def test_when_every_pass_is_marked_not_passing_the_group_is_all_fail(group, annotator):
    reason = {"passed": False, "reason": "all hard-code the expected output"}
    save(group, annotator, [], verdicts={t: reason for t in ("t1", "t2", "t3", "t4", "t5")})
    rows = rows_by_id(group)
    assert {r["label"] for r in rows.values()} == {"all_fail"}
    assert {r["advantage"] for r in rows.values()} == {0.0}


# --- the pages -------------------------------------------------------------------------


def post(client, group, tiers=None, **fields):
    data = {"based_on_version": 0, **fields}
    if tiers is not None:
        data["tiers"] = json.dumps(tiers)
    return client.post(reverse("ranking_save", args=[group.pk]), data)


def test_the_form_without_javascript_marks_a_pass_as_not_passing_and_drops_its_rank(client, group, annotator):
    client.force_login(annotator)
    t1 = pk_of(group, "t1")
    ranks = {f"rank-{pk_of(group, t)}": n for n, t in enumerate(("t1", "t2", "t3", "t4", "t5"), 1)}
    response = post(client, group, **ranks, **{f"override-{t1}": "1", f"override-reason-{t1}": "hard-codes it",
                                              f"flag-{t1}": "reward_hacking"})
    assert response.status_code == 302
    saved = Annotation.objects.get()
    assert saved.verdicts == {"t1": {"passed": False, "reason": "hard-codes it"}}
    assert saved.tiers == [["t2"], ["t3"], ["t4"], ["t5"]] and saved.flags == {}


def test_the_editors_tiers_lose_a_trajectory_marked_not_passing(client, group, annotator):
    client.force_login(annotator)
    t1 = pk_of(group, "t1")
    response = post(client, group, [["t1"], ["t2", "t3"], ["t4"], ["t5"]],
                    **{f"override-{t1}": "1", f"override-reason-{t1}": "lucky pass"})
    assert response.status_code == 302
    assert Annotation.objects.get().tiers == [["t2", "t3"], ["t4"], ["t5"]]


def test_an_override_without_a_reason_gets_400_and_the_editor_keeps_it(client, group, annotator):
    client.force_login(annotator)
    t1 = pk_of(group, "t1")
    response = post(client, group, WITHOUT_T1, **{f"override-{t1}": "1"})
    assert response.status_code == 400
    assert "say why t1 does not pass although its tests say otherwise" in response.content.decode()
    editor = response.context["ranking"].editor
    assert [i.tid for i in editor.failing] == ["t1", "t6"] and editor.failing[0].overridden
    assert not Annotation.objects.exists()


def test_a_fail_marked_passing_without_a_rank_comes_back_in_the_pool(client, group, annotator):
    client.force_login(annotator)
    t6 = pk_of(group, "t6")
    response = post(client, group, [["t1"], ["t2"], ["t3"], ["t4"], ["t5"]],
                    **{f"override-{t6}": "1", f"override-reason-{t6}": "flaky test"})
    assert response.status_code == 400 and "passing but not ranked: t6" in response.content.decode()
    editor = response.context["ranking"].editor
    assert [i.tid for i in editor.pool] == ["t6"] and editor.failing == []


def test_ranking_fields_of_a_failing_trajectory_not_marked_passing_get_400(client, group, annotator):
    client.force_login(annotator)
    response = post(client, group, WITHOUT_T1, **{f"rank-{pk_of(group, 't6')}": "1"})
    assert response.status_code == 400 and "not a passing trajectory" in response.content.decode()
    response = post(client, group, WITHOUT_T1, **{"override-99999": "1"})
    assert response.status_code == 400 and "override-99999: not a trajectory of this group" in response.content.decode()


def test_the_group_page_shows_the_override_and_its_reason_escaped(client, group, annotator, auditor):
    save(group, annotator, WITHOUT_T1, verdicts={"t1": {"passed": False, "reason": "<script>x()</script> hack"}})
    for user in (annotator, auditor):
        client.force_login(user)
        html = client.get(reverse("group", args=[group.pk])).content.decode()
        assert 'id="verdict-overrides"' in html and "marked not passing" in html
        assert "&lt;script&gt;x()&lt;/script&gt; hack" in html and "<script>x()" not in html
    history = client.get(reverse("ranking_history", args=[group.pk])).content.decode()
    assert "marked not passing" in history and "&lt;script&gt;x()&lt;/script&gt; hack" in history


def test_the_editor_opens_with_the_override_in_place(client, group, annotator):
    save(group, annotator, WITHOUT_T1, verdicts=HACK)
    client.force_login(annotator)
    editor = client.get(reverse("group", args=[group.pk])).context["ranking"].editor
    assert [i.tid for i in editor.ranked] == ["t2", "t3", "t4", "t5"] and editor.pool == []
    assert [(i.tid, i.overridden, i.override_reason) for i in editor.failing] == [
        ("t1", True, "special-cases the test input"), ("t6", False, "")]


def test_the_preview_computes_advantages_on_the_corrected_verdicts(client, group, annotator):
    client.force_login(annotator)
    t1 = pk_of(group, "t1")
    response = client.post(reverse("ranking_preview", args=[group.pk]),
                           {"tiers": json.dumps(WITHOUT_T1), "based_on_version": 0, f"override-{t1}": "1",
                            f"override-reason-{t1}": "hack"}, HTTP_HX_REQUEST="true")
    rows = {r["trajectory_id"]: r for r in response.context["preview"].rows}
    assert response.context["preview"].problem == ""
    assert rows["t1"]["passed"] is False and rows["t1"]["advantage"] < 0 and rows["t2"]["rank"] == 1


def test_other_annotators_do_not_see_an_override_before_they_rank_under_k_way_overlap(client, group, annotator,
                                                                                       researcher):
    set_policy(group.batch, overlap=2)
    other = make_user("otto", ANNOTATOR)
    mine = save(group, annotator, WITHOUT_T1, verdicts=HACK)
    ranking_revert(group=group, user=researcher, to_version=mine.version, based_on_version=0)
    client.force_login(other)
    html = client.get(reverse("group", args=[group.pk])).content.decode()
    assert 'id="verdict-overrides"' not in html and "special-cases the test input" not in html
    client.force_login(researcher)
    assert "special-cases the test input" in client.get(reverse("group", args=[group.pk])).content.decode()


def test_hostile_ids_survive_an_override(client, tmp_path, annotator):
    batch = import_batch(tmp_path, hostile_records(), name="hostile")
    group = Group.objects.get(batch=batch)
    passing = list(Trajectory.objects.filter(group=group, passed=True).order_by("trajectory_id"))
    first = passing[0]
    client.force_login(annotator)
    response = post(client, group, [[t.trajectory_id] for t in passing[1:]],
                    **{f"override-{first.pk}": "1", f"override-reason-{first.pk}": "hack"})
    assert response.status_code == 302, response.content.decode()[:400]
    assert list(Annotation.objects.get().verdicts) == [first.trajectory_id]


def test_a_stale_save_with_an_override_keeps_it_on_the_conflict_page(client, group, annotator, researcher):
    save(group, researcher, [["t1"], ["t2"], ["t3"], ["t4"], ["t5"]])
    client.force_login(annotator)
    t1 = pk_of(group, "t1")
    response = post(client, group, WITHOUT_T1, **{f"override-{t1}": "1", f"override-reason-{t1}": "hack"})
    assert response.status_code == 409
    html = response.content.decode()
    assert f'<input type="hidden" name="override-{t1}" value="1">' in html
    assert f'<input type="hidden" name="override-reason-{t1}" value="hack">' in html
