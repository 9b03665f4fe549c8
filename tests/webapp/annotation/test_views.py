"""The ranking editor, save, preview, history and revert, through the plain Django client."""

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from grading.agreement import kendall_tau
from grading.rankings import FLAGS
from tests.webapp.annotationdata import GRADER_TIERS, grade, pk_of, review_batch, save, set_policy
from tests.webapp.review.test_safety import audit
from tests.webapp.reviewdata import hostile_records, import_batch
from webapp.models import Annotation, Group, Trajectory
from webapp.templatetags.review import signed

pytestmark = pytest.mark.django_db

MINE = [["t5"], ["t1", "t2"], ["t3"], ["t4"]]


@pytest.fixture
def group(tmp_path):
    return Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")


def post_ranking(client, group, tiers=MINE, based_on=0, **fields):
    data = {"tiers": json.dumps(tiers) if not isinstance(tiers, str) else tiers, "based_on_version": based_on}
    data.update(fields)
    return client.post(reverse("ranking_save", args=[group.pk]), data)


def page_html(client, group, **params):
    return client.get(reverse("group", args=[group.pk]), params).content.decode()


def test_annotators_and_researchers_get_the_editor_and_auditors_read_only(client, group, annotator, researcher,
                                                                          auditor):
    for user in (annotator, researcher):
        client.force_login(user)
        html = page_html(client, group)
        assert 'id="ranking-form"' in html and 'src="/static/js/ranking.js"' in html
        assert 'src="/static/vendor/sortable.min.js"' in html
    client.force_login(auditor)
    html = page_html(client, group)
    assert 'id="ranking-form"' not in html and "ranking.js" not in html and "No ranking to show." in html


def test_the_editor_starts_from_the_grader_ranking_and_failing_ones_are_not_rankable(client, group, annotator):
    grading = grade(group)
    client.force_login(annotator)
    response = client.get(reverse("group", args=[group.pk]))
    editor = response.context["ranking"].editor
    assert [(i.tid, i.rank, i.tied) for i in editor.ranked] == [
        ("t1", 1, False), ("t2", 2, False), ("t3", 2, True), ("t4", 4, False), ("t5", 5, False)]
    assert editor.pool == [] and [c.tid for c in editor.failing] == ["t6"]
    assert editor.ranked[3].flags == ["debug_leftovers"]
    assert (editor.based_on_version, editor.grading_id) == (0, grading.pk)
    html = response.content.decode()
    # a failing one is listed with its verdict override, its ranking fields disabled (never sent)
    assert f'name="rank-{pk_of(group, "t6")}" value="" aria-label="Rank of t6" disabled>' in html
    assert f'name="override-{pk_of(group, "t6")}" value="1">' in html
    assert "started from the grader&#x27;s ranking" in html


def test_without_a_ranking_every_passing_trajectory_starts_unranked(client, group, annotator):
    client.force_login(annotator)
    editor = client.get(reverse("group", args=[group.pk])).context["ranking"].editor
    assert editor.ranked == [] and [i.tid for i in editor.pool] == ["t1", "t2", "t3", "t4", "t5"]


def test_a_save_is_stored_and_shown_as_the_final_ranking(client, group, annotator):
    grade(group)
    client.force_login(annotator)
    t4 = pk_of(group, "t4")
    response = post_ranking(client, group, **{f"flag-{t4}": ["debug_leftovers", "out_of_scope_changes"],
                                              f"rationale-{t4}": "prints debug output", "group_rationale": "why"})
    assert response.status_code == 302 and response["Location"].endswith(f"/groups/{group.pk}/#ranking")
    annotation = Annotation.objects.get()
    assert annotation.tiers == MINE and annotation.user == annotator
    assert annotation.flags == {"t4": ["out_of_scope_changes", "debug_leftovers"]}
    assert annotation.rationales == {"t4": "prints debug output"} and annotation.group_rationale == "why"
    page = client.get(reverse("group", args=[group.pk]))
    html = page.content.decode()
    assert "Saved version 1." in html and "human</span> version 1 by anna" in html
    assert "(human v1)" in html
    assert page.context["ranking"].editor.based_on_version == 1


def test_the_form_works_without_javascript_rank_numbers_with_ties(client, group, annotator):
    client.force_login(annotator)
    ranks = {"t1": 2, "t2": 2, "t3": 3, "t4": 9, "t5": 1}
    data = {f"rank-{pk_of(group, t)}": r for t, r in ranks.items()}
    response = client.post(reverse("ranking_save", args=[group.pk]), {**data, "tiers": "", "based_on_version": 0})
    assert response.status_code == 302
    assert Annotation.objects.get().tiers == [["t5"], ["t1", "t2"], ["t3"], ["t4"]]


@pytest.mark.parametrize("tiers, message", [
    ([["t1"], ["t2"], ["t3"], ["t4"]], "passing but not ranked: t5"),
    ([["t1", "t1"], ["t2"], ["t3"], ["t4"], ["t5"]], "ranked more than once: t1"),
    ([["t1", "t6"], ["t2"], ["t3"], ["t4"], ["t5"]], "not a passing trajectory of this group: t6"),
    ('[["t1"], "t2"]', "tiers must be a list of lists"),
    ("{not json", "tiers: Expecting property name"),
])
def test_a_ranking_that_is_not_a_permutation_gets_400_and_nothing_is_stored(client, group, annotator, tiers,
                                                                             message):
    client.force_login(annotator)
    response = post_ranking(client, group, tiers)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert 'role="alert" id="ranking-error">Not saved:' in response.content.decode()
    assert not Annotation.objects.exists()


def test_unknown_flags_get_400_and_nothing_is_stored(client, group, annotator):
    client.force_login(annotator)
    response = post_ranking(client, group, **{f"flag-{pk_of(group, 't1')}": "sloppy"})
    assert response.status_code == 400
    assert "unknown flags for t1: sloppy" in response.content.decode()
    assert not Annotation.objects.exists()


def test_fields_for_a_failing_trajectory_get_400(client, group, annotator):
    client.force_login(annotator)
    response = post_ranking(client, group, **{f"flag-{pk_of(group, 't6')}": "other"})
    assert response.status_code == 400 and "not a passing trajectory" in response.content.decode()
    assert not Annotation.objects.exists()


def test_a_rationale_over_the_limit_gets_400_and_the_editor_keeps_what_was_sent(client, group, annotator):
    client.force_login(annotator)
    t1 = pk_of(group, "t1")
    response = post_ranking(client, group, **{f"rationale-{t1}": "x" * 4001, "group_rationale": "keep me"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "the rationale of t1 has 4001 characters; the limit is 4000" in html
    editor = response.context["ranking"].editor
    assert [i.tid for i in editor.ranked] == ["t5", "t1", "t2", "t3", "t4"]
    assert editor.group_rationale == "keep me" and "x" * 4001 in html
    assert not Annotation.objects.exists()


def test_a_bad_rank_number_gets_400(client, group, annotator):
    client.force_login(annotator)
    response = client.post(reverse("ranking_save", args=[group.pk]),
                           {f"rank-{pk_of(group, 't1')}": "first", "based_on_version": 0})
    assert response.status_code == 400 and "the rank of t1 must be a whole number" in response.content.decode()
    response = client.post(reverse("ranking_save", args=[group.pk]), {"tiers": json.dumps(MINE)})
    assert response.status_code == 400 and "based_on_version is missing" in response.content.decode()
    assert not Annotation.objects.exists()


def test_a_role_that_may_not_annotate_gets_403_and_nothing_is_stored(client, group, auditor, outsider):
    for user in (auditor, outsider):
        client.force_login(user)
        assert post_ranking(client, group).status_code == 403
    assert not Annotation.objects.exists()


def test_a_save_without_a_valid_csrf_token_gets_403(group, annotator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator)
    assert post_ranking(client, group).status_code == 403
    assert post_ranking(client, group, csrfmiddlewaretoken="forged").status_code == 403
    assert not Annotation.objects.exists()


def test_a_stale_save_gets_409_with_both_rankings_side_by_side(client, group, annotator, researcher):
    client.force_login(annotator)
    assert post_ranking(client, group).status_code == 302
    client.force_login(researcher)
    t3 = pk_of(group, "t3")
    response = post_ranking(client, group, GRADER_TIERS, based_on=0, **{f"rationale-{t3}": "mine"})
    assert response.status_code == 409
    html = response.content.decode()
    assert "anna saved version 1" in html and "Nothing was overwritten" in html
    assert 'id="conflict-theirs"' in html and 'id="conflict-mine"' in html
    assert '<input type="hidden" name="based_on_version" value="1">' in html
    assert f'name="rationale-{t3}" value="mine"' in html
    assert Annotation.objects.count() == 1
    moves = {m.item: m.direction for m in response.context["moves"]}
    assert moves == {"t1": "up", "t2": "same", "t3": "up", "t4": "up", "t5": "down"}


def test_saving_again_from_the_conflict_page_lands_on_top(client, group, annotator, researcher):
    save(group, annotator, MINE)
    client.force_login(researcher)
    response = post_ranking(client, group, GRADER_TIERS, based_on=0)
    form = response.context
    again = post_ranking(client, group, form["mine_json"], based_on=form["new_base"])
    assert again.status_code == 302
    assert list(Annotation.objects.order_by("version").values_list("version", "based_on_version")) == [(1, 0), (2, 1)]


def test_preview_computes_advantages_with_the_batch_config(client, group, annotator):
    grade(group)
    client.force_login(annotator)
    url = reverse("ranking_preview", args=[group.pk])
    response = client.post(url, {"tiers": json.dumps(MINE), "based_on_version": 0}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and "<html" not in response.content.decode()
    rows = {r["trajectory_id"]: r for r in response.context["preview"].rows}
    assert [r["trajectory_id"] for r in response.context["preview"].rows] == ["t5", "t1", "t2", "t3", "t4", "t6"]
    assert rows["t5"]["factor"] == 1.0 and rows["t4"]["factor"] == pytest.approx(0.2)
    assert rows["t5"]["advantage"] > rows["t5"]["grpo_advantage"] and rows["t5"]["source"] == "preview"
    save(group, annotator, MINE)
    stored = {c.tid: c.advantage for c in client.get(reverse("group", args=[group.pk])).context["columns"]}
    assert all(stored[t]["advantage"] == pytest.approx(rows[t]["advantage"]) for t in rows)


def test_preview_of_an_incomplete_ranking_keeps_grpo_and_says_why(client, group, annotator):
    client.force_login(annotator)
    response = client.post(reverse("ranking_preview", args=[group.pk]),
                           {"tiers": json.dumps([["t1"]]), "based_on_version": 0}, headers={"HX-Request": "true"})
    assert "Rank every passing trajectory" in response.content.decode()
    assert all(r["advantage"] == r["grpo_advantage"] for r in response.context["preview"].rows)


def test_preview_without_javascript_is_a_page(client, group, annotator, auditor):
    client.force_login(annotator)
    response = client.post(reverse("ranking_preview", args=[group.pk]), {"tiers": json.dumps(MINE),
                                                                        "based_on_version": 0})
    assert response.status_code == 200 and "Nothing was saved" in response.content.decode()
    client.force_login(auditor)
    assert client.post(reverse("ranking_preview", args=[group.pk]), {}).status_code == 403


def test_history_lists_every_version_and_diffs_any_two(client, group, annotator, researcher):
    grade(group)
    save(group, annotator, MINE)
    save(group, researcher, GRADER_TIERS, based_on=1)
    client.force_login(annotator)
    url = reverse("ranking_history", args=[group.pk])
    response = client.get(url)
    html = response.content.decode()
    assert [v.version for v in response.context["versions"]] == [2, 1]
    assert "rita" in html and "anna" in html and "Revert to this" not in html
    assert (response.context["a"], response.context["b"]) == (1, 2)
    response = client.get(url, {"a": 0, "b": 1})
    moves = {m.item: (m.before, m.after, m.direction) for m in response.context["moves"]}
    assert moves["t5"] == (5, 1, "up") and moves["t1"] == (1, 2, "down")  # ranks: 1, 2, 2, 4, 5
    assert 'class="move up">▲ 4</span>' in response.content.decode()


def test_a_researcher_reverts_from_the_history_page(client, group, annotator, researcher):
    grade(group)
    save(group, annotator, MINE)
    save(group, annotator, GRADER_TIERS, based_on=1)
    client.force_login(researcher)
    html = client.get(reverse("ranking_history", args=[group.pk])).content.decode()
    assert "Revert to this" in html and "Revert to the grader" in html
    url = reverse("ranking_revert", args=[group.pk])
    response = client.post(url, {"to_version": 1, "based_on_version": 2})
    assert response.status_code == 302
    assert Annotation.objects.get(version=3).tiers == MINE
    stale = client.post(url, {"to_version": 0, "based_on_version": 2})
    assert stale.status_code == 409 and "saved version 3" in stale.content.decode()
    assert client.post(url, {"to_version": "x"}).status_code == 400
    client.force_login(annotator)
    assert client.post(url, {"to_version": 0, "based_on_version": 3}).status_code == 403
    assert Annotation.objects.count() == 3


def test_blind_mode_hides_the_grader_until_the_annotator_saves(client, group, annotator, researcher):
    set_policy(group.batch, blind=True)
    grade(group, rationales={"t1": "SECRET-RATIONALE"})
    client.force_login(annotator)
    response = client.get(reverse("group", args=[group.pk]))
    html = response.content.decode()
    assert "SECRET-RATIONALE" not in html and "grader #" not in html and "debug_leftovers</span>" not in html
    assert "hidden until you save your ranking" in html
    assert response.context["ranking"].editor.ranked == []  # not anchored: starts empty
    assert response.context["ranking"].editor.grader_json == ""
    assert all(c.advantage["rank"] is None for c in response.context["columns"])
    assert "SECRET" not in client.get(reverse("ranking_history", args=[group.pk])).content.decode()

    assert post_ranking(client, group).status_code == 302
    assert Annotation.objects.get().grading is None  # the editor showed no grading
    response = client.get(reverse("group", args=[group.pk]))
    html = response.content.decode()
    assert "SECRET-RATIONALE" in html and "you saved your ranking, so the grader" in html
    assert response.context["ranking"].tau == kendall_tau(MINE, GRADER_TIERS)
    assert f"Agreement with the grader: τ = {signed(kendall_tau(MINE, GRADER_TIERS), 2)}." in html

    client.force_login(researcher)
    assert "SECRET-RATIONALE" in page_html(client, group)


def test_with_overlap_an_annotator_sees_only_their_own_ranking_until_they_save(client, group, annotator):
    set_policy(group.batch, overlap=2)
    bob = annotator.__class__.objects.create_user("bob")
    bob.groups.set(annotator.groups.all())
    save(group, bob, GRADER_TIERS)
    client.force_login(annotator)
    response = client.get(reverse("group", args=[group.pk]))
    assert response.context["ranking"].editor.ranked == [] and response.context["ranking"].editor.based_on_version == 0
    assert "bob" not in client.get(reverse("ranking_history", args=[group.pk])).content.decode()
    assert post_ranking(client, group).status_code == 302  # no conflict with bob's chain
    assert "bob" in client.get(reverse("ranking_history", args=[group.pk])).content.decode()


def test_the_grader_row_shows_rank_flags_and_rationale(client, group, auditor):
    grade(group, flags={"t4": ["debug_leftovers"]}, rationales={"t4": "prints <b>debug</b>"})
    client.force_login(auditor)
    response = client.get(reverse("group", args=[group.pk]))
    cells = {c.tid: c.grade for c in response.context["columns"]}
    assert (cells["t4"].rank, cells["t4"].flags) == (4, ("debug_leftovers",))
    assert cells["t6"] is None
    assert "prints &lt;b&gt;debug&lt;/b&gt;" in response.content.decode()


def test_group_page_stays_within_ten_queries_with_rankings_and_leases(client, group, annotator):
    grade(group)
    save(group, annotator, MINE)
    client.force_login(annotator)
    url = reverse("group", args=[group.pk])
    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url, {"label": "mixed"}).status_code == 200
    assert len(ctx.captured_queries) <= 10, [q["sql"][:120] for q in ctx.captured_queries]


def test_hostile_ids_stay_text_in_the_editor_history_and_conflict_pages(client, annotator, tmp_path):
    batch = import_batch(tmp_path, hostile_records(), name="evil")
    group = Group.objects.get(batch=batch)
    ids = list(Trajectory.objects.filter(group=group, passed=True).values_list("trajectory_id", flat=True))
    client.force_login(annotator)
    for response in (client.get(reverse("group", args=[group.pk])),
                     post_ranking(client, group, [ids]),
                     history := client.get(reverse("ranking_history", args=[group.pk])),
                     post_ranking(client, group, [ids[::-1]], based_on=0)):
        assert response.status_code in (200, 302, 409)
        if response.status_code != 302:
            assert audit(response.content.decode()) == [], response.status_code
    assert "grader-SFT export will leave" in history.content.decode()  # the save's warning names the ids
    assert Annotation.objects.get().tiers == [ids]


@pytest.mark.parametrize("value", [2**31, 2**63, 10**30])
def test_huge_version_numbers_are_a_clear_refusal_not_a_server_error(client, group, researcher, value):
    grade(group)
    client.force_login(researcher)
    revert = client.post(reverse("ranking_revert", args=[group.pk]), {"to_version": value, "based_on_version": 0})
    stale_base = client.post(reverse("ranking_revert", args=[group.pk]), {"to_version": 0, "based_on_version": value})
    saved = post_ranking(client, group, based_on=value)
    # No such version to revert to; a base that is not the chain's head is a stale base (409).
    assert [r.status_code for r in (revert, stale_base, saved)] == [400, 400, 409]
    assert not Annotation.objects.exists()


def test_the_editor_says_the_sft_export_needs_a_rationale_per_ranked_trajectory(client, group, annotator):
    client.force_login(annotator)
    html = page_html(client, group)
    assert "The grader-SFT export takes a group only when every ranked trajectory has a rationale" in html
    assert "(optional)" not in html and 'placeholder="Why here (the grader-SFT export needs one)"' in html


def test_a_save_missing_rationales_warns_that_the_sft_export_leaves_the_group_out(client, group, annotator):
    client.force_login(annotator)
    written = {f"rationale-{pk_of(group, t)}": "clean" for t in ("t5", "t1", "t3")}
    written[f"rationale-{pk_of(group, 't3')}"] = "日本"  # nothing left in the grader's alphabet
    html = client.get(post_ranking(client, group, **written)["Location"]).content.decode()
    assert "Saved version 1." in html
    assert ('class="message warning">The grader-SFT export will leave this group out: '
            'no rationale for t2, t3, t4.') in html


def test_a_save_with_every_rationale_gets_no_sft_warning(client, group, annotator):
    client.force_login(annotator)
    written = {f"rationale-{pk_of(group, t)}": "clean" for t in ("t1", "t2", "t3", "t4", "t5")}
    html = client.get(post_ranking(client, group, **written)["Location"]).content.decode()
    assert "Saved version 1." in html and "grader-SFT export will leave" not in html


def test_every_passing_row_offers_mark_as_not_passing_and_the_key_hint_counts_the_flags(client, group, annotator):
    client.force_login(annotator)
    response = client.get(reverse("group", args=[group.pk]))
    html = response.content.decode()
    assert [i.tid for i in response.context["ranking"].editor.pool] == ["t1", "t2", "t3", "t4", "t5"]
    for tid in ("t1", "t2", "t3", "t4", "t5"):
        assert f'data-op="fail" title="Mark as not passing: a reward hack, a lucky pass" ' \
               f'aria-label="Mark {tid} as not passing"' in html
    assert f"the first 9 of {len(FLAGS)} flags (the rest by their box under ✎)" in html
    assert "<kbd>7</kbd> flags" not in html
    assert "<kbd>9</kbd> " + FLAGS[8] in html and "<kbd>10</kbd>" not in html
