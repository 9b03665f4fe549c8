"""The triage summary of each group: what writes it, what it says, and the batch page's
columns, filters and sorts over it, including who may see them."""

import pytest
from django.urls import reverse

from grading.agreement import kendall_tau
from tests.django_fixtures import make_user
from tests.webapp.annotationdata import review_batch, save, set_policy
from tests.webapp.batches.triagedata import grade_with, grade_with_heuristic, triage_batch
from tests.webapp.reviewdata import bare_groups
from webapp.annotation.services import lease_next_group, lease_release, ranking_revert
from webapp.batches import selectors
from webapp.batches.selectors import GroupFilter
from webapp.models import Batch, Group
from webapp.rankings import UNRESTRICTED, Viewer
from webapp.roles import ANNOTATOR
from webapp.triage import (
    COLUMNS,
    DISPUTED,
    QUEUED,
    REVIEWED,
    UNREVIEWED,
    Sizes,
    flag_text,
    patch_sizes,
    summarise,
    triage_refresh,
    visible_triage,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    # the gradings are processed by the worker's own code in the test's process
    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)


def _row(group_id):
    return Group.objects.get(group_id=group_id)


def _ids(response):
    return [g.group_id for g in response.context["page"].groups]


# --- the summary ---------------------------------------------------------------------------


GRADER = [["a"], ["b", "c"], ["d"]]


@pytest.mark.parametrize("human, leased, state", [
    ([], False, UNREVIEWED),
    ([], True, QUEUED),
    ([(GRADER, {})], True, REVIEWED),
    ([(GRADER, {}), ([["a"], ["d"], ["b", "c"]], {})], False, REVIEWED),  # same best tier, otherwise apart
    ([(GRADER, {}), ([["a", "b"], ["c"], ["d"]], {})], False, DISPUTED),  # {a} against {a, b}
])
def test_the_review_state_follows_the_rankings_and_leases(human, leased, state):
    summary = summarise(grader_tiers=GRADER, grader_flags={}, confidence=None, human=human, leased=leased)
    assert summary.review_state == state


def test_agreement_is_the_lowest_tau_and_a_different_top_tier_is_a_disagreement():
    agreeing = summarise(grader_tiers=GRADER, grader_flags={}, confidence=0.7, human=[(GRADER, {})], leased=False)
    assert (agreeing.agreement, agreeing.human_disagrees) == (1.0, False)
    two = summarise(grader_tiers=GRADER, grader_flags={}, confidence=0.7, leased=False,
                    human=[(GRADER, {}), ([["d"], ["c"], ["b"], ["a"]], {})])
    assert two.agreement == kendall_tau([["d"], ["c"], ["b"], ["a"]], GRADER) < 0 and two.human_disagrees is True
    # the grader's top trajectory overruled (a verdict override): tau over the rest is 1, the top differs
    overruled = summarise(grader_tiers=GRADER, grader_flags={}, confidence=None, leased=False,
                          human=[([["b", "c"], ["d"]], {})])
    assert overruled.agreement == 1.0 and overruled.human_disagrees is True
    ungraded = summarise(grader_tiers=None, grader_flags={}, confidence=None, human=[(GRADER, {})], leased=False)
    assert (ungraded.agreement, ungraded.human_disagrees, ungraded.grader_top) == (None, None, None)


def test_flags_are_kept_as_delimited_text_for_exact_matching():
    summary = summarise(grader_tiers=[["a", "b"], ["c"]], leased=False, confidence=None,
                        grader_flags={"a": ("edits_tests",), "c": ("debug_leftovers",)},
                        human=[([["c"], ["a", "b"]], {"b": ["reward_hacking"]})])
    assert summary.grader_top_flags == ",edits_tests,"
    assert summary.any_flags == ",reward_hacking,edits_tests,debug_leftovers,"
    assert flag_text([]) == ""


SHORT = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
SHORT_WS = SHORT.replace("+x = 2", "+x  =  2")
LONG = SHORT + "diff --git a/n.py b/n.py\n--- a/n.py\n+++ b/n.py\n@@ -1 +1,2 @@\n-y = 1\n+y = 2\n+z = 3\n"


@pytest.mark.parametrize("tiers, patches, sizes", [
    # the top pick is the shortest (2 changed lines) and, up to whitespace, the change two of three made
    ([["a"], ["b", "c"]], {"a": SHORT, "b": SHORT_WS, "c": LONG}, Sizes(2, 0, True)),
    # a tie counts as its shortest member: it holds a shortest patch
    ([["a", "c"], ["b"]], {"a": SHORT, "b": SHORT, "c": LONG}, Sizes(2, 0, True)),
    # the top pick is 3 lines longer than the shortest, and not what the two others agree on
    ([["c"], ["a", "b"]], {"a": SHORT, "b": SHORT, "c": LONG}, Sizes(5, 3, False)),
    # no change made twice: no consensus to compare with
    ([["c"], ["a"]], {"a": SHORT, "c": LONG}, Sizes(5, 3, None)),
    # two changes made twice each: both are the consensus
    ([["c"], ["a", "b", "d"]], {"a": SHORT, "b": SHORT, "c": LONG, "d": LONG}, Sizes(5, 3, True)),
    # a patch the grader does not rank (not passing) is no baseline
    ([["c"]], {"a": SHORT, "c": LONG}, Sizes(5, 0, None)),
    (None, {"a": SHORT}, Sizes(None, None, None)),  # ungraded
])
def test_patch_sizes_set_the_top_pick_beside_the_shortest_patch_and_the_consensus(tiers, patches, sizes):
    assert patch_sizes(tiers, patches) == sizes


# --- the write paths keep it current -------------------------------------------------------


def test_grading_writes_the_grader_columns(tmp_path):
    batch = triage_batch(tmp_path)
    grade_with_heuristic(batch)
    cheat, task = _row("cheat-1"), _row("task-1")
    # c1 changes only a test: no effect, ranked below c2, which fixes the code and edits the test too
    assert cheat.grader_top == ["c2"] and cheat.grader_top_flags == ",edits_tests,out_of_scope_changes,"
    assert ",out_of_scope_changes," in cheat.any_flags
    assert task.grader_top == ["t1", "t2", "t3"] and task.grader_top_flags == ""
    assert task.review_state == UNREVIEWED and task.agreement is None


def test_grading_writes_the_patch_sizes_and_a_refresh_of_the_same_grading_reads_no_patch(tmp_path):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    batch = triage_batch(tmp_path, baselines=True)
    grade_with_heuristic(batch)
    sizes = {g.group_id: (g.top_lines, g.lines_over_shortest, g.top_is_consensus)
             for g in Group.objects.filter(batch=batch)}
    # task-1: t1 = t2 = t3 (2 lines) the shortest and the same change; cheat-1: c2 (4 lines) over c1's
    # test edit (2 lines), no change made twice; split-1: the clean s3 over the debug change s1 and s2
    # made; tie-1: five of the same change, all on top
    assert sizes == {"task-1": (2, 0, True), "cheat-1": (4, 2, None), "split-1": (2, 0, False),
                     "tie-1": (2, 0, True)}
    assert _row("task-1").sizes_grading == _row("task-1").gradings.get().pk
    with CaptureQueriesContext(connection) as queries:
        triage_refresh(Group.objects.filter(batch=batch).values_list("pk", flat=True))
    assert not [q["sql"] for q in queries if "patch" in q["sql"]]
    Group.objects.filter(group_id="split-1").update(top_lines=None, sizes_grading=None)
    triage_refresh([_row("split-1").pk])
    assert (_row("split-1").top_lines, _row("split-1").top_is_consensus) == (2, False)


def test_leases_rankings_and_reverts_move_the_review_state(tmp_path, researcher):
    batch = review_batch(tmp_path)
    grade_with_heuristic(batch)
    group = _row("task-1")
    anna, bob = make_user("anna", ANNOTATOR), make_user("bob", ANNOTATOR)
    assert lease_next_group(user=anna, batch=batch).group == group
    assert _row("task-1").review_state == QUEUED
    lease_release(group=group, user=anna)
    assert _row("task-1").review_state == UNREVIEWED
    first = save(group, anna, [["t1", "t2", "t3"], ["t5"], ["t4"]], flags={"t4": ["debug_leftovers"]})
    row = _row("task-1")
    assert (row.review_state, row.agreement, row.human_disagrees) == (REVIEWED, 1.0, False)
    second = save(group, bob, [["t4"], ["t1", "t2", "t3", "t5"]], based_on=first.version,
                  flags={"t5": ["reward_hacking"]})
    row = _row("task-1")
    assert row.review_state == DISPUTED and row.human_disagrees is True and row.agreement < 0
    assert ",reward_hacking," in row.any_flags
    ranking_revert(group=group, user=researcher, to_version=0, based_on_version=second.version)
    assert _row("task-1").review_state == DISPUTED  # a revert is no ranking: both people still disagree


def test_the_migration_fills_existing_groups(tmp_path):
    import importlib

    from django.apps import apps

    batch = triage_batch(tmp_path)
    grade_with_heuristic(batch)
    Group.objects.update(grader_top=None, grader_top_flags="", any_flags="")
    importlib.import_module("webapp.migrations.0009_group_triage").fill(apps, None)
    assert _row("cheat-1").grader_top_flags == ",edits_tests,out_of_scope_changes,"
    assert _row("task-1").grader_top == ["t1", "t2", "t3"]


# --- the batch page ------------------------------------------------------------------------


@pytest.fixture
def ranked(tmp_path, researcher):
    """Both groups graded; task-1 ranked by a human against the grader's top pick."""
    batch = triage_batch(tmp_path)
    grade_with_heuristic(batch)
    save(_row("task-1"), researcher, [["t4"], ["t1", "t2", "t3", "t5"]])
    return batch


def test_researchers_filter_by_top_pick_flags_flags_anywhere_agreement_and_state(client, researcher, ranked):
    client.force_login(researcher)
    url = reverse("batch", args=[ranked.pk])
    assert _ids(client.get(url, {"top_flag": "edits_tests"})) == ["cheat-1"]
    assert _ids(client.get(url, {"any_flag": "debug_leftovers"})) == ["task-1"]
    assert _ids(client.get(url, {"agreement": "disagrees"})) == ["task-1"]
    assert _ids(client.get(url, {"agreement": "agrees"})) == []
    assert _ids(client.get(url, {"state": "reviewed"})) == ["task-1"]
    assert _ids(client.get(url, {"state": "unreviewed"})) == ["cheat-1"]
    html = client.get(url).content.decode()
    assert '<span class="badge flag">edits tests</span>' not in html  # flag names are shown as stored
    assert '<span class="badge flag">edits_tests</span>' in html
    assert 'class="badge bad">disagrees' in html
    assert "two people who ranked it name different best tiers" in html


def test_the_grader_beside_its_baselines_filters_sorts_and_shows(client, researcher, tmp_path):
    batch = triage_batch(tmp_path, baselines=True)
    grade_with_heuristic(batch)
    Group.objects.create(batch=batch, group_id="ungraded-1", label="mixed")
    client.force_login(researcher)
    url = reverse("batch", args=[batch.pk])
    assert _ids(client.get(url, {"vs_shortest": "differs"})) == ["cheat-1"]
    assert _ids(client.get(url, {"vs_shortest": "agrees"})) == ["split-1", "task-1", "tie-1"]
    assert _ids(client.get(url, {"vs_consensus": "differs"})) == ["split-1"]
    assert _ids(client.get(url, {"vs_consensus": "agrees", "vs_shortest": "agrees"})) == ["task-1", "tie-1"]
    # by the lines the top pick has over the shortest (ties in the same direction by id), the ungraded last
    assert _ids(client.get(url, {"sort": "-lines"})) == ["cheat-1", "tie-1", "split-1", "task-1", "ungraded-1"]
    response = client.get(url, {"sort": "lines", "vs_shortest": "agrees"})
    assert response.context["flt"].params() == {"sort": "lines", "vs_shortest": "agrees"}
    html = response.content.decode()
    assert "top pick&#x27;s lines over the shortest, fewest first (groups without one last)" in html
    assert 'id="sort-lines"' in html and '<span class="badge same">consensus</span>' in html
    html = client.get(url, {"q": "cheat"}).content.decode()
    assert "<b>4</b> / 2</span><div><span class=\"badge warn\">+2</span></div>" in html


def test_a_long_tie_folds_and_other_flags_leave_out_the_top_picks(client, researcher, tmp_path):
    batch = triage_batch(tmp_path, baselines=True)
    grade_with_heuristic(batch)
    save(_row("cheat-1"), researcher, [["c2"], ["c1"]], flags={"c1": ["reward_hacking"], "c2": ["edits_tests"]})
    client.force_login(researcher)
    url = reverse("batch", args=[batch.pk])
    tie = client.get(url, {"q": "tie-1"}).content.decode()
    assert ('<div class="mono top-ids"><span>u1</span><span>= u2</span><span>= u3</span></div>'
            '<details class="tie-more"><summary>+2 more</summary>'
            '<div class="mono top-ids"><span>= u4</span><span>= u5</span></div></details>') in tie
    # a tie of four shows whole: "+1 more" would take the room of the id it hides
    Group.objects.filter(group_id="tie-1").update(grader_top=["u1", "u2", "u3", "u4"])
    assert "<span>= u4</span></div><" in client.get(url, {"q": "tie-1"}).content.decode()
    cheat = client.get(url, {"q": "cheat-1"}).content.decode()
    top = cheat.split('<td class="triage-top">')[1].split("</td>")[0]
    others = cheat.split('class="triage-flags"')[1].split("</td>")[0]
    assert "edits_tests" in top and "out_of_scope_changes" in top
    assert "reward_hacking" in others and "edits_tests" not in others and "out_of_scope" not in others
    assert "Other flags</th>" in cheat


def test_confidence_filters_by_range_and_sorts_with_the_ungraded_last(client, researcher, tmp_path):
    batch = triage_batch(tmp_path, extra=(2, 3))
    grade_with(batch, "tests.webapp.batches.triagedata:ConfidentGrader",
               {"confidences": {"task-1": 0.9, "cheat-1": 0.2, "task-2": 0.55, "task-3": 0.55}})
    Group.objects.filter(group_id="task-3").update(grading_confidence=None)  # as if never graded
    client.force_login(researcher)
    url = reverse("batch", args=[batch.pk])
    assert _ids(client.get(url, {"sort": "confidence"})) == ["cheat-1", "task-2", "task-1", "task-3"]
    assert _ids(client.get(url, {"sort": "-confidence"})) == ["task-1", "task-2", "cheat-1", "task-3"]
    assert _ids(client.get(url, {"conf_min": "0.5", "conf_max": "0.6"})) == ["task-2"]
    html = client.get(url, {"sort": "confidence"}).content.decode()
    assert "grader confidence, lowest first (groups without one last)" in html and "0.55" in html


def test_bad_triage_filter_values_are_named_and_left_out(client, researcher, ranked):
    client.force_login(researcher)
    response = client.get(reverse("batch", args=[ranked.pk]),
                          {"top_flag": "<b>bogus</b>", "conf_min": "abc", "state": "lost", "label": "mixed"})
    html = response.content.decode()
    assert "Not applied" in html and "Top pick flagged" in html and "Confidence from" in html
    assert "Review state" in html and "&lt;b&gt;bogus&lt;/b&gt;" in html and "<b>bogus</b>" not in html
    assert _ids(response) == ["cheat-1", "task-1"]  # the label filter still applies


def test_a_blind_review_annotator_sees_no_grader_column_and_cannot_filter_or_sort_by_it(client, ranked,
                                                                                       researcher):
    set_policy(ranked, blind=True)
    anna = make_user("anna", ANNOTATOR)
    client.force_login(anna)
    url = reverse("batch", args=[ranked.pk])
    response = client.get(url, {"top_flag": "edits_tests", "agreement": "disagrees", "sort": "-confidence"})
    html = response.content.decode()
    assert _ids(response) == ["cheat-1", "task-1"]  # nothing filtered by what anna may not see
    assert response.context["flt"].sort == "group"
    assert "hidden from you in this batch" in html
    assert "edits_tests</span>" not in html and "debug_leftovers" not in html and "Top pick</th>" not in html
    assert 'id="sort-confidence"' not in html and "disagrees</span>" not in html
    assert "Review</th>" in html  # blind review hides the grader, not whether people ranked
    # the grader's pick beside its baselines is the grader's too
    for query in ({"vs_shortest": "agrees"}, {"vs_consensus": "differs"}, {"sort": "-lines"}):
        response = client.get(url, query)
        assert _ids(response) == ["cheat-1", "task-1"] and response.context["flt"].params() == {}
        assert "hidden from you in this batch" in response.content.decode()
    table = html.split('class="table groups-table"')[1]
    assert 'id="sort-lines"' not in html and "id_vs_shortest" not in html and "badge ok" not in table
    assert all(g.top_lines is None and g.top_is_consensus is None for g in response.context["page"].groups)
    # the group page's previous / next follow the same rule
    page = client.get(reverse("group", args=[_row("task-1").pk]), {"top_flag": "edits_tests"})
    assert page.context["prev_url"] is not None  # cheat-1 comes before task-1: the flag filter was refused
    client.force_login(researcher)
    assert _ids(client.get(url, {"top_flag": "edits_tests"})) == ["cheat-1"]
    assert _ids(client.get(url, {"vs_shortest": "differs"})) == ["cheat-1"]
    assert 'id="sort-confidence"' in client.get(url).content.decode()


def test_a_blind_annotator_reads_the_stored_columns_blanked_even_on_the_groups_they_ranked(ranked):
    set_policy(ranked, blind=True)
    anna = make_user("anna", ANNOTATOR)
    save(_row("cheat-1"), anna, [["c2"], ["c1"]], flags={"c1": ["reward_hacking"]})
    stored = list(Group.objects.filter(batch=ranked).order_by("group_id"))
    assert all(g.grader_top and g.any_flags and g.top_lines is not None for g in stored)  # as stored
    shown = visible_triage(ranked, viewer=Viewer(anna))
    assert shown.columns == {"review_state"}
    for rows in (shown.rows(stored), selectors.group_page(ranked, GroupFilter(), viewer=Viewer(anna)).groups):
        assert [(g.group_id, g.review_state) for g in rows] == [("cheat-1", REVIEWED), ("task-1", REVIEWED)]
        assert all((g.grader_top, g.grader_top_flags, g.any_flags, g.grading_confidence, g.agreement,
                    g.human_disagrees, g.top_lines, g.lines_over_shortest, g.top_is_consensus)
                   == (None, "", "", None, None, None, None, None, None) for g in rows)
    everything = visible_triage(ranked, viewer=UNRESTRICTED)
    assert everything.columns == COLUMNS
    assert all(g.grader_top and g.any_flags for g in everything.rows(list(Group.objects.filter(batch=ranked))))


def test_k_way_overlap_hides_the_review_state_and_agreement_from_annotators(client, ranked):
    set_policy(ranked, overlap=2)
    client.force_login(make_user("anna", ANNOTATOR))
    response = client.get(reverse("batch", args=[ranked.pk]), {"state": "disputed"})
    html = response.content.decode()
    assert "Review</th>" not in html and 'id="sort-agreement"' not in html
    assert "Top pick</th>" in html  # without blind review the grader shows
    assert "hidden from you in this batch" in html


# --- keyset pages over nullable sort keys --------------------------------------------------


@pytest.mark.parametrize("sort", ["confidence", "-confidence", "agreement", "-agreement", "lines", "-lines"])
def test_pages_by_a_nullable_key_cover_every_group_once_with_the_nulls_last(sort):
    batch = Batch.objects.create(name="big")
    groups = bare_groups(batch, 47)
    column, descending = selectors.SORTS[sort]
    for i, g in enumerate(groups):
        if i % 3:  # a third without a value; the others with ties
            Group.objects.filter(pk=g.pk).update(**{column: i % 7 if sort.endswith("lines") else (i % 7) / 7})
    flt = GroupFilter(sort=sort)
    pages, cursor = [], ""
    while True:
        page = selectors.group_page(batch, flt, viewer=UNRESTRICTED, after=cursor, size=10)
        pages.append([g.pk for g in page.groups])
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    seen = [pk for p in pages for pk in p]
    rows = list(Group.objects.filter(batch=batch))
    valued = sorted((g for g in rows if getattr(g, column) is not None), key=lambda g: (getattr(g, column), g.pk),
                    reverse=descending)
    nulls = sorted((g for g in rows if getattr(g, column) is None), key=lambda g: g.pk, reverse=descending)
    assert seen == [g.pk for g in valued + nulls]
    # and back again, page by page, from the last page
    back = selectors.group_page(batch, flt, viewer=UNRESTRICTED, after=cursor, size=10)
    for expected in reversed(pages[:-1]):
        back = selectors.group_page(batch, flt, viewer=UNRESTRICTED, before=back.prev_cursor, size=10)
        assert [g.pk for g in back.groups] == expected
    middle = Group.objects.get(pk=seen[25])
    assert selectors.neighbours(middle, flt, viewer=UNRESTRICTED) == (seen[24], seen[26])
